"""Priority groups (ADR-42) against the real server: two clients competing for one consumer.

Every policy (``overflow``, ``pinned_client``, ``prioritized``) through fetch,
messages() and consume(); the pin kept across pulls, failover after
``priority_timeout``, ``unpin``, 423 handling; options refused before sending.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync.errors import PinIdMismatchError, PriorityGroupError, RequiredApiLevelError
from jetstream_sync.jetstream.consumer import Consumer
from jetstream_sync.jetstream.consumer_admin import consumer_api_level
from jetstream_sync.jetstream.consumer_config import ConsumerConfig
from jetstream_sync.jetstream.enums import PriorityPolicy
from tests.fixtures.jetstream import publish_numbered
from tests.fixtures.polling import wait_for
from tests.fixtures.threads import in_thread

PIN = "Nats-Pin-Id"


@pytest.fixture
def other_js(shared_server: Any) -> Iterator[jetstream_sync.JetStreamContext]:
    """A second client (its own connection) on the shared server."""
    with jetstream_sync.connect(shared_server.url) as client:
        yield client.jetstream()


def _consumer(stream: Any, policy: PriorityPolicy, **fields: Any) -> Consumer:
    return stream.create_consumer(
        durable_name="pg", priority_policy=policy, priority_groups=["g"], **fields
    )


def _waiting(cons: Consumer, n: int) -> None:
    wait_for(lambda: cons.info().num_waiting == n, message=f"{n} pulls waiting")


def _data(msgs: list[Any]) -> list[bytes]:
    return [m.data for m in msgs]


# --------------------------------------------------------------------------- prioritized


def test_prioritized_fetch_serves_priority_0_first(js, other_js, stream):
    """A waiting priority-0 fetch gets every message; the priority-1 one only once it is gone."""
    high = _consumer(stream, PriorityPolicy.PRIORITIZED)
    low = other_js.consumer(stream.name, "pg")
    t_low, got_low = in_thread(lambda: low.fetch(3, timeout=5, group="g", priority=1))
    _waiting(high, 1)  # the low-priority pull waits first: order alone would serve it
    t_high, got_high = in_thread(lambda: high.fetch(5, timeout=5, group="g", priority=0))
    _waiting(high, 2)
    publish_numbered(js, f"{stream.name}.x", 5)
    t_high.join(10)
    assert _data(got_high[0]) == [b"0", b"1", b"2", b"3", b"4"]
    publish_numbered(js, f"{stream.name}.x", 3, start=5)
    t_low.join(10)
    assert _data(got_low[0]) == [b"5", b"6", b"7"]


def test_prioritized_messages_serve_priority_0_first(js, other_js, stream):
    """messages(): priority 0 takes all while it pulls; priority 1 gets what comes after."""
    high_cons = _consumer(stream, PriorityPolicy.PRIORITIZED)
    low_cons = other_js.consumer(stream.name, "pg")
    with low_cons.messages(max_messages=10, expires=5, group="g", priority=1) as low:
        _waiting(high_cons, 1)  # the low-priority pull waits first
        with high_cons.messages(max_messages=10, expires=5, group="g", priority=0) as high:
            _waiting(high_cons, 2)
            publish_numbered(js, f"{stream.name}.x", 5)
            assert [high.next(timeout=5).data for _ in range(5)] == [b"0", b"1", b"2", b"3", b"4"]
            with pytest.raises(jetstream_sync.TimeoutError):
                low.next(timeout=0.5)
            high.stop()  # its unsubscribe goes out on js's connection before the next publish
            publish_numbered(js, f"{stream.name}.x", 3, start=5)
            assert [low.next(timeout=5).data for _ in range(3)] == [b"5", b"6", b"7"]


def test_prioritized_consume_serves_priority_0_first(js, other_js, stream):
    """consume(): the priority-0 callback gets every message until it stops; then priority 1."""
    high_cons = _consumer(stream, PriorityPolicy.PRIORITIZED)
    high_got: list[bytes] = []
    low_got: list[bytes] = []
    low = other_js.consumer(stream.name, "pg")
    with low.consume(lambda m: low_got.append(m.data), expires=5, group="g", priority=1):
        _waiting(high_cons, 1)
        with high_cons.consume(lambda m: high_got.append(m.data), expires=5, group="g") as high:
            _waiting(high_cons, 2)  # priority omitted: 0, the highest
            publish_numbered(js, f"{stream.name}.x", 5)
            wait_for(lambda: len(high_got) == 5)
            high.stop()
            publish_numbered(js, f"{stream.name}.x", 3, start=5)
            wait_for(lambda: len(low_got) == 3)
    assert high_got == [b"0", b"1", b"2", b"3", b"4"] and low_got == [b"5", b"6", b"7"]


# --------------------------------------------------------------------------- pinned_client


def test_pin_kept_across_fetch_next_and_fetch_no_wait(js, other_js, stream):
    """Every pull of the pinned handle carries its pin; another client meanwhile gets nothing."""
    publish_numbered(js, f"{stream.name}.x", 6)
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    b = other_js.consumer(stream.name, "pg")
    first = a.fetch(2, timeout=2, group="g")
    pin = a.pin_id("g")
    assert pin and [m.headers[PIN] for m in first] == [pin, pin]
    assert b.fetch(2, timeout=0.5, group="g") == [] and b.pin_id("g") is None
    assert [m.headers[PIN] for m in a.fetch(2, timeout=2, group="g")] == [pin, pin]
    assert a.next(timeout=2, group="g").headers[PIN] == pin
    assert [m.headers[PIN] for m in a.fetch_no_wait(5, group="g")] == [pin]
    assert a.info().priority_groups[0].pinned_client_id == pin


def test_pin_kept_by_messages_and_consume_across_refills(js, other_js, stream):
    """messages() and consume() keep one pin over many pulls, and share it with fetch."""
    publish_numbered(js, f"{stream.name}.x", 12)
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    b = other_js.consumer(stream.name, "pg")
    with a.messages(max_messages=2, expires=5, group="g") as it:  # refills every message or two
        pins = {it.next(timeout=5).headers[PIN] for _ in range(6)}
        assert b.fetch(1, timeout=0.5, group="g") == []
    assert len(pins) == 1 and a.pin_id("g") in pins
    got: list[str] = []
    with a.consume(lambda m: got.append(m.headers[PIN]), max_messages=2, expires=5, group="g"):
        wait_for(lambda: len(got) == 6)
    assert set(got) == pins


def test_a_handle_shares_one_pin_among_its_pulls(js, stream):
    """The pin one pull of a handle wins is the handle's: reported, and sent by its other pulls."""
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    with (
        a.messages(max_messages=1, expires=5, group="g") as first,
        a.messages(max_messages=1, expires=5, group="g"),
    ):
        _waiting(a, 2)
        js.publish(f"{stream.name}.x", b"0")
        pin = first.next(timeout=5).headers[PIN]  # the first waiting pull wins the pin
        assert a.pin_id("g") == pin
    js.publish(f"{stream.name}.x", b"1")
    again = a.fetch(1, timeout=2, group="g")  # without the pin it would only wait as a candidate
    assert _data(again) == [b"1"] and again[0].headers[PIN] == pin


