"""Push subscriptions (``js.subscribe``) under faults: a frozen server with a full buffer."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync
from tests.fixtures.jetstream import publish_numbered
from tests.fixtures.polling import wait_for
from tests.fixtures.server import stopped
from tests.fixtures.stall import fill_past_high_water

pytestmark = pytest.mark.timeout(120)


def is_flow_control(msg: jetstream_sync.Msg) -> bool:
    """Whether ``msg`` is a push consumer's flow-control request."""
    return msg.status == 100 and bool(msg.reply)


def _flow_controlled(js: jetstream_sync.JetStreamContext, name: str) -> str:
    """A stream ``name`` (subjects ``<name lower>.>``) and its durable push consumer ``fc``,
    with flow control and 0.5 s heartbeats; return the consumer's deliver subject."""
    js.create_stream(name=name, subjects=[f"{name.lower()}.>"])
    deliver = js.client.new_inbox()
    js.create_consumer(
        name, durable_name="fc", deliver_subject=deliver, flow_control=True,
        idle_heartbeat=0.5, ack_policy=jetstream_sync.AckPolicy.NONE,
    )  # fmt: skip
    return deliver


def test_next_msg_answering_flow_control_keeps_its_timeout_with_a_full_buffer(nats_server):
    """A flow-control request taken while a frozen server leaves no room to answer it does not
    hold next_msg past its timeout; after the freeze every message arrives once."""
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        deliver = _flow_controlled(js, "PF")
        observer = nc.subscribe(deliver)  # sees the same frames, answers nothing
        sub = js.subscribe_bind("PF", "fc", manual_ack=True)
        nc.flush()
        publish_numbered(js, "pf.x", 300, size=10_000)  # once both subscriptions listen
        wait_for(lambda: is_flow_control(observer.next_msg(timeout=5)), timeout=30)  # one queued
        got = []
        with stopped(nats_server):
            fill_past_high_water(nc)
            while True:
                start = time.monotonic()
                try:
                    got.append(int(sub.next_msg(timeout=0.5).data.rstrip(b".")))
                except jetstream_sync.TimeoutError:
                    break
                finally:
                    took = time.monotonic() - start
                    assert took < 3, f"next_msg(timeout=0.5) blocked {took:.1f} s"
        while len(got) < 300:
            got.append(int(sub.next_msg(timeout=20).data.rstrip(b".")))
        assert got == list(range(300))
        sub.unsubscribe()
        observer.unsubscribe()


def test_unsubscribe_of_a_callback_answering_flow_control_with_a_full_buffer_is_prompt(
    nats_server,
):
    """A callback subscription's thread answering flow control while a frozen server leaves
    no room waits at most a heartbeat for it: unsubscribe() returns, not after the link
    went stale."""
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        deliver = _flow_controlled(js, "PC")
        observer = nc.subscribe(deliver)
        gate = threading.Event()
        got = []
        sub = js.subscribe_bind(
            "PC", "fc", cb=lambda msg: (gate.wait(30), got.append(msg)), manual_ack=True
        )
        nc.flush()
        publish_numbered(js, "pc.x", 300, size=10_000)
        before = 0  # the messages the callback takes before the request
        while not is_flow_control(msg := observer.next_msg(timeout=30)):
            before += not msg.is_status
        with stopped(nats_server):
            fill_past_high_water(nc)
            gate.set()
            wait_for(lambda: len(got) >= before, timeout=30)
            start = time.monotonic()
            sub.unsubscribe()
            took = time.monotonic() - start
        assert took < 3, f"unsubscribe() blocked {took:.1f} s"
        observer.unsubscribe()
