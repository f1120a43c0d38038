"""Calls that write or wait honour their deadline with a stalled server and a full buffer (issue 8).

A stalled server is a real nats-server stopped with SIGSTOP (its sockets stay
open, it reads nothing); ``fill_past_high_water`` fills the client's write
buffer past its 32 MiB high-water mark, so every further write waits for room.
The default ``ping_interval`` (2 minutes) keeps the connection from being
declared stale during a test: a write without a deadline would block.
"""

from __future__ import annotations

import math
import threading
import time

import pytest

import jetstream_sync as js
from tests.fixtures.polling import wait_for
from tests.fixtures.server import stopped
from tests.fixtures.stall import fill_past_high_water

pytestmark = pytest.mark.timeout(90)


def times_out(call, within: float = 5.0) -> None:
    """``call()`` raises the client's TimeoutError in under ``within`` seconds."""
    start = time.monotonic()
    with pytest.raises(js.TimeoutError):
        call()
    took = time.monotonic() - start
    assert took < within, f"blocked {took:.1f} s"


def test_subscription_drain_timeout_holds_with_a_full_buffer(nats_server):
    """sub.drain(timeout=) raises TimeoutError in time; its UNSUB, queued at once, still goes."""
    with js.connect(nats_server.url) as nc:
        sub = nc.subscribe("dl.sub")
        with stopped(nats_server):
            fill_past_high_water(nc)
            times_out(lambda: sub.drain(timeout=0.5))
        nc.flush(timeout=60)
        assert not sub.is_active
        (conn,) = nats_server.monitor("connz", subs=True)["connections"]
        assert "dl.sub" not in conn.get("subscriptions_list", [])


def test_client_drain_timeout_holds_with_a_full_buffer(nats_server):
    """nc.drain(timeout=) raises TimeoutError in time and closes the client anyway."""
    nc = js.connect(nats_server.url)
    try:
        nc.subscribe("dl.client")
        with stopped(nats_server):
            fill_past_high_water(nc)
            times_out(lambda: nc.drain(timeout=0.5))
            assert nc.is_closed
    finally:
        nc.close()


def test_publish_async_never_blocks_past_its_timeout_on_a_full_buffer(nats_server):
    """publish_async waits for buffer room up to timeout= or the context's timeout; nothing sent."""
    with js.connect(nats_server.url, name="pa") as nc:
        ctx = nc.jetstream(timeout=1.0)
        ctx.create_stream(name="PA", subjects=["pa.>"])
        assert ctx.publish_async("pa.x", b"before").result(timeout=10).seq == 1
        with stopped(nats_server):
            fill_past_high_water(nc)
            times_out(lambda: ctx.publish_async("pa.x", b"lost", timeout=0.5))
            times_out(lambda: ctx.publish_async("pa.x", b"lost"))  # the context's 1 s
            times_out(lambda: ctx.publish_async("pa.x", b"lost", timeout=1))  # an int
            times_out(lambda: ctx.publish_async("pa.x", "lost", timeout=0.5))  # str: other path
            assert ctx.publish_async_pending() == 0  # the refused ones wait for no ack
        nc.flush(timeout=60)
        assert ctx.publish_async("pa.x", b"after").result(timeout=10).seq == 2


def test_pull_iterator_timeout_holds_when_its_pull_request_finds_no_room(nats_server):
    """messages().next(timeout=) raises in time when the next pull request cannot be written."""
    with js.connect(nats_server.url) as nc:
        ctx = nc.jetstream(timeout=5.0)
        st = ctx.create_stream(name="PI", subjects=["pi.>"])
        ctx.publish("pi.x", b"0")
        consumer = st.create_consumer(durable_name="pi")
        with consumer.messages(max_messages=1, expires=30) as it:
            assert it.next(timeout=10).data == b"0"  # its pull is used up: the next asks again
            with stopped(nats_server):
                fill_past_high_water(nc)
                times_out(lambda: it.next(timeout=0.5))  # it must ask again: no room for that
                times_out(lambda: it.next(timeout=0.5))
            nc.flush(timeout=60)
            ctx.publish("pi.x", b"1")
            assert it.next(timeout=20).data == b"1"