def test_failover_after_priority_timeout(js, other_js, stream):
    """A pinned client that stops pulling loses the pin after priority_timeout to a waiting one.

    Its next fetch, refused with 423 for the stale pin, clears it and waits as a
    candidate: no error, nothing delivered.
    """
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT, priority_timeout=1.0)
    b = other_js.consumer(stream.name, "pg")
    js.publish(f"{stream.name}.x", b"0")
    pinned_at = time.monotonic()  # at the latest: a stall after the fetch must not count
    assert _data(a.fetch(1, timeout=2, group="g")) == [b"0"]
    old = a.pin_id("g")
    t, got = in_thread(lambda: b.fetch(1, timeout=5, group="g"))
    _waiting(a, 1)
    js.publish(f"{stream.name}.x", b"1")
    t.join(10)
    assert _data(got[0]) == [b"1"]
    assert time.monotonic() - pinned_at >= 0.9  # it waited for the pin to time out
    assert b.pin_id("g") not in (None, old)
    assert a.fetch(1, timeout=1, group="g") == []
    assert a.pin_id("g") is None


def test_unpin_moves_the_pin_to_a_waiting_client(js, other_js, stream):
    """unpin(group): the next message goes to the client waiting without a pin, pinned anew."""
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    b = other_js.consumer(stream.name, "pg")
    js.publish(f"{stream.name}.x", b"0")
    assert _data(a.fetch(1, timeout=2, group="g")) == [b"0"]
    t, got = in_thread(lambda: b.fetch(1, timeout=5, group="g"))
    _waiting(a, 1)
    a.unpin("g")
    js.publish(f"{stream.name}.x", b"1")
    t.join(10)
    assert _data(got[0]) == [b"1"] and got[0][0].headers[PIN] == b.pin_id("g") != a.pin_id("g")


