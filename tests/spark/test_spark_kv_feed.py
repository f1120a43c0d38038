"""A Key-Value bucket as a change feed (``readStream.format("jetstream-kv")``), and its history.

Each streaming test runs ``Trigger.AvailableNow`` queries into parquet from
one checkpoint, writing to the bucket between runs, and reads back every
row the sink holds: a revision lost or written twice shows there.
"""

from __future__ import annotations

import uuid

import pytest

from jetstream_sync import StreamSource
from jetstream_sync.errors import BucketNotFoundError
from tests.fixtures.polling import wait_for
from tests.fixtures.spark import run_into_parquet

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def make_bucket(js):
    """Make fresh buckets (``history`` revisions per key), deleted afterwards."""
    names = []

    def make(history: int = 10):
        name = "feed" + uuid.uuid4().hex[:8]
        names.append(name)
        return js.create_key_value(bucket=name, history=history)

    yield make
    for name in names:
        try:
            js.delete_key_value(name)
        except BucketNotFoundError:
            pass


def _run(spark, server, bucket: str, tmp_path, **options):
    """One availableNow run of the feed checkpointed in ``tmp_path``, into parquet there."""
    reader = spark.readStream.format("jetstream-kv").option("servers", server.url)
    reader = reader.option("bucket", bucket)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    query = run_into_parquet(reader.load(), tmp_path)
    if query.exception() is not None:
        raise query.exception()
    return query


def _written(spark, tmp_path) -> list[tuple[str, bytes, int, str]]:
    """Every row the sink holds, ``(key, value, revision, operation)``, by revision (then value)."""
    if not (tmp_path / "out").exists():
        return []
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    return sorted(
        ((r.key, bytes(r.value), r.revision, r.operation) for r in rows),
        key=lambda row: (row[2], row[1]),
    )


def test_the_feed_resumes_from_its_checkpoint_after_puts_deletes_and_purges(
    spark, shared_server, make_bucket, tmp_path
):
    """Each revision reaches the sink once across restarts; a purge's marker is a row, and the
    revisions it removed that were already read stay in the sink."""
    kv = make_bucket()
    kv.put("a", b"a1")
    kv.put("b", b"b1")
    kv.put("a", b"a2")
    first = _run(
        spark,
        shared_server,
        kv.bucket,
        tmp_path,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=2,
    )
    assert [p["numInputRows"] for p in first.recentProgress if p["numInputRows"]] == [2, 1]
    assert _written(spark, tmp_path) == [
        ("a", b"a1", 1, "PUT"),
        ("b", b"b1", 2, "PUT"),
        ("a", b"a2", 3, "PUT"),
    ]
    kv.delete("b")
    kv.put("c", b"c1")
    kv.purge("a")  # removes revisions 1 and 3 from the stream
    _run(spark, shared_server, kv.bucket, tmp_path, startingOffsets="earliest")
    _run(spark, shared_server, kv.bucket, tmp_path, startingOffsets="earliest")  # nothing new
    assert _written(spark, tmp_path) == [
        ("a", b"a1", 1, "PUT"),
        ("b", b"b1", 2, "PUT"),
        ("a", b"a2", 3, "PUT"),
        ("b", b"", 4, "DEL"),
        ("c", b"c1", 5, "PUT"),
        ("a", b"", 6, "PURGE"),
    ]
    buckets = {r.bucket for r in spark.read.parquet(str(tmp_path / "out")).collect()}
    assert buckets == {kv.bucket}


