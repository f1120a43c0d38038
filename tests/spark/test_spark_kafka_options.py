"""Kafka's source options on ``format("jetstream")``: a Kafka job ports by changing the format.

``startingOffsets`` (earliest, latest, a sequence, JSON ``{"STREAM": seq}``),
``endingOffsets`` (exclusive, as Kafka's), ``startingTimestamp`` (ms since the
epoch), ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` with
``maxTriggerDelay``, and ``includeHeaders``.
"""

from __future__ import annotations

import json
import time

import pytest

from jetstream_sync.spark._kafka import parse_duration, parse_millis, parse_offset
from tests.fixtures.polling import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def stream_options():
    """Streams answer direct gets (the fast read path)."""
    return {"allow_direct": True}


def _fill(js, name: str, first: int, last: int) -> None:
    for i in range(first, last + 1):
        js.publish_async(f"{name}.x", b"m%d" % i, headers={"n": str(i)})
    js.publish_async_completed(10)


def _batch(spark, server, stream: str, **options) -> list:
    reader = spark.read.format("jetstream").option("servers", server.url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load().collect()


def _seqs(rows) -> list[int]:
    return sorted(r.seq for r in rows)


def test_batch_starting_and_ending_offsets(spark, shared_server, js, stream):
    """startingOffsets is the first sequence read, endingOffsets the one after the last."""
    _fill(js, stream.name, 1, 10)
    name = stream.name
    read = lambda **o: _seqs(_batch(spark, shared_server, name, **o))  # noqa: E731
    assert read(startingOffsets="earliest", endingOffsets="latest") == list(range(1, 11))
    assert read(startingOffsets="4") == list(range(4, 11))
    assert read(startingOffsets=json.dumps({name: 6}), endingOffsets="9") == [6, 7, 8]
    assert read(startingOffsets=json.dumps({name: -2}), endingOffsets=json.dumps({name: 3})) == [
        1,
        2,
    ]
    assert read(endingOffsets=json.dumps({name: -1})) == list(range(1, 11))


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("startingOffsets", "latest", "cannot be latest on a batch read"),
        ("endingOffsets", "earliest", "cannot be earliest on a batch read"),
        ("startingOffsets", '{"OTHER": 3}', "must name the stream"),
        ("endingOffsets", "soon", "must be earliest, latest, a sequence number or JSON"),
        ("startingTimestamp", "2026-01-01", "milliseconds since the epoch"),
    ],
)
def test_batch_refuses_bad_kafka_values(spark, shared_server, stream, option, value, error):
    """A value a batch read cannot honour fails the query before any task runs."""
    with pytest.raises(Exception, match=error):
        _batch(spark, shared_server, stream.name, **{option: value})


def _millis_after(stream, seq: int) -> int:
    """A time in ms after message ``seq`` was stored, once the clock has passed it."""
    stored = stream.get_msg(seq).time
    after = int(stored.timestamp() * 1000) + 1
    wait_for(lambda: time.time() * 1000 > after + 1, timeout=2)
    return after


def test_starting_timestamp_on_batch_and_streaming_reads(
    spark, shared_server, js, stream, tmp_path
):
    """startingTimestamp starts at the first message stored at or after it, in ms."""
    _fill(js, stream.name, 1, 5)
    after = _millis_after(stream, 5)
    _fill(js, stream.name, 6, 9)
    assert _seqs(_batch(spark, shared_server, stream.name, startingTimestamp=after)) == [6, 7, 8, 9]
    query = _stream_query(spark, shared_server, stream.name, tmp_path, startingTimestamp=after)
    query.awaitTermination(240)
    assert _memory(spark, query) == [6, 7, 8, 9]


def _stream_query(spark, server, stream: str, tmp_path, trigger=None, **options):
    reader = spark.readStream.format("jetstream").option("servers", server.url)
    reader = reader.option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    name = "q" + stream.replace("-", "_").lower() + str(len(list(tmp_path.iterdir())))
    return (
        reader.load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(**(trigger or {"availableNow": True}))
        .start()
    )


def _why(spark, query) -> str:
    """What a streaming test reports when its rows did not come: the query's state."""
    return (
        f"rows {_memory(spark, query)}, exception {query.exception()}, "
        f"status {query.status}, last progress {query.lastProgress}"
    )


def _memory(spark, query) -> list[int]:
    return sorted(r.seq for r in spark.sql(f"SELECT seq FROM {query.name}").collect())


def test_streaming_starting_offsets_json_and_max_offsets_per_trigger(
    spark, shared_server, js, stream, tmp_path
):
    """JSON startingOffsets picks the sequence; maxOffsetsPerTrigger caps each micro-batch."""
    _fill(js, stream.name, 1, 24)
    query = _stream_query(
        spark,
        shared_server,
        stream.name,
        tmp_path,
        startingOffsets=json.dumps({stream.name: 5}),
        maxOffsetsPerTrigger=7,
    )
    query.awaitTermination(240)
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [7, 7, 6]
    assert _memory(spark, query) == list(range(5, 25))


@pytest.mark.parametrize("zero", ["0", '{"%s": 0}'])
def test_streaming_starting_offsets_zero_reads_from_the_first_message(
    spark, shared_server, js, stream, tmp_path, zero
):
    """startingOffsets 0 reads every message, as a batch read does: sequence 0 never existed."""
    _fill(js, stream.name, 1, 5)
    starting = zero % stream.name if "%s" in zero else zero
    query = _stream_query(spark, shared_server, stream.name, tmp_path, startingOffsets=starting)
    query.awaitTermination(240)
    assert query.exception() is None, _why(spark, query)
    assert _memory(spark, query) == [1, 2, 3, 4, 5]


