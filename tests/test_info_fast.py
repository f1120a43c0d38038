"""The hand-written from_api of stream, consumer and account info equals the generic decoder's."""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

import jetstream_sync as js
from jetstream_sync.jetstream._codec import OBJ, OBJMAP, OBJS, Wire
from jetstream_sync.jetstream._timefmt import NanoDatetime
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

HAND_WRITTEN = (
    StreamInfo, StreamConfig, StreamState, ClusterInfo, PeerInfo, ConsumerInfo, ConsumerConfig,
    SequenceInfo, AccountInfo, AccountLimits, APIStats, AccountTier,
)  # fmt: skip
generic_from_api = Wire.from_api.__func__  # the reference: what every other class uses


def assert_same(cls: type, d: dict[str, Any]) -> int:
    """``cls.from_api(d)`` equals the generic decoder's result, field by field, nested too.

    Returns how many hand-written decoders were compared (the nested ones included).
    """
    fast, ref = cls.from_api(d), generic_from_api(cls, d)
    assert fast == ref
    assert fast.to_api() == ref.to_api()  # nanoseconds, _nats.* metadata and extra included
    for a in attrs.fields(cls):
        mine, theirs = getattr(fast, a.name), getattr(ref, a.name)
        assert type(mine) is type(theirs), a.name
        if isinstance(mine, datetime.datetime):
            assert (mine.rfc3339(), type(mine)) == (theirs.rfc3339(), NanoDatetime), a.name
        if mine is not None and a.name == "extra":
            assert mine == theirs
    compared = 1
    for a in attrs.fields(cls):
        spec = a.metadata.get("wire")
        value = d.get(spec.wire) if spec is not None else None
        if value is None or spec.cls not in HAND_WRITTEN:
            continue
        if spec.kind == OBJ:
            compared += assert_same(spec.cls, value)
        elif spec.kind == OBJS:
            compared += sum(assert_same(spec.cls, v) for v in value)
        elif spec.kind == OBJMAP:
            compared += sum(assert_same(spec.cls, v) for v in value.values())
    return compared


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
    compared = sum(assert_same(StreamInfo, d) for d in replies["streams"])
    full = StreamInfo.from_api(replies["streams"][0])
    assert full.state.deleted == (2,) and full.state.subjects == {"full.a": 2, "full.b": 1,
                                                                    "full.c": 1}  # fmt: skip
    assert full.config.republish.dest == "rep.>" and full.config.max_age == 3600.0
    assert StreamInfo.from_api(replies["streams"][2]).mirror.name == "FULL"
    assert len(StreamInfo.from_api(replies["streams"][3]).sources) == 2
    assert compared >= 4 * 3  # each info, its config and state (and cluster) were compared


def test_consumer_infos_decode_the_same(replies: dict[str, Any]) -> None:
    """Consumer infos with every config field (pull, push, group, pending) decode the same."""
    for d in replies["created"] + replies["consumers"]:
        assert assert_same(ConsumerInfo, d) >= 4  # info, config, delivered, ack_floor
    pull = ConsumerInfo.from_api(replies["consumers"][0])
    assert pull.config.backoff == (1.0, 2.0)
    assert pull.config.pause_until.rfc3339() == "2099-01-02T03:04:05.123456789Z"
    plain = ConsumerInfo.from_api(replies["consumers"][3])
    assert plain.num_ack_pending == 2 and plain.delivered.last_active is not None


def test_account_info_decodes_the_same(replies: dict[str, Any]) -> None:
    """Account info decodes the same, also in the tiered shape (tiers come from JWTs only)."""
    d = replies["account"]
    assert assert_same(AccountInfo, d) >= 3  # info, limits, api
    tiered = {k: v for k, v in d.items() if k != "limits"}
    usage = ("memory", "storage", "reserved_memory", "reserved_storage", "streams", "consumers")
    tier = {k: d[k] for k in usage if k in d} | {"limits": d["limits"]}
    tiered["tiers"] = {"R1": tier, "R3": {**tier, "streams": 0, "future_key": 1}}
    assert assert_same(AccountInfo, tiered) == 1 + 1 + 2 * 2  # info, api, two tiers + limits
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
            assert assert_same(StreamInfo, stream) >= 5  # + cluster and its replicas
            assert assert_same(ConsumerInfo, consumer) >= 5
            assert StreamInfo.from_api(stream).cluster.leader
        finally:
            api(nc, "$JS.API.STREAM.DELETE.REPL")