def test_revisions_the_bucket_removed_before_they_were_read_are_not_data_loss(
    spark, shared_server, make_bucket, tmp_path
):
    """history=1 and purges move the stream's first sequence past the checkpoint: the feed
    (failOnDataLoss left true) reads on from what is stored, where a stream read would fail."""
    kv = make_bucket(history=1)
    kv.put("a", b"a1")
    _run(spark, shared_server, kv.bucket, tmp_path, startingOffsets="earliest")
    kv.put("a", b"a2")  # removes revision 1
    kv.put("a", b"a3")  # removes revision 2, unread: the first sequence is now 3
    kv.put("b", b"b1")
    kv.purge("b")  # removes revision 4, unread
    assert kv.status().values == 2  # a3, and the marker that purged b1
    _run(spark, shared_server, kv.bucket, tmp_path, startingOffsets="earliest")
    assert _written(spark, tmp_path) == [
        ("a", b"a1", 1, "PUT"),
        ("a", b"a3", 3, "PUT"),
        ("b", b"", 5, "PURGE"),
    ]


def test_a_feed_started_after_a_purge_sees_only_the_marker(
    spark, shared_server, make_bucket, tmp_path
):
    """``earliest`` is the history still stored: a purged key shows only its marker."""
    kv = make_bucket()
    kv.put("k", b"1")
    kv.put("k", b"2")
    kv.put("other", b"x")
    kv.purge("k")
    _run(spark, shared_server, kv.bucket, tmp_path, startingOffsets="earliest")
    assert _written(spark, tmp_path) == [("other", b"x", 3, "PUT"), ("k", b"", 4, "PURGE")]


def test_latest_starts_after_what_is_stored(spark, shared_server, make_bucket, tmp_path):
    """The default ``latest`` (as Kafka's) sees only changes made after the query started."""
    kv = make_bucket()
    kv.put("before", b"1")
    _run(spark, shared_server, kv.bucket, tmp_path)
    assert _written(spark, tmp_path) == []
    kv.put("after", b"2")
    _run(spark, shared_server, kv.bucket, tmp_path)
    assert _written(spark, tmp_path) == [("after", b"2", 2, "PUT")]


def test_a_revision_or_json_naming_the_bucket_is_where_the_feed_starts(
    spark, shared_server, make_bucket, tmp_path
):
    """``startingOffsets`` takes a revision, or Kafka's JSON with the bucket for the topic."""
    kv = make_bucket()
    for i in range(1, 5):
        kv.put(f"k{i}", b"%d" % i)
    _run(spark, shared_server, kv.bucket, tmp_path / "rev", startingOffsets=3)
    assert [row[2] for row in _written(spark, tmp_path / "rev")] == [3, 4]
    _run(
        spark, shared_server, kv.bucket, tmp_path / "json", startingOffsets=f'{{"{kv.bucket}": 2}}'
    )
    assert [row[2] for row in _written(spark, tmp_path / "json")] == [2, 3, 4]


def test_keys_filters_the_feed_on_the_server(spark, shared_server, make_bucket, tmp_path):
    """``keys`` takes a key filter with ``*`` and ``>``, as ``KeyValue.watch``."""
    kv = make_bucket()
    kv.put("orders.eu.1", b"1")
    kv.put("users.1", b"u")
    kv.put("orders.us.2", b"2")
    kv.delete("orders.eu.1")
    _run(
        spark,
        shared_server,
        kv.bucket,
        tmp_path,
        startingOffsets="earliest",
        keys="orders.*.>",
        numPartitions=3,
    )
    assert _written(spark, tmp_path) == [
        ("orders.eu.1", b"1", 1, "PUT"),
        ("orders.us.2", b"2", 3, "PUT"),
        ("orders.eu.1", b"", 4, "DEL"),
    ]


