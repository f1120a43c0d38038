"""Gaps and data loss on the ``jetstream`` reads, as docs/spark/reading.md defines them.

A gap (a message deleted or expired on its own) is never an error; loss (the
stream's first sequence moved past sequences a task had not read yet, or the
stream was deleted or recreated since planning) fails the read with
``failOnDataLoss=true`` and is a WARNING with the remaining rows otherwise.

The first tests drive one task's read (``read_checked``, what a Spark task
runs) in this process, against the real server, stopping it between two
record batches to purge or recreate the stream; both read paths (batched
direct get, and the ordered consumer of a stream without ``allow_direct``).
The Spark tests at the end do the same through ``format("jetstream-faults")``,
whose tasks pause mid-range while the test purges the stream.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402

from jetstream_sync.errors import DataLossError  # noqa: E402
from jetstream_sync.spark._common import READ_SCHEMA, context, stream_position  # noqa: E402
from jetstream_sync.spark._loss import PlannedRange, read_checked  # noqa: E402
from jetstream_sync.spark._plan import Bounds, plan_range  # noqa: E402
from tests.fixtures.polling import wait_for  # noqa: E402
from tests.fixtures.spark_faults import FORMAT as FAULTS  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

TOTAL = 20_000  # a task's read yields record batches of about 8,192 rows: three of them
PATHS = pytest.mark.parametrize("direct", [True, False], ids=["direct-get", "ordered-consumer"])
SCHEMA = to_arrow_schema(READ_SCHEMA, timezone="UTC")


def _make(js, name: str, total: int, direct: bool) -> Any:
    stream = js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=direct)
    for i in range(1, total + 1):
        js.publish_async(f"{name}.{'a' if i % 2 else 'b'}", b"m%d" % i)
    js.publish_async_completed(30)
    return stream


def _task(server, name: str, subject: str | None = None):
    """What planning gives one task reading the whole stream: its range and the stream's
    creation time."""
    conn = {"servers": [server.url]}
    pos = stream_position(conn, name)
    rng = plan_range(context(conn), name, Bounds(subject=subject), True, pos)
    assert rng is not None
    return PlannedRange(rng, pos.created), conn


def _read(planned, conn, fail: bool, between=None) -> list[int]:
    """The sequences one task reads; ``between()`` runs after its first record batch."""
    seqs: list[int] = []
    for batch in read_checked(planned, conn, SCHEMA, fail):
        seqs += batch.column(batch.schema.get_field_index("seq")).to_pylist()
        if between is not None:
            between()
            between = None
    return seqs


def _loss_warnings(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "jetstream_sync.spark" and r.levelno == logging.WARNING
    ]


@PATHS
def test_messages_deleted_before_the_read_are_gaps_never_errors(
    shared_server, js, stream_name, caplog, direct
):
    """Deleted at the range's start, inside it, at its end, with or without a subject filter:
    the rest is read, nothing is raised or warned."""
    stream = _make(js, stream_name, TOTAL, direct)
    deleted = {1, 2, 3, 500, 8191, 8192, 8193, 8194, 15_000, TOTAL - 1, TOTAL}
    for seq in deleted:
        stream.delete_msg(seq)
    with caplog.at_level(logging.WARNING, logger="jetstream_sync.spark"):
        planned, conn = _task(shared_server, stream_name)
        assert _read(planned, conn, True) == sorted(set(range(1, TOTAL + 1)) - deleted)
        planned, conn = _task(shared_server, stream_name, subject=f"{stream_name}.a")
        odd = sorted(set(range(1, TOTAL + 1, 2)) - deleted)
        assert _read(planned, conn, True) == odd
    assert _loss_warnings(caplog) == []


@PATHS
def test_a_purge_mid_read_fails_naming_the_stream_and_the_range(
    shared_server, js, stream_name, direct
):
    """A read planned for 20,000 messages, purged after its first batch, fails."""
    stream = _make(js, stream_name, TOTAL, direct)
    planned, conn = _task(shared_server, stream_name)
    with pytest.raises(DataLossError) as caught:
        _read(planned, conn, True, between=stream.purge)
    text = str(caught.value)
    assert repr(stream_name) in text and f"..{TOTAL} of the range 1..{TOTAL}" in text, text
    assert "removed before they were read" in text and "failOnDataLoss=false" in text, text


@PATHS
def test_without_fail_on_data_loss_a_purge_mid_read_warns_and_reads_what_remains(
    shared_server, js, stream_name, caplog, direct
):
    """failOnDataLoss=false: a WARNING names the lost range; the rows kept are read, once."""
    stream = _make(js, stream_name, TOTAL, direct)
    planned, conn = _task(shared_server, stream_name)
    with caplog.at_level(logging.WARNING, logger="jetstream_sync.spark"):
        seqs = _read(planned, conn, False, between=lambda: stream.purge(keep=1000))
    kept = list(range(TOTAL - 999, TOTAL + 1))
    assert seqs[-1000:] == kept and len(seqs) == len(set(seqs)) < TOTAL
    assert seqs[: len(seqs) - 1000] == list(range(1, len(seqs) - 999))
    (warning,) = _loss_warnings(caplog)
    assert f"sequences {len(seqs) - 999}..{TOTAL - 1000} " in warning, warning
    assert "reading on without them" in warning, warning


@PATHS
def test_a_stream_recreated_since_planning_is_loss(shared_server, js, stream_name, caplog, direct):
    """Recreated between planning and the read: an error, or a warning and no row of the new
    stream (its messages are not the planned ones)."""
    _make(js, stream_name, 10, direct)
    planned, conn = _task(shared_server, stream_name)
    js.delete_stream(stream_name)
    _make(js, stream_name, 10, direct)
    with pytest.raises(DataLossError, match="deleted and created again"):
        _read(planned, conn, True)
    with caplog.at_level(logging.WARNING, logger="jetstream_sync.spark"):
        assert _read(planned, conn, False) == []
    (warning,) = _loss_warnings(caplog)
    assert repr(stream_name) in warning and "sequences 1..10" in warning, warning


def test_a_stream_deleted_since_planning_is_loss(shared_server, js, stream_name):
    """Deleted between planning and the read: the error names the stream."""
    _make(js, stream_name, 10, True)
    planned, conn = _task(shared_server, stream_name)
    js.delete_stream(stream_name)
    with pytest.raises(DataLossError) as raised:
        _read(planned, conn, True)
    assert f"stream {stream_name!r} was deleted while sequences 1..10 of its planned range " in str(
        raised.value
    )
    assert "1..10 were still to read" in str(raised.value)


# --------------------------------------------------------------------------
# On Spark: tasks that pause mid-range while the test purges or recreates the stream.


def _pausing_read(spark, server, name: str, pause: Path, after: int, **options) -> Any:
    reader = spark.read.format(FAULTS).option("servers", server.url).option("stream", name)
    reader = reader.option("pauseDir", str(pause)).option("pauseAfterBatches", str(after))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def _while_paused(pause: Path, partitions: int, work, fault) -> dict[str, Any]:
    """Run ``work`` on a thread; once every task paused, run ``fault``, let them go, join."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except Exception as exc:  # noqa: BLE001 - the caller asserts on it
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="spark-job")
    thread.start()
    try:
        wait_for(
            lambda: len(list(pause.glob("paused-*"))) == partitions or not thread.is_alive(),
            timeout=120,
            interval=0.05,
        )
        fault()
    finally:
        (pause / "go").touch()
        thread.join()
    return outcome


