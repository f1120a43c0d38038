"""``python -m benchmarks spark-cold``: what the first query of a Spark session costs, and whose.

Issue 21 asks the first ``format("jetstream")`` query of a session to come within
2 s of a warm one. This measures the floor under that: the same first query by
Python code that does nothing, so the share that is Spark's own (starting its
Python workers for planning and for the tasks) shows beside ours. Each kind runs
in a fresh ``local[2]`` session of its own, in a child process; the first query
is timed, then two more (the warm ones):

- ``mappartitions``: ``parallelize(range(2), 2).mapPartitions(...).count()``: the
  task-side Python workers only, as the nats-py way pays them;
- ``trivial``: a Python data source that yields 1,000 rows from two partitions and
  imports nothing: Spark's planning workers plus the task workers;
- ``ours``: ``format("jetstream")`` reading a 1,000-message default stream into
  ``count()`` (two partitions).

Prints a markdown table of medians over ``--reps`` sessions per kind (the kinds
alternate, so load that comes and goes falls on each alike); ``--json`` writes
every run. The exit code is 1 only when a session failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .server import BenchServer, server_version
from .spark_bench import spark_environment

KINDS = ("mappartitions", "trivial", "ours")
STREAM = "COLD"
MESSAGES = 1000


class TrivialReader(DataSourceReader):
    """Two partitions of 500 integers: no imports, no I/O."""

    def partitions(self) -> list[InputPartition]:
        """Two partitions."""
        return [InputPartition(0), InputPartition(1)]

    def read(self, partition: InputPartition) -> Any:
        """500 one-column rows."""
        return ((i,) for i in range(MESSAGES // 2))


class TrivialSource(DataSource):
    """``format("cold-trivial")``: the cheapest Python data source Spark can plan and run."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "cold-trivial"

    def schema(self) -> str:
        """One integer column."""
        return "x INT"

    def reader(self, schema: Any) -> TrivialReader:
        """The reader."""
        return TrivialReader()


def session_main(kind: str, url: str) -> None:
    """Child process: a fresh session, the first query and two warm ones; JSON on stdout."""
    from pyspark.sql import SparkSession

    started = time.perf_counter()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(f"jetstream_sync-spark-cold-{kind}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    session_secs = time.perf_counter() - started
    if kind == "trivial":
        spark.dataSource.register(TrivialSource)
    elif kind == "ours":
        import jetstream_sync.spark

        jetstream_sync.spark.register(spark)

    def query() -> int:
        if kind == "mappartitions":
            rdd = spark.sparkContext.parallelize(range(MESSAGES), 2)
            return int(rdd.mapPartitions(lambda part: [sum(1 for _ in part)]).sum())
        if kind == "trivial":
            return int(spark.read.format("cold-trivial").load().count())
        reader = spark.read.format("jetstream").option("servers", url).option("stream", STREAM)
        return int(reader.option("numPartitions", 2).load().count())

    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        count = query()
        runs.append(time.perf_counter() - t0)
        if count != MESSAGES:
            raise RuntimeError(f"{kind}: counted {count}, expected {MESSAGES}")
    spark.stop()
    print(json.dumps({"kind": kind, "session_secs": session_secs, "runs": runs}))


def run_session(kind: str, url: str) -> dict[str, Any]:
    """One kind in a child process: its runs, or the error."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.spark_cold", "--session", kind, url],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"kind": kind, "error": (done.stderr or done.stdout)[-500:]}
    return dict(json.loads(lines[-1]))


def run_all(kinds: list[str], reps: int) -> list[dict[str, Any]]:
    """Every kind ``reps`` times, alternating, against one fresh server with the stream."""
    import jetstream_sync

    spark_environment()
    runs: list[dict[str, Any]] = []
    with BenchServer() as server:
        with jetstream_sync.connect(server.url) as nc:
            js = nc.jetstream()
            js.create_stream(name=STREAM, subjects=["cold.>"])
            for _ in range(MESSAGES):
                js.publish_async("cold.x", b"x" * 128)
            js.publish_async_completed(timeout=30)
        for _ in range(reps):
            for kind in kinds:
                runs.append(run_session(kind, server.url))
                sys.stderr.write(f"{runs[-1]}\n")
    return runs


def markdown(runs: list[dict[str, Any]], kinds: list[str]) -> str:
    """Medians per kind: session start, first query, warm query, first minus warm."""
    lines = [
        "| kind | sessions | session start s | first query s | warm query s | first − warm s |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for kind in kinds:
        good = [r for r in runs if r["kind"] == kind and "error" not in r]
        if not good:
            lines.append(f"| {kind} | 0 | failed | | | |")
            continue
        start = statistics.median(r["session_secs"] for r in good)
        first = statistics.median(r["runs"][0] for r in good)
        warm = statistics.median(min(r["runs"][1:]) for r in good)
        cells = (start, first, warm, first - warm)
        lines.append(f"| {kind} | {len(good)} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run, print the table; exit 1 if a session failed."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks spark-cold", description=__doc__)
    ap.add_argument("--reps", type=int, default=3, help="sessions per kind (default 3)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="of " + ",".join(KINDS))
    ap.add_argument("--json", type=Path, help="write every run here")
    args = ap.parse_args(argv)
    kinds = [k for k in KINDS if k in args.kinds.split(",")]
    load_before = os.getloadavg()[0]
    runs = run_all(kinds, args.reps)
    meta = {
        "loadavg": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "reps": args.reps,
        "nproc": os.cpu_count(),
        "nats_server": server_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(f"The first query of a Spark session ({json.dumps(meta)})\n")
    print(markdown(runs, kinds))
    if args.json is not None:
        args.json.write_text(json.dumps({"meta": meta, "runs": runs}, indent=2))
    return 1 if any("error" in r for r in runs) else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--session"]:
        session_main(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
