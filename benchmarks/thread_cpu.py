"""Where jetstream_sync's CPU goes, thread by thread, in one scenario.

``python -m benchmarks.thread_cpu --scenario S2 --n 200000 [--profile THREAD]``

Starts a fresh server (prefilled for the consuming scenarios), runs the ``ours``
driver's scenario in this process and prints, for each thread alive at the end of
the timed block, its CPU time per message (each thread's own CPU clock,
``time.pthread_getcpuclockid``), then the whole process's. Threads that ended
inside the block (a fetch's none; a consume()'s none) are counted in the total
only. With ``--profile NAME-PREFIX`` the threads whose name starts with the
prefix (``MainThread``, ``jetstream_sync-1-reader``...) run under ``cProfile``
and the top functions by own time are printed after the table (profiling slows
those threads down several times: read it for shares, not for figures).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import sys
import threading
import time
from typing import Any

from . import SCENARIOS, Timed, count_for
from . import driver_ours as ours
from .prefill import prefill
from .server import BenchServer


def thread_cpu() -> dict[str, float]:
    """CPU seconds of every live thread, by name."""
    out: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            clock = time.pthread_getcpuclockid(thread.ident)
            out[thread.name] = out.get(thread.name, 0.0) + time.clock_gettime(clock)
        except (OSError, ProcessLookupError):
            continue
    return out


class ThreadTimed(Timed):
    """The driver's ``Timed``, also snapshotting each thread's CPU at both ends."""

    last: ThreadTimed | None = None

    def __enter__(self) -> ThreadTimed:
        self.before = thread_cpu()
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.after = thread_cpu()
        ThreadTimed.last = self


class GcClock:
    """CPU time spent in the garbage collector, by the thread whose allocation triggered it."""

    def __init__(self) -> None:
        self.by_thread: dict[str, float] = {}
        self.collections = [0, 0, 0]
        self._started: dict[int, float] = {}

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        ident = threading.get_ident()
        if phase == "start":
            self._started[ident] = time.thread_time()
            return
        name = threading.current_thread().name
        spent = time.thread_time() - self._started.pop(ident, time.thread_time())
        self.by_thread[name] = self.by_thread.get(name, 0.0) + spent
        self.collections[info["generation"]] += 1


def install_profiler(prefix: str) -> list[cProfile.Profile]:
    """Profile every thread (existing main, or started later) whose name starts with ``prefix``."""
    profiles: list[cProfile.Profile] = []
    if threading.current_thread().name.startswith(prefix):
        prof = cProfile.Profile()
        profiles.append(prof)
        prof.enable()
    original_run = threading.Thread.run

    def run(self: threading.Thread) -> None:
        if not self.name.startswith(prefix):
            original_run(self)
            return
        prof = cProfile.Profile()
        profiles.append(prof)
        prof.enable()
        try:
            original_run(self)
        finally:
            prof.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    return profiles


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="S2")
    ap.add_argument("--n", type=int, default=0, help="messages (default: the quick count)")
    ap.add_argument("--profile", default="", help="profile threads whose name starts with this")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--gc", action="store_true", help="also time the garbage collector per thread")
    args = ap.parse_args(argv)
    sc = SCENARIOS[args.scenario]
    n = args.n or count_for(sc.label, "ours", quick=True)
    ours.Timed = ThreadTimed  # type: ignore[attr-defined, misc]
    rows: list[dict[str, Any]] = []
    ours.emit = rows.append  # type: ignore[attr-defined, assignment]
    with BenchServer() as server:
        if sc.prefilled:
            prefill(server.port, n, sc.size, sc.storage)
        profiles = install_profiler(args.profile) if args.profile else []
        gc_clock = GcClock()
        if args.gc:
            gc.callbacks.append(gc_clock)
        ours.main(["--port", str(server.port), "--scenario", sc.label, "--n", str(n)])
        if args.gc:
            gc.callbacks.remove(gc_clock)
        for prof in profiles:
            prof.disable()
    timed = ThreadTimed.last
    assert timed is not None
    rate = n / timed.secs
    print(f"{sc.label}: n={n:,} {rate:,.0f} msgs/s, process {timed.cpu / n * 1e6:.2f} us/msg")
    for name, cpu in sorted(
        timed.after.items(), key=lambda kv: -kv[1] + timed.before.get(kv[0], 0)
    ):
        used = cpu - timed.before.get(name, 0.0)
        if used > 0.0005:
            in_gc = gc_clock.by_thread.get(name, 0.0)
            note = f"  (garbage collector {in_gc / n * 1e6:.2f})" if in_gc else ""
            print(f"  {name:<34} {used / n * 1e6:6.2f} us/msg{note}")
    if args.gc:
        print(f"  collections by generation: {gc_clock.collections} (the whole run)")
    if profiles:
        stats = pstats.Stats(profiles[0], stream=(out := io.StringIO()))
        for prof in profiles[1:]:
            stats.add(prof)
        stats.sort_stats("tottime").print_stats(args.top)
        sys.stdout.write(out.getvalue())


if __name__ == "__main__":
    main()
