"""KeyValueConfig: validation before sending and the stream ADR-8/48/57 prescribe."""

from __future__ import annotations

import pickle
from datetime import timedelta

import pytest

import jetstream_sync as js
from jetstream_sync import (
    ExternalStream,
    KeyValueConfig,
    StreamSource,
    SubjectTransform,
)
from jetstream_sync.kv._keys import check_filter, check_key, distinct_filters


@pytest.mark.parametrize("bucket", ["", "a.b", "a b", "a*", "a>", "ä", "a/b"])
def test_bad_bucket_names_are_typed_value_errors(bucket):
    """A bucket name outside [a-zA-Z0-9_-]+ raises InvalidBucketNameError (a ValueError)."""
    with pytest.raises(js.InvalidBucketNameError) as info:
        KeyValueConfig(bucket=bucket)
    assert isinstance(info.value, ValueError) and isinstance(info.value, js.KeyValueError)


@pytest.mark.parametrize("key", ["", ".a", "a.", "a..b", "a b", "a*", "a.>", "ü", "a\tb"])
def test_bad_keys(key):
    """Keys: [-/_=.a-zA-Z0-9]+, no leading/trailing dot, no empty token, no wildcard."""
    with pytest.raises(js.InvalidKeyError):
        check_key(key)


@pytest.mark.parametrize("key", ["a", "a.b", "A-b_c/d=e.9", "_kv"])
def test_good_keys(key):
    """Valid keys pass unchanged."""
    assert check_key(key) == key


@pytest.mark.parametrize("good", [">", "*", "a.*", "a.>", "*.b.>", "a.b"])
def test_filters_accept_whole_token_wildcards(good):
    """Key filters allow * as a whole token and > as the last token."""
    assert check_filter(good) == good


@pytest.mark.parametrize("bad", ["", ">.a", "a.>.b", "a..b", ".a", "a b"])
def test_filters_reject_the_rest(bad):
    """> before the end, empty tokens and spaces are refused (a* is a literal token)."""
    with pytest.raises(js.InvalidKeyError):
        check_filter(bad)


@pytest.mark.parametrize(
    ("filters", "kept"),
    [
        (["a", "a"], ["a"]),
        (["a.b", "a.*"], ["a.*"]),
        (["a.*", "a.b", "a.>", "c"], ["a.>", "c"]),
        (["*.>", "a", "a.b", ">"], [">"]),
        (["*.>", "a", "a.b"], ["*.>", "a"]),  # *.> needs two tokens
        (["a.*", "*.b", "a.b"], ["a.*", "*.b"]),  # a partial overlap stays
        (["a.*.c", "a.b.*", "a.b.c"], ["a.*.c", "a.b.*"]),
        (["a.>", "a"], ["a.>", "a"]),
        (["*", "a", "a.b"], ["*", "a.b"]),
    ],
)
def test_filters_that_another_covers_are_dropped(filters, kept):
    """A watch keeps only the filters no other one covers, in their order."""
    assert distinct_filters(filters) == kept


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("history", 0, ValueError),
        ("history", 65, ValueError),
        ("history", "5", TypeError),
        ("replicas", 6, ValueError),
        ("ttl", -1, ValueError),
        ("limit_marker_ttl", 0.5, ValueError),
        ("max_bytes", -2, ValueError),
        ("max_value_size", 2**31, ValueError),  # the stream's max_msg_size is an int32
        ("storage", "disk", ValueError),
    ],
)
def test_bad_fields(field, value, error):
    """Each field is checked at construction."""
    with pytest.raises(error):
        KeyValueConfig(bucket="B", **{field: value})


@pytest.mark.parametrize("field", ["ttl", "limit_marker_ttl"])
def test_durations_past_292_years_are_refused_naming_the_field(field):
    """A ttl or limit_marker_ttl past a Go duration is refused at construction, naming the
    field given (not max_age / subject_delete_marker_ttl, the stream fields they become)."""
    with pytest.raises(ValueError, match=f"^{field} must be at most"):
        KeyValueConfig(bucket="B", **{field: 1e12})


def test_default_stream_follows_adr8():
    """The default bucket: KV_<b> on $KV.<b>.>, history 1, discard new, rollups, no deletes."""
    s = KeyValueConfig(bucket="CFG").stream_config()
    assert s.name == "KV_CFG" and s.subjects == ("$KV.CFG.>",)
    assert s.max_msgs_per_subject == 1 and s.discard.value == "new"
    assert s.allow_rollup_hdrs and s.deny_delete and s.allow_direct
    assert (s.max_msgs, s.max_bytes, s.max_msg_size, s.max_consumers) == (-1, -1, -1, -1)
    assert s.duplicate_window == 120.0 and s.max_age == 0.0
    assert s.compression.value == "none" and not s.allow_msg_ttl


def test_duplicate_window_is_capped_by_ttl():
    """A TTL under 2 minutes becomes the duplicate window; a longer one leaves 2 minutes."""
    assert KeyValueConfig(bucket="B", ttl=30).stream_config().duplicate_window == 30.0
    long = KeyValueConfig(bucket="B", ttl=timedelta(hours=1)).stream_config()
    assert (long.duplicate_window, long.max_age) == (120.0, 3600.0)


