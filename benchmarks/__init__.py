"""The project's benchmark suite: jetstream_sync side by side with nats-py and a raw limit.

``python -m benchmarks`` runs every scenario for every client, each client in its own
process against a fresh loopback nats-server, and prints a table of medians (see
``docs/performance.md``). This module holds what the orchestrator and the three drivers
share: the scenario table, the message counts, the command line of a driver and the
measuring helpers. It imports nothing heavy, so a driver process starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

STREAM = "S"
SUBJECT = "bench.s"
SUBJECTS = ["bench.>"]
SERVICE = "svc"  # the S5 request/reply subject
BATCH = 500  # fetch batch of S3/S4 and the buffer of consume()/messages() in S7/MEM
WINDOW = 4000  # async publish acks in flight (S2/S6)
OBJ_BUCKET = "BENCH"
OBJ_SIZE = 100 * 1024 * 1024  # OBJput/OBJget: one "message" is one 100 MiB object

CLIENTS = ("raw", "ours", "nats-py")  # a run's clients unless --clients says otherwise
# nats.js runs FASTB, S5 and S5x (it needs node), ours-gevent is ours under gevent: when asked
ALL_CLIENTS = (*CLIENTS, "nats.js", "ours-gevent")
S8_THREADS = 16  # S8: threads sharing one client (a web server's workers)


@dataclass(frozen=True)
class Scenario:
    """One benchmark scenario as the orchestrator schedules it."""

    label: str  # the name in the table: S1, S2mem, S6_64k...
    base: str  # what the driver does: S1 S2 S3 S4 S5 S7 MEM
    size: int = 128  # payload bytes
    storage: str = "file"
    prefilled: bool = False  # the stream holds the messages before the client starts
    title: str = ""


SCENARIOS: dict[str, Scenario] = {
    s.label: s
    for s in (
        Scenario("S1", "S1", title="JetStream publish, waiting for each ack"),
        Scenario("S2", "S2", title="async publish, <= 4000 acks in flight, file storage"),
        Scenario("S2mem", "S2", storage="memory", title="S2 on a memory stream"),
        Scenario("S3", "S3", prefilled=True, title="fetch(500) + ack, AckExplicit durable"),
        # ours acks each fetched batch with ack_batch(); the other clients run S3.
        Scenario("S3B", "S3", prefilled=True, title="fetch(500) + one batch ack, AckExplicit"),
        Scenario("S4", "S4", prefilled=True, title="fetch(500), AckNone"),
        Scenario(
            "S5",
            "S5",
            title="core request/reply, in-process responder (+ S5info, S5cinfo, S5ccreate)",
        ),
        Scenario(
            "S5x",
            "S5x",
            title="core request/reply, the client's own responder in a process of its own",
        ),
        Scenario("S6_16", "S2", size=16, title="async publish, 16 B payloads"),
        Scenario("S6_1k", "S2", size=1024, title="async publish, 1 KiB payloads"),
        Scenario("S6_64k", "S2", size=65536, title="async publish, 64 KiB payloads"),
        Scenario("S7", "S7", prefilled=True, title="consume() callback + ack, AckExplicit"),
        Scenario("MEM", "MEM", prefilled=True, title="RSS growth over messages() + ack"),
        Scenario(
            "S8",
            "S8",
            title=f"{S8_THREADS} threads publishing and waiting for each PubAck, one client",
        ),
        Scenario("KVput", "KVput", title="KV put, one after another (1,000 keys)"),
        Scenario("KVget", "KVget", title="KV get (direct), one after another (1,000 keys)"),
        Scenario(
            "KVwatch",
            "KVwatch",
            prefilled=True,
            title="KV watch of a bucket's initial values, up to the end marker",
        ),
        Scenario("OBJput", "OBJput", size=OBJ_SIZE, title="Object Store put of a 100 MiB object"),
        Scenario("OBJget", "OBJget", size=OBJ_SIZE, title="Object Store get of a 100 MiB object"),
        Scenario("FASTB", "FASTB", title="fast-ingest batch (ADR-50), one batch, file storage"),
    )
}

# Rows a run produces per client: S5 also reports the latency of three JetStream API
# calls: stream info (S5info), consumer info (S5cinfo), create_consumer (S5ccreate).
S5_EXTRA = ("S5info", "S5cinfo", "S5ccreate")
ROW_LABELS = [x for s in SCENARIOS for x in ((s, *S5_EXTRA) if s == "S5" else (s,))]

# Messages per (scenario, client) for a full run, chosen for a few seconds each on the
# 2-core box; "*" applies to every client.
FULL_N: dict[str, dict[str, int]] = {
    "S1": {"raw": 25_000, "ours": 15_000, "nats-py": 10_000},
    "S2": {"raw": 500_000, "ours": 300_000, "nats-py": 100_000},
    "S2mem": {"raw": 500_000, "ours": 300_000, "nats-py": 100_000},
    "S3": {"raw": 200_000, "ours": 200_000, "nats-py": 60_000},
    "S3B": {"raw": 200_000, "ours": 200_000, "nats-py": 60_000},
    "S4": {"raw": 200_000, "ours": 200_000, "nats-py": 60_000},
    "S5": {"*": 10_000},
    "S5x": {"*": 10_000},
    "S6_16": {"raw": 500_000, "ours": 300_000, "nats-py": 100_000},
    "S6_1k": {"raw": 300_000, "ours": 200_000, "nats-py": 60_000},
    "S6_64k": {"raw": 25_000, "ours": 20_000, "nats-py": 10_000},
    "S7": {"raw": 200_000, "ours": 200_000, "nats-py": 60_000},
    "MEM": {"*": 1_000_000},
    "S8": {"*": 10},  # seconds, not messages
    "KVput": {"raw": 25_000, "ours": 15_000, "nats-py": 10_000},
    "KVget": {"raw": 25_000, "ours": 15_000, "nats-py": 10_000},
    "KVwatch": {"*": 100_000},
    "OBJput": {"*": 3},
    "OBJget": {"*": 3},
    "FASTB": {"raw": 1_000_000, "ours": 1_000_000, "nats-py": 300_000, "nats.js": 1_000_000},
}

# --quick: about a minute for everything on 2 cores.
QUICK_N: dict[str, dict[str, int]] = {
    "S1": {"*": 3_000},
    "S2": {"*": 40_000},
    "S2mem": {"*": 40_000},
    "S3": {"*": 40_000},
    "S3B": {"*": 40_000},
    "S4": {"*": 40_000},
    "S5": {"*": 3_000},
    "S5x": {"*": 3_000},
    "S6_16": {"*": 40_000},
    "S6_1k": {"*": 30_000},
    "S6_64k": {"*": 3_000},
    "S7": {"*": 40_000},
    "MEM": {"*": 100_000},
    "S8": {"*": 3},  # seconds, not messages
    "KVput": {"*": 3_000},
    "KVget": {"*": 3_000},
    "KVwatch": {"*": 20_000},
    "OBJput": {"*": 1},
    "OBJget": {"*": 1},
    "FASTB": {"*": 40_000},
}


def count_for(label: str, client: str, quick: bool, scale: float = 1.0) -> int:
    """How many messages ``client`` handles in scenario ``label`` (S8: how many seconds)."""
    table = (QUICK_N if quick else FULL_N)[label]
    client = client.removesuffix("-gevent")  # ours under gevent handles what ours handles
    return max(1, int(table.get(client, table.get("*", 0)) * scale))


# ------------------------------------------------------------------ measuring


def cpu_seconds() -> float:
    """User + system CPU of this process (every thread) so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def percentile(values: list[float], p: float) -> float:
    """The ``p`` quantile (0..1) of ``values`` by the nearest-rank rule."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


class Timed:
    """Wall time and process CPU over a ``with`` block."""

    def __enter__(self) -> Timed:
        self.cpu0 = cpu_seconds()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.secs = time.perf_counter() - self.t0
        self.cpu = cpu_seconds() - self.cpu0


def rss_mb() -> float:
    """This process's resident set size now, in MB (10^6 bytes)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS; False if not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """Peak RSS in MB since the last :func:`reset_peak_rss` (else since the start)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def result(
    client: str, label: str, n: int, size: int, timed: Timed, **extra: object
) -> dict[str, object]:
    """One result row as every driver prints it."""
    row: dict[str, object] = {
        "client": client,
        "scenario": label,
        "n": n,
        "size": size,
        "secs": round(timed.secs, 4),
        "msgs_per_s": round(n / timed.secs, 1),
        "mb_per_s": round(n * size / timed.secs / 1e6, 3),
        "cpu_s": round(timed.cpu, 4),
        "cpu_us_per_msg": round(timed.cpu / n * 1e6, 3),
        "client_cpu_pct": round(100 * timed.cpu / timed.secs, 1),
    }
    row.update(extra)
    return row


