"""``python -m benchmarks spark``: the ``jetstream`` data source vs nats-py in ``mapPartitions``.

One fresh loopback nats-server for the whole run holds two read streams of N
128-byte messages, one of each kind users have:

- ``default``: made with defaults, as ``create_stream``, nats.go and nats.py
  make it (no ``allow_direct``): the source reads it through a consumer;
- ``direct``: ``allow_direct``: the source reads it by batched direct gets.

Scenarios (``TARGETS``):

- ``read-count``: a batch read into ``count()``, on each kind of stream;
- ``read-agg``: the same read into an aggregation (count and bytes per
  ``seq % 16``), collected on the driver, on each kind of stream;
- ``write``: a batch write of N 128-byte rows into a fresh stream;
- ``write-fast``: the same into a stream with ``allow_batched``, ours with
  ``mode=fast`` (fast-ingest batches, the same derived message ids);
- ``write-nodedupe``: ``write`` with ``dedupe=false``, ours only (no message
  ids: the same work for the server as nats-py's writes), beside the
  baselines of ``write``;
- ``batch-step``: the main job's batch step (``examples/pipeline.py``: N order
  events as JSON, read, decoded by ``from_json``, aggregated per region and
  hour), ours only, with ``batch-step-read`` beside it: the same read into
  ``count()``, so the table shows what the data source leaves to decoding and
  aggregating.

Clients: ``ours`` is ``format("jetstream")``; ``nats-py`` is nats-py in
``mapPartitions`` (``benchmarks.spark_natspy``; its write gathers every ack at
the end); ``nats-py-window`` writes with at most 4,000 acks outstanding, the
way a user writes it.

Each (session, client, stream kind) runs in a Spark session of its own, in a
child process: the session's first query is timed **cold** (Python workers
start, import, connect), then every scenario ``--reps`` times **warm** (the
best is reported). ``--one-session`` runs every classic cell in one session
instead (one cold row for them all): a check that each runner runs and
reports, at the cost of one JVM instead of seven. The ``connect`` session runs ours through
``SparkSession.builder.remote`` against a Spark Connect server from the
pyspark wheel (a process holds a classic session or a remote one, never both).
Every result is checked (rows counted, messages stored) before its time counts.

Adding a scenario: a function ``(cell: Cell) -> checked count`` in
``RUNNERS`` and its rate target in ``TARGETS``; it runs for ``ours`` on no
particular stream unless ``CLIENTS`` / ``KINDS`` / ``CONNECT`` say otherwise.

Prints a markdown table (and writes JSON with ``--json``); figures are
information, never a verdict: the exit code is 1 only when a run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._wire import RawConn
from .prefill import pipelined_publish
from .server import CLOCK_TICKS, BenchServer, server_version

ROOT = Path(__file__).resolve().parent.parent
STREAMS = {"default": "SD", "direct": "S"}  # read stream per kind; both hold bench.s
WRITE_SUBJECTS = "sparkw"  # each write cell writes to sparkw.<token> in its own stream
SIZE = 128
NO_KIND = "-"  # a scenario that reads no stream
TARGETS = {
    "read-count": 150_000,
    "read-agg": 150_000,
    "write": 75_000,
    "write-fast": 75_000,
    "write-nodedupe": 75_000,
    "batch-step": 92_000,  # events/s: 2.5x the 36,790 of issue 20
    "batch-step-read": 150_000,
}
CLIENTS = {
    "read-count": ("ours", "nats-py"),
    "read-agg": ("ours", "nats-py"),
    "write": ("ours", "nats-py", "nats-py-window"),
    "write-fast": ("ours", "nats-py-window"),
}
KINDS = {"read-count": tuple(STREAMS), "read-agg": tuple(STREAMS)}
CONNECT = ("read-count", "write")  # the scenarios run through Spark Connect too
BASELINES = ("nats-py", "nats-py-window")
BASELINE_SCENARIO = {"write-nodedupe": "write"}  # ratios against that scenario's baselines
SESSION_TIMEOUT = 3600.0  # seconds one child session may run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line: sizes, master, repetitions, and which scenarios, streams and sessions."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks spark", description=__doc__)
    ap.add_argument("--n", type=int, default=1_000_000, help="messages per scenario")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=2, help="read/write partitions")
    ap.add_argument("--reps", type=int, default=1, help="warm repetitions (the best is reported)")
    ap.add_argument("--only", default="", help="scenarios, e.g. read-count,write")
    ap.add_argument("--kinds", default=",".join(STREAMS), help="read streams: default,direct")
    ap.add_argument("--sessions", default="classic,connect", help="classic,connect")
    ap.add_argument(
        "--one-session",
        action="store_true",
        help="every classic cell in one session (one cold row): a smoke run, not a measurement",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    args.scenarios = [s for s in TARGETS if not args.only or s in args.only.split(",")]
    args.kind_list = [k for k in STREAMS if k in args.kinds.split(",")]
    args.session_list = [s for s in ("classic", "connect") if s in args.sessions.split(",")]
    return args


# -- the server's streams ---------------------------------------------------------------


def prefill_read_streams(server: BenchServer, n: int) -> None:
    """Create both read streams and store ``n`` messages of ``SIZE`` bytes on ``bench.s`` in each.

    Each stream captures ``bench.>`` while it is filled, then lets go of it
    (its subjects are renamed), so the next one can take it.
    """
    import jetstream_sync

    for kind, name in STREAMS.items():
        with jetstream_sync.connect(server.url) as nc:
            ctx = nc.jetstream()
            if kind == "direct":
                ctx.create_stream(name=name, subjects=["bench.>"], allow_direct=True)
            else:
                ctx.create_stream(name=name, subjects=["bench.>"])
        conn = RawConn(server.port)
        try:
            pipelined_publish(conn, n, SIZE, check=True)
        finally:
            conn.close()
        with jetstream_sync.connect(server.url) as nc:
            ctx = nc.jetstream()
            ctx.update_stream(ctx.stream(name).info().config, subjects=[f"filled.{name}"])


def fresh_write_stream(url: str, name: str, subject: str) -> None:
    """(Re)create the empty stream ``name`` capturing ``subject`` that a write scenario fills."""
    import jetstream_sync

    with jetstream_sync.connect(url) as nc:
        ctx = nc.jetstream()
        if name in set(ctx.stream_names()):
            ctx.delete_stream(name)
        ctx.create_stream(name=name, subjects=[subject], duplicate_window=600.0)


def stored(url: str, name: str) -> int:
    """How many messages stream ``name`` holds."""
    import jetstream_sync

    with jetstream_sync.connect(url) as nc:
        return nc.jetstream().stream(name).info().state.messages


# -- the scenarios ----------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One scenario run one way: what a runner gets."""

    scenario: str
    kind: str
    client: str
    session: str
    spark: Any
    url: str
    n: int
    partitions: int


