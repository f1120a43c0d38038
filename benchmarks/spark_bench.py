"""``python -m benchmarks spark``: the ``jetstream`` data source vs nats-py in ``mapPartitions``.

One Spark session (``local[2]`` by default) and one fresh loopback nats-server
for the whole run; every scenario runs both ways in the same run, in turn:

- ``read-count``: a batch read of N 128-byte messages into ``count()``;
- ``read-agg``: the same read into an aggregation (count and bytes per
  ``seq % 16``), collected on the driver;
- ``write``: a batch write of N 128-byte rows into a fresh stream;
- ``batch-step``: the main job's batch step (``examples/pipeline.py``: N order
  events as JSON, read, decoded by ``from_json``, aggregated per region and
  hour) beside ``read-count`` of the same stream, ours only (see
  :func:`batch_step_rows`).

"ours" is ``format("jetstream")``; "nats-py" is ``benchmarks.spark_natspy``.
Every result is checked (counts, stored messages) before its time is reported.
Prints a markdown table (and writes JSON with ``--json``); figures are
information, never a verdict: the exit code is 1 only when a run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ._wire import RawConn
from .prefill import pipelined_publish
from .server import CLOCK_TICKS, BenchServer, server_version

ROOT = Path(__file__).resolve().parent.parent
READ_STREAM = "S"  # prefill.pipelined_publish publishes to bench.s
WRITE_SUBJECTS = "sparkw"  # each client writes to sparkw.<client> in its own stream
SIZE = 128
TARGETS = {"read-count": 150_000, "read-agg": 150_000, "write": 75_000}
CLIENTS = ("ours", "nats-py")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """``--n``, ``--master``, ``--partitions``, ``--reps``, ``--json``."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks spark", description=__doc__)
    ap.add_argument("--n", type=int, default=1_000_000, help="messages per scenario")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=2, help="read/write partitions")
    ap.add_argument("--reps", type=int, default=1, help="repetitions (the best is reported)")
    ap.add_argument("--only", default="", help="scenarios, e.g. read-count,write")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    args.scenarios = [s for s in TARGETS if not args.only or s in args.only.split(",")]
    return args


