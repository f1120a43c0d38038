"""nats.js (``@nats-io/jetstream`` 3.4) for FASTB and the latency scenarios, through node.

``python -m benchmarks.driver_natsjs --port P --scenario FASTB|S5|S5x --n N [--size B]``

FASTB runs ``benchmarks/nats_js_fastb.mjs`` (nats.js's own fast ingest,
``startFastIngest``); S5 (with S5info, S5cinfo, S5ccreate) and S5x run
``benchmarks/nats_js_latency.mjs`` (a responder whose callback runs on the event loop
that read the request, in the same process for S5 and in a process of its own for S5x).
The driver passes their result lines on. It needs ``node`` on ``PATH`` and a directory
whose ``node_modules`` holds ``@nats-io/transport-node`` and ``@nats-io/jetstream``: the
environment variable ``NATS_JS_DIR``, else ``benchmarks/js`` (``npm install
--prefix benchmarks/js @nats-io/jetstream@3.4.0 @nats-io/transport-node@3.4.0``).
Without them, or for any other scenario, it prints an "unavailable" row.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import driver_args, emit, responder_process, unavailable

CLIENT = "nats.js"
HERE = Path(__file__).resolve().parent
SCRIPTS = {"FASTB": HERE / "nats_js_fastb.mjs", "S5": HERE / "nats_js_latency.mjs",
           "S5x": HERE / "nats_js_latency.mjs"}  # fmt: skip
MODULES = ("@nats-io/transport-node", "@nats-io/jetstream")


def modules_dir() -> Path | None:
    """The directory whose node_modules holds nats.js, or None."""
    where = Path(os.environ.get("NATS_JS_DIR") or HERE / "js")
    if all((where / "node_modules" / m / "package.json").is_file() for m in MODULES):
        return where
    return None


def jetstream_version(where: Path) -> str:
    """The installed ``@nats-io/jetstream`` version."""
    meta = json.loads((where / "node_modules/@nats-io/jetstream/package.json").read_text())
    return str(meta.get("version", "?"))


def main(argv: list[str] | None = None) -> None:
    args, sc = driver_args(argv)
    if sc.base not in SCRIPTS:
        unavailable(CLIENT, args.label, f"the nats.js peer runs {', '.join(SCRIPTS)} only")
        return
    node, where = shutil.which("node"), modules_dir()
    if node is None or where is None:
        missing = "node" if node is None else "nats.js modules (set NATS_JS_DIR)"
        unavailable(CLIENT, args.label, f"{missing} not found")
        return
    cmd = [node, str(SCRIPTS[sc.base]), "--modules", str(where), "--port", str(args.port),
           "--scenario", sc.base, "--n", str(args.n), "--size", str(args.size),
           "--storage", args.storage, "--label", args.label]  # fmt: skip
    if args.serve:  # S5x's responder: node answers on this process's stdin and stdout
        sys.exit(subprocess.run([*cmd, "--serve"], check=False).returncode)
    if sc.base == "S5x":
        with responder_process("driver_natsjs", args.port, args.size):
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    else:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not rows:
        sys.stderr.write(done.stderr[-3000:])
        sys.exit(done.returncode or 1)
    for row in rows:
        row["nats_js"] = jetstream_version(where)
        emit(row)


if __name__ == "__main__":
    main()