def read_frame(cell: Cell) -> Any:
    """The cell's read stream as a DataFrame, read the cell's way."""
    stream = STREAMS[cell.kind]
    if cell.client == "ours":
        return (
            cell.spark.read.format("jetstream")
            .option("servers", cell.url)
            .option("stream", stream)
            .option("numPartitions", cell.partitions)
            .load()
        )
    from benchmarks import spark_natspy

    url, ranges = cell.url, spark_natspy.split(1, cell.n, cell.partitions)
    rdd = cell.spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(
        lambda part: spark_natspy.read_partition(url, stream, part)
    )
    return cell.spark.createDataFrame(rdd, "subject STRING, seq LONG, data BINARY")


def read_count(cell: Cell) -> int:
    """``read-count``: the read into ``count()``."""
    return int(read_frame(cell).count())


def read_agg(cell: Cell) -> int:
    """``read-agg``: the read into count and bytes per ``seq % 16``, collected; the total count."""
    from pyspark.sql import functions as F

    rows = (
        read_frame(cell)
        .groupBy((F.col("seq") % 16).alias("bucket"))
        .agg(F.count("*").alias("n"), F.sum(F.length("data")).alias("bytes"))
        .collect()
    )
    return sum(row.n for row in rows)


def rows_to_write(spark: Any, n: int, partitions: int, subject: str) -> Any:
    """``n`` rows of ``subject`` and a distinct ``SIZE``-byte ``data``."""
    from pyspark.sql import functions as F

    return spark.range(0, n, 1, partitions).select(
        F.lit(subject).alias("subject"),
        F.lpad(F.col("id").cast("string"), SIZE, "x").cast("binary").alias("data"),
    )