@pytest.fixture
def pause(tmp_path: Path) -> Path:
    directory = tmp_path / "pause"
    directory.mkdir()
    return directory


@PATHS
def test_spark_a_batch_read_purged_mid_read_fails(
    spark, shared_server, js, stream_name, pause, direct
):
    """Two tasks pause after a batch, the stream is purged: the job fails naming the loss."""
    stream = _make(js, stream_name, 2 * TOTAL, direct)
    df = _pausing_read(spark, shared_server, stream_name, pause, 1, numPartitions=2)
    outcome = _while_paused(pause, 2, lambda: df.select("seq").collect(), stream.purge)
    assert "result" not in outcome, len(outcome["result"])
    text = str(outcome["error"])
    assert "DataLossError" in text and repr(stream_name) in text, text
    assert "removed before they were read" in text, text


def test_spark_a_batch_read_purged_mid_read_without_fail_returns_what_remains(
    spark, shared_server, js, stream_name, pause
):
    """failOnDataLoss=false: the job succeeds with the rows read before the purge and the
    rows it kept, each once."""
    stream = _make(js, stream_name, 2 * TOTAL, True)
    df = _pausing_read(
        spark, shared_server, stream_name, pause, 1, numPartitions=2, failOnDataLoss="false"
    )
    outcome = _while_paused(
        pause, 2, lambda: df.select("seq").collect(), lambda: stream.purge(keep=1000)
    )
    assert "error" not in outcome, outcome["error"]
    seqs = sorted(row.seq for row in outcome["result"])
    assert len(seqs) == len(set(seqs)) < 2 * TOTAL
    assert set(range(2 * TOTAL - 999, 2 * TOTAL + 1)) <= set(seqs)


