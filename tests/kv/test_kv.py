"""Key-Value buckets and their reads and writes, against the real server (ADR-8, ADR-48)."""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Iterator

import attrs
import pytest

import jetstream_sync as nats_sync
from jetstream_sync import KeyValueOp, StreamSource
from tests.fixtures.jetstream import deletion_marker, unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer


@pytest.fixture
def bucket(js: nats_sync.JetStreamContext) -> Iterator[str]:
    """A unique bucket name, its bucket deleted afterwards if made."""
    name = unique_stream_name("KV")
    yield name
    with contextlib.suppress(nats_sync.BucketNotFoundError):
        js.delete_key_value(name)


@pytest.fixture
def kv(js: nats_sync.JetStreamContext, bucket: str) -> nats_sync.KeyValue:
    """A bucket keeping 5 revisions per key."""
    return js.create_key_value(bucket=bucket, history=5)


# ---------------------------------------------------------------- buckets


def test_create_bind_list_and_delete(js, bucket):
    """A bucket is made, found by name and in the listings, then deleted."""
    kv = js.create_key_value(bucket=bucket, description="settings", metadata={"team": "a"})
    assert kv.bucket == bucket and kv.stream_name == f"KV_{bucket}"
    assert js.create_key_value(bucket=bucket, description="settings", metadata={"team": "a"})
    assert js.key_value(bucket).bucket == bucket
    assert bucket in list(js.key_value_store_names())
    (status,) = [s for s in js.key_values() if s.bucket == bucket]
    assert status.metadata == {"team": "a"} and status.backing_store == "JetStream"
    assert js.delete_key_value(bucket)
    with pytest.raises(nats_sync.BucketNotFoundError) as info:
        js.key_value(bucket)
    assert isinstance(info.value, nats_sync.StreamNotFoundError)
    with pytest.raises(nats_sync.BucketNotFoundError):
        js.delete_key_value(bucket)


def test_a_bucket_name_at_the_stream_name_limit_works_one_byte_more_is_refused(js):
    """KV_ and the bucket must fit the server's 255-byte stream names: 252 bytes work, 253
    raise LimitExceededError naming the bucket's own length, before anything is sent."""
    longest = unique_stream_name("K").ljust(252, "k")
    try:
        assert js.create_key_value(bucket=longest).put("k", b"v") == 1
        assert js.key_value(longest).get("k").value == b"v"
    finally:
        js.delete_key_value(longest)
    for call in (lambda b: js.create_key_value(bucket=b), js.key_value, js.delete_key_value):
        with pytest.raises(nats_sync.LimitExceededError, match="bucket is too long: 253 bytes"):
            call(longest + "k")


def test_calls_on_a_deleted_bucket(js, bucket):
    """Reads and status on a bucket deleted under the handle raise BucketNotFoundError."""
    for direct in (True, False):
        kv = js.create_key_value(bucket=bucket, allow_direct=direct)
        kv.put("k", b"v")
        js.delete_key_value(bucket)
        with pytest.raises(nats_sync.BucketNotFoundError):
            kv.get("k")
        with pytest.raises(nats_sync.BucketNotFoundError):
            kv.status()


def test_stream_settings_on_the_server(js, bucket):
    """The server holds the ADR-8 stream: history as max per subject, discard new, rollups."""
    js.create_key_value(bucket=bucket, history=7, ttl=30, max_value_size=64, compression=True)
    cfg = js.stream(f"KV_{bucket}").cached_info.config
    assert cfg.subjects == (f"$KV.{bucket}.>",) and cfg.max_msgs_per_subject == 7
    assert cfg.discard.value == "new" and cfg.allow_rollup_hdrs and cfg.deny_delete
    assert cfg.allow_direct and cfg.duplicate_window == 30.0 and cfg.max_age == 30.0
    assert cfg.max_msg_size == 64 and cfg.compression.value == "s2"


def test_update_and_create_or_update(js, bucket):
    """update_key_value changes a bucket; it needs one; create_or_update does both."""
    with pytest.raises(nats_sync.BucketNotFoundError):
        js.update_key_value(bucket=bucket, history=2)
    js.create_or_update_key_value(bucket=bucket, history=2)
    js.update_key_value(bucket=bucket, history=4, description="more")
    status = js.key_value(bucket).status()
    assert (status.history, status.config.description) == (4, "more")
    js.create_or_update_key_value(bucket=bucket, history=6)
    assert js.key_value(bucket).status().history == 6