def test_limit_markers_compression_and_metadata():
    """limit_marker_ttl sets allow_msg_ttl and subject_delete_marker_ttl (ADR-48)."""
    s = KeyValueConfig(
        bucket="B", limit_marker_ttl=5, compression=True, metadata={"k": "v"}, history=64
    ).stream_config()
    assert s.allow_msg_ttl and s.subject_delete_marker_ttl == 5.0
    assert s.compression.value == "s2" and s.metadata == {"k": "v"}
    assert s.max_msgs_per_subject == 64


def test_mirror_gets_kv_prefix_and_mirror_direct():
    """ADR-57: a mirror names the origin's KV_ stream, sets mirror_direct and has no subjects."""
    s = KeyValueConfig(bucket="M", mirror=StreamSource(name="ORIG")).stream_config()
    assert s.mirror.name == "KV_ORIG" and s.mirror_direct and not s.subjects


def test_sources_get_transforms_unless_given():
    """ADR-57: a bucket source is mapped onto this bucket's keys; explicit transforms stay."""
    own = SubjectTransform(src="events.>", dest="$KV.AGG.>")
    s = KeyValueConfig(
        bucket="AGG",
        sources=[
            StreamSource(name="A"),
            StreamSource(name="KV_B", filter_subject="NEW.>"),
            StreamSource(name="EVENTS", subject_transforms=[own]),
        ],
    ).stream_config()
    a, b, events = s.sources
    assert a.name == "KV_A" and a.subject_transforms[0].src == "$KV.A.>"
    assert a.subject_transforms[0].dest == "$KV.AGG.>"
    assert b.name == "KV_B" and b.filter_subject is None
    assert b.subject_transforms[0].src == "$KV.B.NEW.>"
    assert b.subject_transforms[0].dest == "$KV.AGG.NEW.>"  # the keys keep their names
    assert events.name == "EVENTS" and events.subject_transforms == (own,)
    assert s.subjects == ("$KV.AGG.>",)


def test_external_source_of_the_same_bucket_keeps_its_subjects():
    """A same-named bucket in another domain is sourced without a transform (nats.go)."""
    src = StreamSource(name="B", external=ExternalStream(api="$JS.HUB.API"))
    (out,) = KeyValueConfig(bucket="B", sources=[src]).stream_config().sources
    assert out.name == "KV_B" and not out.subject_transforms


def test_mirror_and_sources_together_are_refused():
    """A bucket mirrors or sources, not both."""
    with pytest.raises(ValueError, match="mirror"):
        KeyValueConfig(bucket="B", mirror=StreamSource(name="A"), sources=[StreamSource(name="C")])


def test_round_trip_through_the_stream_config():
    """from_stream gives back the settings a bucket was made with."""
    cfg = KeyValueConfig(
        bucket="B", description="d", history=3, ttl=60, max_bytes=1000, max_value_size=100,
        compression=True, limit_marker_ttl=2, metadata={"a": "b"}, storage="memory",
    )  # fmt: skip
    assert KeyValueConfig.from_stream(cfg.stream_config()) == cfg


def test_errors_and_configs_pickle():
    """Configs and the KV errors survive pickling (Spark ships them)."""
    cfg = KeyValueConfig(bucket="B", history=2)
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    err = js.BucketNotFoundError(404, 10059, "bucket 'B' not found")
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, js.StreamNotFoundError) and back.err_code == 10059
    wrong = pickle.loads(pickle.dumps(js.KeyExistsError(400, 10071, "wrong last sequence: 3")))
    assert isinstance(wrong, js.WrongLastSequenceError) and isinstance(wrong, js.KeyValueError)
    marker = js.KeyValueEntry(
        bucket="B", key="k", value=b"", revision=3, created_ns=1, operation=js.KeyValueOp.DEL
    )
    deleted = pickle.loads(pickle.dumps(js.KeyDeletedError("deleted", marker)))
    assert deleted.entry == marker and isinstance(deleted, js.KeyNotFoundError)
    assert marker.created.year == 1970 and marker.created.nanosecond == 1


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-22T18:06:01.123456789Z",
        "2026-11-22T18:06:01Z",
        "2026-11-22T18:06:01.1Z",
        "1970-01-01T00:00:00.000000001Z",
        "2026-11-22T18:06:01.123+01:00",
    ],
)
def test_server_timestamps_to_ns(text):
    """The get path's timestamp reader agrees with the full RFC 3339 parser."""
    from jetstream_sync._timefmt import datetime_to_ns, parse_rfc3339
    from jetstream_sync.kv.entry import rfc3339_ns

    assert rfc3339_ns(text) == datetime_to_ns(parse_rfc3339(text))


def test_delivered_entries_equal_constructed_ones():
    """The watch's fast entry builder gives the same entry as the constructor."""
    from jetstream_sync.kv.entry import entry_from_delivered
    from jetstream_sync.msg import Msg

    reply = "$JS.ACK.KV_B.c_1.1.42.7.1763834400123456789.3"
    got = entry_from_delivered("B", len("$KV.B."), Msg("$KV.B.a.b", reply, b"v"))
    want = js.KeyValueEntry(bucket="B", key="a.b", value=b"v", revision=42,
                            created_ns=1763834400123456789, delta=3)  # fmt: skip
    assert got == want and hash(got) == hash(want) and repr(got) == repr(want)
    assert pickle.loads(pickle.dumps(got)) == want
    v2 = "$JS.ACK.HUB.ACCHASH.KV_B.c_1.1.42.7.1763834400123456789.3.rnd"
    assert entry_from_delivered("B", 6, Msg("$KV.B.a.b", v2, b"v")) == want