def write(cell: Cell) -> int:
    """``write`` (``write-nodedupe``: ours with ``dedupe=false``): N rows into a fresh stream;
    the messages it then holds."""
    token = (cell.client + cell.session).replace("-", "")
    target, subject = f"W{token.upper()}", f"{WRITE_SUBJECTS}.{token}"
    fresh_write_stream(cell.url, target, subject)
    frame = rows_to_write(cell.spark, cell.n, cell.partitions, subject)
    url = cell.url
    if cell.client == "ours":
        writer = frame.write.format("jetstream").option("servers", url).mode("append")
        writer.option("dedupe", str(cell.scenario != "write-nodedupe").lower()).save()
    else:
        from benchmarks import spark_natspy

        body = (
            spark_natspy.write_partition
            if cell.client == "nats-py"
            else spark_natspy.write_partition_windowed
        )
        frame.rdd.mapPartitions(lambda rows: body(url, rows)).sum()
    return stored(url, target)


def write_fast(cell: Cell) -> int:
    """``write-fast``: ``write`` into a stream with ``allow_batched``, ours with ``mode=fast``.

    Ours sends each task's rows as fast-ingest batches, with the same derived
    ``Nats-Msg-Id`` per row as ``write``; nats-py writes with its bounded window.
    """
    import jetstream_sync

    token = (cell.client + cell.session).replace("-", "")
    target, subject = f"WF{token.upper()}", f"{WRITE_SUBJECTS}fast.{token}"
    with jetstream_sync.connect(cell.url) as nc:
        ctx = nc.jetstream()
        if target in set(ctx.stream_names()):
            ctx.delete_stream(target)
        ctx.create_stream(
            name=target, subjects=[subject], duplicate_window=600.0, allow_batched=True
        )
    frame = rows_to_write(cell.spark, cell.n, cell.partitions, subject)
    url = cell.url
    if cell.client == "ours":
        writer = frame.write.format("jetstream").option("servers", url).option("mode", "fast")
        writer.option("stream", target).mode("append").save()
    else:
        from benchmarks import spark_natspy

        frame.rdd.mapPartitions(lambda rows: spark_natspy.write_partition_windowed(url, rows)).sum()
    return stored(url, target)


