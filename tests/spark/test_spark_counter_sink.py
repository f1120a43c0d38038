"""The ``jetstream-counter`` sink: rows added to counters (ADR-49), and what a retry does."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.fixtures.spark import failed_tasks, rerun_after_a_lost_commit, run_available_now
from tests.fixtures.spark_counter_faults import FORMAT as FAULTS
from tests.fixtures.spark_counter_faults import FaultsCounterDataSource

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def stream_options():
    """Streams are counter streams."""
    return {"allow_msg_counter": True}


@pytest.fixture
def counter_faults(spark):
    """The session, with the counter sink's fault hook registered."""
    spark.dataSource.register(FaultsCounterDataSource)
    return spark


def _write(df, server, source="jetstream-counter", **options) -> None:
    writer = df.write.format(source).mode("append").option("servers", server.url)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def test_rows_add_their_values_to_the_counters_of_their_subjects(spark, shared_server, js, stream):
    """Each subject's total is the sum of its rows, negatives and values past 64 bits too."""
    name = stream.name
    rows = [(f"{name}.{'a' if i % 3 else 'b'}", i - 20) for i in range(60)]
    df = spark.createDataFrame(rows, "subject STRING, value BIGINT").repartition(3)
    _write(df, shared_server, stream=name)
    counter = js.counter(name)
    for key in ("a", "b"):
        expected = sum(v for s, v in rows if s == f"{name}.{key}")
        assert counter.load(f"{name}.{key}") == expected
    big = spark.createDataFrame(
        [(Decimal(2**70),), (Decimal(2**70),), (Decimal(-1),)], "n DECIMAL(38, 0)"
    )
    _write(big, shared_server, subject=f"{name}.big", valueColumn="n")
    assert counter.load(f"{name}.big") == 2**71 - 1


def test_a_retried_task_is_not_counted_twice_with_dedupe(counter_faults, shared_server, js, stream):
    """A task failing after 30 of its 100 increments is retried: each row counts once."""
    df = counter_faults.createDataFrame([(1,)] * 100, "value INT").coalesce(1)

    def write() -> None:
        _write(df, shared_server, FAULTS, subject=f"{stream.name}.c", failAfterRows=30)

    assert failed_tasks(counter_faults, f"counter-retry-{stream.name}", write) == 1
    assert js.counter(stream.name).load(f"{stream.name}.c") == 100


def test_a_retried_task_counts_its_stored_rows_again_without_dedupe(
    counter_faults, shared_server, js, stream
):
    """dedupe=false: the 30 increments stored before the failure are added again by the retry."""
    df = counter_faults.createDataFrame([(1,)] * 100, "value INT").coalesce(1)

    def write() -> None:
        _write(
            df, shared_server, FAULTS, subject=f"{stream.name}.c", failAfterRows=30, dedupe="false"
        )

    assert failed_tasks(counter_faults, f"counter-nodedupe-{stream.name}", write) == 1
    assert js.counter(stream.name).load(f"{stream.name}.c") == 130
    assert "Nats-Msg-Id" not in (stream.get_msg(1).headers or {})


def test_bad_columns_options_and_streams_are_refused_at_planning(spark, shared_server, js, stream):
    """A non-integer value, an unknown column or option, a stream without counters: refused,
    nothing stored."""
    name = stream.name
    cases = [
        (spark.createDataFrame([(1.5,)], "value DOUBLE"), {}, "must be an integer"),
        (spark.createDataFrame([("7",)], "value STRING"), {}, "must be an integer"),
        (spark.createDataFrame([(1, "x")], "value INT, extra STRING"), {}, "unknown: extra"),
        (spark.createDataFrame([(1,)], "n INT"), {}, "needs the column 'value'"),
    ]
    for df, options, text in cases:
        with pytest.raises(Exception, match=text):
            _write(df, shared_server, subject=f"{name}.x", **options)
    with pytest.raises(Exception, match="did you mean 'valueColumn'"):
        _write(spark.createDataFrame([(1,)], "value INT"), shared_server, subject=f"{name}.x",
               valueColum="value")  # fmt: skip
    plain = js.create_stream(name=name + "PLAIN", subjects=[f"{name}PLAIN.>"])
    try:
        with pytest.raises(Exception, match="allow_msg_counter") as caught:
            _write(spark.createDataFrame([(1,)], "value INT"), shared_server, stream=plain.name,
                   subject=f"{name}PLAIN.x")  # fmt: skip
        assert "CountersNotEnabledError" in str(caught.value)
        assert plain.info().state.messages == 0
    finally:
        js.delete_stream(plain.name)
    assert stream.info().state.messages == 0


def test_a_null_value_fails_the_task_naming_its_row(spark, shared_server, js, stream):
    """The rows before a null value are counted once (the retries are deduplicated)."""
    rows = [(1,)] * 5 + [(None,)] + [(1,)] * 3
    df = spark.createDataFrame(rows, "value INT").coalesce(1)
    with pytest.raises(Exception, match="row 5 of partition 0.*null"):
        _write(df, shared_server, subject=f"{stream.name}.n")
    assert js.counter(stream.name).load(f"{stream.name}.n") == 5


def test_rows_add_only_to_counters_of_the_sinks_stream(spark, shared_server, js, stream):
    """A subject another counter stream captures fails the task at its row; nothing goes there."""
    name = stream.name
    other = js.create_stream(name=name + "B", subjects=[f"{name}b.>"], allow_msg_counter=True)
    try:
        rows = [(f"{name}.a", 1)] * 4 + [(f"{name}b.x", 5)] + [(f"{name}.a", 1)] * 2
        df = spark.createDataFrame(rows, "subject STRING, value INT").coalesce(1)
        with pytest.raises(Exception, match="row 4 of partition 0.*not one of the counter"):
            _write(df, shared_server, stream=name)
        assert js.counter(name).load(f"{name}.a") == 4
        with pytest.raises(Exception, match="StreamWrongExpectedError"):
            _write(spark.createDataFrame([(1,)], "value INT"), shared_server, stream=name,
                   subject=f"{name}b.y")  # fmt: skip
        assert other.info().state.messages == 0
    finally:
        js.delete_stream(other.name)


def test_a_streaming_counter_write_rerun_from_its_checkpoint_counts_once(
    spark, shared_server, js, stream, tmp_path
):
    """A micro-batch run again after a restart adds nothing: its increments carry the same ids."""
    source = js.create_stream(name=stream.name + "IN", subjects=[f"{stream.name}IN.>"])
    for i in range(30):
        js.publish_async(f"{source.name}.in", b"%d" % i)
    js.publish_async_completed(10)
    checkpoint = tmp_path / "checkpoint"

    def writer():
        return (
            spark.readStream.format("jetstream")
            .option("servers", shared_server.url)
            .option("stream", source.name)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("CAST(CAST(data AS STRING) AS BIGINT) AS value")
            .writeStream.format("jetstream-counter")
            .option("servers", shared_server.url)
            .option("subject", f"{stream.name}.total")
            .option("checkpointLocation", str(checkpoint))
        )

    try:
        run_available_now(writer())
        assert js.counter(stream.name).load(f"{stream.name}.total") == sum(range(30))
        again = rerun_after_a_lost_commit(writer(), checkpoint)
        assert sum(p["numInputRows"] for p in again.recentProgress) == 30  # it did run again
        assert js.counter(stream.name).load(f"{stream.name}.total") == sum(range(30))
    finally:
        js.delete_stream(source.name)