def test_publish_batch_timeout_holds_with_a_full_buffer(nats_server):
    """publish_batch(timeout=) raises in time; the cut-short batch is never committed."""
    with js.connect(nats_server.url) as nc:
        ctx = nc.jetstream(timeout=5.0)
        st = ctx.create_stream(name="PB", subjects=["pb.>"], allow_atomic=True)
        with stopped(nats_server):
            fill_past_high_water(nc)
            times_out(lambda: ctx.publish_batch([("pb.x", b"1"), ("pb.x", b"2")], timeout=0.5))
        nc.flush(timeout=60)
        assert st.info().state.messages == 0
        assert ctx.publish_batch([("pb.x", b"3"), ("pb.x", b"4")], timeout=10).seq == 2


def test_subscribe_and_unsubscribe_do_not_wait_for_room(nats_server):
    """SUB and UNSUB go into a full buffer at once, in order; the server gets them once it reads."""
    with js.connect(nats_server.url) as nc:
        with stopped(nats_server):
            fill_past_high_water(nc)
            sub = nc.subscribe("dl.late")
            gone = nc.subscribe("dl.gone")
            gone.unsubscribe()
            first = nc.request  # the first request subscribes the client's reply inbox
            times_out(lambda: first("dl.nobody", b"x", timeout=0.5))
        nc.flush(timeout=60)
        nc.publish("dl.late", b"in")
        assert sub.next_msg(timeout=10).data == b"in"
        (conn,) = nats_server.monitor("connz", subs=True)["connections"]
        subjects = conn.get("subscriptions_list", [])
        assert "dl.late" in subjects and "dl.gone" not in subjects


def test_fetch_and_direct_get_timeouts_hold_with_a_full_buffer(nats_server):
    """consumer.fetch(timeout=) returns [] in time; a batched direct get raises in time."""
    with js.connect(nats_server.url) as nc:
        ctx = nc.jetstream(timeout=5.0)
        st = ctx.create_stream(name="FD", subjects=["fd.>"], allow_direct=True)
        ctx.publish("fd.x", b"0")
        consumer = st.create_consumer(durable_name="fd")
        with stopped(nats_server):
            fill_past_high_water(nc)
            start = time.monotonic()
            assert consumer.fetch(1, timeout=0.5) == []
            assert time.monotonic() - start < 5
            times_out(lambda: st.get_last_msgs_for(["fd.>"], timeout=0.5))
        nc.flush(timeout=60)
        assert [m.data for m in consumer.fetch(1, timeout=10)] == [b"0"]
        assert [m.data for m in st.get_last_msgs_for(["fd.>"], timeout=10)] == [b"0"]


def test_first_publish_async_keeps_its_timeout_and_blocks_no_subscriber(nats_server):
    """The first publish_async (it subscribes the ack inbox) times out in time on a full buffer,
    and a subscribe() on another thread meanwhile returns at once (issue 18, item 2)."""
    with js.connect(nats_server.url) as nc:
        ctx = nc.jetstream(timeout=5.0)
        ctx.create_stream(name="FIRST", subjects=["first.>"])
        raised: list[BaseException] = []

        def first_publish() -> None:
            try:
                ctx.publish_async("first.x", b"x", timeout=1)
            except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
                raised.append(exc)

        subscribed = threading.Event()
        with stopped(nats_server):
            fill_past_high_water(nc)
            publisher = threading.Thread(target=first_publish)
            publisher.start()
            wait_for(lambda: nc._connection._routes or not publisher.is_alive(), timeout=10)
            subscriber = threading.Thread(
                target=lambda: (nc.subscribe("first.y"), subscribed.set())
            )
            subscriber.start()
            assert subscribed.wait(2), "subscribe() waited behind the first publish_async"
            publisher.join(5)
            assert not publisher.is_alive(), "publish_async(timeout=1) blocked past its timeout"
        subscriber.join()
        publisher.join()
        assert [type(e) for e in raised] == [js.WriteBufferTimeoutError]
        nc.flush(timeout=60)
        assert ctx.publish_async("first.x", b"after").result(timeout=10).seq == 1


