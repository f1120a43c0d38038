"""Every call that returns a list returns every item, for 3,000 items: past each server limit.

nats-server answers at most 1,024 subjects to one batched "last message per subject" get
(``413 Too Many Results``), 1,024 stream or consumer names and 256 infos per page; the
client pages under each. Items are written with async publishes (or raw API requests
whose replies are counted) so that each test stays a few seconds long.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import JetStreamContext
from jetstream_sync.jetstream.schedule import schedule_headers
from jetstream_sync.jetstream.stream import Stream

N = 3000


def _publish_all(
    js: JetStreamContext, items: list[tuple[str, bytes, dict[str, Any] | None]]
) -> None:
    for subject, data, headers in items:
        js.publish_async(subject, data, headers=headers)
    js.publish_async_completed(timeout=60)


def _requests(nc: jetstream_sync.Client, requests: list[tuple[str, bytes]]) -> list[Any]:
    """Send raw API requests without waiting for each; return every JSON reply."""
    replies: list[Any] = []
    inbox = nc.new_inbox()
    with nc.subscribe(inbox, pending_msgs_limit=len(requests) + 1) as sub:
        for subject, body in requests:
            nc.publish(subject, body, reply=inbox)
        nc.flush()
        while len(replies) < len(requests):
            replies.append(json.loads(sub.next_msg(timeout=30).data))
    return replies


@pytest.fixture
def counter_stream(js: JetStreamContext, stream_name: str) -> Stream:
    return js.create_stream(
        name=stream_name, subjects=[f"{stream_name}.>"], allow_msg_counter=True, allow_direct=True
    )


def _count_everywhere(js: JetStreamContext, stream: Stream) -> None:
    _publish_all(js, [(f"{stream.name}.c.{i}", b"", {"Nats-Incr": f"+{i}"}) for i in range(N)])


def test_counter_get_many_returns_every_counter(
    js: JetStreamContext, counter_stream: Stream
) -> None:
    """get_many over 3,000 counters: every one, with its value (the server answers 1,024)."""
    _count_everywhere(js, counter_stream)
    counter = js.counter(counter_stream.name)
    got = {e.subject: e.value for e in counter.get_many(f"{counter_stream.name}.c.>")}
    assert got == {f"{counter_stream.name}.c.{i}": i for i in range(N)}
    literal = [f"{counter_stream.name}.c.{i}" for i in range(N)]
    assert len(list(counter.get_many(literal))) == N


def test_get_last_msgs_for_pins_one_snapshot(js: JetStreamContext, counter_stream: Stream) -> None:
    """Past 1,024 subjects, up_to_seq still bounds every page: a consistent snapshot."""
    _count_everywhere(js, counter_stream)
    name = counter_stream.name
    got = counter_stream.get_last_msgs_for([f"{name}.c.*"], up_to_seq=2000)
    assert [m.seq for m in got] == list(range(1, 2001))
    assert [m.seq for m in counter_stream.get_last_msgs_for([f"{name}.>"])] == list(range(1, N + 1))


def test_get_last_msgs_for_up_to_time_past_1024_subjects(
    js: JetStreamContext, counter_stream: Stream
) -> None:
    """Past 1,024 subjects, up_to_time bounds every page as up_to_seq does."""
    _count_everywhere(js, counter_stream)
    name = counter_stream.name
    before = counter_stream.get_msg(2001).time
    got = counter_stream.get_last_msgs_for([f"{name}.c.*"], up_to_time=before)
    assert [m.seq for m in got] == list(range(1, 2001))


def test_get_last_msgs_for_more_subjects_than_one_request_holds(
    js: JetStreamContext, stream_name: str
) -> None:
    """600 subjects of 2,000 bytes (1.2 MB, past max_payload): the newest message of each."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_direct=True)
    subjects = [f"{stream.name}.{i}." + "x" * 2000 for i in range(600)]
    _publish_all(js, [(subject, b"%d" % i, None) for i, subject in enumerate(subjects)])
    got = stream.get_last_msgs_for(subjects)
    assert [m.subject for m in got] == subjects


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "no-direct"])
def test_schedules_lists_every_schedule(
    js: JetStreamContext, stream_name: str, direct: bool
) -> None:
    """schedules() over 3,000 schedules returns each one (by direct get or not)."""
    js.create_stream(
        name=stream_name, subjects=[f"{stream_name}.>"], allow_msg_schedules=True,
        allow_direct=direct,
    )  # fmt: skip
    when = datetime.now(UTC) + timedelta(days=1)
    items = []
    for i in range(N):
        hdrs, _ = schedule_headers(f"{stream_name}.s.{i}", f"{stream_name}.out", at=when)
        items.append((f"{stream_name}.s.{i}", b"", hdrs))
    _publish_all(js, items)
    listed = js.schedules(stream_name)
    assert sorted(s.subject for s in listed) == sorted(f"{stream_name}.s.{i}" for i in range(N))