def test_limit_markers_can_be_enabled_not_disabled(js, bucket):
    """ADR-48: an update may turn limit markers on; turning them off is refused."""
    js.create_key_value(bucket=bucket)
    assert js.update_key_value(bucket=bucket, limit_marker_ttl=2).status().limit_marker_ttl == 2.0
    with pytest.raises(nats_sync.APIError):
        js.update_key_value(bucket=bucket)


def test_create_with_other_settings_is_refused(js, bucket):
    """Creating an existing bucket with different settings fails with the stream's error."""
    js.create_key_value(bucket=bucket, history=2)
    with pytest.raises(nats_sync.StreamNameInUseError):
        js.create_key_value(bucket=bucket, history=3)


def test_bad_names_raise_before_sending(js):
    """Bad bucket names and keys are typed ValueErrors raised before any request."""
    for call in (lambda: js.key_value("a.b"), lambda: js.create_key_value(bucket="a b")):
        with pytest.raises(nats_sync.InvalidBucketNameError):
            call()


def test_key_value_refuses_a_stream_that_is_no_bucket(js, bucket):
    """Binding to a KV_ stream without per-key history is refused."""
    js.create_stream(name=f"KV_{bucket}", subjects=[f"$KV.{bucket}.>"])
    with pytest.raises(nats_sync.KeyValueError, match="not a Key-Value bucket"):
        js.key_value(bucket)
    with pytest.raises(nats_sync.KeyValueError, match="not a Key-Value bucket"):
        js.delete_key_value(bucket)  # nor is it deleted as one
    js.delete_stream(f"KV_{bucket}")


# ---------------------------------------------------------------- operations


def test_put_get_and_revisions(kv):
    """put returns increasing revisions; get returns the latest or a given revision."""
    r1 = kv.put("color", b"red")
    r2 = kv.put("color", "blue")
    entry = kv.get("color")
    assert (entry.key, entry.value, entry.revision, entry.operation) == (
        "color", b"blue", r2, KeyValueOp.PUT,
    )  # fmt: skip
    assert entry.bucket == kv.bucket and entry.delta == 0 and entry.created.tzinfo
    assert kv.get("color", revision=r1).value == b"red"
    other = kv.put("size", b"L")
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.get("color", revision=other)
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.get("missing")
    with pytest.raises(nats_sync.InvalidKeyError):
        kv.put("bad key", b"")


def test_a_get_entry_equals_the_constructed_one(kv):
    """The entry a get builds has every field, as KeyValueEntry(...) would make it."""
    rev = kv.put("k", b"v")
    entry = kv.get("k")
    assert entry == nats_sync.KeyValueEntry(
        bucket=kv.bucket, key="k", value=b"v", revision=rev, created_ns=entry.created_ns,
    )  # fmt: skip
    assert abs(entry.created - datetime.datetime.now(datetime.UTC)) < datetime.timedelta(minutes=1)


def test_direct_replies_off_the_fast_path_decode_the_same(js, kv):
    """A reply the one-pass reader declines (another time stamp form) gives the same entry."""
    from jetstream_sync.kv.entry import entry_from_direct
    from jetstream_sync.msg import Msg, header_block

    kv.put("k", b"v")
    kv.delete("k")
    reply = js.client.request(
        f"$JS.API.DIRECT.GET.{kv.stream_name}.$KV.{kv.bucket}.k", b"", timeout=5
    )
    block = header_block(reply)
    assert block is not None
    stamp = reply.headers["Nats-Time-Stamp"]
    other = block.replace(stamp.encode(), stamp.replace("Z", "+00:00").encode())
    fast = entry_from_direct(kv.bucket, "k", reply)
    slow = entry_from_direct(kv.bucket, "k", Msg(reply.subject, "", reply.data, other))
    assert slow == fast and fast[1].operation is KeyValueOp.DEL