def test_unpin_forgets_the_handles_own_pin(js, stream):
    """After unpin(group) the handle's pin_id(group) is None (it used to show the pin the
    server had just dropped), and its next fetch is pinned anew."""
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    for i in range(2):
        js.publish(f"{stream.name}.x", b"%d" % i)
    assert _data(a.fetch(1, timeout=2, group="g")) == [b"0"]
    old = a.pin_id("g")
    assert old is not None
    a.unpin("g")
    assert a.pin_id("g") is None
    assert _data(a.fetch(1, timeout=2, group="g")) == [b"1"]
    assert a.pin_id("g") not in (None, old)


def test_423_fetch_clears_the_pin_and_pulls_again(js, stream):
    """A fetch whose pin was unpinned gets 423; it pulls again without the pin, pinned anew."""
    publish_numbered(js, f"{stream.name}.x", 2)
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    assert _data(a.fetch(1, timeout=2, group="g")) == [b"0"]
    old = a.pin_id("g")
    stream.consumer("pg").unpin("g")  # another handle: a still holds the old pin
    again = a.fetch(1, timeout=2, group="g")
    assert _data(again) == [b"1"]
    assert again[0].headers[PIN] == a.pin_id("g") != old


def test_423_fetch_with_heartbeat_pulls_again_within_its_timeout(js, other_js, stream):
    """A 423 late in a heartbeat fetch: the pull goes again (without heartbeats that no
    longer fit its shorter expiry) and the fetch ends empty at its timeout, no error."""
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    b = other_js.consumer(stream.name, "pg")
    js.publish(f"{stream.name}.x", b"0")
    assert _data(a.fetch(1, timeout=2, group="g")) == [b"0"]
    b.unpin("g")  # nobody is pinned; a still holds the old pin
    start = time.monotonic()
    t_a, got_a = in_thread(lambda: a.fetch(1, timeout=4, heartbeat=1.9, group="g"))
    _waiting(a, 1)
    t_b, got_b = in_thread(lambda: b.fetch(1, timeout=5, group="g"))
    _waiting(a, 2)
    # Let 0.3 s pass, so that 2 x 1.9 s of heartbeats no longer fit in what is left.
    wait_for(lambda: time.monotonic() - start >= 0.3)
    js.publish(f"{stream.name}.x", b"1")  # a's stale pull gets 423; b's wins the pin
    t_b.join(10)
    t_a.join(10)
    assert _data(got_b[0]) == [b"1"]
    assert got_a == [[]] and a.pin_id("g") is None
    assert time.monotonic() - start >= 3.5  # the second pull waited out the first's timeout