def test_get_msgs_returns_a_big_batch(js: JetStreamContext, stream: Stream) -> None:
    """get_msgs(batch=3000) returns 3,000 messages."""
    _publish_all(js, [(f"{stream.name}.m", b"x" * 100, None)] * N)
    js.update_stream(name=stream.name, subjects=[f"{stream.name}.>"], allow_direct=True)
    assert [m.seq for m in stream.get_msgs(batch=N)] == list(range(1, N + 1))


def test_kv_keys_over_many_keys_and_filters(js: JetStreamContext, stream_name: str) -> None:
    """keys() of 3,000 keys, and keys() given 3,000 literal filters."""
    kv = js.create_key_value(bucket=stream_name)
    try:
        _publish_all(js, [(f"$KV.{stream_name}.k{i}", b"v", None) for i in range(N)])
        assert sorted(kv.keys()) == sorted(f"k{i}" for i in range(N))
        # The server compares a consumer's filters pair by pair: 1.6 s for these on an idle
        # machine, past the default 5 s on the gate's busy one.
        assert len(kv.keys([f"k{i}" for i in range(N)], timeout=60)) == N
    finally:
        js.delete_key_value(stream_name)


def test_object_store_list_over_many_objects(js: JetStreamContext, stream_name: str) -> None:
    """list() of a bucket holding 3,000 objects returns each one."""
    obs = js.create_object_store(bucket=stream_name)
    try:
        for i in range(N):
            obs.put(f"o{i}", b"x")
        assert sorted(o.name for o in obs.list()) == sorted(f"o{i}" for i in range(N))
    finally:
        js.delete_object_store(stream_name)


@pytest.fixture
def own_js(nats_server: Any) -> Iterator[JetStreamContext]:
    """A JetStream context on a server of its own (3,000 streams stay out of the shared one)."""
    with jetstream_sync.connect(nats_server.url) as nc:
        yield nc.jetstream()


def test_stream_and_consumer_listings_page(own_js: JetStreamContext) -> None:
    """stream_names/streams and consumer_names/consumers return 3,000 of each."""
    nc, prefix = own_js.client, own_js.api_prefix
    creates = [
        (f"{prefix}.STREAM.CREATE.S{i}",
         json.dumps({"name": f"S{i}", "subjects": [f"s{i}"], "storage": "memory"}).encode())
        for i in range(N)
    ]  # fmt: skip
    assert all("error" not in r for r in _requests(nc, creates))
    assert len(set(own_js.stream_names())) == N
    assert len({s.config.name for s in own_js.streams()}) == N
    stream = own_js.create_stream(name="C", subjects=["c"], storage="memory", max_consumers=N)
    consumers = [
        (f"{prefix}.CONSUMER.CREATE.C.d{i}",
         json.dumps({"stream_name": "C", "config": {"durable_name": f"d{i}"}}).encode())
        for i in range(N)
    ]  # fmt: skip
    errors = [r["error"] for r in _requests(nc, consumers) if "error" in r]
    assert errors == []
    assert len(set(stream.consumer_names())) == N
    assert len({c.name for c in stream.consumers()}) == N
