"""The spark curve: ``format("jetstream")`` into ``count()`` with 1, 2, 4, 8 partitions.

One fresh server and one Spark session for the whole curve. The stream is made as
users make it (``create_stream`` defaults: file storage, no ``allow_direct``), so the
source reads through consumers. Before each timed read, a read of the first 10,000
messages with the same partition count warms the Python workers. CPU per message is
reported twice: the Spark process tree's (``spark_bench.CpuMeter``: this process, the
JVM it starts and the JVM's Python workers, the server left out though this process
started it) and the server's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from ._wire import RawConn, create_stream
from .prefill import pipelined_publish
from .scaling import SIZE, Curve, publish_window
from .server import BenchServer

WARM_UP = 10_000


def read(spark: Any, url: str, partitions: int, end_seq: int | None = None) -> Any:
    """Stream "S" as a DataFrame through the data source."""
    reader = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", "S")
        .option("numPartitions", partitions)
    )
    if end_seq is not None:
        reader = reader.option("endSeq", end_seq)
    return reader.load()


def run_spark_curve(
    curve: Curve, args: argparse.Namespace, n: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every point of the spark curve, ``--reps`` times; rows and crash reasons."""
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        row = {"curve": curve.name, "client": "ours", "x": 0, "mode": "",
               "error": f"unavailable: pyspark is not installed ({e})"}  # fmt: skip
        return [row], []
    from .spark_bench import CpuMeter, spark_environment, start_spark

    rows: list[dict[str, Any]] = []
    crashes: list[str] = []
    with BenchServer() as server:
        assert server.proc is not None
        server_pid = server.proc.pid
        t0 = time.perf_counter()
        conn = RawConn(server.port)
        try:
            create_stream(conn, "file")
            pipelined_publish(conn, n, SIZE, publish_window(SIZE), check=True)
        finally:
            conn.close()
        sys.stderr.write(f"spark: {n:,} messages stored in {time.perf_counter() - t0:.0f} s\n")
        spark_environment()
        spark = start_spark({"master": args.master})
        try:
            spark.range(10).count()  # the JVM and its Python workers start before any timing
            for rep in range(1, args.reps + 1):
                for x in curve.xs:
                    row: dict[str, Any] = {"curve": curve.name, "client": "ours", "x": x,
                                           "mode": "", "rep": rep}  # fmt: skip
                    try:
                        read(spark, server.url, x, min(n, WARM_UP)).count()
                        meter = CpuMeter([os.getpid()], exclude=frozenset([server_pid]))
                        server0 = server.cpu_seconds()
                        start = time.perf_counter()
                        got = read(spark, server.url, x).count()
                        secs = time.perf_counter() - start
                        cpu, server_cpu = meter.stop(), server.cpu_seconds() - server0
                        if got != n:
                            raise RuntimeError(f"count() gave {got:,}, expected {n:,}")
                    except Exception as exc:  # reported in the table; the exit code says 1
                        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                        crashes.append(f"spark x={x} rep {rep}: {row['error']}")
                    else:
                        row.update(
                            n=n,
                            secs=round(secs, 3),
                            msgs_per_s=round(n / secs),
                            cpu_us_per_msg=round(cpu / n * 1e6, 2),
                            server_cpu_us_per_msg=round(server_cpu / n * 1e6, 2),
                        )
                    rows.append(row)
                    sys.stderr.write(f"spark x={x} rep {rep}: {row}\n")
        finally:
            spark.stop()
    return rows, crashes