def test_both_per_trigger_spellings_are_refused_together(spark, shared_server, stream, tmp_path):
    """maxOffsetsPerTrigger is an alias: giving both names is an error, not a silent choice."""
    with pytest.raises(Exception, match="not both"):
        query = _stream_query(
            spark, shared_server, stream.name, tmp_path,
            maxOffsetsPerTrigger=5, maxMessagesPerTrigger=6,
        )  # fmt: skip
        query.awaitTermination(60)


def test_min_offsets_per_trigger_waits_for_enough_messages(
    spark, shared_server, js, stream, tmp_path
):
    """Fewer than minOffsetsPerTrigger new messages wait; the first micro-batch has them all.

    The minimum is the count after the second fill, which a look can see only whole: with
    a lower one, a look in the middle of it (10 of 12 stored) rightly made a micro-batch of
    10 and left 2 waiting for an hour (it failed so once in CI).
    """
    _fill(js, stream.name, 1, 5)
    query = _stream_query(
        spark, shared_server, stream.name, tmp_path,
        trigger={"processingTime": "200 milliseconds"},
        startingOffsets="earliest", minOffsetsPerTrigger=12, maxTriggerDelay="1h",
    )  # fmt: skip
    try:
        # the query is planning triggers and skipping them: its source has reported an offset
        wait_for(lambda: query.lastProgress is not None, timeout=60, interval=0.1)
        assert _memory(spark, query) == []
        _fill(js, stream.name, 6, 12)
        wait_for(
            lambda: len(_memory(spark, query)) == 12, timeout=60, interval=0.2,
            message=lambda: _why(spark, query),
        )  # fmt: skip

        def batches() -> list[int]:
            return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

        # A micro-batch's rows reach the memory sink before its progress is recorded.
        wait_for(lambda: sum(batches()) >= 12, timeout=60, interval=0.1)
        assert batches() == [12]
    finally:
        query.stop()


def test_max_trigger_delay_reads_what_there_is(spark, shared_server, js, stream, tmp_path):
    """After maxTriggerDelay without enough messages, a micro-batch reads those there are."""
    _fill(js, stream.name, 1, 3)
    query = _stream_query(
        spark, shared_server, stream.name, tmp_path,
        trigger={"processingTime": "200 milliseconds"},
        startingOffsets="earliest", minOffsetsPerTrigger=100, maxTriggerDelay="1s",
    )  # fmt: skip
    try:
        wait_for(lambda: _memory(spark, query) == [1, 2, 3], timeout=60, interval=0.2)
    finally:
        query.stop()


def test_available_now_ignores_min_offsets_and_ends_at_the_start_time_last(
    spark, shared_server, js, stream, tmp_path
):
    """Trigger.AvailableNow reads up to the last sequence at its start, whatever the minimum."""
    _fill(js, stream.name, 1, 4)
    query = _stream_query(
        spark, shared_server, stream.name, tmp_path,
        startingOffsets="earliest", minOffsetsPerTrigger=100,
    )  # fmt: skip
    query.awaitTermination(240)
    assert _memory(spark, query) == [1, 2, 3, 4]


def test_include_headers_false_drops_the_headers_column(spark, shared_server, js, stream, tmp_path):
    """Headers stay by default (our schema); includeHeaders=false leaves the column out."""
    _fill(js, stream.name, 1, 3)
    default = _batch(spark, shared_server, stream.name)
    assert {r.headers["n"][0] for r in default} == {"1", "2", "3"}
    without = _batch(spark, shared_server, stream.name, includeHeaders="false")
    assert [sorted(r.asDict()) for r in without][0] == [
        "data", "seq", "stream", "subject", "timestamp",
    ]  # fmt: skip
    query = _stream_query(
        spark, shared_server, stream.name, tmp_path,
        startingOffsets="earliest", includeHeaders="false",
    )  # fmt: skip
    query.awaitTermination(240)
    columns = spark.sql(f"SELECT * FROM {query.name}").columns
    assert "headers" not in columns and _memory(spark, query) == [1, 2, 3]


# --------------------------------------------------------------------------
# Without Spark: the parsers.


def test_offsets_durations_and_timestamps_parse_as_kafka_writes_them():
    """Kafka's spellings give our values; anything else is a ValueError naming the option."""
    assert parse_offset(" Earliest ", "o", "S") == "earliest"
    assert parse_offset('{"S": 7}', "o", "S") == 7
    assert parse_offset('{"S": -1}', "o", "S") == "latest"
    for bad in ('{"S": -3}', '{"S": 1, "T": 2}', "[1]", '{"S": "7"}', "-5"):
        with pytest.raises(ValueError, match="'o'"):
            parse_offset(bad, "o", "S")
    assert parse_duration("15m", "d") == 900.0
    assert parse_duration("500ms", "d") == 0.5
    assert parse_duration("250", "d") == 0.25
    with pytest.raises(ValueError, match="'d'"):
        parse_duration("soon", "d")
    assert parse_millis("1500", "t").timestamp() == 1.5
    for bad in ("99999999999999999", "\u00b2", "\u0661\u0662"):  # past year 9999; not 0-9
        with pytest.raises(ValueError, match="'t'"):
            parse_millis(bad, "t")
    for bad in ("\u00b2", "\u0661\u0662"):  # digits to str.isdigit, not sequence numbers
        with pytest.raises(ValueError, match="'o'"):
            parse_offset(bad, "o", "S")
