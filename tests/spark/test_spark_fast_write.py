"""The ``jetstream`` sink's ``mode=fast``: rows as fast-ingest batches, still exactly once."""

from __future__ import annotations

import pyarrow as pa
import pytest

import jetstream_sync
from jetstream_sync.jetstream.arrow_publish import ArrowPublisher
from jetstream_sync.spark._fast_write import FastPublisher
from tests.fixtures.spark import failed_tasks, rerun_after_a_lost_commit, run_available_now
from tests.fixtures.spark_faults import FORMAT as FAULTS

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def stream_options():
    """Streams take fast-ingest batches."""
    return {"allow_batched": True}


def _write(df, server, source="jetstream", **options) -> None:
    writer = df.write.format(source).mode("append").option("servers", server.url)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def _stored(stream) -> list:
    info = stream.info()
    return [stream.get_msg(seq) for seq in range(info.state.first_seq, info.state.last_seq + 1)]


def test_a_fast_write_gives_each_row_the_id_the_acknowledged_writer_gives_it(js, stream):
    """mode=fast sends each row with the id ArrowPublisher derives for it (same prefix, same
    row index, a task spread over several fast batches and record batches), so the two modes
    dedupe alike: a rewrite through the other one stores nothing new."""
    subjects = [f"{stream.name}.a", f"{stream.name}." + "c" * 80, f"{stream.name}.a"] * 5
    payloads = [b"alpha", b"", "é".encode()] * 5
    rows = pa.record_batch([pa.array(subjects), pa.array(payloads)], names=["subject", "data"])
    fast = FastPublisher(js, 0, "w:0:", None, batch_rows=4)
    fast.publish_all([rows.slice(0, 7), rows.slice(7)])
    ids = [m.headers["Nats-Msg-Id"] for m in _stored(stream)]
    assert len(ids) == 15 and len(set(ids)) == 15
    acked = ArrowPublisher(js.client, "w:0:", None)
    acked.publish_all([rows])
    assert (acked.sent, acked.duplicates) == (15, 15)
    assert stream.info().state.messages == 15


def test_a_task_goes_out_in_fast_batches_of_fast_batch_rows(js, stream):
    """A task's 25 rows with fastBatchRows=10 are three committed fast batches, in order."""
    made = []
    real = js.fast_batch

    def counting(**kwargs):
        made.append(kwargs)
        return real(**kwargs)

    js.fast_batch = counting
    batch = pa.record_batch([pa.array([b"r%d" % i for i in range(25)])], names=["data"])
    publisher = FastPublisher(js, 0, "w:0:", f"{stream.name}.f", batch_rows=10)
    publisher.publish_all([batch])
    assert (len(made), publisher.sent, publisher.stream) == (3, 25, stream.name)
    assert [m.data for m in _stored(stream)] == [b"r%d" % i for i in range(25)]


def test_a_fast_write_stores_every_row_once_with_its_columns(spark, shared_server, stream):
    """Subject, data, headers and msgId land as with mode=async; a rewrite adds nothing."""
    name = stream.name
    rows = [
        (f"{name}.{'a' if i % 2 else 'b'}", b"d%d" % i, {"n": str(i)}, f"id-{i}") for i in range(60)
    ]
    df = spark.createDataFrame(
        rows, "subject STRING, data BINARY, headers MAP<STRING, STRING>, msgId STRING"
    ).repartition(3)
    _write(df, shared_server, stream=name, mode="fast", fastBatchRows=7)
    _write(df, shared_server, stream=name, mode="fast")
    state = stream.info().state
    assert (state.messages, state.last_seq) == (60, 60)
    got = {m.data: (m.subject, m.headers["n"], m.headers["Nats-Msg-Id"]) for m in _stored(stream)}
    assert got[b"d7"] == (f"{name}.a", "7", "id-7")
    assert sorted(got) == sorted(b"d%d" % i for i in range(60))


def test_a_fast_rewrite_of_an_acknowledged_write_adds_nothing(spark, shared_server, stream):
    """The same writeId in mode=async then mode=fast: the derived ids match, the stream dedupes."""
    df = spark.createDataFrame([(f"v{i}",) for i in range(40)], "data STRING").coalesce(2)
    subject = f"{stream.name}.w"
    _write(df, shared_server, subject=subject, writeId="same-write")
    _write(df, shared_server, subject=subject, writeId="same-write", mode="fast")
    state = stream.info().state
    assert (state.messages, state.last_seq) == (40, 40)


def test_a_fast_write_without_dedupe_sends_no_ids(spark, shared_server, stream):
    """mode=fast with dedupe=false: no message id, so the same writeId twice stores twice."""
    df = spark.createDataFrame([(f"v{i}",) for i in range(40)], "data STRING").coalesce(2)
    subject = f"{stream.name}.w"
    for _ in range(2):
        _write(df, shared_server, subject=subject, writeId="same", mode="fast", dedupe="false")
    msgs = _stored(stream)
    assert len(msgs) == 80 and not any(m.headers for m in msgs)