def latency_fields(samples_us: list[float]) -> dict[str, float]:
    """p50/p99 of latency samples in microseconds."""
    return {
        "p50_us": round(percentile(samples_us, 0.50), 1),
        "p99_us": round(percentile(samples_us, 0.99), 1),
    }


def run_threads(
    count: int, seconds: float, call: Callable[[int], Callable[[], object]]
) -> tuple[Timed, int, list[float]]:
    """S8: ``count`` threads each repeating a call for ``seconds``; every call is timed.

    ``call(i)`` runs on thread ``i`` before the start line and returns what that thread
    repeats (so per-thread set-up, a socket for instance, stays out of the timing).
    Returns the timing of the whole, how many calls completed and every call's latency
    in microseconds. An exception in a thread is raised here after all have stopped.
    """
    start = threading.Barrier(count + 1)
    latencies: list[list[float]] = [[] for _ in range(count)]
    errors: list[BaseException] = []
    stop_at = [0.0]

    def worker(i: int) -> None:
        try:
            one = call(i)
        except BaseException as exc:  # reported below, after the others stopped
            errors.append(exc)
            start.abort()
            return
        record = latencies[i].append
        clock = time.perf_counter_ns
        try:
            start.wait()
            while time.perf_counter() < stop_at[0]:
                t0 = clock()
                one()
                record((clock() - t0) / 1000)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,), name=f"bench-{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    with Timed() as timed:
        stop_at[0] = time.perf_counter() + seconds
        try:
            start.wait()
        except threading.BrokenBarrierError:  # a thread failed to set up: raised below
            pass
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    merged = [x for lat in latencies for x in lat]
    return timed, len(merged), merged


