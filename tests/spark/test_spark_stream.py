"""The ``jetstream`` data source's streaming read: availableNow, checkpoints, data loss."""

from __future__ import annotations

import pytest

from tests.fixtures.spark import run_into_parquet

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def stream_options():
    """Streams answer direct gets (the fast read path)."""
    return {"allow_direct": True}


def _publish(js, subject: str, first: int, last: int) -> None:
    for i in range(first, last + 1):
        js.publish_async(subject, b"m%d" % i)
    js.publish_async_completed(10)


def _run(spark, server, stream: str, tmp_path, **options) -> None:
    """One availableNow run of the query checkpointed in ``tmp_path``, into parquet there."""
    reader = spark.readStream.format("jetstream").option("servers", server.url)
    reader = reader.option("stream", stream).option("startingOffsets", "earliest")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return run_into_parquet(reader.load(), tmp_path)


def _written(spark, tmp_path) -> list[bytes]:
    return [bytes(r.data) for r in spark.read.parquet(str(tmp_path / "out")).collect()]


def test_available_now_then_restart_from_the_checkpoint(spark, shared_server, js, stream, tmp_path):
    """A second run from the checkpoint reads exactly the new messages: no loss, no duplicates."""
    subject = f"{stream.name}.x"
    _publish(js, subject, 1, 20)
    first = _run(spark, shared_server, stream.name, tmp_path, maxMessagesPerTrigger=7)
    batches = [p for p in first.recentProgress if p["numInputRows"]]
    assert [p["numInputRows"] for p in batches] == [7, 7, 6]
    assert sorted(_written(spark, tmp_path)) == sorted(b"m%d" % i for i in range(1, 21))
    _publish(js, subject, 21, 35)
    _run(spark, shared_server, stream.name, tmp_path, maxMessagesPerTrigger=7)
    assert sorted(_written(spark, tmp_path)) == sorted(b"m%d" % i for i in range(1, 36))


def test_removed_messages_fail_the_query_unless_told_to_skip(
    spark, shared_server, js, stream, tmp_path
):
    """Unread messages purged before a restart fail it; failOnDataLoss=false skips ahead."""
    subject = f"{stream.name}.x"
    _publish(js, subject, 1, 5)
    _run(spark, shared_server, stream.name, tmp_path)
    _publish(js, subject, 6, 10)
    stream.purge(seq=9)  # 6, 7 and 8 are gone unread
    with pytest.raises(Exception, match="were removed"):
        _run(spark, shared_server, stream.name, tmp_path)
    _run(spark, shared_server, stream.name, tmp_path, failOnDataLoss="false")
    assert sorted(_written(spark, tmp_path)) == sorted(b"m%d" % i for i in (1, 2, 3, 4, 5, 9, 10))


def test_a_recreated_stream_fails_the_query_unless_told_to_skip(
    spark, shared_server, js, stream, tmp_path
):
    """A recreated stream fails the restart; failOnDataLoss=false reads the new stream."""
    subject = f"{stream.name}.x"
    _publish(js, subject, 1, 5)
    _run(spark, shared_server, stream.name, tmp_path)
    js.delete_stream(stream.name)
    js.create_stream(name=stream.name, subjects=[f"{stream.name}.>"], allow_direct=True)
    _publish(js, subject, 100, 102)
    with pytest.raises(Exception, match="created again"):
        _run(spark, shared_server, stream.name, tmp_path)
    _run(spark, shared_server, stream.name, tmp_path, failOnDataLoss="false")
    assert sorted(_written(spark, tmp_path)) == sorted(
        b"m%d" % i for i in (1, 2, 3, 4, 5, 100, 101, 102)
    )