def test_423_messages_goes_on_without_the_pin(js, other_js, stream):
    """messages(): a 423 raises nothing; it pulls again unpinned and wins the pin when free."""
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    b = other_js.consumer(stream.name, "pg")
    js.publish(f"{stream.name}.x", b"0")
    with a.messages(max_messages=5, expires=5, group="g") as it:
        first = it.next(timeout=5)
        t, got = in_thread(lambda: b.fetch(1, timeout=5, group="g"))
        _waiting(a, 2)
        a.unpin("g")
        js.publish(f"{stream.name}.x", b"1")  # a's pull gets 423; b's wins the pin
        t.join(10)
        assert _data(got[0]) == [b"1"]
        a.unpin("g")  # b pulls no more: free the pin for a's new, unpinned pull
        js.publish(f"{stream.name}.x", b"2")
        third = it.next(timeout=5)
    assert third.data == b"2"
    assert third.headers[PIN] not in (first.headers[PIN], got[0][0].headers[PIN])


def test_423_consume_reports_a_warning_and_goes_on(js, other_js, stream):
    """consume(): the error handler hears PinIdMismatchError; consumption goes on, re-pinned."""
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    b = other_js.consumer(stream.name, "pg")
    got: list[bytes] = []
    errors: list[BaseException] = []
    js.publish(f"{stream.name}.x", b"0")
    with a.consume(
        lambda m: got.append(m.data), error_handler=errors.append,
        max_messages=5, expires=5, group="g",
    ) as ctx:  # fmt: skip
        wait_for(lambda: got == [b"0"])
        t, b_got = in_thread(lambda: b.fetch(1, timeout=5, group="g"))
        _waiting(a, 2)
        a.unpin("g")
        js.publish(f"{stream.name}.x", b"1")
        t.join(10)
        assert _data(b_got[0]) == [b"1"]
        wait_for(lambda: any(isinstance(e, PinIdMismatchError) for e in errors))
        a.unpin("g")
        js.publish(f"{stream.name}.x", b"2")
        wait_for(lambda: got == [b"0", b"2"])
        assert not ctx.closed
    assert all(isinstance(e, PinIdMismatchError) for e in errors)


def _pull_one(cons: Consumer, mode: str) -> tuple[bytes, list[BaseException]]:
    """One message through fetch, next, messages() or consume(), and the warnings heard."""
    warnings: list[BaseException] = []
    if mode == "fetch":
        return _data(cons.fetch(1, timeout=5, group="g"))[0], warnings
    if mode == "next":
        return cons.next(timeout=5, group="g").data, warnings
    if mode == "messages":
        with cons.messages(max_messages=1, expires=5, group="g") as it:
            return it.next(timeout=5).data, warnings
    got: list[bytes] = []
    with cons.consume(
        lambda m: got.append(m.data), error_handler=warnings.append, expires=5, group="g"
    ):
        wait_for(lambda: got or any(not isinstance(e, PinIdMismatchError) for e in warnings))
    return got[0] if got else b"", warnings


@pytest.mark.parametrize("mode", ["fetch", "next", "messages", "consume"])
def test_a_pin_from_before_a_policy_change_is_dropped(js, stream, mode):
    """A handle pinned before the consumer left PINNED_CLIENT drops its pin and pulls on.

    The server refuses a pull with a pin id then (400 "Not a Pinned Client Priority
    consumer"); every pull of the handle used to fail with PriorityGroupError. The
    server keeps its old pin until priority_timeout: pulls without one wait till then.
    """
    a = _consumer(stream, PriorityPolicy.PINNED_CLIENT, priority_timeout=1.0)
    publish_numbered(js, f"{stream.name}.x", 2)
    assert _data(a.fetch(1, timeout=2, group="g")) == [b"0"] and a.pin_id("g")
    stream.update_consumer(
        durable_name="pg", priority_groups=["g"], priority_policy=PriorityPolicy.OVERFLOW
    )
    data, warnings = _pull_one(a, mode)
    assert data == b"1" and a.pin_id("g") is None
    assert all(isinstance(e, PinIdMismatchError) for e in warnings)


# --------------------------------------------------------------------------- overflow


