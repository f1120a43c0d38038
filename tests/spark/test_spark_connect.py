"""The ``jetstream`` and ``jetstream-kv`` data sources through a Spark Connect session.

One Connect server (``local[2]``, from the pyspark wheel) serves the module;
``register`` runs on its remote session, which has no ``sparkContext``. The
client code runs in a child process (``connect_spark.run``): a process holds
either the suite's classic session or a remote one.
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
    connect_spark.run(
        """
        rows = [(f"{v['stream']}.{i % 2}", b"d%d" % i) for i in range(20)]
        df = spark.createDataFrame(rows, "subject STRING, data BINARY")
        df.write.format("jetstream").mode("append").option("servers", v["servers"]).save()
        got = (
            spark.read.format("jetstream")
            .option("servers", v["servers"])
            .option("stream", v["stream"])
            .option("subject", v["stream"] + ".1")
            .load()
            .collect()
        )
        assert sorted(bytes(r.data) for r in got) == sorted(b"d%d" % i for i in range(1, 20, 2))
        assert {(r.stream, r.subject) for r in got} == {(v["stream"], v["stream"] + ".1")}
        """,
        servers=shared_server.url,
        stream=stream.name,
    )
    assert sorted(m.data for m in _stored(stream)) == sorted(b"d%d" % i for i in range(20))


def test_streaming_read_into_parquet_and_into_a_stream(
    connect_spark, shared_server, js, stream, tmp_path
):
    """An availableNow query reads every message into parquet; another copies them to a stream."""
    for i in range(30):
        js.publish_async(f"{stream.name}.x", b"m%d" % i)
    js.publish_async_completed(10)
    copy = js.create_stream(name=stream.name + "_COPY", subjects=[f"{stream.name}_COPY.>"])
    try:
        connect_spark.run(
            """
            def run(sink, **options):
                source = (
                    spark.readStream.format("jetstream")
                    .option("servers", v["servers"])
                    .option("stream", v["stream"])
                    .option("startingOffsets", "earliest")
                    .option("maxMessagesPerTrigger", "12")
                    .load()
                )
                if sink == "jetstream":
                    source = source.selectExpr(f"'{v['copy']}.y' AS subject", "data")
                writer = source.writeStream.format(sink).trigger(availableNow=True)
                for key, value in options.items():
                    writer = writer.option(key, value)
                query = writer.option("checkpointLocation", v["tmp"] + "/" + sink).start()
                try:
                    assert query.awaitTermination(200)
                finally:
                    query.stop()

            run("parquet", path=v["tmp"] + "/out")
            written = spark.read.parquet(v["tmp"] + "/out").collect()
            assert sorted(bytes(r.data) for r in written) == sorted(b"m%d" % i for i in range(30))
            run("jetstream", servers=v["servers"])
            """,
            servers=shared_server.url,
            stream=stream.name,
            copy=copy.name,
            tmp=str(tmp_path),
        )
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
        connect_spark.run(
            """
            df = spark.createDataFrame([("eu", "1"), ("us", "2")], "key STRING, value STRING")
            (df.write.format("jetstream-kv").mode("append")
                .option("servers", v["servers"]).option("bucket", v["bucket"]).save())
            got = (
                spark.read.format("jetstream-kv")
                .option("servers", v["servers"])
                .option("bucket", v["bucket"])
                .load()
                .collect()
            )
            assert {r.key: bytes(r.value) for r in got} == {"eu": b"1", "us": b"2"}, got
            """,
            servers=shared_server.url,
            bucket=name,
        )
        assert kv.get("us").value == b"2"
    finally:
        js.delete_key_value(name)


def test_workers_python_and_the_data_sources_own_error_line(connect_spark, shared_server):
    """Workers run PYSPARK_PYTHON; the data source's error is the line before SQLSTATE."""
    connect_spark.run(
        """
        import os
        from pyspark.sql.functions import udf

        where = udf(lambda _: __import__("sys").executable, "string")
        worker = spark.range(1).select(where("id").alias("python")).collect()[0].python
        assert worker == os.environ["PYSPARK_PYTHON"], worker
        try:
            spark.read.format("jetstream").option("servers", v["servers"]).option(
                "stream", "NO_SUCH_STREAM"
            ).load().collect()
        except Exception as error:
            text = str(error)
        else:
            raise AssertionError("a read of a missing stream succeeded")
        assert text.startswith("[PYTHON_DATA_SOURCE_ERROR]"), text[:300]
        own = text.partition("\\n SQLSTATE:")[0].splitlines()[-1]
        assert own.startswith("jetstream_sync.errors.StreamNotFoundError: stream not found"), own
        """,
        servers=shared_server.url,
    )
