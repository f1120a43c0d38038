"""Calls that write or wait honour their deadline with a stalled server and a full buffer (issue 8).

A stalled server is a real nats-server stopped with SIGSTOP (its sockets stay
open, it reads nothing); ``fill_past_high_water`` fills the client's write
buffer past its 32 MiB high-water mark, so every further write waits for room.
The default ``ping_interval`` (2 minutes) keeps the connection from being
declared stale during a test: a write without a deadline would block.
"""

from __future__ import annotations

import time

import pytest

import jetstream_sync as js
from tests.fixtures.server import stopped
from tests.test_write_deadlines import fill_past_high_water

pytestmark = pytest.mark.timeout(90)


def times_out(call, within: float = 5.0) -> None:
    """``call()`` raises the client's TimeoutError in under ``within`` seconds."""
    start = time.monotonic()
    with pytest.raises(js.TimeoutError):
        call()
    took = time.monotonic() - start
    assert took < within, f"blocked {took:.1f} s"


def test_subscription_drain_timeout_holds_with_a_full_buffer(nats_server):
    """sub.drain(timeout=) raises TimeoutError in time; the subscription still works afterwards."""
    with js.connect(nats_server.url) as nc:
        sub = nc.subscribe("dl.sub")
        with stopped(nats_server):
            fill_past_high_water(nc)
            times_out(lambda: sub.drain(timeout=0.5))
        nc.flush(timeout=60)
        nc.publish("dl.sub", b"still here")
        assert sub.next_msg(timeout=10).data == b"still here"
        sub.drain(timeout=10)
        assert not sub.is_active


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
