"""Infos decode their nested parts on first read, to the values the eager decoder gave.

Every reply here is a real server's (one server, the 3-node cluster, streams and
consumers made by nats-py); each must decode field by field as the reference (the
specs read one at a time, as before) does, and the lazy parts must decode once.
"""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import nats
import pytest

import jetstream_sync as js
from jetstream_sync.errors import KeyDeletedError
from jetstream_sync.jetstream._codec import PENDING, LazyField
from jetstream_sync.jetstream.consumer_config import ConsumerConfig
from jetstream_sync.jetstream.info import ConsumerInfo, StreamInfo, StreamState
from jetstream_sync.jetstream.stream_config import StreamConfig
from jetstream_sync.kv.entry import entry_from_stored
from tests.fixtures.wire_reference import assert_same, reference_from_api

EVERY = {
    "name": "EVERY", "subjects": ["every.>"], "description": "every option",
    "metadata": {"owner": "tests"}, "max_consumers": 50, "max_msgs": 1000,
    "max_bytes": 1 << 20, "max_age": 3600 * 10**9, "max_msgs_per_subject": 10,
    "max_msg_size": 1024, "discard": "new", "discard_new_per_subject": True,
    "storage": "file", "num_replicas": 1, "duplicate_window": 60 * 10**9,
    "compression": "s2", "allow_direct": True, "allow_rollup_hdrs": True,
    "republish": {"src": "every.>", "dest": "rep.>", "headers_only": True},
    "subject_transform": {"src": "every.>", "dest": "moved.every.>"},
    "consumer_limits": {"inactive_threshold": 600 * 10**9, "max_ack_pending": 100},
    "allow_msg_ttl": True, "subject_delete_marker_ttl": 5 * 10**9, "first_seq": 7,
    "allow_batched": True, "persist_mode": "async",
}  # fmt: skip

STREAMS = [
    EVERY,
    {"name": "ATOMIC", "subjects": ["atomic.>"], "allow_atomic": True},
    {"name": "COUNT", "subjects": ["count.>"], "allow_msg_counter": True, "allow_direct": True},
    {"name": "SCHED", "subjects": ["sched.>"], "allow_msg_schedules": True, "allow_msg_ttl": True},
    {"name": "MIRROR", "storage": "memory", "mirror_direct": True, "mirror": {
        "name": "EVERY", "subject_transforms": [{"src": "moved.every.a", "dest": "m.a"}]}},
    {"name": "SOURCED", "subjects": ["own.>"], "placement": {"tags": ["a"]}, "sources": [
        {"name": "EVERY", "opt_start_seq": 1, "filter_subject": "moved.every.b"},
        {"name": "FAR", "external": {"api": "$JS.far.API", "deliver": "far.dlv"},
         "opt_start_time": "2021-01-01T00:00:00.000000001Z"}]},
]  # fmt: skip

CONSUMERS = [
    {  # pull: priority groups (pinned), paused, backoff, filter subjects
        "durable_name": "PINNED", "deliver_policy": "by_start_sequence", "opt_start_seq": 7,
        "ack_policy": "explicit", "backoff": [10**9, 2 * 10**9], "max_deliver": 5,
        "filter_subjects": ["moved.every.a", "moved.every.b"], "max_waiting": 100,
        "max_ack_pending": 50, "max_batch": 10, "max_expires": 30 * 10**9, "max_bytes": 4096,
        "metadata": {"team": "a"}, "priority_groups": ["g1"],
        "priority_policy": "pinned_client", "priority_timeout": 60 * 10**9,
    },
    {  # pull, paused until far away
        "durable_name": "PAUSED", "ack_policy": "explicit", "description": "paused",
        "pause_until": "2099-01-02T03:04:05.123456789Z", "headers_only": True,
        "inactive_threshold": 300 * 10**9, "num_replicas": 1, "mem_storage": True,
        "sample_freq": "50%", "replay_policy": "instant",
    },
    {  # pull, overflow groups
        "name": "OVERFLOW", "ack_policy": "all", "priority_groups": ["a", "b"],
        "priority_policy": "overflow", "filter_subject": "moved.every.>",
    },
    {  # push, every push field
        "durable_name": "PUSH", "deliver_subject": "push.here", "deliver_group": "workers",
        "deliver_policy": "by_start_time", "opt_start_time": "2020-05-06T07:08:09.987654321Z",
        "ack_policy": "explicit", "ack_wait": 45 * 10**9, "replay_policy": "original",
        "rate_limit_bps": 1 << 20, "flow_control": True, "idle_heartbeat": 5 * 10**9,
    },
]  # fmt: skip