def test_overflow_min_pending_serves_while_that_many_are_pending(js, stream):
    """min_pending=2 with 3 pending: served while >= 2 are pending (2 messages), then it waits."""
    cons = _consumer(stream, PriorityPolicy.OVERFLOW)
    publish_numbered(js, f"{stream.name}.x", 3)
    assert _data(cons.fetch(5, timeout=3, group="g", min_pending=2)) == [b"0", b"1"]
    assert cons.fetch(5, timeout=0.5, group="g", min_pending=2) == []
    assert _data(cons.fetch(5, timeout=2, group="g")) == [b"2"]


def test_overflow_min_ack_pending_serves_while_acks_are_pending(js, stream):
    """min_ack_pending=2: nothing until two deliveries await acks; nothing again once acked."""
    cons = _consumer(stream, PriorityPolicy.OVERFLOW)
    publish_numbered(js, f"{stream.name}.x", 6)
    assert cons.fetch(3, timeout=0.5, group="g", min_ack_pending=2) == []
    unacked = cons.fetch(2, timeout=2, group="g")  # no limit: served; 2 acks now pending
    assert _data(unacked) == [b"0", b"1"]
    overflow = cons.fetch(2, timeout=2, group="g", min_ack_pending=2)
    assert _data(overflow) == [b"2", b"3"]
    for msg in unacked + overflow:
        msg.ack_sync()
    assert cons.fetch(2, timeout=0.5, group="g", min_ack_pending=2) == []
    # Either limit met is enough: min_pending=2 serves one of the last two, then 1 is pending.
    assert _data(cons.fetch(2, timeout=1, group="g", min_ack_pending=2, min_pending=2)) == [b"4"]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("options", "text"),
    [
        ({"group": "g", "priority": 10}, "priority must be between 0 and 9"),
        ({"group": "g", "priority": -1}, "priority must be between 0 and 9"),
        ({"group": "g", "priority": True}, "priority must be an int"),
        ({"priority": 1}, "need group="),
        ({"min_pending": 1}, "need group="),
        ({"group": "g", "min_ack_pending": -1}, "min_ack_pending must be between 0 and"),
        ({"group": "g", "min_pending": 2**63}, "min_pending must be between 0 and 9223372036"),
        ({"group": "g", "min_ack_pending": 2**64}, "min_ack_pending must be between 0 and"),
        ({"group": "bad name"}, "must be 1-16 characters"),
        ({"group": "x" * 17}, "must be 1-16 characters"),
        ({"group": ""}, "must be 1-16 characters"),
        ({"group": "nope"}, "priority group 'nope': consumer 'pg' does not declare it"),
        ({}, "pull with group="),
        ({"group": "g", "priority": 1}, "priority needs the prioritized policy"),
    ],
)
def test_bad_options_refused_before_sending(nc, stream, options, text):
    """Bad priority-group options raise PriorityGroupError (a ValueError) and send no pull
    (what the cached config refuses is checked once more against the server's config)."""
    cons = _consumer(stream, PriorityPolicy.OVERFLOW)
    with nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream.name}.pg") as pulls:
        nc.flush()
        for pull in (
            lambda: cons.fetch(1, timeout=1, **options),
            lambda: cons.fetch_no_wait(1, **options),
            lambda: cons.messages(**options),
            lambda: cons.consume(print, **options),
        ):
            with pytest.raises(PriorityGroupError, match=text) as info:
                pull()
            assert isinstance(info.value, ValueError) and info.value.status == 0
        nc.flush()
        assert pulls.pending_msgs == 0


def test_a_handle_follows_a_changed_consumer_config(js, stream):
    """A handle whose cached config predates an update of the consumer's groups and policy
    pulls with the new ones (it used to refuse them from its cache until its next info())."""
    a = _consumer(stream, PriorityPolicy.OVERFLOW)
    stream.update_consumer(
        durable_name="pg", priority_groups=["new"], priority_policy=PriorityPolicy.PRIORITIZED
    )
    js.publish(f"{stream.name}.x", b"0")
    assert _data(a.fetch(1, timeout=2, group="new", priority=1)) == [b"0"]
    with pytest.raises(PriorityGroupError, match="does not declare it"):
        a.fetch(1, timeout=1, group="g")
    stream.update_consumer(durable_name="pg")  # no groups any more
    js.publish(f"{stream.name}.x", b"1")
    assert _data(a.fetch(1, timeout=2)) == [b"1"]


