"""The ``jetstream`` Spark data source through server faults: nothing lost, nothing twice."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync
from tests.fixtures.polling import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONS = 2  # the shared session runs two tasks at once: both pause together
PER_PARTITION = 10_000  # more than one Arrow batch (8,192 rows): each pause is mid-range


def _failed_tasks(spark: Any, group: str) -> int:
    """How many task attempts of the job group's stages failed so far."""
    tracker = spark.sparkContext.statusTracker()
    stages = [
        tracker.getStageInfo(stage)
        for job in tracker.getJobIdsForGroup(group)
        for stage in (tracker.getJobInfo(job).stageIds if tracker.getJobInfo(job) else ())
    ]
    return sum(stage.numFailedTasks for stage in stages if stage)


@pytest.mark.parametrize("direct", [True, False], ids=["direct-get", "ordered-consumer"])
def test_batch_read_through_a_server_restart_returns_every_message_once(
    spark, restartable_server, tmp_path: Path, direct: bool
):
    """Both tasks pause mid-range, the server stops, the tasks fail and are retried while it
    starts again: the read returns every stored message exactly once."""
    server = restartable_server
    total = PARTITIONS * PER_PARTITION
    with jetstream_sync.connect(server.url) as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="FAULTS", subjects=["faults.>"], allow_direct=direct)
        for i in range(total):
            ctx.publish_async("faults.x", b"m%d" % i)
        ctx.publish_async_completed(30)
    pause = tmp_path / "pause"
    pause.mkdir()
    df = (
        spark.read.format("jetstream")
        .option("servers", server.url)
        .option("stream", "FAULTS")
        .option("numPartitions", str(PARTITIONS))
        .option("testPauseDir", str(pause))
        .load()
    )
    group = f"faults-{'direct' if direct else 'consumer'}-{server.port}"
    outcome: dict[str, Any] = {}

    def collect() -> None:
        spark.sparkContext.setJobGroup(group, "a batch read through a server restart")
        try:
            outcome["rows"] = df.select("seq", "data").collect()
        except Exception as exc:  # noqa: BLE001 - asserted below
            outcome["error"] = exc
        finally:
            spark.sparkContext.setJobGroup("", "")

    reader = threading.Thread(target=collect, name="spark-collect")
    reader.start()
    try:
        wait_for(
            lambda: len(list(pause.glob("paused-*"))) == PARTITIONS or not reader.is_alive(),
            timeout=120,
            interval=0.05,
        )
        server.stop(keep_store=True)
        (pause / "go").touch()
        # the paused attempts read on into a dead server and fail (or the read ends)
        wait_for(
            lambda: _failed_tasks(spark, group) >= 1 or not reader.is_alive(),
            timeout=60,
            interval=0.05,
        )
        server.start()
    finally:
        (pause / "go").touch()
        reader.join()
    assert "error" not in outcome, outcome.get("error")
    rows = outcome["rows"]
    seqs = sorted(row.seq for row in rows)
    assert len(seqs) == len(set(seqs)) == total, (len(seqs), len(set(seqs)), total)
    assert seqs == list(range(1, total + 1))
    assert sorted(bytes(row.data) for row in rows) == sorted(b"m%d" % i for i in range(total))
    assert _failed_tasks(spark, group) >= 1  # a task did fail and re-read its range
