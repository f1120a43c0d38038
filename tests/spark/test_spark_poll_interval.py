"""``pollInterval``: an idle streaming read asks the server at most once per interval.

Spark asks a streaming source for its latest offset every 10 ms while no data
arrives; each answer costs a stream info. The reader waits out ``pollInterval``
after a look that found nothing, never in an ``availableNow`` run and never
after a look that found messages. A wait where there should be none shows here
as a test that runs into its timeout (the interval is an hour).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import jetstream_sync  # noqa: E402
from jetstream_sync.spark._source import JetStreamDataSource  # noqa: E402
from tests.fixtures.polling import wait_for  # noqa: E402

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def js_on_nats_server(nats_server) -> Iterator[jetstream_sync.JetStreamContext]:
    """A JetStream context on this test's own server (whose API requests are counted)."""
    with jetstream_sync.connect(nats_server.url) as nc:
        yield nc.jetstream()


def _reader(server, stream: str, **options: str):
    source = JetStreamDataSource({"servers": server.url, "stream": stream, **options})
    return source.streamReader(source.schema())


def _api_requests(server) -> int:
    return int(server.monitor("jsz")["api"]["total"])


def test_an_idle_reader_looks_once_per_interval(nats_server, js_on_nats_server):
    """Four looks at an idle stream with 300 ms between them, each followed by Spark's
    progress report: four stream infos, and at least three intervals' time; a message
    published meanwhile is in the next answer."""
    js_on_nats_server.create_stream(name="IDLE", subjects=["idle.>"])
    reader = _reader(nats_server, "IDLE", pollInterval="300ms")
    start = reader.initialOffset()
    before, began = _api_requests(nats_server), time.monotonic()
    for _ in range(4):
        assert reader.latestOffset(start, reader.getDefaultReadLimit()) == start
        assert reader.reportLatestOffset() == start  # what the look saw: no request of its own
    assert time.monotonic() - began >= 0.9
    assert _api_requests(nats_server) - before == 4
    js_on_nats_server.publish("idle.x", b"1")
    assert reader.latestOffset(start, reader.getDefaultReadLimit())["seq"] == start["seq"] + 1


def test_a_look_that_found_messages_and_an_available_now_run_never_wait(
    nats_server, js_on_nats_server
):
    """pollInterval=1h: after messages were found the next look is at once, and so is every
    look of an availableNow run (a wait would run into the test's timeout)."""
    js_on_nats_server.create_stream(name="BUSY", subjects=["busy.>"])
    reader = _reader(nats_server, "BUSY", pollInterval="1h", startingOffsets="earliest")
    start = reader.initialOffset()
    limit = reader.getDefaultReadLimit()
    js_on_nats_server.publish("busy.x", b"1")
    first = reader.latestOffset(start, limit)
    js_on_nats_server.publish("busy.x", b"2")
    assert reader.latestOffset(first, limit)["seq"] == first["seq"] + 1
    now = _reader(nats_server, "BUSY", pollInterval="1h", startingOffsets="earliest")
    now.prepareForTriggerAvailableNow()
    end = now.latestOffset(now.initialOffset(), limit)
    for _ in range(3):
        assert now.latestOffset(end, limit) == end


def test_a_bad_interval_is_refused_when_the_query_is_planned(nats_server, js_on_nats_server):
    """Not a duration: a ValueError naming the option, before anything runs."""
    js_on_nats_server.create_stream(name="BAD", subjects=["bad.>"])
    with pytest.raises(ValueError, match="pollInterval"):
        _reader(nats_server, "BAD", pollInterval="soon")


@pytest.mark.timeout(240)
def test_an_idle_spark_query_asks_the_server_about_once_per_interval(
    spark, nats_server, js_on_nats_server, tmp_path
):
    """A running query with Spark's default trigger and nothing to read, pollInterval=1s:
    its next four stream infos take at least two intervals (Spark alone asks every 10 ms);
    a message published then still arrives."""
    js_on_nats_server.create_stream(name="QUIET", subjects=["quiet.>"])
    query = (
        spark.readStream.format("jetstream").option("servers", nats_server.url)
        .option("stream", "QUIET").option("pollInterval", "1s").load()
        .writeStream.format("memory").queryName("quiet")
        .option("checkpointLocation", str(tmp_path / "checkpoint")).start()
    )  # fmt: skip
    try:
        wait_for(lambda: query.lastProgress is not None, timeout=120, interval=0.1)
        # timed from before the count is read, so a look counted meanwhile is inside the window
        began = time.monotonic()
        before = _api_requests(nats_server)
        # four looks: three spacings (two would do; one spare for whatever else asks)
        wait_for(lambda: _api_requests(nats_server) - before >= 4, timeout=60, interval=0.05)
        assert time.monotonic() - began >= 2.0
        js_on_nats_server.publish("quiet.x", b"hello")
        wait_for(
            lambda: [r.data for r in spark.sql("SELECT data FROM quiet").collect()]
            == [b"hello"],
            timeout=120, interval=0.2,
        )  # fmt: skip
    finally:
        query.stop()
