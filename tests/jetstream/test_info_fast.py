"""The compiled from_api of every wire class equals the field-by-field reading of its specs.

Each class's ``from_api`` is generated from its field specs (``_codec.compile_decoder``).
The reference here reads the same specs one field at a time, as the generic decoder
did before; real server replies and Hypothesis-made ones must decode the same.
"""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jetstream_sync as js
from jetstream_sync._timefmt import (
    GO_ZERO_TIME,
)
from jetstream_sync.jetstream._codec import (
    DUR,
    DURS,
    ENUM,
    OBJ,
    OBJMAP,
    OBJS,
    PLAIN,
    SEQ,
    TIME,
    Wire,
)
from jetstream_sync.jetstream.consumer_config import ConsumerConfig
from jetstream_sync.jetstream.info import (
    AccountInfo,
    AccountLimits,
    AccountTier,
    APIStats,
    ClusterInfo,
    ConsumerInfo,
    PeerInfo,
    SequenceInfo,
    StreamInfo,
    StreamState,
)
from jetstream_sync.jetstream.stream_config import StreamConfig
from tests.fixtures.wire_reference import assert_same, reference_from_api

# The classes whose from_api was once written out by hand (they must stay covered).
ONCE_HAND_WRITTEN = (
    StreamInfo, StreamConfig, StreamState, ClusterInfo, PeerInfo, ConsumerInfo, ConsumerConfig,
    SequenceInfo, AccountInfo, AccountLimits, APIStats, AccountTier,
)  # fmt: skip


def _compiled(cls: type) -> bool:
    """Whether ``cls.from_api`` is its decoder compiled from the specs."""
    return cls.from_api.__func__.__code__.co_filename.startswith("<from_api of")


def _own_format(cls: type) -> bool:
    """A class with a from_api of its own (another wire format, e.g. RawStreamMsg)."""
    own = vars(cls).get("from_api")
    return own is not None and not _compiled(cls)


def _wire_classes(base: type = Wire) -> set[type]:
    out = set()
    for sub in base.__subclasses__():
        if attrs.has(sub):
            out.add(sub)
        out |= _wire_classes(sub)
    return out


# Every class decoded from its specs, in every module that defines one.
WIRE_CLASSES = sorted(
    (c for c in _wire_classes() if not _own_format(c)),
    key=lambda c: f"{c.__module__}.{c.__qualname__}",
)


# ---------------------------------------------------------------------- Hypothesis

_TIMES = st.one_of(
    st.just(GO_ZERO_TIME),
    st.builds(
        lambda s, ns: (
            datetime.datetime.fromtimestamp(s, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
            + f".{ns:09d}Z"
        ),
        st.integers(0, 4102444800),
        st.integers(0, 10**9 - 1),
    ),
)
_PLAIN = st.one_of(st.integers(-(2**63), 2**64 - 1), st.text(max_size=8), st.booleans())
_NS = st.integers(-1, 2**52)


def _value(spec: Any) -> st.SearchStrategy[Any]:
    kind = spec.kind
    if kind == PLAIN:
        return _PLAIN
    if kind == SEQ:
        return st.lists(_PLAIN, max_size=3)
    if kind == DUR:
        return _NS
    if kind == DURS:
        return st.lists(_NS, max_size=3)
    if kind == TIME:
        return _TIMES
    if kind == ENUM:
        return st.sampled_from([m.value for m in spec.cls] + ["not-a-member", 7])
    if kind == OBJ:
        return st.deferred(lambda: wire_dicts(spec.cls))
    if kind == OBJS:
        return st.lists(st.deferred(lambda: wire_dicts(spec.cls)), max_size=2)
    if kind == OBJMAP:
        return st.dictionaries(st.text(max_size=4), st.deferred(lambda: wire_dicts(spec.cls)),
                               max_size=2)  # fmt: skip
    return st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3)


