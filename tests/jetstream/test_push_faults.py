"""Push subscriptions (``js.subscribe``) under faults: a frozen server with a full buffer."""

from __future__ import annotations

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


def test_next_msg_answering_flow_control_keeps_its_timeout_with_a_full_buffer(nats_server):
    """A flow-control request taken while a frozen server leaves no room to answer it does not
    hold next_msg past its timeout; after the freeze every message arrives once."""
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="PF", subjects=["pf.>"])
        deliver = nc.new_inbox()
        js.create_consumer(
            "PF", durable_name="fc", deliver_subject=deliver, flow_control=True,
            idle_heartbeat=0.5, ack_policy=jetstream_sync.AckPolicy.NONE,
        )  # fmt: skip
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