def api(nc: js.Client, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JetStream API request; the decoded reply (an error fails the test)."""
    reply = json.loads(nc.request(subject, json.dumps(body or {}).encode(), timeout=10).data)
    assert "error" not in reply, (subject, reply["error"])
    return reply


def assert_decodes_as_before(cls: type, reply: dict[str, Any]) -> None:
    """The lazy decoder's result equals the reference's, field by field, repr and JSON too."""
    assert_same(cls, copy.deepcopy(reply))
    fresh = cls.from_api(copy.deepcopy(reply))
    ref = reference_from_api(cls, copy.deepcopy(reply))
    assert repr(fresh) == repr(ref)
    for a in attrs.fields(cls):  # each lazy part alone, on an info nothing else was read from
        alone = cls.from_api(copy.deepcopy(reply))
        assert getattr(alone, a.name) == getattr(ref, a.name), a.name
    assert cls.from_api(fresh.to_api()) == ref  # the round trip


@pytest.fixture(scope="module")
def replies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Stream infos of every kind of stream, consumer infos of every option, in every state."""
    from tests.fixtures.server import NatsServer

    server = NatsServer(directory=tmp_path_factory.mktemp("info-lazy")).start()
    try:
        with js.connect(server.url) as nc:
            for body in STREAMS:
                api(nc, f"$JS.API.STREAM.CREATE.{body['name']}", body)
            ctx = nc.jetstream()
            for subject in ("every.a", "every.b", "every.a", "every.c"):
                ctx.publish(subject, b"x")
            ctx.publish("count.a", b"", headers={"Nats-Incr": "+2"})
            api(nc, "$JS.API.STREAM.MSG.DELETE.EVERY", {"seq": 8, "no_erase": True})
            for config in CONSUMERS:
                name = config.get("durable_name") or config["name"]
                api(nc, f"$JS.API.CONSUMER.CREATE.EVERY.{name}",
                    {"stream_name": "EVERY", "config": config})  # fmt: skip
            pinned = ctx.consumer("EVERY", "PINNED")
            assert len(pinned.fetch(1, timeout=5, group="g1")) == 1  # pins this client
            out = {
                "streams": [api(nc, f"$JS.API.STREAM.INFO.{b['name']}") for b in STREAMS],
                "details": api(nc, "$JS.API.STREAM.INFO.EVERY",
                               {"subjects_filter": ">", "deleted_details": True}),
                "consumers": [
                    api(nc, f"$JS.API.CONSUMER.INFO.EVERY.{c.get('durable_name') or c['name']}")
                    for c in CONSUMERS
                ],
                "public": ctx.stream("EVERY").info(),
            }  # fmt: skip
        yield out
    finally:
        server.stop()


def test_every_kind_of_stream_info_decodes_as_before(replies: dict[str, Any]) -> None:
    """Every config option, mirror, sources, transforms, counters, schedules: as before."""
    for reply in replies["streams"]:
        assert_decodes_as_before(StreamInfo, reply)
    every, *_, mirror, sourced = (StreamInfo.from_api(r) for r in replies["streams"])
    assert every.config.republish.dest == "rep.>" and every.config.first_seq == 7
    assert every.config.subject_transform.dest == "moved.every.>"
    assert every.config.persist_mode.value == "async" and every.config.allow_batched
    assert mirror.mirror.name == "EVERY"
    assert mirror.config.mirror.subject_transforms[0].dest == "m.a"
    # the server lists the states of a stream's sources in no fixed order
    assert sorted(s.name for s in sourced.sources) == ["EVERY", "FAR"]
    assert sourced.config.sources[1].external.api == "$JS.far.API"
    assert sourced.config.placement.tags == ("a",)


def test_per_subject_counts_and_deleted_sequences_decode_as_before(
    replies: dict[str, Any],
) -> None:
    """The state's per-subject map and deleted sequences (asked for) are read on first access."""
    reply = replies["details"]
    assert_decodes_as_before(StreamInfo, reply)
    state = StreamInfo.from_api(reply).state
    assert {"subjects", "deleted", "first_ts", "last_ts"} <= set(vars(state)[PENDING])
    assert state.subjects == {"moved.every.a": 2, "moved.every.c": 1}  # 8 (b) deleted
    assert state.deleted == (8,)


def test_every_consumer_option_and_state_decodes_as_before(replies: dict[str, Any]) -> None:
    """Pinned groups, pause, backoff, filters, overflow, push: consumer infos decode as before."""
    for reply in replies["consumers"]:
        assert_decodes_as_before(ConsumerInfo, reply)
    pinned, paused, overflow, push = (ConsumerInfo.from_api(r) for r in replies["consumers"])
    group = pinned.priority_groups[0]
    assert group.group == "g1" and group.pinned_client_id and group.pinned_ts is not None
    assert pinned.config.backoff == (1.0, 2.0) and pinned.num_ack_pending == 1
    assert pinned.config.filter_subjects == ("moved.every.a", "moved.every.b")
    assert paused.paused and paused.pause_remaining > 0
    assert paused.config.pause_until.rfc3339() == "2099-01-02T03:04:05.123456789Z"
    assert overflow.config.priority_groups == ("a", "b")
    assert push.config.deliver_group == "workers" and push.config.flow_control


def test_the_public_call_gives_the_same_info(replies: dict[str, Any]) -> None:
    """Stream.info() (the lazy decode of a reply just received) equals the reference."""
    info = replies["public"]
    ref = reference_from_api(StreamInfo, info.to_api())
    assert info == ref and repr(info) == repr(ref)


def test_fields_unknown_to_this_client_are_kept_as_before(replies: dict[str, Any]) -> None:
    """Future keys, at the top and inside every lazy part, land in the same extra as before."""
    stream = copy.deepcopy(replies["streams"][-1])  # SOURCED: sources and external too
    stream["future"] = {"a": [1]}
    stream["config"]["new_limit"] = 5
    stream["config"]["sources"][1]["external"]["hop"] = "x"
    stream["state"]["new_count"] = 3
    stream["cluster"]["raft_new"] = True
    stream["sources"][0]["new_lag"] = 1
    assert_decodes_as_before(StreamInfo, stream)
    info = StreamInfo.from_api(copy.deepcopy(stream))
    assert info.extra == {"future": {"a": [1]}} and info.config.extra == {"new_limit": 5}
    assert info.config.sources[1].external.extra == {"hop": "x"}
    assert info.state.extra == {"new_count": 3} and info.cluster.extra == {"raft_new": True}
    assert info.sources[0].extra == {"new_lag": 1}
    assert info.to_api()["config"]["new_limit"] == 5  # sent back unchanged
    consumer = copy.deepcopy(replies["consumers"][0])
    consumer["config"]["new_option"] = "y"
    consumer["delivered"]["new_seq"] = 9
    consumer["priority_groups"][0]["new_state"] = "z"
    assert_decodes_as_before(ConsumerInfo, consumer)
    cinfo = ConsumerInfo.from_api(consumer)
    assert cinfo.config.extra == {"new_option": "y"} and cinfo.delivered.extra == {"new_seq": 9}
    assert cinfo.priority_groups[0].extra == {"new_state": "z"}


def test_lazy_parts_decode_once(replies: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A lazy part is decoded on its first read only; later reads return the same object."""
    reply = replies["streams"][0]
    StreamInfo.from_api(reply)  # compiled, descriptors installed
    field = vars(StreamInfo)["config"]
    assert isinstance(field, LazyField)
    calls = []
    decode = field.decode
    monkeypatch.setattr(field, "decode", lambda raw: calls.append(raw) or decode(raw))
    info = StreamInfo.from_api(reply)
    assert "config" not in vars(info) and calls == []  # nothing decoded yet
    first = info.config
    assert calls == [reply["config"]] and isinstance(first, StreamConfig)
    assert info.config is first and info.config is first
    assert len(calls) == 1 and vars(info)["config"] is first
    assert "config" not in vars(info)[PENDING]


def test_info_calls_leave_the_parts_nobody_read_undecoded(
    js: js.JetStreamContext, stream: Any, stream_name: str
) -> None:
    """Stream.info() and Consumer.info() decode the counters; config, cluster, ts wait."""
    js.publish(f"{stream_name}.a", b"x")
    info = stream.info()
    assert {"config", "cluster", "created", "ts"} <= set(vars(info)[PENDING])
    assert info.state.messages == 1 and {"first_ts", "last_ts"} <= set(vars(info.state)[PENDING])
    assert info.config.name == stream_name and "config" not in vars(info)[PENDING]
    consumer = js.create_consumer(stream_name, durable_name="LAZYC")
    cinfo = consumer.info()
    assert {"config", "delivered", "ack_floor", "ts"} <= set(vars(cinfo)[PENDING])
    assert cinfo.num_pending == 1 and cinfo.config.durable_name == "LAZYC"


def test_racing_first_reads_get_one_object(replies: dict[str, Any]) -> None:
    """Threads reading a lazy part at once all get the same object."""
    for _ in range(20):
        info = ConsumerInfo.from_api(replies["consumers"][0])
        barrier = threading.Barrier(8)
        seen: list[ConsumerConfig] = []

        def read(info: ConsumerInfo = info, barrier: threading.Barrier = barrier) -> None:
            barrier.wait(timeout=10)
            seen.append(info.config)  # noqa: B023

        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        assert len(seen) == 8 and all(c is info.config for c in seen)


def test_undecoded_infos_copy_and_pickle_whole(replies: dict[str, Any]) -> None:
    """copy, deepcopy and pickle of an info nothing was read from carry decoded, equal parts."""
    reply = replies["consumers"][0]
    expected = reference_from_api(ConsumerInfo, reply)
    for clone in (
        copy.copy(ConsumerInfo.from_api(reply)),
        copy.deepcopy(ConsumerInfo.from_api(reply)),
        pickle.loads(pickle.dumps(ConsumerInfo.from_api(reply))),
    ):
        assert PENDING not in vars(clone)
        assert clone == expected and repr(clone) == repr(expected)
    original = StreamInfo.from_api(replies["streams"][0])
    twin = copy.copy(original)
    assert twin.config == original.config  # neither read first: both still decode
    assert hash(StreamInfo.from_api(replies["streams"][0])) == hash(original)


def test_state_built_by_hand_has_no_pending_values() -> None:
    """An info built with __init__ keeps every field as given (the descriptor never runs)."""
    state = StreamState(messages=3, subjects={"a": 3})
    assert PENDING not in vars(state) and state.subjects == {"a": 3}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        state.subjects = {}  # type: ignore[misc]


def test_kv_entries_of_direct_and_non_direct_buckets_match_the_stored_message(
    js: js.JetStreamContext,
) -> None:
    """A direct get's entry, and a non-direct bucket's, equal the generic stored-message entry."""
    for direct in (True, False):
        bucket = f"LAZY_{int(direct)}"
        kv = js.create_key_value(bucket=bucket, allow_direct=direct, history=5)
        try:
            first = kv.put("k", b"v1")
            kv.put("k", b"v2")
            kv.delete("gone")
            stream = js.stream(f"KV_{bucket}")
            for got in (kv.get("k"), kv.get("k", revision=first)):
                raw = stream.get_msg(got.revision)
                assert got == entry_from_stored(bucket, "k", raw), direct
            with pytest.raises(KeyDeletedError) as marker:
                kv.get("gone")
            raw = stream.get_msg(marker.value.entry.revision)
            assert marker.value.entry == entry_from_stored(bucket, "gone", raw), direct
        finally:
            js.delete_key_value(bucket)


@pytest.mark.interop
def test_streams_and_consumers_made_by_natspy_decode_as_before(nats_server) -> None:
    """nats-py's stream and consumer (its defaults, its JSON) decode as before, as it reads them."""

    async def natspy_side() -> tuple[int, int]:
        anc = await nats.connect(nats_server.url)
        jsc = anc.jetstream()
        await jsc.add_stream(name="PY", subjects=["py.>"], description="made by nats-py",
                             metadata={"by": "nats-py"})  # fmt: skip
        for i in range(3):
            await jsc.publish(f"py.{i}", b"x")
        await jsc.add_consumer("PY", durable_name="PYC", filter_subjects=["py.1", "py.2"],
                               backoff=[1, 2], max_deliver=4)  # fmt: skip
        si, ci = await jsc.stream_info("PY"), await jsc.consumer_info("PY", "PYC")
        await anc.close()
        return si.state.messages, ci.num_pending

    messages, pending = asyncio.run(natspy_side())
    with js.connect(nats_server.url) as nc:
        stream = api(nc, "$JS.API.STREAM.INFO.PY")
        consumer = api(nc, "$JS.API.CONSUMER.INFO.PY.PYC")
        assert_decodes_as_before(StreamInfo, stream)
        assert_decodes_as_before(ConsumerInfo, consumer)
        ctx = nc.jetstream()
        info, cinfo = ctx.stream("PY").info(), ctx.consumer("PY", "PYC").info()
        assert info.state.messages == messages == 3 and cinfo.num_pending == pending == 2
        assert info.config.metadata["by"] == "nats-py" and cinfo.config.backoff == (1.0, 2.0)


@pytest.mark.cluster
def test_clustered_infos_decode_as_before(cluster) -> None:
    """A placed R3 stream's and consumer's cluster info (leader, peers) decode as before."""
    with js.connect(cluster.urls) as nc:
        name = nc.server_info["cluster"]
        api(nc, "$JS.API.STREAM.CREATE.LAZYR", {"name": "LAZYR", "subjects": ["lazyr.>"],
                                                 "num_replicas": 3,
                                                 "placement": {"cluster": name}})  # fmt: skip
        try:
            body = {
                "stream_name": "LAZYR",
                "config": {"durable_name": "C", "ack_policy": "none", "num_replicas": 3},
            }
            api(nc, "$JS.API.CONSUMER.CREATE.LAZYR.C", body)
            stream = api(nc, "$JS.API.STREAM.INFO.LAZYR")
            consumer = api(nc, "$JS.API.CONSUMER.INFO.LAZYR.C")
            assert_decodes_as_before(StreamInfo, stream)
            assert_decodes_as_before(ConsumerInfo, consumer)
            info = StreamInfo.from_api(stream)
            assert info.cluster.name == name and info.cluster.leader
            assert info.config.placement.cluster == name
            assert len(ConsumerInfo.from_api(consumer).cluster.replicas or ()) == 2
        finally:
            api(nc, "$JS.API.STREAM.DELETE.LAZYR")