def test_a_mirrored_bucket_feeds_its_origin_s_keys(spark, shared_server, js, make_bucket, tmp_path):
    """A mirror stores the origin's subjects (``$KV.<origin>.<key>``): the feed reads those,
    keys and all, and ``keys`` filters them, with the mirror's name in the bucket column."""
    origin = make_bucket()
    mirror = origin.bucket + "m"
    js.create_key_value(bucket=mirror, history=10, mirror=StreamSource(name=origin.bucket))
    try:
        origin.put("orders.1", b"o1")
        origin.put("users.1", b"u1")
        origin.delete("orders.1")
        wait_for(lambda: js.key_value(mirror).status().values == 3, timeout=20)
        _run(spark, shared_server, mirror, tmp_path / "all", startingOffsets="earliest")
        assert _written(spark, tmp_path / "all") == [
            ("orders.1", b"o1", 1, "PUT"),
            ("users.1", b"u1", 2, "PUT"),
            ("orders.1", b"", 3, "DEL"),
        ]
        rows = spark.read.parquet(str(tmp_path / "all" / "out")).collect()
        assert {r.bucket for r in rows} == {mirror}
        _run(spark, shared_server, mirror, tmp_path / "users", startingOffsets="earliest",
             keys="users.>")  # fmt: skip
        assert _written(spark, tmp_path / "users") == [("users.1", b"u1", 2, "PUT")]
    finally:
        js.delete_key_value(mirror)


def test_a_recreated_bucket_is_data_loss(spark, shared_server, js, make_bucket, tmp_path):
    """A bucket deleted and created again fails the restart; failOnDataLoss=false reads the
    new bucket from its start."""
    kv = make_bucket()
    kv.put("a", b"old")
    _run(spark, shared_server, kv.bucket, tmp_path, startingOffsets="earliest")
    js.delete_key_value(kv.bucket)
    kv = js.create_key_value(bucket=kv.bucket)
    kv.put("a", b"new")
    with pytest.raises(Exception, match="created again"):
        _run(spark, shared_server, kv.bucket, tmp_path, startingOffsets="earliest")
    _run(spark, shared_server, kv.bucket, tmp_path, failOnDataLoss="false")
    assert _written(spark, tmp_path) == [("a", b"new", 1, "PUT"), ("a", b"old", 1, "PUT")]


def test_a_missing_bucket_or_a_bad_key_filter_fails_before_anything_runs(
    spark, shared_server, make_bucket, tmp_path
):
    """The bucket and ``keys`` are checked when the query starts, naming what is wrong."""
    with pytest.raises(Exception, match="not found"):
        _run(spark, shared_server, "nobucket" + uuid.uuid4().hex[:6], tmp_path / "a")
    with pytest.raises(Exception, match="invalid bucket name 'a.b'"):
        _run(spark, shared_server, "a.b", tmp_path / "c")
    kv = make_bucket()
    with pytest.raises(Exception, match="option 'keys'"):
        _run(spark, shared_server, kv.bucket, tmp_path / "b", keys="a.>.b")


def test_a_batch_read_with_include_history_returns_every_stored_revision(
    spark, shared_server, make_bucket
):
    """``includeHistory=true``: one row per stored revision, markers included (without
    ``includeDeletes=false``); the default stays one row per key holding a value."""
    kv = make_bucket()
    kv.put("a", b"a1")
    kv.put("a", b"a2")
    kv.put("b", b"b1")
    kv.delete("b")
    kv.put("c", b"c1")
    kv.put("c", b"c2")
    kv.purge("c")

    def read(**options):
        reader = spark.read.format("jetstream-kv").option("servers", shared_server.url)
        reader = reader.option("bucket", kv.bucket)
        for key, value in options.items():
            reader = reader.option(key, value)
        rows = reader.load().collect()
        return sorted((r.key, bytes(r.value), r.revision, r.operation) for r in rows)

    assert read(includeHistory="true") == [
        ("a", b"a1", 1, "PUT"),
        ("a", b"a2", 2, "PUT"),
        ("b", b"", 4, "DEL"),
        ("b", b"b1", 3, "PUT"),
        ("c", b"", 7, "PURGE"),
    ]
    assert read(includeHistory="true", includeDeletes="false") == [
        ("a", b"a1", 1, "PUT"),
        ("a", b"a2", 2, "PUT"),
        ("b", b"b1", 3, "PUT"),
    ]
    assert read() == [("a", b"a2", 2, "PUT")]