def test_checked_keys_are_kept_within_a_bound(kv):
    """A key is checked once and its subjects kept, at most KEY_CACHE keys; bad keys never."""
    from jetstream_sync.kv.bucket import KEY_CACHE

    for bad in ("a b", "", ".a", "a..b", "a.", "a.*", b"k", ["k"], None):
        for _ in range(2):
            with pytest.raises(nats_sync.InvalidKeyError):
                kv.put(bad, b"")  # type: ignore[arg-type]
            with pytest.raises(nats_sync.InvalidKeyError):
                kv.get(bad)  # type: ignore[arg-type]
    for i in range(KEY_CACHE + 10):
        kv.create(f"k{i}", b"") if i % 1000 == 0 else kv._subjects(f"k{i}")
        assert len(kv._keys) <= KEY_CACHE
    assert [kv.get(f"k{i}").revision for i in (0, 4000)] == [1, 5]  # k0 checked again


def test_put_nobody_stores_goes_through_publish_retries(js, bucket):
    """A put no stream takes is retried as a JetStream publish is, then raises NoRespondersError."""
    from jetstream_sync.jetstream.publish import RETRY_WAIT

    kv = js.create_key_value(bucket=bucket)
    js.delete_key_value(bucket)
    start = time.monotonic()
    with pytest.raises(nats_sync.NoRespondersError):
        kv.put("k", b"v", timeout=5)
    assert time.monotonic() - start >= 2 * RETRY_WAIT  # the publish's two retries ran
    with pytest.raises(nats_sync.NoRespondersError):
        kv.put("k", b"v", timeout=0.2)  # no time for a retry: still no responders, not a timeout


def test_delete_and_purge_markers(kv):
    """A deleted or purged key raises KeyDeletedError (a KeyNotFoundError) carrying the marker."""
    kv.put("a", b"1")
    rev = kv.delete("a")
    with pytest.raises(nats_sync.KeyDeletedError) as info:
        kv.get("a")
    assert isinstance(info.value, nats_sync.KeyNotFoundError)
    assert (info.value.entry.revision, info.value.entry.operation) == (rev, KeyValueOp.DEL)
    kv.put("b", b"1")
    kv.put("b", b"2")
    prev = kv.purge("b")
    with pytest.raises(nats_sync.KeyDeletedError) as info:
        kv.get("b")
    assert info.value.entry.operation is KeyValueOp.PURGE
    assert kv.status().values == 3  # a: put + DEL; b: only the purge marker is left
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.get("b", revision=prev - 1)


def test_create_only_when_absent(kv):
    """create succeeds on a new, deleted or purged key and fails on a live one."""
    r = kv.create("k", b"1")
    with pytest.raises(nats_sync.KeyExistsError) as info:
        kv.create("k", b"2")
    assert isinstance(info.value, nats_sync.KeyWrongLastSequenceError)
    assert info.value.err_code in (10071, 10164)
    kv.delete("k")
    assert kv.create("k", b"3") > r
    kv.purge("k")
    assert kv.get("k", revision=kv.create("k", b"4")).value == b"4"


def test_update_and_conditional_delete(kv):
    """update and delete(last=) apply only at the expected revision."""
    r = kv.put("k", b"1")
    r2 = kv.update("k", b"2", r)
    with pytest.raises(nats_sync.KeyWrongLastSequenceError):
        kv.update("k", b"3", r)
    with pytest.raises(nats_sync.KeyWrongLastSequenceError):
        kv.delete("k", last=r)
    kv.delete("k", last=r2)
    with pytest.raises(nats_sync.KeyDeletedError):
        kv.get("k")
    for bad in (-1, "3", True):
        with pytest.raises(ValueError):
            kv.update("k", b"x", bad)
        with pytest.raises(ValueError):
            kv.delete("k", last=bad)


def test_bucket_without_direct_gets(js, bucket):
    """A bucket with allow_direct off reads through the stream leader, same results."""
    kv = js.create_key_value(bucket=bucket, allow_direct=False, history=2)
    r = kv.put("k", b"1")
    kv.put("k", b"2")
    assert kv.get("k").value == b"2" and kv.get("k", revision=r).value == b"1"
    kv.delete("k")
    with pytest.raises(nats_sync.KeyDeletedError):
        kv.get("k")
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.get("other")
    with pytest.raises(ValueError):
        kv.get("k", revision=0)


