"""The ``jetstream`` data source's batch read on a real Spark session and a real server."""

from __future__ import annotations

import pytest

import jetstream_sync
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer
from tests.fixtures.spark import run_into_parquet

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def stream_options():
    """Streams answer direct gets (the fast read path)."""
    return {"allow_direct": True}


def _read(spark, server, stream, **options):
    reader = spark.read.format("jetstream").option("servers", server.url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def _seqs(df) -> list[int]:
    return [row.seq for row in df.select("seq").collect()]


def _plan(df) -> str:
    """The executed plan: the filters Spark still evaluates after the scan appear in it."""
    return df._jdf.queryExecution().executedPlan().toString()


def _fill(js, name: str, n: int) -> None:
    """n messages: seq i on subject ``<name>.a`` when i is odd, else ``<name>.b.x``."""
    for i in range(1, n + 1):
        subject = f"{name}.a" if i % 2 else f"{name}.b.x"
        js.publish_async(subject, b"m%d" % i, headers={"n": str(i), "k": ["x", "y"]})
    js.publish_async_completed(10)


def test_every_stored_message_once_across_four_partitions(spark, shared_server, js, stream):
    """Every stored message comes back exactly once from 4 partitions; deleted ones are gaps."""
    _fill(js, stream.name, 101)
    deleted = {1, 26, 50, 51, 76, 101}
    for seq in deleted:
        stream.delete_msg(seq)
    df = _read(spark, shared_server, stream.name, numPartitions=4)
    assert df.rdd.getNumPartitions() == 4
    seqs = _seqs(df)
    assert sorted(seqs) == sorted(set(range(1, 102)) - deleted)
    assert len(seqs) == len(set(seqs))
    row = df.where("seq = 7").collect()[0]
    assert (row.stream, row.subject, bytes(row.data)) == (stream.name, f"{stream.name}.a", b"m7")
    assert row.headers == {"n": ["7"], "k": ["x", "y"]}
    stored = stream.get_msg(7).time
    assert abs(row.timestamp.timestamp() - stored.timestamp()) < 2e-6  # Spark keeps microseconds


def test_subject_filters_literal_and_wildcards(spark, shared_server, js, stream):
    """The subject option filters on the server: a literal, a ``*`` and a ``>`` filter."""
    _fill(js, stream.name, 20)
    name = stream.name
    odd = list(range(1, 21, 2))
    even = list(range(2, 21, 2))
    assert sorted(_seqs(_read(spark, shared_server, name, subject=f"{name}.a"))) == odd
    assert sorted(_seqs(_read(spark, shared_server, name, subject=f"{name}.*.x"))) == even
    assert sorted(_seqs(_read(spark, shared_server, name, subject=f"{name}.b.>"))) == even
    everything = _read(spark, shared_server, name, subject=f"{name}.>")
    assert sorted(_seqs(everything)) == list(range(1, 21))


def test_sequence_and_time_bounds(spark, shared_server, js, stream):
    """startSeq and endSeq bound the read; startTime starts at the first message stored then."""
    _fill(js, stream.name, 30)
    got = _read(spark, shared_server, stream.name, startSeq=5, endSeq=12, numPartitions=3)
    assert sorted(_seqs(got)) == list(range(5, 13))
    tenth = stream.get_msg(10).time
    after = _read(spark, shared_server, stream.name, startTime=tenth.isoformat())
    assert sorted(_seqs(after)) == list(range(10, 31))


@pytest.fixture
def spark_pushdown(spark):
    """The session with filter push-down registered; the default registration comes back after."""
    import jetstream_sync.spark as jss

    jss.register(spark, pushdown=True)
    yield spark
    jss.register(spark)


def test_where_clauses_are_pushed_down(spark_pushdown, shared_server, js, stream):
    """seq ranges, subject equality and prefix, and timestamp >= are pushed; others are not."""
    spark = spark_pushdown
    _fill(js, stream.name, 40)
    name = stream.name

    def where(condition):
        return _read(spark, shared_server, name, numPartitions=2).where(condition)

    query = where(f"seq > 10 AND seq <= 30 AND subject = '{name}.a'")
    plan = _plan(query)
    assert "BatchScan jetstream" in plan and "> 10" not in plan and f"{name}.a" not in plan, plan
    assert sorted(_seqs(query)) == list(range(11, 31, 2))
    assert sorted(_seqs(where(f"subject LIKE '{name}.b%'"))) == list(range(2, 41, 2))
    assert sorted(_seqs(where(f"startswith(subject, '{name}.b.')"))) == list(range(2, 41, 2))
    assert _seqs(where(f"subject = '{name}.*'")) == []
    since = stream.get_msg(35).time
    df = _read(spark, shared_server, name)
    later = df.where(df.timestamp >= since)
    assert sorted(_seqs(later)) == list(range(35, 41))
    not_pushed = where("data = X'6D33' OR seq = 4")
    assert "6D33" in _plan(not_pushed).upper()
    assert sorted(_seqs(not_pushed)) == [3, 4]


def test_without_pushdown_where_clauses_are_evaluated_by_spark(spark, shared_server, js, stream):
    """Registered without push-down (Spark 4.3's default), a reused DataFrame reads right."""
    _fill(js, stream.name, 10)
    df = _read(spark, shared_server, stream.name)
    assert df.where("seq > 5").count() == 5
    assert df.count() == 10


def test_a_stream_without_direct_get_is_read_by_an_ordered_consumer(
    spark, shared_server, js, stream_name
):
    """Without allow_direct the ranges are read by ordered consumers, deleted afterwards."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_direct=False)
    _fill(js, stream_name, 50)
    for seq in (3, 20, 21, 50):
        stream.delete_msg(seq)
    df = _read(spark, shared_server, stream_name, numPartitions=4, subject=f"{stream_name}.>")
    seqs = _seqs(df)
    assert sorted(seqs) == sorted(set(range(1, 51)) - {3, 20, 21, 50})
    assert len(seqs) == len(set(seqs))
    wait_for(lambda: stream.info().state.consumer_count == 0, timeout=10)


def test_start_before_the_first_sequence_fails_unless_told_otherwise(
    spark, shared_server, js, stream
):
    """A startSeq already removed fails the read; failOnDataLoss=false skips ahead."""
    _fill(js, stream.name, 10)
    stream.purge(seq=6)
    with pytest.raises(Exception, match="removed"):
        _read(spark, shared_server, stream.name, startSeq=2).collect()
    got = _read(spark, shared_server, stream.name, startSeq=2, failOnDataLoss="false")
    assert sorted(_seqs(got)) == list(range(6, 11))


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "consumer"])
def test_subjects_and_headers_another_client_wrote_in_bytes_that_are_not_utf8(
    spark, shared_server, js, stream_name, direct
):
    """Such rows are read on both paths; each invalid byte shows as U+FFFD."""
    from tests.fixtures.raw_client import RawClient

    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_direct=direct)
    name = stream_name.encode()
    block = b"NATS/1.0\r\nk\xe9y: v\xe9l\r\n\r\n"
    raw = RawClient(shared_server.port)
    try:
        raw.send(
            b"PUB %s.caf\xe9.x 2\r\nhi\r\n" % name
            + b"HPUB %s.h %d %d\r\n%shh\r\n" % (name, len(block), len(block) + 2, block)
        )
    finally:
        raw.close()
    wait_for(lambda: js.stream(stream_name).info().state.messages == 2)
    rows = _read(spark, shared_server, stream_name).orderBy("seq").collect()
    assert [(r.seq, r.subject, bytes(r.data)) for r in rows] == [
        (1, f"{stream_name}.caf\ufffd.x", b"hi"),
        (2, f"{stream_name}.h", b"hh"),
    ]
    assert rows[1].headers == {"k\ufffdy": ["v\ufffdl"]}


def test_reads_keep_within_the_servers_max_request_batch(spark, tmp_path):
    """On a server with ``jetstream { limits { max_request_batch: 10 } }`` a batch and a
    streaming read of a stream without direct get, and a Key-Value read, return every
    message (the consumer reads asked for 4,096 at once: every task failed with
    PullRequestLimitError)."""
    limits = ["limits { max_request_batch: 10 }"]
    server = NatsServer(directory=tmp_path / "nats-server", jetstream_config=limits).start()
    try:
        with jetstream_sync.connect(server.url) as nc:
            js = nc.jetstream()
            js.create_stream(name="LIMITED", subjects=["limited.>"], allow_direct=False)
            _fill(js, "limited", 35)
            kv = js.create_key_value(bucket="limited")
            for i in range(25):
                kv.put(f"k{i}", b"v%d" % i)
        assert sorted(_seqs(_read(spark, server, "LIMITED", numPartitions=2))) == list(range(1, 36))
        stream = spark.readStream.format("jetstream").option("servers", server.url)
        stream = stream.option("stream", "LIMITED").option("startingOffsets", "earliest")
        run_into_parquet(stream.load(), tmp_path)
        written = spark.read.parquet(str(tmp_path / "out")).select("seq").collect()
        assert sorted(row.seq for row in written) == list(range(1, 36))
        reader = spark.read.format("jetstream-kv").option("servers", server.url)
        keys = [row.key for row in reader.option("bucket", "limited").load().collect()]
        assert sorted(keys) == sorted(f"k{i}" for i in range(25))
    finally:
        server.stop()
