"""``make test``: every stage runs, the quiet ones beside the suite, and a summary ends it.

``python -m tests.support.stages`` runs ``make <stage>`` for each of :data:`STAGES`.
The suite runs in the foreground with its output on the terminal; the other stages
(types, docs, the sanitized parser tests) run at the same time with their output in a
log each, printed whole when the suite is done, so the machine's idle time while the
suite waits on servers and JVMs does their work. They run niced (:data:`QUIET_NICENESS`):
the suite is the longest stage, and the sanitized parser tests beside it, one core busy
for eight minutes, made it about two minutes slower than alone. A stage that fails does
not stop the others. The summary names each stage's result and time; the exit status is 1 if any
stage failed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

#: Every stage of ``make test``, in the order the summary lists them.
STAGES = ("typecheck", "docs", "suite", "asan")
#: The stage whose output goes to the terminal as it runs.
FOREGROUND = "suite"
#: How much the quiet stages yield the CPU to the foreground one (``nice -n``).
QUIET_NICENESS = 15


class Stage:
    """``make <name>`` started now; :meth:`wait` gives its exit status and when it ended.

    Args:
        name: the make target.
        started: the ``time.monotonic()`` the summary's times count from.
        log: where its output goes (``None``: the terminal, at full priority; a log:
            niced by :data:`QUIET_NICENESS`).
    """

    def __init__(self, name: str, started: float, log: Path | None = None) -> None:
        self.name, self.log = name, log
        self.ended = 0.0
        out = None if log is None else log.open("wb")
        command = ["make", "--no-print-directory", name]
        if log is not None:
            command = ["nice", "-n", str(QUIET_NICENESS), *command]
        self._process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        if out is not None:
            out.close()  # the child holds its own copy
        # A waiter per stage, so each stage's end is timed even while the suite still runs.
        self._waiter = threading.Thread(target=self._wait, args=(started,), name=f"wait-{name}")
        self._waiter.start()

    def _wait(self, started: float) -> None:
        self._process.wait()
        self.ended = time.monotonic() - started

    def wait(self) -> int:
        """Its exit status, once it has ended."""
        self._waiter.join()
        return self._process.returncode


def main(names: tuple[str, ...] = STAGES, foreground: str = FOREGROUND) -> int:
    """Run every stage, print the background stages' logs and the summary; 1 if one failed.

    Args:
        names: the make targets, in the summary's order.
        foreground: the one of them whose output goes to the terminal as it runs.
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="make-test-") as tmp:
        quiet = [s for s in names if s != foreground]
        stages = {s: Stage(s, started, Path(tmp) / f"{s}.log") for s in quiet}
        print(f"== make {foreground} (beside it: {', '.join(quiet)})", flush=True)
        stages[foreground] = Stage(foreground, started)
        results: dict[str, tuple[int, float]] = {}
        for name in (foreground, *quiet):
            stage = stages[name]
            results[name] = (stage.wait(), stage.ended)
            if stage.log is not None:
                print(f"\n== make {name}", flush=True)
                sys.stdout.buffer.write(stage.log.read_bytes())
                sys.stdout.flush()
    print("\n== make test: stages (each ran from the start; time = when it ended)")
    for name in names:
        code, ended = results[name]
        print(f"{name:<10} {'passed' if code == 0 else 'FAILED'} at {ended:.0f} s")
    failed = [name for name in names if results[name][0] != 0]
    if failed:
        print(f"make test FAILED: {' '.join(failed)}", file=sys.stderr)
        return 1
    print("make test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
