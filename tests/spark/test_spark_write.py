"""The ``jetstream`` sink: batch and streaming writes, exactly once through message ids."""

from __future__ import annotations

import pytest

from tests.fixtures.spark import failed_tasks, rerun_after_a_lost_commit, run_available_now
from tests.fixtures.spark_faults import FORMAT as FAULTS

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _write(df, server, source="jetstream", **options) -> None:
    writer = df.write.format(source).mode("append").option("servers", server.url)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def _stored(stream) -> list:
    info = stream.info()
    return [stream.get_msg(seq) for seq in range(info.state.first_seq, info.state.last_seq + 1)]


def test_write_then_identical_rewrite_with_msg_ids_leaves_the_stream_unchanged(
    spark, shared_server, stream
):
    """Rows land with subject, data and headers; writing the same msgIds again adds nothing."""
    name = stream.name
    rows = [
        (f"{name}.{'a' if i % 2 else 'b'}", b"d%d" % i, {"n": str(i)}, f"id-{i}") for i in range(50)
    ]
    df = spark.createDataFrame(
        rows, "subject STRING, data BINARY, headers MAP<STRING, STRING>, msgId STRING"
    ).repartition(3)
    _write(df, shared_server)
    assert stream.info().state.messages == 50
    _write(df, shared_server)
    state = stream.info().state
    assert (state.messages, state.last_seq) == (50, 50)
    got = {m.data: (m.subject, m.headers["n"], m.headers["Nats-Msg-Id"]) for m in _stored(stream)}
    assert got[b"d7"] == (f"{name}.a", "7", "id-7")
    assert sorted(got) == sorted(b"d%d" % i for i in range(50))


def test_an_empty_msg_id_is_no_id_so_the_row_gets_a_derived_one(spark, shared_server, stream):
    """An empty ``msgId`` (what ``coalesce(id, '')`` gives) is treated as null, as nats.go treats
    an empty id: the row gets its derived id, so re-running the write stores nothing twice. It
    used to go out as an empty ``Nats-Msg-Id``, which the server does not deduplicate on."""
    rows = [("a", "id-a"), ("b", ""), ("c", None), ("d", "")]
    df = spark.createDataFrame(rows, "data STRING, msgId STRING").coalesce(1)
    for _ in range(2):
        _write(df, shared_server, subject=f"{stream.name}.m", writeId="empty-ids")
    msgs = _stored(stream)
    assert sorted(m.data for m in msgs) == [b"a", b"b", b"c", b"d"]
    ids = {m.data: m.headers["Nats-Msg-Id"] for m in msgs}
    assert ids[b"a"] == "id-a"
    assert all(ids[d].startswith("empty-ids:0:") for d in (b"b", b"c", b"d")), ids


def test_string_data_and_the_subject_option(spark, shared_server, stream):
    """A string data column is UTF-8 encoded; the subject option stands in for the column."""
    df = spark.createDataFrame([(f"é{i}",) for i in range(5)], "data STRING")
    _write(df, shared_server, subject=f"{stream.name}.s")
    msgs = _stored(stream)
    assert sorted(m.data for m in msgs) == sorted(f"é{i}".encode() for i in range(5))
    assert {m.subject for m in msgs} == {f"{stream.name}.s"}