def start_spark(master: str) -> Any:
    """A Spark session whose Python workers can import ``benchmarks`` and ``jetstream_sync``."""
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import jetstream_sync.spark

    spark = (
        SparkSession.builder.master(master)
        .appName("jetstream_sync-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    jetstream_sync.spark.register(spark)
    return spark


def prefill_read_stream(server: BenchServer, n: int) -> None:
    """Create the read stream (direct get allowed) and store ``n`` messages of ``SIZE`` bytes."""
    import jetstream_sync

    with jetstream_sync.connect(server.url) as nc:
        nc.jetstream().create_stream(name=READ_STREAM, subjects=["bench.>"], allow_direct=True)
    conn = RawConn(server.port)
    try:
        pipelined_publish(conn, n, SIZE, check=True)
    finally:
        conn.close()


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


# -- the two ways to read and write ----------------------------------------------------


def read_ours(spark: Any, url: str, partitions: int) -> Any:
    """The stream as a DataFrame through ``format("jetstream")``."""
    return (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", READ_STREAM)
        .option("numPartitions", partitions)
        .load()
    )


def read_natspy(spark: Any, url: str, partitions: int, n: int) -> Any:
    """The stream as a DataFrame through nats-py in ``mapPartitions``."""
    from benchmarks import spark_natspy

    ranges = spark_natspy.split(1, n, partitions)
    rdd = spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(
        lambda part: spark_natspy.read_partition(url, READ_STREAM, part)
    )
    return spark.createDataFrame(rdd, "subject STRING, seq LONG, data BINARY")


def rows_to_write(spark: Any, n: int, partitions: int, subject: str) -> Any:
    """``n`` rows of ``subject`` and a distinct ``SIZE``-byte ``data``."""
    from pyspark.sql import functions as F

    return spark.range(0, n, 1, partitions).select(
        F.lit(subject).alias("subject"),
        F.lpad(F.col("id").cast("string"), SIZE, "x").cast("binary").alias("data"),
    )


def aggregate(frame: Any) -> int:
    """Count and bytes per ``seq % 16``, collected; return the total count."""
    from pyspark.sql import functions as F

    rows = (
        frame.groupBy((F.col("seq") % 16).alias("bucket"))
        .agg(F.count("*").alias("n"), F.sum(F.length("data")).alias("bytes"))
        .collect()
    )
    return sum(row.n for row in rows)


def scenario(name: str, client: str, spark: Any, url: str, args: argparse.Namespace) -> int:
    """Run one scenario one way; return the count it checked."""
    n, parts = args.n, args.partitions
    if name == "write":
        token = client.replace("-", "")
        target, subject = f"W{token.upper()}", f"{WRITE_SUBJECTS}.{token}"
        fresh_write_stream(url, target, subject)
        frame = rows_to_write(spark, n, parts, subject)
        if client == "ours":
            frame.write.format("jetstream").option("servers", url).mode("append").save()
        else:
            from benchmarks import spark_natspy

            frame.rdd.mapPartitions(lambda rows: spark_natspy.write_partition(url, rows)).sum()
        return stored(url, target)
    frame = read_ours(spark, url, parts) if client == "ours" else read_natspy(spark, url, parts, n)
    return frame.count() if name == "read-count" else aggregate(frame)


def _tree_times(root: int) -> dict[tuple[int, str], int]:
    """CPU ticks (utime + stime) of ``root`` and each descendant, keyed by (pid, start time)."""
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
    tree, todo = {}, [root]
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    while todo:
        pid = todo.pop()
        if pid in times:
            tree[(pid, times[pid][0])] = times[pid][1]
        todo += children.get(pid, [])
    return tree


class CpuMeter:
    """CPU seconds used by this process and its descendants (Spark's JVM, Python workers).

    A thread samples the process tree every 0.2 s and keeps each process's
    last value, so a worker that exits during the measurement still counts
    (up to its last sample).
    """

    def __init__(self) -> None:
        """Take the baseline and start sampling."""
        self._root = os.getpid()
        self._base = _tree_times(self._root)
        self._last = dict(self._base)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-cpu-meter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._last.update(_tree_times(self._root))

    def stop(self) -> float:
        """Stop sampling; return the CPU seconds used since the baseline."""
        self._stop.set()
        self._thread.join()
        self._last.update(_tree_times(self._root))
        ticks = sum(last - self._base.get(key, 0) for key, last in self._last.items())
        return ticks / CLOCK_TICKS


def measure(
    name: str, client: str, spark: Any, server: BenchServer, args: argparse.Namespace
) -> dict:
    """Run one scenario one way ``--reps`` times; the best time with its CPU, or the error.

    ``cpu_us_per_msg`` is the CPU of Spark (driver, JVM, Python workers) plus
    the server's, per message: unlike the wall time, it barely depends on what
    else the machine runs. ``cpu_bound_msgs_per_s`` is the rate that CPU
    allows on this machine's cores.
    """
    best: dict[str, Any] = {"scenario": name, "client": client, "n": args.n}
    for _ in range(args.reps):
        meter, server0, start = CpuMeter(), server.cpu_seconds(), time.perf_counter()
        try:
            count = scenario(name, client, spark, server.url, args)
        except Exception as exc:  # reported in the table; the exit code says 1
            meter.stop()
            best["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            return best
        secs = time.perf_counter() - start
        cpu = meter.stop() + server.cpu_seconds() - server0
        if count != args.n:
            best["error"] = f"checked {count:,} messages, expected {args.n:,}"
            return best
        if "secs" not in best or secs < best["secs"]:
            best.update(
                secs=round(secs, 3),
                msgs_per_s=round(args.n / secs),
                cpu_us_per_msg=round(cpu / args.n * 1e6, 2),
                cpu_bound_msgs_per_s=round(args.n * (os.cpu_count() or 1) / cpu),
            )
    return best


def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every scenario, both ways, against one fresh server; one row per scenario and client."""
    rows: list[dict[str, Any]] = []
    with BenchServer() as server:
        prefill_read_stream(server, args.n)
        spark = start_spark(args.master)
        try:
            spark.range(10).count()  # the JVM and the Python workers are warm before timing
            for name in args.scenarios:
                for client in CLIENTS:
                    rows.append(measure(name, client, spark, server, args))
                    sys.stderr.write(f"{name} {client}: {rows[-1]}\n")
            if not args.only or BATCH_STEP in args.only.split(","):
                rows += batch_step_rows(spark, server, args)
        finally:
            spark.stop()
    return rows


# -- the main job's batch step, on its own data ------------------------------------------

BATCH_STEP = "batch-step"
BATCH_STEP_TARGET = 92_000  # events/s: 2.5x the 36,790 of issue 20


def _pipeline() -> Any:
    """``examples/pipeline.py`` as a module (it imports its helper as a script does)."""
    import importlib.util

    examples = ROOT / "examples"
    if str(examples) not in sys.path:
        sys.path.insert(0, str(examples))
    spec = importlib.util.spec_from_file_location("pipeline_example", examples / "pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def batch_step_rows(spark: Any, server: BenchServer, args: argparse.Namespace) -> list[dict]:
    """``batch-step`` and ``read-count`` of the same ``ORDERS`` stream, in turn, ``--reps`` times.

    The stream is filled as the main job's step a does (N JSON order events,
    async publishing); ``batch-step`` is its step b's read and aggregation,
    collected on the driver, checked to count every event; ``read-count`` is
    the same read (the job's options) into ``count()``, so the table shows
    what the data source leaves to decoding and aggregating. Each keeps its
    best time with its CPU, as :func:`measure` does.
    """
    import contextlib

    import jetstream_sync

    pipeline = _pipeline()
    # its progress lines go to stderr: stdout is the table's
    with jetstream_sync.connect(server.url) as nc, contextlib.redirect_stdout(sys.stderr):
        ctx = nc.jetstream()
        pipeline.create_streams(ctx)
        hour = pipeline.HOUR_MS
        start = int(time.time() * 1000) // hour * hour - pipeline.SPAN_HOURS * hour
        pipeline.publish_orders(
            ctx, args.n, start, pipeline.SPAN_HOURS * hour, seed=1, label="batch-step: publish",
            rates=pipeline.Rates(),
        )  # fmt: skip

    def batch_step() -> int:
        rows = pipeline.aggregate_orders(pipeline.read_orders(spark, server.url, None)).collect()
        return sum(row.orders for row in rows)

    def read_count() -> int:
        return int(pipeline.read_orders(spark, server.url, None).count())

    # untimed: the first event alone, so neither run is timed starting Spark's Python processes
    first = spark.read.format("jetstream").option("servers", server.url).option("endSeq", 1)
    first.option("stream", "ORDERS").load().count()
    out = []
    for name, run in ((BATCH_STEP, batch_step), (f"{BATCH_STEP} read-count", read_count)):
        best: dict[str, Any] = {"scenario": name, "client": "ours", "n": args.n}
        for _ in range(args.reps):
            meter, server0, began = CpuMeter(), server.cpu_seconds(), time.perf_counter()
            try:
                count = run()
            except Exception as exc:  # reported in the table; the exit code says 1
                meter.stop()
                best["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                break
            secs = time.perf_counter() - began
            cpu = meter.stop() + server.cpu_seconds() - server0
            if count != args.n:
                best["error"] = f"checked {count:,} events, expected {args.n:,}"
                break
            if "secs" not in best or secs < best["secs"]:
                best.update(
                    secs=round(secs, 3),
                    msgs_per_s=round(args.n / secs),
                    cpu_us_per_msg=round(cpu / args.n * 1e6, 2),
                    cpu_bound_msgs_per_s=round(args.n * (os.cpu_count() or 1) / cpu),
                )
        if name == BATCH_STEP and "msgs_per_s" in best:
            met = best["msgs_per_s"] >= BATCH_STEP_TARGET
            best["target"] = f"≥ {BATCH_STEP_TARGET:,}/s: {'met' if met else 'NOT met'}"
        out.append(best)
        sys.stderr.write(f"{name}: {best}\n")
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table, with the ratio ours / nats-py and the targets."""
    rate = {(r["scenario"], r["client"]): r.get("msgs_per_s") for r in rows}
    cpu = {(r["scenario"], r["client"]): r.get("cpu_us_per_msg") for r in rows}
    lines = [
        "| scenario | client | msgs/s | seconds | CPU µs/msg | CPU-bound msgs/s "
        "| ours / nats-py | target |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ours, theirs = rate.get((r["scenario"], "ours")), rate.get((r["scenario"], "nats-py"))
        if "error" in r:
            lines.append(f"| {r['scenario']} | {r['client']} | error: {r['error']} | | | | | |")
            continue
        ratio, target = "", r.get("target", "")
        if r["client"] == "ours" and ours and theirs:
            ratio = f"{ours / theirs:.1f}x"
            ours_cpu, their_cpu = cpu[(r["scenario"], "ours")], cpu[(r["scenario"], "nats-py")]
            if ours_cpu and their_cpu:
                ratio += f" (CPU: {their_cpu / ours_cpu:.1f}x)"
            met = ours >= TARGETS[r["scenario"]] and ours >= 3 * theirs
            target = f"≥ {TARGETS[r['scenario']]:,}/s and ≥ 3x: {'met' if met else 'NOT met'}"
        lines.append(
            f"| {r['scenario']} | {r['client']} | {r['msgs_per_s']:,} | {r['secs']:.2f} "
            f"| {r['cpu_us_per_msg']:.1f} | {r['cpu_bound_msgs_per_s']:,} | {ratio} | {target} |"
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
    sys.exit(main())