def wire_dicts(cls: type) -> st.SearchStrategy[dict[str, Any]]:
    """Wire JSON for ``cls``: each key absent, null, its none_wire or a value; unknown keys."""
    optional = {}
    for a in attrs.fields(cls):
        spec = a.metadata.get("wire")
        if spec is None:
            continue
        choices = [st.none(), _value(spec)]
        if spec.none_wire is not _NONE_WIRE_UNSET:
            choices.append(st.just(spec.none_wire))
        optional[spec.wire] = st.one_of(*choices)
    unknown = st.dictionaries(st.sampled_from(["zz_new", "type", "total", "offset"]), _PLAIN,
                              max_size=2)  # fmt: skip
    return st.builds(lambda known, more: {**more, **known},
                     st.fixed_dictionaries({}, optional=optional), unknown)  # fmt: skip


_NONE_WIRE_UNSET = attrs.fields_dict(js.jetstream.info.PeerInfo)["name"].metadata["wire"].none_wire


@pytest.mark.parametrize("cls", WIRE_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_compiled_decoder_equals_the_reference(cls: type, data: st.DataObject) -> None:
    """For every wire class, any wire JSON decodes the same compiled as field by field."""
    d = data.draw(wire_dicts(cls))
    try:
        expected = reference_from_api(cls, d)
    except TypeError:  # a required key missing: both refuse (a lazy part when first read)
        with pytest.raises(TypeError):
            repr(cls.from_api(d))  # repr reads every field, nested ones too
        return
    assert expected == cls.from_api(d)
    assert_same(cls, d)


def test_every_once_hand_written_class_is_covered() -> None:
    """The twelve classes that had a hand-written from_api are decoded from their specs."""
    assert set(ONCE_HAND_WRITTEN) <= set(WIRE_CLASSES)
    assert len(WIRE_CLASSES) > len(ONCE_HAND_WRITTEN)
    for cls in ONCE_HAND_WRITTEN:
        cls.from_api({})
        assert _compiled(cls), cls


# ---------------------------------------------------------------------- real replies


def api(nc: js.Client, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JetStream API request; the decoded reply (an error fails the test)."""
    reply = json.loads(nc.request(subject, json.dumps(body or {}).encode(), timeout=10).data)
    assert "error" not in reply, (subject, reply["error"])
    return reply


FULL_STREAM = {
    "name": "FULL", "subjects": ["full.>"], "description": "every field",
    "metadata": {"owner": "tests"}, "max_consumers": 50, "max_msgs": 1000,
    "max_bytes": 1 << 20, "max_age": 3600 * 10**9, "max_msgs_per_subject": 10,
    "max_msg_size": 1024, "discard": "new", "discard_new_per_subject": True,
    "storage": "file", "num_replicas": 1, "duplicate_window": 60 * 10**9,
    "compression": "s2", "allow_direct": True, "allow_rollup_hdrs": True,
    "deny_delete": False, "deny_purge": False,
    "republish": {"src": "full.>", "dest": "rep.>", "headers_only": True},
    "consumer_limits": {"inactive_threshold": 600 * 10**9, "max_ack_pending": 100},
    "allow_msg_ttl": True, "subject_delete_marker_ttl": 5 * 10**9, "first_seq": 1,
}  # fmt: skip

CONSUMERS = [
    {  # pull, with every pull field
        "durable_name": "PULL",
        "description": "a pull consumer",
        "deliver_policy": "by_start_sequence",
        "opt_start_seq": 2,
        "ack_policy": "explicit",
        "backoff": [10**9, 2 * 10**9],
        "max_deliver": 5,
        "filter_subjects": ["full.a", "full.b"],
        "replay_policy": "instant",
        "sample_freq": "50%",
        "max_waiting": 100,
        "max_ack_pending": 50,
        "headers_only": True,
        "max_batch": 10,
        "max_expires": 30 * 10**9,
        "max_bytes": 4096,
        "inactive_threshold": 300 * 10**9,
        "num_replicas": 1,
        "mem_storage": True,
        "metadata": {"team": "a"},
        "pause_until": "2099-01-02T03:04:05.123456789Z",
        "priority_groups": ["g1"],
        "priority_policy": "pinned_client",
        "priority_timeout": 60 * 10**9,
    },
    {  # push, with every push field
        "durable_name": "PUSH",
        "deliver_subject": "push.here",
        "deliver_policy": "by_start_time",
        "opt_start_time": "2020-05-06T07:08:09.987654321Z",
        "ack_policy": "explicit",
        "ack_wait": 45 * 10**9,
        "filter_subject": "full.>",
        "replay_policy": "original",
        "rate_limit_bps": 1 << 20,
        "flow_control": True,
        "idle_heartbeat": 5 * 10**9,
        "headers_only": False,
    },
    {  # push to a queue group
        "durable_name": "GROUP",
        "deliver_subject": "group.here",
        "deliver_group": "workers",
        "deliver_policy": "last_per_subject",
        "filter_subject": "full.*",
        "ack_policy": "all",
    },
    {"name": "PLAIN", "ack_policy": "explicit", "deliver_policy": "all"},  # a name, no durable_name
]


@pytest.fixture(scope="module")
def replies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Real server replies: streams (full, mirror, sourced), consumers, account info."""
    from tests.fixtures.server import NatsServer

    server = NatsServer(directory=tmp_path_factory.mktemp("info-fast")).start()
    out: dict[str, Any] = {}
    try:
        with js.connect(server.url) as nc:
            api(nc, "$JS.API.STREAM.CREATE.FULL", FULL_STREAM)
            ctx = nc.jetstream()
            for i, subject in enumerate(["full.a", "full.b", "full.c", "full.a", "full.b"]):
                ctx.publish(subject, b"x%d" % i)
            api(nc, "$JS.API.STREAM.MSG.DELETE.FULL", {"seq": 2, "no_erase": True})
            api(nc, "$JS.API.STREAM.CREATE.MIRROR", {
                "name": "MIRROR", "storage": "memory",
                "mirror": {"name": "FULL", "opt_start_seq": 1, "filter_subject": "full.a"},
            })  # fmt: skip
            api(nc, "$JS.API.STREAM.CREATE.OTHER", {"name": "OTHER", "subjects": ["other.>"]})
            api(nc, "$JS.API.STREAM.CREATE.SOURCED", {
                "name": "SOURCED", "subjects": ["own.>"], "retention": "limits",
                "sources": [
                    {"name": "FULL", "subject_transforms": [{"src": "full.a", "dest": "x.a"}]},
                    {"name": "OTHER", "opt_start_time": "2021-01-01T00:00:00.000000001Z"},
                ],
                "placement": {"tags": []},
            })  # fmt: skip
            out["streams"] = [
                api(nc, "$JS.API.STREAM.INFO.FULL", {"subjects_filter": ">",
                                                     "deleted_details": True}),
                api(nc, "$JS.API.STREAM.INFO.FULL"),
                api(nc, "$JS.API.STREAM.INFO.MIRROR"),
                api(nc, "$JS.API.STREAM.INFO.SOURCED"),
            ]  # fmt: skip
            out["created"] = []
            for config in CONSUMERS:
                name = config.get("durable_name") or config["name"]
                body = {"stream_name": "FULL", "config": config}
                out["created"].append(api(nc, f"$JS.API.CONSUMER.CREATE.FULL.{name}", body))
            pull = ctx.consumer("FULL", "PLAIN")
            assert len(pull.fetch(2, timeout=5)) == 2  # delivered, not acked: pending state
            out["consumers"] = [
                api(nc, f"$JS.API.CONSUMER.INFO.FULL.{c.get('durable_name') or c['name']}")
                for c in CONSUMERS
            ]
            out["account"] = api(nc, "$JS.API.INFO")
        yield out
    finally:
        server.stop()


def test_stream_infos_decode_the_same(replies: dict[str, Any]) -> None:
    """Stream infos (limits, deleted details, subjects, mirror, sources) decode the same."""
    for d in replies["streams"]:
        assert_same(StreamInfo, d)
    full = StreamInfo.from_api(replies["streams"][0])
    assert full.state.deleted == (2,) and full.state.subjects == {"full.a": 2, "full.b": 1,
                                                                    "full.c": 1}  # fmt: skip
    assert full.config.republish.dest == "rep.>" and full.config.max_age == 3600.0
    assert StreamInfo.from_api(replies["streams"][2]).mirror.name == "FULL"
    assert len(StreamInfo.from_api(replies["streams"][3]).sources) == 2


def test_consumer_infos_decode_the_same(replies: dict[str, Any]) -> None:
    """Consumer infos with every config field (pull, push, group, pending) decode the same."""
    for d in replies["created"] + replies["consumers"]:
        assert_same(ConsumerInfo, d)
    pull = ConsumerInfo.from_api(replies["consumers"][0])
    assert pull.config.backoff == (1.0, 2.0)
    assert pull.config.pause_until.rfc3339() == "2099-01-02T03:04:05.123456789Z"
    plain = ConsumerInfo.from_api(replies["consumers"][3])
    assert plain.num_ack_pending == 2 and plain.delivered.last_active is not None


def test_account_info_decodes_the_same(replies: dict[str, Any]) -> None:
    """Account info decodes the same, also in the tiered shape (tiers come from JWTs only)."""
    d = replies["account"]
    assert_same(AccountInfo, d)
    tiered = {k: v for k, v in d.items() if k != "limits"}
    usage = ("memory", "storage", "reserved_memory", "reserved_storage", "streams", "consumers")
    tier = {k: d[k] for k in usage if k in d} | {"limits": d["limits"]}
    tiered["tiers"] = {"R1": tier, "R3": {**tier, "streams": 0, "future_key": 1}}
    assert_same(AccountInfo, tiered)
    assert AccountInfo.from_api(tiered).tiers["R3"].extra == {"future_key": 1}


def test_unknown_keys_nulls_and_values_decode_the_same(replies: dict[str, Any]) -> None:
    """Unknown keys and enum values go to extra, nulls read as defaults, as generically."""
    d = copy.deepcopy(replies["streams"][0])
    d["future"] = {"a": 1}
    d["config"]["retention"] = "someday"  # an enum value this client lacks: kept in extra
    d["config"]["max_msgs"] = None
    d["state"]["messages"] = None
    d["cluster"]["new_field"] = [1]
    assert_same(StreamInfo, d)
    info = StreamInfo.from_api(d)
    assert info.extra == {"future": {"a": 1}} and info.config.extra == {"retention": "someday"}
    assert info.config.retention is None and info.state.messages == 0
    c = copy.deepcopy(replies["consumers"][1])
    del c["config"]["ack_policy"]  # absent: None (the server's NONE)
    c["config"]["priority_policy"] = "newer"
    assert_same(ConsumerInfo, c)
    assert ConsumerInfo.from_api(c).config.ack_policy is None
    c["config"]["ack_policy"] = None  # null: the default
    assert_same(ConsumerInfo, c)
    with pytest.raises(TypeError):
        StreamInfo.from_api([])  # type: ignore[arg-type]


@pytest.mark.cluster
def test_clustered_infos_decode_the_same(cluster) -> None:
    """A replicated stream's and consumer's cluster info (leader, replicas) decode the same."""
    with js.connect(cluster.urls) as nc:
        api(nc, "$JS.API.STREAM.CREATE.REPL", {"name": "REPL", "subjects": ["repl.>"],
                                                "num_replicas": 3})  # fmt: skip
        try:
            body = {"stream_name": "REPL", "config": {"durable_name": "C", "ack_policy": "none"}}
            api(nc, "$JS.API.CONSUMER.CREATE.REPL.C", body)
            stream = api(nc, "$JS.API.STREAM.INFO.REPL")
            consumer = api(nc, "$JS.API.CONSUMER.INFO.REPL.C")
            assert_same(StreamInfo, stream)
            assert_same(ConsumerInfo, consumer)
            assert StreamInfo.from_api(stream).cluster.leader
        finally:
            api(nc, "$JS.API.STREAM.DELETE.REPL")
