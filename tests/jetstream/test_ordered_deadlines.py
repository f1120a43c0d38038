"""The ordered consumer: recreation honours the caller's deadline; bad input is not retried."""

from __future__ import annotations

import time

import pytest

import jetstream_sync
from jetstream_sync.jetstream.consumer_config import OrderedConsumerConfig
from tests.fixtures.jetstream import publish_numbered
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer, stopped
from tests.fixtures.stall import fill_past_high_water

pytestmark = pytest.mark.timeout(120)


def times_out(call, within: float) -> float:
    """Seconds ``call()`` took; it must raise the client's TimeoutError in under ``within`` s."""
    start = time.monotonic()
    with pytest.raises(jetstream_sync.TimeoutError):
        call()
    took = time.monotonic() - start
    assert took < within, f"blocked {took:.1f} s"
    return took


def test_iteration_timeout_holds_while_the_server_is_stalled(nats_server):
    """it.next(timeout=) raises in time while links cannot be recreated, then resumes in order."""
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream(timeout=5.0)
        st = js.create_stream(name="OD", subjects=["od.>"])
        publish_numbered(js, "od.x", 3)
        oc = st.ordered_consumer()
        with oc.messages(max_messages=10, expires=2, heartbeat=0.2) as it:
            assert [int(it.next(timeout=5).data) for _ in range(3)] == [0, 1, 2]
            serial = oc._serial
            with stopped(nats_server):
                # Missed heartbeats make it recreate the link: each attempt is cut at the deadline.
                deadline = time.monotonic() + 30
                while oc._serial == serial:
                    times_out(lambda: it.next(timeout=0.5), within=3)
                    assert time.monotonic() < deadline, "no reset was attempted"
                for _ in range(3):
                    times_out(lambda: it.next(timeout=0.5), within=3)
            publish_numbered(js, "od.x", 2, start=3)
            assert [int(it.next(timeout=20).data) for _ in range(2)] == [3, 4]


def test_fetch_and_next_timeouts_hold_with_a_stalled_server_and_a_full_buffer(nats_server):
    """fetch/next(timeout=) never wait past their timeout for a new link; the next call recovers."""
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream(timeout=5.0)
        st = js.create_stream(name="OF", subjects=["of.>"])
        publish_numbered(js, "of.x", 2)
        oc = st.ordered_consumer()
        assert [int(m.data) for m in oc.fetch(2, timeout=5)] == [0, 1]
        with stopped(nats_server):
            fill_past_high_water(nc)
            oc._current = None  # as after a sequence gap: the next call makes a new link
            times_out(lambda: oc.next(timeout=0.5), within=3)
            times_out(lambda: oc.fetch(5, timeout=0.5), within=3)
        nc.flush(timeout=60)
        publish_numbered(js, "of.x", 1, start=2)
        assert int(oc.next(timeout=20).data) == 2


def test_fetch_timeout_holds_while_the_server_is_down(restartable_server):
    """With the server gone, fetch/next time out in time and resume after it comes back."""
    with jetstream_sync.connect(
        restartable_server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1
    ) as nc:
        js = nc.jetstream(timeout=5.0)
        st = js.create_stream(name="OK", subjects=["ok.>"], storage=jetstream_sync.StorageType.FILE)
        publish_numbered(js, "ok.x", 2)
        oc = st.ordered_consumer()
        assert [int(m.data) for m in oc.fetch(2, timeout=5)] == [0, 1]
        restartable_server.kill()
        oc._current = None
        times_out(lambda: oc.next(timeout=0.5), within=3)
        times_out(lambda: oc.fetch(5, timeout=0.5), within=3)
        restartable_server.restart()
        wait_for(lambda: nc.is_connected, timeout=20)
        publish_numbered(js, "ok.x", 1, start=2)
        assert int(oc.next(timeout=20).data) == 2


def test_bad_config_is_not_retried(js, stream):
    """A link the server refuses as bad input (overlapping filters: 400) raises at once."""
    publish_numbered(js, f"{stream.name}.a", 1)
    oc = js.ordered_consumer(
        stream.name, OrderedConsumerConfig(filter_subjects=(f"{stream.name}.>", f"{stream.name}.a"))
    )
    start = time.monotonic()
    with pytest.raises(jetstream_sync.APIError) as info:
        oc.fetch(1, timeout=20)
    assert info.value.code == 400
    assert time.monotonic() - start < 5


def test_bad_input_error_is_not_retried(tmp_path):
    """A link whose request the client refuses (over max_payload: a ValueError) raises at once."""
    with NatsServer(directory=tmp_path, max_payload=64 * 1024) as server:
        with jetstream_sync.connect(server.url) as nc:
            js = nc.jetstream()
            js.create_stream(name="BIG", subjects=["big.>"])
            config = OrderedConsumerConfig(metadata={"big": "x" * (100 * 1024)})
            oc = js.ordered_consumer("BIG", config)
            start = time.monotonic()
            with pytest.raises(jetstream_sync.MaxPayloadError):
                oc.fetch(1, timeout=20)
            assert time.monotonic() - start < 5