def test_policy_options_checked_against_the_consumer(stream):
    """A group on a consumer without groups, or min_pending outside OVERFLOW, is refused."""
    plain = stream.create_consumer(durable_name="plain")
    with pytest.raises(PriorityGroupError, match="has no priority groups"):
        plain.fetch(1, timeout=1, group="g")
    pinned = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    with pytest.raises(PriorityGroupError, match="need the overflow policy"):
        pinned.fetch(1, timeout=1, group="g", min_pending=1)


def test_server_refusals_map_to_priority_group_error(js, stream):
    """Without a cached config, the server's 400 (pulls) and 10160 (unpin) name the group."""
    _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    blind = Consumer(js.client, js._api, stream.name, "pg")  # a handle that knows no config
    with pytest.raises(PriorityGroupError, match="'nope'.*Invalid Priority Group") as info:
        blind.fetch(1, timeout=1, group="nope")
    assert info.value.status == 400 and info.value.group == "nope"
    copy = pickle.loads(pickle.dumps(info.value))  # Spark ships errors between processes
    assert (type(copy), str(copy), copy.group, copy.status) == (
        PriorityGroupError, str(info.value), "nope", 400,
    )  # fmt: skip
    with pytest.raises(PriorityGroupError, match="Not a Overflow"):
        blind.fetch(1, timeout=1, group="g", min_pending=1)
    with pytest.raises(PriorityGroupError, match="'nope'"), blind.messages(group="nope") as it:
        it.next(timeout=5)
    with pytest.raises(PriorityGroupError, match="'nope'") as info:
        blind.unpin("nope")
    assert info.value.status == 400


def test_unpin_bad_group_refused_before_sending(nc, stream):
    """unpin() with a malformed or undeclared group raises PriorityGroupError and sends no
    unpin request (an undeclared group asks for the consumer's config once more first)."""
    cons = _consumer(stream, PriorityPolicy.PINNED_CLIENT)
    with nc.subscribe(f"$JS.API.CONSUMER.UNPIN.{stream.name}.pg") as unpins:
        nc.flush()
        for group in ("", "bad name", "nope"):
            with pytest.raises(PriorityGroupError):
                cons.unpin(group)
        nc.flush()
        assert unpins.pending_msgs == 0


# --------------------------------------------------------------------------- server versions


def test_policies_need_their_server_version(js, stream, monkeypatch):
    """PRIORITIZED needs nats-server 2.12 (API level 2), the other policies 2.11: refused early."""
    assert consumer_api_level(_config(PriorityPolicy.PRIORITIZED)) == 2
    assert consumer_api_level(_config(PriorityPolicy.PINNED_CLIENT)) == 1
    assert consumer_api_level(_config(PriorityPolicy.OVERFLOW)) == 1
    info = dict(js.client.server_info)
    monkeypatch.setattr(type(js.client), "server_info", property(lambda self: info))
    info["api_lvl"] = 1
    with pytest.raises(RequiredApiLevelError, match="nats-server 2.12"):
        stream.create_consumer(config=_config(PriorityPolicy.PRIORITIZED))
    _consumer(stream, PriorityPolicy.OVERFLOW).delete()  # level 1 is enough for it
    info["api_lvl"] = 0
    with pytest.raises(RequiredApiLevelError, match="nats-server 2.11"):
        stream.create_consumer(config=_config(PriorityPolicy.PINNED_CLIENT))
    assert list(stream.consumer_names()) == []


def _config(policy: PriorityPolicy) -> ConsumerConfig:
    return ConsumerConfig(durable_name="pg", priority_policy=policy, priority_groups=["g"])
