"""The ``jetstream`` Spark data source through server restarts: nothing lost, nothing twice.

Every read task's first attempt pauses in the middle of its range (the ``pauseDir`` hook of
``format("jetstream-faults")``, see ``tests/fixtures/spark_faults.py``); the test stops the server,
lets the tasks go on into the dead server until one fails, and starts the server
again: the retried tasks read (and write) their whole range again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync
from tests.fixtures.polling import wait_for
from tests.fixtures.spark_faults import FORMAT as FAULTS

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONS = 2  # the shared session runs two tasks at once: both pause together
# messages per partition: more than a task reads before its pause, i.e. the batches (8,192
# rows) it yields and the direct get (4,096 messages) it has asked for meanwhile
READ_PER_PARTITION = 20_000  # the batch read pauses after one batch
COPY_PER_PARTITION = 30_000  # the streaming copy's readers pause after three


def _fill(server: Any, total: int, direct: bool = True) -> None:
    """Stream IN (``in.>``) with ``total`` messages ``m0``..; stream OUT (``out.>``), empty."""
    with jetstream_sync.connect(server.url) as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="IN", subjects=["in.>"], allow_direct=direct)
        ctx.create_stream(name="OUT", subjects=["out.>"], allow_direct=True)
        for i in range(total):
            ctx.publish_async("in.x", b"m%d" % i)
        ctx.publish_async_completed(30)


def _failed_stages(spark: Any) -> set[int]:
    """The active stages with a failed task attempt."""
    tracker = spark.sparkContext.statusTracker()
    stages = (tracker.getStageInfo(s) for s in tracker.getActiveStageIds())
    return {s.stageId for s in stages if s is not None and s.numFailedTasks > 0}


def _through_restart(
    spark: Any, server: Any, pause: Path, work: Callable[[], None], mid_batch: Callable[[], bool]
) -> set[int]:
    """Run ``work`` on a thread; when every task paused and ``mid_batch()`` holds, stop the
    server, let the tasks go on until one fails, start the server; join. Return the stages
    whose tasks failed."""
    failed: set[int] = set()
    thread = threading.Thread(target=work, name="spark-job")
    thread.start()
    try:
        wait_for(
            lambda: len(list(pause.glob("paused-*"))) == PARTITIONS or not thread.is_alive(),
            timeout=120,
            interval=0.05,
        )
        wait_for(
            lambda: mid_batch() or not thread.is_alive(),
            timeout=60,
            interval=0.05,
            message="the job stored nothing before the pause",
        )
        server.stop(keep_store=True)
        (pause / "go").touch()
        # the paused attempts go on into the dead server and fail (or the job ends)
        wait_for(
            lambda: failed.update(_failed_stages(spark)) or failed or not thread.is_alive(),
            timeout=60,
            interval=0.05,
            message="no task failed with the server down",
        )
        server.start()
    finally:
        (pause / "go").touch()
        thread.join()
    return failed


def _pause_dir(tmp_path: Path) -> Path:
    pause = tmp_path / "pause"
    pause.mkdir()
    return pause


@pytest.mark.parametrize("direct", [True, False], ids=["direct-get", "ordered-consumer"])
def test_batch_read_through_a_server_restart_returns_every_message_once(
    spark, restartable_server, tmp_path: Path, direct: bool
):
    """Both tasks pause mid-range, the server stops, a task fails and is retried while it
    starts again: the read returns every stored message exactly once."""
    server = restartable_server
    total = PARTITIONS * READ_PER_PARTITION
    _fill(server, total, direct)
    pause = _pause_dir(tmp_path)
    df = (
        spark.read.format(FAULTS)
        .option("servers", server.url)
        .option("stream", "IN")
        .option("numPartitions", str(PARTITIONS))
        .option("pauseDir", str(pause))
        .load()
    )
    outcome: dict[str, Any] = {}

    def collect() -> None:
        try:
            outcome["rows"] = df.select("seq", "data").collect()
        except Exception as exc:  # noqa: BLE001 - asserted below
            outcome["error"] = exc

    failed = _through_restart(spark, server, pause, collect, lambda: True)
    assert "error" not in outcome, outcome.get("error")
    rows = outcome["rows"]
    seqs = sorted(row.seq for row in rows)
    assert len(seqs) == len(set(seqs)) == total, (len(seqs), len(set(seqs)), total)
    assert seqs == list(range(1, total + 1))
    assert sorted(bytes(row.data) for row in rows) == sorted(b"m%d" % i for i in range(total))
    assert failed  # a task did fail and re-read its range


def test_streaming_write_through_a_server_restart_mid_batch_adds_no_duplicates(
    spark, restartable_server, tmp_path: Path
):
    """A micro-batch copying IN to OUT stops mid-way (part of it stored) when the server
    stops; the retried tasks publish their rows again under the same derived msg ids:
    OUT ends with every message exactly once."""
    server = restartable_server
    total = PARTITIONS * COPY_PER_PARTITION
    _fill(server, total)
    pause = _pause_dir(tmp_path)
    query = (
        spark.readStream.format(FAULTS)
        .option("servers", server.url)
        .option("stream", "IN")
        .option("startingOffsets", "earliest")
        .option("numPartitions", str(PARTITIONS))
        .option("pauseDir", str(pause))
        .option("pauseAfterBatches", "3")
        .load()
        .select("data")
        .writeStream.format("jetstream")
        .option("servers", server.url)
        .option("subject", "out.copy")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
    )
    outcome: dict[str, Any] = {}

    def await_query() -> None:
        outcome["done"] = outcome["query"].awaitTermination(240)

    def out_messages() -> int:
        with jetstream_sync.connect(server.url) as nc:
            return nc.jetstream().stream("OUT").info().state.messages

    outcome["query"] = query.start()  # in this thread: it sees the registered source
    # the readers paused after 24,576 rows each; the writers got them in Arrow batches
    # of up to 10,000 rows (spark.sql.execution.arrow.maxRecordsPerBatch)
    failed = _through_restart(
        spark, server, pause, await_query, lambda: out_messages() >= PARTITIONS * 10_000
    )
    running = outcome["query"]
    assert outcome["done"] and running.exception() is None, running.exception()
    assert sum(p["numInputRows"] for p in running.recentProgress) >= total
    assert failed  # a task failed mid-batch and was retried
    with jetstream_sync.connect(server.url) as nc:
        out = nc.jetstream().stream("OUT")
        state = out.info().state
        assert (state.messages, state.first_seq, state.last_seq) == (total, 1, total)
        stored: list[bytes] = []
        while len(stored) < total:
            got = out.get_msgs(start_seq=len(stored) + 1, batch=5000, timeout=10)
            assert got, f"read back stopped at {len(stored)}"
            stored += [m.data for m in got]
    assert sorted(stored) == sorted(b"m%d" % i for i in range(total))