def test_a_revision_that_is_no_stream_sequence_is_refused_before_sending(kv):
    """get(revision=) takes a stream sequence: past 64 bits is a ValueError, a float or a
    str a TypeError, before anything is sent (not a server error, not another revision)."""
    kv.put("k", b"1")
    with pytest.raises(ValueError, match="64 bits"):
        kv.get("k", revision=2**64)
    for revision in (1.5, "1", True):
        with pytest.raises(TypeError):
            kv.get("k", revision=revision)


def test_a_direct_get_nobody_answers_reads_through_the_stream_leader(js, bucket):
    """No replica answers the direct get (here: the stream stopped allowing it under a
    handle that knows it allowed; on a cluster: an election, interest still spreading):
    the get asks the stream leader instead of raising NoRespondersError."""
    kv = js.create_key_value(bucket=bucket, history=2)
    r = kv.put("k", b"1")
    kv.put("k", b"2")
    config = js.stream(kv.stream_name).info().config
    js.update_stream(attrs.evolve(config, allow_direct=False))
    assert kv.get("k").value == b"2" and kv.get("k", revision=r).value == b"1"
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.get("other")
    js.delete_key_value(bucket)
    with pytest.raises(nats_sync.BucketNotFoundError):
        kv.get("k")


def test_max_value_size_is_enforced(js, bucket):
    """A value over max_value_size is refused by the server with an API error."""
    kv = js.create_key_value(bucket=bucket, max_value_size=8)
    kv.put("ok", b"12345678")
    with pytest.raises(nats_sync.APIError):
        kv.put("big", b"123456789")


def test_the_servers_refusals_of_a_bucket_are_typed(js, bucket):
    """replicas > 1 on a single server, a max_bytes it has no room for, and a put to a
    full bucket (discard NEW) raise their classes; the full bucket keeps what it held."""
    with pytest.raises(nats_sync.ReplicasNotSupportedError):
        js.create_key_value(bucket=bucket, replicas=3)
    with pytest.raises(nats_sync.InsufficientResourcesError):
        js.create_key_value(bucket=bucket, max_bytes=10**15)
    kv = js.create_key_value(bucket=bucket, max_bytes=200)
    with pytest.raises(nats_sync.StreamStoreFailedError):
        for i in range(10):
            kv.put(f"k{i}", b"x" * 50)
    assert kv.get("k0").value == b"x" * 50
    assert kv.status().values < 10


def test_history_limit_keeps_the_newest(kv):
    """Only `history` revisions are kept per key."""
    revs = [kv.put("h", str(i)) for i in range(7)]
    assert kv.status().values == 5
    with pytest.raises(nats_sync.KeyNotFoundError):
        kv.get("h", revision=revs[0])
    assert kv.get("h", revision=revs[2]).value == b"2"


def test_per_key_ttl_leaves_a_marker(js, bucket):
    """create(ttl=) expires the key; the server's MaxAge marker reads as a purge (ADR-48)."""
    kv = js.create_key_value(bucket=bucket, limit_marker_ttl=5)
    assert kv.status().limit_marker_ttl == 5.0
    kv.create("session", b"x", ttl=1)
    kv.put("stays", b"y")

    marker = wait_for(lambda: deletion_marker(kv, "session"), timeout=20, interval=0.1)
    assert marker.operation is KeyValueOp.PURGE
    assert kv.get("stays").value == b"y"
    assert kv.create("session", b"again") > marker.revision


def test_purge_with_ttl_removes_the_marker_later(js, bucket):
    """purge(ttl=) leaves a marker that the server removes after the TTL."""
    kv = js.create_key_value(bucket=bucket, limit_marker_ttl=5)
    kv.put("k", b"1")
    kv.purge("k", ttl=3)
    with pytest.raises(nats_sync.KeyDeletedError):
        kv.get("k")

    def gone():
        try:
            kv.get("k")
        except nats_sync.KeyDeletedError:
            return False
        except nats_sync.KeyNotFoundError:
            return True
        return False

    wait_for(gone, timeout=20, interval=0.1)