def pipeline_module() -> Any:
    """``examples/pipeline.py`` as a module (it imports its helper as a script does)."""
    import importlib.util

    examples = ROOT / "examples"
    if str(examples) not in sys.path:
        sys.path.insert(0, str(examples))
    if "pipeline_example" in sys.modules:
        return sys.modules["pipeline_example"]
    spec = importlib.util.spec_from_file_location("pipeline_example", examples / "pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def prefill_orders(server: BenchServer, n: int) -> None:
    """Fill ``ORDERS`` as the main job's step a does: ``n`` JSON order events."""
    import contextlib

    import jetstream_sync

    pipeline = pipeline_module()
    # its progress lines go to stderr: stdout is the table's
    with jetstream_sync.connect(server.url) as nc, contextlib.redirect_stdout(sys.stderr):
        ctx = nc.jetstream()
        pipeline.create_streams(ctx)
        hour = pipeline.HOUR_MS
        start = int(time.time() * 1000) // hour * hour - pipeline.SPAN_HOURS * hour
        pipeline.publish_orders(
            ctx, n, start, pipeline.SPAN_HOURS * hour, seed=1, label="batch-step: publish",
            rates=pipeline.Rates(),
        )  # fmt: skip


def batch_step(cell: Cell) -> int:
    """``batch-step``: the main job's step b on ``ORDERS``, collected; the events it counted."""
    pipeline = pipeline_module()
    rows = pipeline.aggregate_orders(pipeline.read_orders(cell.spark, cell.url, None)).collect()
    return sum(row.orders for row in rows)


def batch_step_read(cell: Cell) -> int:
    """``batch-step-read``: the same read of ``ORDERS`` (the job's options) into ``count()``."""
    return int(pipeline_module().read_orders(cell.spark, cell.url, None).count())


RUNNERS: dict[str, Callable[[Cell], int]] = {
    "read-count": read_count,
    "read-agg": read_agg,
    "write": write,
    "write-fast": write_fast,
    "write-nodedupe": write,
    "batch-step": batch_step,
    "batch-step-read": batch_step_read,
}


# -- CPU ----------------------------------------------------------------------------------


def _tree_times(
    roots: list[int], exclude: frozenset[int] = frozenset()
) -> dict[tuple[int, str], int]:
    """CPU ticks (utime + stime) of each root and its descendants, keyed by (pid, start time).

    A pid in ``exclude`` counts for nothing, and neither do its descendants.
    """
    parents: dict[int, int] = {}
    times: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the process has gone meanwhile
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (fields[19], int(fields[11]) + int(fields[12]))
    tree, todo = {}, list(roots)
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    while todo:
        pid = todo.pop()
        if pid in exclude:
            continue
        if pid in times:
            tree[(pid, times[pid][0])] = times[pid][1]
        todo += children.get(pid, [])
    return tree


#: The kinds of process a Spark benchmark's CPU is split into, in the order reported.
CPU_KINDS = ("server", "workers", "jvm", "driver")


def process_kind(pid: int, server_pid: int) -> str:
    """Which part of a Spark run ``pid`` is: the nats-server, Spark's Python workers, a JVM
    (Spark's, or a Connect server's), or the driver (the session's Python process)."""
    if pid == server_pid:
        return "server"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "driver"
    if argv and os.path.basename(argv[0]) == b"java":
        return "jvm"
    if any(arg in (b"pyspark.daemon", b"pyspark.worker") for arg in argv):
        return "workers"
    return "driver"


class CpuMeter:
    """CPU seconds used by some processes and their descendants (Spark's JVM, Python workers).

    A thread samples the process trees every 0.2 s and keeps each process's
    last value, so a worker that exits during the measurement still counts
    (up to its last sample).

    Args:
        roots: the pids whose trees count.
        exclude: pids left out with their descendants (a server the measuring
            process started itself, counted on its own).
        server_pid: the nats-server's pid, for :meth:`split`.
    """

    def __init__(
        self, roots: list[int], exclude: frozenset[int] = frozenset(), server_pid: int = 0
    ) -> None:
        """Take the baseline and start sampling."""
        self._roots = roots
        self._exclude = exclude
        self._server_pid = server_pid
        self._base = _tree_times(roots, exclude)
        self._last = dict(self._base)
        self._kinds: dict[tuple[int, str], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-cpu-meter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def _sample(self) -> None:
        times = _tree_times(self._roots, self._exclude)
        for key in times.keys() - self._kinds.keys():
            self._kinds[key] = process_kind(key[0], self._server_pid)
        self._last.update(times)

    def stop(self) -> float:
        """Stop sampling; return the CPU seconds used since the baseline."""
        self._stop.set()
        self._thread.join()
        self._sample()
        ticks = sum(last - self._base.get(key, 0) for key, last in self._last.items())
        return ticks / CLOCK_TICKS

    def split(self) -> dict[str, float]:
        """After :meth:`stop`: the CPU seconds per kind of process (see :data:`CPU_KINDS`)."""
        out = dict.fromkeys(CPU_KINDS, 0.0)
        for key, last in self._last.items():
            kind = self._kinds.get(key) or process_kind(key[0], self._server_pid)
            out[kind] += (last - self._base.get(key, 0)) / CLOCK_TICKS
        return out


# -- a session (in a child process) -------------------------------------------------------


def start_spark(spec: dict[str, Any]) -> Any:
    """The spec's session (classic on its master, or remote), ``jetstream`` registered."""
    from pyspark.sql import SparkSession

    import jetstream_sync.spark

    if spec.get("remote"):
        spark = SparkSession.builder.remote(spec["remote"]).getOrCreate()
    else:
        spark = (
            SparkSession.builder.master(spec["master"])
            .appName("jetstream_sync-spark-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
    jetstream_sync.spark.register(spark)
    return spark


def timed(
    cell: Cell, roots: list[int], server_pid: int
) -> tuple[float, float, int, dict[str, float]]:
    """Run ``cell`` once: its seconds, the CPU seconds of ``roots``' trees, the checked count,
    and the CPU seconds per kind of process."""
    meter, start = CpuMeter(roots, server_pid=server_pid), time.perf_counter()
    try:
        count = RUNNERS[cell.scenario](cell)
    finally:
        cpu = meter.stop()
    return time.perf_counter() - start, cpu, count, meter.split()


def run_cells(spec: dict[str, Any], spark: Any, roots: list[int]) -> list[dict[str, Any]]:
    """Every cell of ``spec`` in ``spark``: the first run of the first is the cold one."""
    rows: list[dict[str, Any]] = []
    n, cores = spec["n"], os.cpu_count() or 1
    for index, (scenario, kind, client) in enumerate(spec["cells"]):
        cell = Cell(
            scenario, kind, client, spec["session"], spark, spec["url"], n, spec["partitions"]
        )
        row: dict[str, Any] = {"scenario": scenario, "stream": kind, "client": client,
                               "session": spec["session"], "n": n}  # fmt: skip
        try:
            runs = [
                timed(cell, roots, spec["server_pid"]) for _ in range(spec["reps"] + (index == 0))
            ]
        except Exception as exc:  # reported in the table; the exit code says 1
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            continue
        wrong = [count for _, _, count, _ in runs if count != n]
        if wrong:
            row["error"] = f"checked {wrong[0]:,} messages, expected {n:,}"
            rows.append(row)
            continue
        if index == 0:
            row["cold_secs"] = round(runs[0][0], 3)
            row["cold_msgs_per_s"] = round(n / runs[0][0])
            runs = runs[1:]
        secs, cpu, _, split = min(runs)
        row.update(
            secs=round(secs, 3),
            msgs_per_s=round(n / secs),
            cpu_us_per_msg=round(cpu / n * 1e6, 2),
            cpu_split_us_per_msg={kind: round(v / n * 1e6, 2) for kind, v in split.items()},
            cpu_bound_msgs_per_s=round(n * cores / cpu) if cpu else None,
        )
        rows.append(row)
        sys.stderr.write(f"{row}\n")
    return rows


def session_main(spec: dict[str, Any]) -> None:
    """A child process: start the spec's session (and Connect server), run its cells, write JSON."""
    roots = [os.getpid(), spec["server_pid"]]
    if spec["session"] == "connect":
        from .spark_connect import ConnectServer

        with (
            tempfile.TemporaryDirectory(prefix="jsbench-connect-") as tmp,
            ConnectServer(Path(tmp), spec["master"]) as connect,
        ):
            spark = start_spark({**spec, "remote": connect.url})
            rows = run_cells(spec, spark, [*roots, connect.pid() or os.getpid()])
            spark.stop()
    else:
        spark = start_spark(spec)
        rows = run_cells(spec, spark, roots)
        spark.stop()
    Path(spec["out"]).write_text(json.dumps(rows))


# -- the orchestrator ---------------------------------------------------------------------


def plan(args: argparse.Namespace) -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """The sessions to run: ``(session, label, cells)``.

    A classic session per client and stream kind (each has its cold first
    query), or one for every classic cell with ``--one-session``; one Connect
    session for all the Connect cells.
    """
    groups: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}
    for session in args.session_list:
        for scenario in args.scenarios:
            if session == "connect" and scenario not in CONNECT:
                continue
            clients = CLIENTS.get(scenario, ("ours",)) if session == "classic" else ("ours",)
            for client in clients:
                for kind in KINDS.get(scenario, (NO_KIND,)):
                    if kind == NO_KIND or kind in args.kind_list:
                        # one Connect server (a JVM of its own) serves all its cells
                        shared = session == "connect" or args.one_session
                        key = (session, "", "") if shared else (session, client, kind)
                        groups.setdefault(key, []).append((scenario, kind, client))
    return [(key[0], " ".join(filter(None, key)), cells) for key, cells in groups.items()]


def run_session(
    session: str, cells: list[tuple[str, str, str]], server: BenchServer, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Run one session's cells in a child process; its rows (or an error row per cell)."""
    with tempfile.TemporaryDirectory(prefix="jsbench-spark-") as tmp:
        out = Path(tmp) / "rows.json"
        spec = {"session": session, "cells": cells, "url": server.url,
                "server_pid": server.proc.pid if server.proc else 0, "n": args.n,
                "partitions": args.partitions, "reps": args.reps, "master": args.master,
                "out": str(out)}  # fmt: skip
        try:
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.spark_bench", "--session", json.dumps(spec)],
                cwd=ROOT, capture_output=True, text=True, timeout=SESSION_TIMEOUT,
            )  # fmt: skip
            # the session's last traceback says why, not the Spark log lines after it
            why = done.stderr[max(done.stderr.rfind("Traceback"), 0) :][-1500:]
            failure = "" if out.exists() else f"exit {done.returncode}: {why}"
        except subprocess.TimeoutExpired:
            failure = f"the session ran over {SESSION_TIMEOUT:.0f} s"
        if failure:
            return [{"scenario": s, "stream": k, "client": c, "session": session, "n": args.n,
                     "error": failure} for s, k, c in cells]  # fmt: skip
        return list(json.loads(out.read_text()))


def spark_environment() -> None:
    """Let Spark's Python workers (a Connect server's too) run this interpreter and import
    ``benchmarks`` and ``jetstream_sync``; keep Spark on loopback."""
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every session of the plan against one fresh server; one row per cell."""
    spark_environment()
    rows: list[dict[str, Any]] = []
    with BenchServer() as server:
        prefill_read_streams(server, args.n)
        if "batch-step" in args.scenarios or "batch-step-read" in args.scenarios:
            prefill_orders(server, args.n)
        for session, label, cells in plan(args):
            sys.stderr.write(f"session {label}: {[c[0] for c in cells]}\n")
            rows += run_session(session, cells, server, args)
    return rows


def _ratio(mine: float | None, theirs: float | None) -> str:
    return f"{mine / theirs:.1f}x" if mine and theirs else ""


def markdown(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table: warm and cold rates, ratios to the baselines, targets."""
    rate = {(r["scenario"], r["stream"], r["client"], r["session"]): r.get("msgs_per_s")
            for r in rows}  # fmt: skip
    lines = [
        "| scenario | stream | session | client | msgs/s warm | msgs/s cold | cold − warm s "
        "| CPU µs/msg | server / workers / JVM / driver | ours / baseline | target |",
        "|---|---|---|---|---:|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        where = f"| {r['scenario']} | {r['stream']} | {r['session']} | {r['client']} "
        if "error" in r:
            lines.append(where + f"| error: {r['error']} | | | | | | |")
            continue
        cold = cold_extra = ratios = target = ""
        if "cold_secs" in r:
            cold = f"{r['cold_msgs_per_s']:,}"
            cold_extra = f"{r['cold_secs'] - r['secs']:+.2f}"
        key = (BASELINE_SCENARIO.get(r["scenario"], r["scenario"]), r["stream"])
        if r["client"] == "ours" and r["session"] == "classic":
            mine = r["msgs_per_s"]
            pairs = [(b, rate.get((*key, b, "classic"))) for b in BASELINES]
            ratios = ", ".join(f"{_ratio(mine, v)} {b}" for b, v in pairs if v)
            met = mine >= TARGETS[r["scenario"]] and all(mine >= 3 * v for _, v in pairs if v)
            target = f"≥ {TARGETS[r['scenario']]:,}/s and ≥ 3x: {'met' if met else 'NOT met'}"
        elif r["session"] == "connect":
            classic = rate.get((*key, r["client"], "classic"))
            ratios = f"{_ratio(r['msgs_per_s'], classic)} classic" if classic else ""
        split = r.get("cpu_split_us_per_msg") or {}
        parts = " / ".join(f"{split.get(kind, 0.0):.1f}" for kind in CPU_KINDS)
        lines.append(
            where + f"| {r['msgs_per_s']:,} | {cold} | {cold_extra} | {r['cpu_us_per_msg']:.1f} "
            f"| {parts} | {ratios} | {target} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run, print the table; exit 1 if a scenario failed."""
    args = parse_args(argv)
    load_before = os.getloadavg()[0]
    rows = run_all(args)
    meta = {
        # other processes' load skews every figure: the 1-minute load average before and after
        "loadavg": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "master": args.master,
        "partitions": args.partitions,
        "n": args.n,
        "reps": args.reps,
        "size": SIZE,
        "nproc": os.cpu_count(),
        "nats_server": server_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(f"Spark data source vs nats-py in mapPartitions ({json.dumps(meta)})\n")
    print(markdown(rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--session"]:
        session_main(json.loads(sys.argv[2]))
    else:
        sys.exit(main())
