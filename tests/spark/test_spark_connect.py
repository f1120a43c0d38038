"""The ``jetstream`` and ``jetstream-kv`` data sources through a Spark Connect session.

One Connect server (``local[2]``, from the pyspark wheel) serves the module;
``register`` runs on its remote session, which has no ``sparkContext``.
"""

from __future__ import annotations

import uuid

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]


def _stored(stream) -> list:
    info = stream.info()
    return [stream.get_msg(seq) for seq in range(info.state.first_seq, info.state.last_seq + 1)]


def test_batch_write_then_batch_read(connect_spark, shared_server, stream):
    """Rows written through the remote session land in the stream and read back."""
    rows = [(f"{stream.name}.{i % 2}", b"d%d" % i) for i in range(20)]
    df = connect_spark.createDataFrame(rows, "subject STRING, data BINARY")
    df.write.format("jetstream").mode("append").option("servers", shared_server.url).save()
    assert sorted(m.data for m in _stored(stream)) == sorted(b"d%d" % i for i in range(20))
    got = (
        connect_spark.read.format("jetstream")
        .option("servers", shared_server.url)
        .option("stream", stream.name)
        .option("subject", f"{stream.name}.1")
        .load()
        .collect()
    )
    assert sorted(bytes(r.data) for r in got) == sorted(b"d%d" % i for i in range(1, 20, 2))
    assert {(r.stream, r.subject) for r in got} == {(stream.name, f"{stream.name}.1")}


def test_streaming_read_into_parquet_and_into_a_stream(
    connect_spark, shared_server, js, stream, tmp_path
):
    """An availableNow query reads every message into parquet; another copies them to a stream."""
    for i in range(30):
        js.publish_async(f"{stream.name}.x", b"m%d" % i)
    js.publish_async_completed(10)
    copy = js.create_stream(name=stream.name + "_COPY", subjects=[f"{stream.name}_COPY.>"])
    try:

        def run(sink: str, **options: str) -> None:
            source = (
                connect_spark.readStream.format("jetstream")
                .option("servers", shared_server.url)
                .option("stream", stream.name)
                .option("startingOffsets", "earliest")
                .option("maxMessagesPerTrigger", "12")
                .load()
            )
            if sink == "jetstream":
                source = source.selectExpr(f"'{copy.name}.y' AS subject", "data")
            writer = source.writeStream.format(sink).trigger(availableNow=True)
            for key, value in options.items():
                writer = writer.option(key, value)
            query = writer.option("checkpointLocation", str(tmp_path / sink)).start()
            try:
                assert query.awaitTermination(240)
            finally:
                query.stop()

        run("parquet", path=str(tmp_path / "out"))
        written = connect_spark.read.parquet(str(tmp_path / "out")).collect()
        assert sorted(bytes(r.data) for r in written) == sorted(b"m%d" % i for i in range(30))
        run("jetstream", servers=shared_server.url)
        copied = _stored(copy)
        assert sorted(m.data for m in copied) == sorted(b"m%d" % i for i in range(30))
        assert {m.subject for m in copied} == {f"{copy.name}.y"}
    finally:
        js.delete_stream(copy.name)


def test_key_value_write_then_read(connect_spark, shared_server, js):
    """Rows put through the remote session are the bucket's values when read back."""
    name = "connect" + uuid.uuid4().hex[:8]
    kv = js.create_key_value(bucket=name)
    try:
        df = connect_spark.createDataFrame([("eu", "1"), ("us", "2")], "key STRING, value STRING")
        df.write.format("jetstream-kv").mode("append").option("servers", shared_server.url).option(
            "bucket", name
        ).save()
        assert kv.get("us").value == b"2"
        got = (
            connect_spark.read.format("jetstream-kv")
            .option("servers", shared_server.url)
            .option("bucket", name)
            .load()
            .collect()
        )
        assert {r.key: bytes(r.value) for r in got} == {"eu": b"1", "us": b"2"}
    finally:
        js.delete_key_value(name)
