"""The data sources on a standalone cluster whose executors get the package as an archive.

A master and two workers from the pyspark wheel (``standalone_spark``), on
loopback; the executors' Python is the packed venv shipped with
``spark.archives`` (``tests/fixtures/spark_cluster.py``), not the test venv.
Each driver runs in a child process (``standalone_spark.run``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# The first test also pays for the archive and six JVMs (master, workers, driver, executors).
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(420)]


@pytest.fixture
def stream_options():
    """Streams answer direct gets (the columnar read path)."""
    return {"allow_direct": True}


def _publish(js, stream: str, count: int) -> None:
    for i in range(count):
        js.publish_async(f"{stream}.{i % 3}", b"m%d" % i)
    js.publish_async_completed(10)


def _stored(stream) -> list:
    info = stream.info()
    return [stream.get_msg(seq) for seq in range(info.state.first_seq, info.state.last_seq + 1)]


def test_executors_run_the_shipped_environment(standalone_spark, tmp_path):
    """Both workers' executors import jetstream_sync, C core included, from the unpacked archive."""
    report = tmp_path / "executors.json"
    standalone_spark.run(
        """
        def where(_):
            import sys
            import jetstream_sync
            yield (sys.executable, jetstream_sync.__file__, jetstream_sync.__impl__)

        rows = spark.sparkContext.parallelize(range(8), 8).mapPartitions(where).collect()
        with open(v["report"], "w") as out:
            json.dump(rows, out)
        """,
        report=str(report),
    )
    rows = json.loads(report.read_text())
    workers = standalone_spark.cluster.work_dirs
    used = set()
    for executable, module, impl in rows:
        environment = Path(executable).parent.parent
        assert environment.name == "environment", executable
        assert Path(module).is_relative_to(environment), module
        assert impl == "c"
        (worker,) = [w for w in workers if environment.is_relative_to(w)]
        used.add(worker)
    assert used == set(workers)


def test_batch_read(standalone_spark, shared_server, js, stream):
    """A batch read over four partitions returns every message once, as stored."""
    _publish(js, stream.name, 3000)
    standalone_spark.run(
        """
        df = (
            spark.read.format("jetstream")
            .option("servers", v["servers"])
            .option("stream", v["stream"])
            .option("numPartitions", "4")
            .load()
        )
        rows = df.select("subject", "seq", "data").collect()
        assert len(rows) == 3000
        assert sorted(r.seq for r in rows) == list(range(1, 3001))
        assert {r.seq: (r.subject, bytes(r.data)) for r in rows} == {
            i + 1: (f"{v['stream']}.{i % 3}", b"m%d" % i) for i in range(3000)
        }
        """,
        servers=shared_server.url,
        stream=stream.name,
    )


def test_batch_write(standalone_spark, shared_server, stream):
    """Rows written from four partitions on both executors are each stored once."""
    standalone_spark.run(
        """
        rows = [(f"{v['stream']}.{i % 3}", b"w%d" % i) for i in range(2000)]
        df = spark.createDataFrame(rows, "subject STRING, data BINARY").repartition(4)
        df.write.format("jetstream").mode("append").option("servers", v["servers"]).save()
        """,
        servers=shared_server.url,
        stream=stream.name,
    )
    stored = _stored(stream)
    assert len(stored) == 2000
    assert sorted(m.data for m in stored) == sorted(b"w%d" % i for i in range(2000))


def test_streaming_query_available_now(standalone_spark, shared_server, js, stream, tmp_path):
    """An availableNow query copies every message to another stream in limited micro-batches."""
    _publish(js, stream.name, 1000)
    copy = js.create_stream(name=stream.name + "_COPY", subjects=[f"{stream.name}_COPY.>"])
    try:
        standalone_spark.run(
            """
            query = (
                spark.readStream.format("jetstream")
                .option("servers", v["servers"])
                .option("stream", v["stream"])
                .option("startingOffsets", "earliest")
                .option("maxMessagesPerTrigger", "400")
                .load()
                .selectExpr(
                    f"'{v['copy']}.' || substring_index(subject, '.', -1) AS subject", "data"
                )
                .writeStream.format("jetstream")
                .option("servers", v["servers"])
                .option("checkpointLocation", v["checkpoint"])
                .trigger(availableNow=True)
                .start()
            )
            try:
                assert query.awaitTermination(200)
            finally:
                query.stop()
            batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
            assert batches == [400, 400, 200], batches
            """,
            servers=shared_server.url,
            stream=stream.name,
            copy=copy.name,
            checkpoint=str(tmp_path / "checkpoint"),
        )
        copied = _stored(copy)
        assert len(copied) == 1000
        assert sorted(m.data for m in copied) == sorted(b"m%d" % i for i in range(1000))
        assert {m.subject for m in copied} == {f"{copy.name}.{i}" for i in range(3)}
    finally:
        js.delete_stream(copy.name)