def test_a_fast_task_failing_mid_partition_is_retried_without_duplicates(
    spark, shared_server, stream
):
    """A task that stored 130 rows in fast batches, then failed, is retried: 300 rows, once."""
    df = spark.createDataFrame([(f"row-{i}",) for i in range(300)], "data STRING").coalesce(1)

    def write() -> None:
        _write(
            df, shared_server, FAULTS, subject=f"{stream.name}.w", mode="fast",
            fastBatchRows=50, failAfterRows=130,
        )  # fmt: skip

    assert failed_tasks(spark, f"fast-retry-{stream.name}", write) == 1  # it did fail once
    state = stream.info().state
    assert (state.messages, state.first_seq, state.last_seq) == (300, 1, 300)
    assert sorted(m.data for m in _stored(stream)) == sorted(b"row-%d" % i for i in range(300))


def test_fast_mode_on_a_stream_without_allow_batched_fails_at_planning(
    spark, shared_server, js, stream_name
):
    """The write is refused before any task runs, naming allow_batched; nothing is stored."""
    plain = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    df = spark.createDataFrame([("x",)], "data STRING")
    with pytest.raises(Exception, match="allow_batched") as caught:
        _write(df, shared_server, subject=f"{stream_name}.x", mode="fast")
    assert "BatchPublishDisabledError" in str(caught.value)
    assert plain.info().state.messages == 0


def test_fast_mode_needs_a_stream_to_check_and_a_known_mode(spark, shared_server, stream):
    """No stream nor subject option with mode=fast, or an unknown mode: refused at planning."""
    df = spark.createDataFrame([(f"{stream.name}.x", "x")], "subject STRING, data STRING")
    with pytest.raises(Exception, match="'stream' option"):
        _write(df, shared_server, mode="fast")
    with pytest.raises(Exception, match="option 'mode' must be 'async' or 'fast'"):
        _write(df, shared_server, stream=stream.name, mode="fastest")
    assert stream.info().state.messages == 0


def test_a_bad_row_fails_a_fast_task_naming_it_after_storing_the_rows_before(
    spark, shared_server, stream
):
    """A row with a wildcard subject is not sent; the rows before it are stored, each once."""
    name = stream.name
    rows = [(f"{name}.{'*' if i == 5 else 'ok'}", f"v{i}") for i in range(8)]
    df = spark.createDataFrame(rows, "subject STRING, data STRING").coalesce(1)
    with pytest.raises(Exception) as caught:
        _write(df, shared_server, stream=name, mode="fast")
    text = str(caught.value)
    assert "row 5 of partition 0" in text and "was not sent" in text, text
    assert sorted(m.data for m in _stored(stream)) == [b"v%d" % i for i in range(5)]


def test_a_streaming_fast_write_rerun_from_its_checkpoint_adds_no_duplicates(
    spark, shared_server, js, stream, tmp_path
):
    """A micro-batch run again after a restart, in fast batches: the stream drops the copies."""
    source = stream.name
    sink = js.create_stream(
        name=source + "OUT", subjects=[f"{source}OUT.>"], allow_batched=True
    ).name
    for i in range(30):
        js.publish_async(f"{source}.in", b"e%d" % i)
    js.publish_async_completed(10)
    checkpoint = tmp_path / "checkpoint"

    def writer():
        return (
            spark.readStream.format("jetstream")
            .option("servers", shared_server.url)
            .option("stream", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("data")
            .writeStream.format("jetstream")
            .option("servers", shared_server.url)
            .option("subject", f"{sink}.out")
            .option("mode", "fast")
            .option("checkpointLocation", str(checkpoint))
        )

    try:
        run_available_now(writer())
        assert js.stream(sink).cached_info.state.messages == 30
        again = rerun_after_a_lost_commit(writer(), checkpoint)
        assert sum(p["numInputRows"] for p in again.recentProgress) == 30  # it did run again
        state = js.stream(sink).cached_info.state
        assert (state.messages, state.last_seq) == (30, 30)
    finally:
        js.delete_stream(sink)


def test_a_row_the_stream_refuses_stops_the_task_and_keeps_the_rows_before(js, stream_name):
    """A row over the stream's max_msg_size stops the fast batch: the error names that row
    (the server refuses it by its sequence) and the server's error; the rows before it are
    stored, in order."""
    stream = js.create_stream(
        name=stream_name, subjects=[f"{stream_name}.>"], allow_batched=True, max_msg_size=256
    )
    data = [b"x" * (1024 if i == 12 else 8) for i in range(20)]
    publisher = FastPublisher(js, 3, "w:3:", f"{stream_name}.m", batch_rows=100)
    with pytest.raises(
        jetstream_sync.RowPublishError, match=r"row 12 of partition 3 .* not stored"
    ) as e:
        publisher.publish_all([pa.record_batch([pa.array(data)], names=["data"])])
    assert "exceeds maximum" in str(e.value), e.value
    assert [m.data for m in _stored(stream)] == data[:12]


def test_a_bad_row_first_in_its_fast_batch_fails_naming_it(js, stream):
    """A wildcard subject opening a fast batch: the batches before it are stored, it is named."""
    subjects = [f"{stream.name}.ok"] * 3 + [f"{stream.name}.>"] + [f"{stream.name}.ok"]
    batch = pa.record_batch(
        [pa.array(subjects), pa.array([b"v%d" % i for i in range(5)])], names=["subject", "data"]
    )
    publisher = FastPublisher(js, 1, "w:1:", None, batch_rows=3)
    with pytest.raises(jetstream_sync.RowPublishError, match="row 3 of partition 1.*not sent"):
        publisher.publish_all([batch])
    assert [m.data for m in _stored(stream)] == [b"v0", b"v1", b"v2"]