def test_client_drain_keeps_its_whole_timeout_on_a_stalled_server(nats_server):
    """nc.drain(timeout=T) returns within T (closing included), not T + 1 s (issue 18, item 2)."""
    nc = js.connect(nats_server.url)
    try:
        nc.subscribe("dl.whole")
        with stopped(nats_server):
            fill_past_high_water(nc)
            times_out(lambda: nc.drain(timeout=1.0), within=1.9)
    finally:
        nc.close()


def test_drain_from_a_callback_completes_without_a_false_timeout(nats_server):
    """sub.drain() and nc.drain() called in a callback return normally; every message is handled."""
    with js.connect(nats_server.url) as nc:
        handled: list[bytes] = []
        outcome: list[BaseException | None] = []
        done = threading.Event()

        def on_msg(msg: js.Msg) -> None:
            handled.append(msg.data)
            if msg.data == b"0":
                try:
                    sub.drain(timeout=3)
                    outcome.append(None)
                except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
                    outcome.append(exc)
            if len(handled) == 3:
                done.set()

        sub = nc.subscribe("dl.cb", cb=on_msg)
        for i in range(3):
            nc.publish("dl.cb", b"%d" % i)
        assert done.wait(10)
        assert outcome == [None]
        assert handled == [b"0", b"1", b"2"]
        wait_for(lambda: not sub.is_active)

    closer = js.connect(nats_server.url)
    outcome.clear()
    finished = threading.Event()

    def drain_client(msg: js.Msg) -> None:
        try:
            closer.drain(timeout=3)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            outcome.append(exc)
        finished.set()

    closer.subscribe("dl.cb2", cb=drain_client)
    closer.publish("dl.cb2", b"x")
    assert finished.wait(10)
    assert outcome == [None]
    assert closer.is_closed


def test_timeouts_are_checked_at_the_call_even_when_the_answer_is_ready(nats_server):
    """NaN, zero and negative timeouts are refused although a message is pending (issue 18, 2)."""
    with js.connect(nats_server.url) as nc:
        sub = nc.subscribe("dl.ready")
        nc.publish("dl.ready", b"ready")
        nc.flush()
        wait_for(lambda: sub.pending_msgs == 1)
        for bad in (math.nan, 0, -1.0, math.inf):
            with pytest.raises(ValueError, match="timeout"):
                sub.next_msg(timeout=bad)
            with pytest.raises(ValueError, match="timeout"):
                sub.next_msgs(timeout=bad)
            with pytest.raises(ValueError, match="timeout"):
                nc.flush(timeout=bad)
            with pytest.raises(ValueError, match="timeout"):
                nc.request("dl.ready", b"", timeout=bad)
            with pytest.raises(ValueError, match="timeout"):
                sub.drain(timeout=bad)
            with pytest.raises(ValueError, match="timeout"):
                nc.drain(timeout=bad)
        assert sub.next_msg(timeout=1).data == b"ready"


def test_timeouts_are_checked_before_the_state_of_the_client(nats_server):
    """A bad timeout is a ValueError on a closed client and on a callback subscription too."""
    nc = js.connect(nats_server.url)
    with_cb = nc.subscribe("dl.cb.state", cb=lambda msg: None)
    plain = nc.subscribe("dl.plain.state")
    nc.close()
    for call in (
        lambda: with_cb.next_msg(timeout=math.nan),
        lambda: with_cb.next_msgs(timeout=math.nan),
        lambda: plain.drain(timeout=math.nan),
        lambda: nc.flush(timeout=math.nan),
        lambda: nc.request("dl.x", b"", timeout=math.nan),
        lambda: nc.publish("dl.x", b"", timeout=math.nan),
        lambda: nc.publish_frames(b"", 0, timeout=math.nan),
        lambda: nc.drain(timeout=math.nan),
    ):
        with pytest.raises(ValueError, match="timeout"):
            call()


def test_reconnect_buffer_full_error_is_a_public_error():
    """ReconnectBufferFullError lives in errors.py and is the same class where it was before."""
    from jetstream_sync import errors
    from jetstream_sync._connection import writer as _writer

    assert errors.ReconnectBufferFullError is js.ReconnectBufferFullError
    assert _writer.ReconnectBufferFullError is errors.ReconnectBufferFullError
    assert errors.ReconnectBufferFullError.__module__ == "jetstream_sync.errors"