def test_spark_a_batch_read_of_a_stream_recreated_after_planning_fails(
    spark, shared_server, js, stream_name, pause
):
    """The tasks pause before reading; the stream is deleted and created again: the job fails."""
    _make(js, stream_name, 100, True)

    def recreate() -> None:
        js.delete_stream(stream_name)
        _make(js, stream_name, 100, True)

    df = _pausing_read(spark, shared_server, stream_name, pause, 0, numPartitions=2)
    outcome = _while_paused(pause, 2, lambda: df.select("seq").collect(), recreate)
    assert "created again" in str(outcome.get("error")), outcome


def _stream_query(spark, server, name: str, pause: Path, tmp_path: Path, **options) -> Any:
    reader = spark.readStream.format(FAULTS).option("servers", server.url).option("stream", name)
    reader = reader.option("startingOffsets", "earliest").option("numPartitions", "2")
    reader = reader.option("pauseDir", str(pause)).option("pauseAfterBatches", "1")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return (
        reader.load()
        .select("seq")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
    )


def _streamed(spark, tmp_path: Path) -> list[int]:
    return sorted(r.seq for r in spark.read.parquet(str(tmp_path / "out")).collect())


@PATHS
@pytest.mark.parametrize("fail", [True, False], ids=["fail", "warn"])
def test_spark_a_streaming_read_purged_mid_batch(
    spark, shared_server, js, stream_name, pause, tmp_path, fail, direct
):
    """A micro-batch's tasks pause after a batch, the stream is purged: the query fails, or
    with failOnDataLoss=false it writes the rows read before the purge and those kept."""
    stream = _make(js, stream_name, 2 * TOTAL, direct)
    query = _stream_query(
        spark, shared_server, stream_name, pause, tmp_path, failOnDataLoss=str(fail).lower()
    ).start()

    def run() -> Any:
        query.awaitTermination(240)
        return query

    outcome = _while_paused(pause, 2, run, lambda: stream.purge(keep=1000))
    error = outcome.get("error") or query.exception()
    if fail:
        assert error is not None and "removed before they were read" in str(error), error
        return
    assert error is None, error
    seqs = _streamed(spark, tmp_path)
    assert len(seqs) == len(set(seqs)) < 2 * TOTAL
    assert set(range(2 * TOTAL - 999, 2 * TOTAL + 1)) <= set(seqs)


def test_spark_a_streaming_read_of_a_stream_with_gaps_reads_the_rest(
    spark, shared_server, js, stream_name, tmp_path
):
    """Messages deleted before the query planned its micro-batch are gaps: no error."""
    stream = _make(js, stream_name, 50, True)
    deleted = {1, 10, 11, 25, 50}
    for seq in deleted:
        stream.delete_msg(seq)
    query = (
        spark.readStream.format("jetstream")
        .option("servers", shared_server.url)
        .option("stream", stream_name)
        .option("startingOffsets", "earliest")
        .option("numPartitions", "3")
        .load()
        .select("seq")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert query.exception() is None, query.exception()
    assert _streamed(spark, tmp_path) == sorted(set(range(1, 51)) - deleted)