def emit(row: dict[str, object]) -> None:
    """Print one JSON result line for the orchestrator."""
    sys.stdout.write(json.dumps(row) + "\n")
    sys.stdout.flush()


@contextlib.contextmanager
def responder_process(driver: str, port: int, size: int) -> Iterator[None]:
    """S5x: the client's own responder, in a process of its own, while the block runs.

    Starts ``python -m benchmarks.<driver> --port P --scenario S5x --size S --serve``
    and returns once it printed ``ready`` (it has subscribed, and the server has its
    SUB); afterwards closes its stdin, which ends it, and waits for it.
    """
    child = subprocess.Popen(
        [sys.executable, "-m", f"benchmarks.{driver}", "--port", str(port), "--scenario",
         "S5x", "--size", str(size), "--serve"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    try:
        line = child.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the {driver} responder did not start: {line!r}")
        yield
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def wait_for_stdin_to_close() -> None:
    """Block until the parent closes this process's stdin (how a responder is stopped)."""
    sys.stdin.read()


def unavailable(client: str, label: str, why: str) -> None:
    """Report that ``client`` cannot run ``label`` yet (not a crash)."""
    emit({"client": client, "scenario": label, "error": f"unavailable: {why}"})


def driver_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Scenario]:
    """Parse a driver's command line; ``--scenario`` takes a label (S6_64k) or a base (S6)."""
    ap = argparse.ArgumentParser(description="Run one benchmark scenario; print JSON lines.")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument(
        "--scenario", required=True, help="S1 S2 S2mem S3 S4 S5 S6 S6_1k S7 MEM S8 KVput ..."
    )
    ap.add_argument("--n", type=int, default=10_000, help="messages (S8: seconds)")
    ap.add_argument("--size", type=int, default=None, help="payload bytes (default: scenario's)")
    ap.add_argument("--storage", choices=("file", "memory"), default=None)
    ap.add_argument("--window", type=int, default=WINDOW, help="async publish acks in flight")
    ap.add_argument(
        "--serve", action="store_true",
        help="S5x: be the responder (until stdin closes) instead of the requester",
    )  # fmt: skip
    ap.add_argument(
        "--responder", choices=("inline", "thread"), default="inline",
        help="S5, jetstream_sync: the responder's callback runs inline (on the thread that "
        "read the request) or on the subscription's own thread",
    )  # fmt: skip
    args = ap.parse_args(argv)
    label = "S6_16" if args.scenario == "S6" else args.scenario
    if label not in SCENARIOS:
        ap.error(f"unknown scenario {args.scenario!r}; choose from {', '.join(SCENARIOS)}")
    sc = SCENARIOS[label]
    if args.size is None:
        args.size = sc.size
    if args.storage is None:
        args.storage = sc.storage
    if args.scenario == "S6" and args.size != 16:
        label = {1024: "S6_1k", 65536: "S6_64k"}.get(args.size, f"S6_{args.size}")
    args.label = label
    return args, sc