def test_ttl_without_limit_markers_is_refused(kv):
    """A per-key TTL on a bucket without limit_marker_ttl is refused by the server."""
    with pytest.raises(nats_sync.APIError):
        kv.create("k", b"1", ttl=5)


def test_status(kv):
    """status() reports the bucket's numbers and settings."""
    kv.put("a", b"12345")
    s = kv.status()
    assert (s.bucket, s.values, s.history, s.ttl, s.is_compressed) == (kv.bucket, 1, 5, 0.0, False)
    assert s.bytes > 0 and s.limit_marker_ttl == 0.0 and s.config.history == 5
    assert kv.info() == nats_sync.KeyValueConfig(bucket=kv.bucket, history=5)


def test_mirror_reads_locally_and_writes_to_the_origin(js, bucket):
    """A mirrored bucket serves reads with the origin's keys; writes go to the origin.

    The mirror answers the origin's direct gets too (``mirror_direct``), so the origin's
    own read may lag its write until the mirror has it: the test waits for it."""
    origin = js.create_key_value(bucket=bucket)
    mirror_name = bucket + "_M"
    try:
        js.create_key_value(bucket=mirror_name, mirror=StreamSource(name=bucket))
        mirror = js.key_value(mirror_name)
        origin.put("k", b"from origin")
        assert wait_for(lambda: _value(mirror, "k") == b"from origin", timeout=20)
        revision = mirror.put("k", b"through mirror")
        assert revision == 2  # the origin's sequence: stored there
        assert wait_for(lambda: _value(origin, "k") == b"through mirror", timeout=20)
        assert wait_for(lambda: _value(mirror, "k") == b"through mirror", timeout=20)
    finally:
        js.delete_key_value(mirror_name)


def test_a_mirror_filtered_by_keys_copies_those_keys(js, bucket):
    """A mirror's filter_subject names keys, as a source's does (or a whole ``$KV.`` subject).

    A key filter once reached the server as it was and matched no subject: the mirror
    stayed empty without an error."""
    origin = js.create_key_value(bucket=bucket)
    origin.put("cfg.a", b"1")
    origin.put("other", b"2")
    names = (bucket + "_M", bucket + "_N")
    try:
        by_key = js.create_key_value(
            bucket=names[0], mirror=StreamSource(name=bucket, filter_subject="cfg.>")
        )
        by_subject = js.create_key_value(
            bucket=names[1], mirror=StreamSource(name=bucket, filter_subject=f"$KV.{bucket}.cfg.>")
        )
        for mirror in (by_key, by_subject):
            assert mirror.info().mirror.filter_subject == f"$KV.{bucket}.cfg.>"
            assert wait_for(lambda m=mirror: _value(m, "cfg.a") == b"1", timeout=20)
            assert mirror.keys() == ["cfg.a"]
    finally:
        for name in names:
            with contextlib.suppress(nats_sync.BucketNotFoundError):
                js.delete_key_value(name)


def test_sources_aggregate_buckets(js, bucket):
    """A bucket sourcing two buckets holds their keys as its own (ADR-57 transforms)."""
    a, b, agg = bucket + "_A", bucket + "_B", bucket
    try:
        js.create_key_value(bucket=a).put("x", b"from a")
        js.create_key_value(bucket=b).put("y", b"from b")
        kv = js.create_key_value(
            bucket=agg, sources=[StreamSource(name=a), StreamSource(name=f"KV_{b}")]
        )
        assert wait_for(lambda: _value(kv, "x") == b"from a", timeout=20)
        assert wait_for(lambda: _value(kv, "y") == b"from b", timeout=20)
        assert sorted(kv.keys()) == ["x", "y"]
    finally:
        for name in (a, b):
            js.delete_key_value(name)