def test_a_rejected_row_fails_the_write_naming_it(spark, shared_server, js, stream_name):
    """A row the stream refuses fails the task with its subject, index and the server's error."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], max_msg_size=256)
    rows = [(b"x" * (4 if i != 3 else 1024),) for i in range(6)]
    df = spark.createDataFrame(rows, "data BINARY").coalesce(1)
    with pytest.raises(Exception) as caught:
        _write(df, shared_server, subject=f"{stream_name}.big")
    text = str(caught.value)
    assert "row 3 of partition 0" in text and f"{stream_name}.big" in text, text
    assert "maximum" in text.lower(), text
    assert stream.info().state.messages == 5  # every other row, each once (retried task)


def test_a_task_failing_mid_partition_is_retried_without_duplicates(spark, shared_server, stream):
    """A task failing after storing part of its rows is retried: no duplicate, no gap."""
    df = spark.createDataFrame([(f"row-{i}",) for i in range(200)], "data STRING").coalesce(1)
    failed = failed_tasks(
        spark, f"retry-{stream.name}",
        lambda: _write(df, shared_server, FAULTS, subject=f"{stream.name}.w", failAfterRows=120),
    )  # fmt: skip
    assert failed == 1  # it did fail once
    state = stream.info().state
    assert (state.messages, state.first_seq, state.last_seq) == (200, 1, 200)
    assert sorted(m.data for m in _stored(stream)) == sorted(b"row-%d" % i for i in range(200))


def test_without_dedupe_a_retried_task_stores_its_stored_rows_again(spark, shared_server, stream):
    """dedupe=false: rows carry no message id (no headers at all), so the 120 rows stored
    before the failure are stored again by the retried task."""
    df = spark.createDataFrame([(f"row-{i}",) for i in range(200)], "data STRING").coalesce(1)

    def write() -> None:
        _write(
            df, shared_server, FAULTS, subject=f"{stream.name}.w", failAfterRows=120, dedupe="false"
        )

    assert failed_tasks(spark, f"nodedupe-{stream.name}", write) == 1  # it did fail once
    msgs = _stored(stream)
    assert len(msgs) == 320 and not any(m.headers for m in msgs)
    assert sorted(m.data for m in msgs) == sorted(
        [b"row-%d" % i for i in range(200)] + [b"row-%d" % i for i in range(120)]
    )


@pytest.mark.parametrize("dedupe", ["true", "false"])
def test_a_missing_stream_fails_the_write_at_planning(spark, shared_server, stream_name, dedupe):
    """The ``stream`` option names a stream that does not exist: the write fails before any
    task runs, with or without dedupe."""
    df = spark.createDataFrame([("x",)], "data STRING")
    with pytest.raises(Exception, match="does not exist"):
        _write(df, shared_server, stream=stream_name, subject=f"{stream_name}.x", dedupe=dedupe)


@pytest.mark.parametrize("mode", ["async", "fast"])
def test_a_subject_option_the_stream_option_does_not_capture_fails_at_planning(
    spark, shared_server, js, stream_name, mode
):
    """``stream=A`` with ``subject`` one of stream B's: refused before any task runs (it used to
    store every row in B, having checked A's duplicate window), as the counter sink does."""
    a = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_batched=True)
    other = js.create_stream(name=f"{stream_name}_B", subjects=[f"{stream_name}b.>"])
    try:
        df = spark.createDataFrame([("x",)], "data STRING")
        with pytest.raises(Exception, match="StreamWrongExpectedError") as caught:
            _write(df, shared_server, stream=stream_name, subject=f"{stream_name}b.x", mode=mode)
        assert f"{stream_name}b.x" in str(caught.value) and "option 'subject'" in str(caught.value)
        assert (a.info().state.messages, other.info().state.messages) == (0, 0)
    finally:
        js.delete_stream(other.name)


def test_overwrite_is_refused_by_every_sink_before_anything_is_written(
    spark, shared_server, js, stream_name
):
    """mode("overwrite") fails at planning in each sink; it used to append silently."""
    stream = js.create_stream(
        name=stream_name, subjects=[f"{stream_name}.>"], allow_msg_counter=True
    )
    kv = js.create_key_value(bucket=stream_name)
    try:
        row = (f"{stream_name}.k", 1)
        writes = [
            ("jetstream", "subject STRING, data STRING", {}),
            ("jetstream-counter", "subject STRING, value INT", {"stream": stream_name}),
            ("jetstream-kv", "key STRING, value STRING", {"bucket": stream_name}),
        ]
        for source, schema, options in writes:
            df = spark.createDataFrame([row if "INT" in schema else (row[0], "1")], schema)
            writer = df.write.format(source).mode("overwrite").option("servers", shared_server.url)
            for key, value in options.items():
                writer = writer.option(key, value)
            with pytest.raises(Exception, match=r'only appends; write with mode\("append"\)'):
                writer.save()
        assert stream.info().state.messages == 0
        assert kv.keys() == []
    finally:
        js.delete_key_value(stream_name)


def test_a_streaming_write_rerun_from_its_checkpoint_adds_no_duplicates(
    spark, shared_server, js, stream, tmp_path
):
    """A micro-batch run again after a restart publishes the same ids: the stream drops them."""
    source = stream.name
    sink = js.create_stream(name=source + "OUT", subjects=[f"{source}OUT.>"]).name
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
            .option("numPartitions", 3)
            .load()
            .select("data")
            .writeStream.format("jetstream")
            .option("servers", shared_server.url)
            .option("subject", f"{sink}.out")
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


def test_a_duplicate_window_under_ten_minutes_is_warned_about(js, stream, stream_name, caplog):
    """The writer's check warns (logger jetstream_sync.spark) about a 2-minute window, once."""
    from jetstream_sync.spark._write import check_duplicate_window

    long_window = js.create_stream(
        name=stream_name + "LONG", subjects=[f"{stream_name}LONG.>"], duplicate_window=600
    )
    try:
        with caplog.at_level("WARNING", logger="jetstream_sync.spark"):
            check_duplicate_window(js, stream.name)
            check_duplicate_window(js, stream.name)
            check_duplicate_window(js, long_window.name)
    finally:
        js.delete_stream(long_window.name)
    warned = [r.getMessage() for r in caplog.records if r.name == "jetstream_sync.spark"]
    assert len(warned) == 1 and stream.name in warned[0] and "120 s" in warned[0], warned