def test_a_filtered_source_keeps_its_keys(js, bucket):
    """A source's filter_subject picks keys; they keep their names in the aggregate.

    A filter with ``>`` once dropped its literal tokens (``cfg.x`` arrived as ``x``), and a
    literal filter or one with ``*`` made a transform the server refused."""
    a, b, c, agg = bucket + "_A", bucket + "_B", bucket + "_C", bucket
    try:
        kv_a = js.create_key_value(bucket=a)
        kv_a.put("cfg.x", b"from a")
        kv_a.put("other", b"not sourced")
        js.create_key_value(bucket=b).put("q", b"from b")
        js.create_key_value(bucket=c).put("p.1", b"from c")
        kv = js.create_key_value(
            bucket=agg,
            sources=[
                StreamSource(name=a, filter_subject="cfg.>"),
                StreamSource(name=b, filter_subject="q"),
                StreamSource(name=c, filter_subject=f"$KV.{c}.p.*"),
            ],
        )
        assert wait_for(lambda: _value(kv, "q") == b"from b", timeout=20)
        assert wait_for(lambda: _value(kv, "cfg.x") == b"from a", timeout=20)
        assert wait_for(lambda: _value(kv, "p.1") == b"from c", timeout=20)
        assert sorted(kv.keys()) == ["cfg.x", "p.1", "q"]
        assert js.update_key_value(kv.info()).info() == kv.info()
    finally:
        for name in (a, b, c):
            js.delete_key_value(name)


def _value(kv: nats_sync.KeyValue, key: str) -> bytes | None:
    try:
        return kv.get(key).value
    except nats_sync.KeyNotFoundError:
        return None


def test_domain_prefix_in_key_subjects(tmp_path):
    """Behind a JetStream domain, writes carry the domain's API prefix and still land."""
    with NatsServer(directory=tmp_path / "srv", jetstream_config=["domain: HUB"]) as server:
        with nats_sync.connect(server.url) as nc:
            ctx = nc.jetstream(domain="HUB")
            kv = ctx.create_key_value(bucket="D")
            assert kv._write_pre == "$JS.HUB.API.$KV.D."
            rev = kv.put("k", b"v")
            assert kv.get("k").revision == rev
            assert nc.jetstream().key_value("D").get("k").value == b"v"


_CROSS_ACCOUNT = """
accounts: {
  A: {
    users: [ {user: a, password: a} ]
    jetstream: enabled
    exports: [ {service: "$JS.API.>", response_type: stream}, {service: "$KV.>"} ]
  }
  I: {
    users: [ {user: i, password: i} ]
    imports: [
      {service: {account: A, subject: "$JS.API.>"}, to: "fromA.>"}
      {service: {account: A, subject: "$KV.>"}, to: "fromA.$KV.>"}
    ]
  }
}
"""


def test_imported_api_prefix_in_key_subjects(tmp_path):
    """Through an imported API (prefix=): writes, gets and watches (pulls: response_type stream)."""
    with NatsServer(directory=tmp_path / "srv", extra_config=_CROSS_ACCOUNT) as server:
        url = server.url.replace("nats://", "nats://{}:{}@")
        with (
            nats_sync.connect(url.format("a", "a")) as owner,
            nats_sync.connect(url.format("i", "i")) as guest,
        ):
            mine = owner.jetstream().create_key_value(bucket="Map", history=5)
            kv = guest.jetstream(prefix="fromA").key_value("Map")
            rev = kv.put("k", b"from I")
            assert mine.get("k").revision == rev
            assert kv.get("k").value == b"from I"
            kv.update("k", b"again", rev)
            with kv.watch() as w:
                assert w.next(timeout=5).value == b"again"
                assert w.next(timeout=5) is None
                mine.put("k", b"from A")
                assert w.next(timeout=5).value == b"from A"


def test_create_over_a_deleted_key_keeps_to_one_timeout(kv, monkeypatch):
    """Over a delete marker create makes three round trips; each gets what is left of the
    one ``timeout``, not a whole one of its own (which made the call last up to 3x)."""
    given: list[float] = []
    publish, get = kv._publish, kv._get

    def timed_publish(*args, timeout, **kwargs):
        given.append(timeout)
        return publish(*args, timeout=timeout, **kwargs)

    def timed_get(key, revision, timeout):
        given.append(timeout)
        return get(key, revision, timeout)

    kv.put("k", b"1")
    kv.delete("k")
    monkeypatch.setattr(kv, "_publish", timed_publish)
    monkeypatch.setattr(kv, "_get", timed_get)
    kv.create("k", b"2", timeout=5)
    assert len(given) == 3, given
    assert given[0] == 5 and 5 > given[1] > given[2] > 0, given
