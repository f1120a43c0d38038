"""Timeouts hold however full the write buffer is; PONGs answer their own PINGs (issue 8, C1-C2).

A stalled server is a real nats-server stopped with SIGSTOP: its sockets stay
open, it reads nothing, so the client's kernel buffers and then its own write
buffer fill up. Upper bounds on durations only catch hangs; the assertions are
on what was raised.
"""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync as js
from jetstream_sync._connection import pings as _pings
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer, stopped
from tests.fixtures.stall import CHUNK, fill_past_high_water

pytestmark = pytest.mark.timeout(90)


def in_msgs(server: NatsServer, name: str) -> int:
    """Messages the server received on the connection called ``name``."""
    conns = server.monitor("connz")["connections"]
    return next(c["in_msgs"] for c in conns if c.get("name") == name)


def elapsed(call) -> float:
    """Seconds ``call()`` took; it must raise TimeoutError."""
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        call()
    return time.monotonic() - start


def test_timeouts_hold_with_a_full_buffer(nats_server):
    """publish, flush, request and js.publish raise TimeoutError in time; nothing half-sent."""
    with js.connect(nats_server.url, name="full") as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="STALL", subjects=["stall.js"])
        before = in_msgs(nats_server, "full")
        with stopped(nats_server):
            sent = fill_past_high_water(nc)
            assert elapsed(lambda: nc.publish("stall.x", b"x", timeout=0.5)) < 5
            assert elapsed(lambda: nc.flush(timeout=0.5)) < 5
            assert elapsed(lambda: nc.request("stall.req", b"x", timeout=0.5)) < 5
            assert elapsed(lambda: ctx.publish("stall.js", b"x", timeout=1)) < 6
            with pytest.raises(js.TimeoutError, match="write buffer"):
                nc.publish("stall.x", b"x", timeout=0.1)
        # The server reads everything once it runs again: exactly the publishes that
        # returned, whole (a partial frame would be a protocol error and a disconnect).
        nc.flush(timeout=60)
        # the server counts a read buffer's messages once it has parsed all of it
        wait_for(lambda: in_msgs(nats_server, "full") - before == sent)
        assert nc.stats.reconnects == 0
        assert ctx.publish("stall.js", b"after", timeout=10).seq == 1


def test_stale_connection_is_detected_with_a_full_buffer(nats_server):
    """Keep-alive PINGs bypass a full buffer: the stale connection is dropped, then reconnected."""
    errors: list[BaseException] = []
    disconnected, reconnected = threading.Event(), threading.Event()
    with js.connect(
        nats_server.url,
        ping_interval=1.0,
        max_outstanding_pings=2,
        reconnect_time_wait=0.1,
        connect_timeout=1.0,
        error_cb=errors.append,
        disconnected_cb=disconnected.set,
        reconnected_cb=reconnected.set,
    ) as nc:
        sub = nc.subscribe("stall.after")
        with stopped(nats_server):
            fill_past_high_water(nc)
            assert disconnected.wait(30), "the stale connection was never detected"
            assert any("stale" in str(e) for e in errors), errors
        assert reconnected.wait(30), "no reconnect after SIGCONT"
        nc.publish("stall.after", b"ok")
        assert sub.next_msg(timeout=10).data == b"ok"
        nc.flush(timeout=10)


def test_publish_without_timeout_waits_until_the_connection_is_declared_lost(nats_server):
    """A publish with no timeout blocked on a full buffer ends when the link is declared stale."""
    with js.connect(
        nats_server.url, ping_interval=0.5, max_outstanding_pings=2, reconnect_time_wait=0.1
    ) as nc:
        with stopped(nats_server):
            fill_past_high_water(nc)
            # More than reconnect_buf_size is buffered when the connection is dropped.
            with pytest.raises(js.NatsError, match="reconnect buffer full"):
                nc.publish("stall.fill", CHUNK)
        wait_for(lambda: nc.is_connected, timeout=30)
        nc.flush(timeout=30)


# --------------------------------------------------------------------------
# C2: a timed-out flush's late PONG answers no one else


def test_late_pong_of_a_timed_out_flush_does_not_complete_the_next(nats_server):
    """After a timed-out flush, the next flush returns only once the server has everything."""
    with js.connect(nats_server.url, name="pongs") as nc:
        before = in_msgs(nats_server, "pongs")
        payload = b"y" * 4096
        with stopped(nats_server):
            with pytest.raises(js.TimeoutError):
                nc.flush(timeout=0.5)
            for _ in range(5000):  # 20 MiB behind the first PING
                nc.publish("pongs.x", payload)
            result: list[BaseException | None] = []
            flusher = threading.Thread(target=lambda: result.append(_flush(nc, 60)))
            flusher.start()
            wait_for(lambda: _flush_waiting(nc))
        flusher.join()
        assert result == [None]
        wait_for(lambda: in_msgs(nats_server, "pongs") - before == 5000)


def _flush_waiting(nc: js.Client) -> bool:
    """A flush has registered its PING (the timed-out one's placeholder aside)."""
    abandoned = getattr(_pings, "_ABANDONED", None)
    return any(w is not None and w is not abandoned for w in list(nc._connection._pings._in_flight))


def _flush(nc: js.Client, timeout: float) -> BaseException | None:
    try:
        nc.flush(timeout=timeout)
    except Exception as exc:  # returned for the assertion
        return exc
    return None


def test_late_pong_is_consumed_by_its_placeholder():
    """The first PONG after a timed-out flush answers that flush's PING, not the next flush."""
    with FakeServer() as fake, js.connect(fake.url, reconnect_time_wait=0.05) as nc:
        conn = fake.connection(0)
        conn.answer_pings = False
        sub = nc.subscribe("marker")
        conn.sid_of(b"marker")
        with pytest.raises(js.TimeoutError):
            nc.flush(timeout=0.3)
        result: list[BaseException | None] = []
        flusher = threading.Thread(target=lambda: result.append(_flush(nc, 30)))
        flusher.start()
        wait_for(lambda: conn.pings == 3)  # the handshake's, the timed-out one, this one
        conn.send(b"PONG\r\n")  # answers the timed-out flush's PING
        conn.msg(b"marker", b"after the PONG")
        assert sub.next_msg(timeout=5).data == b"after the PONG"  # the PONG was handled
        conn.close()  # the second PING will never be answered on this connection
        flusher.join()
        assert isinstance(result[0], js.ConnectionLostError), result
        fake.connection(1)
        nc.flush(timeout=5)


def test_pings_buffered_at_a_disconnect_are_not_sent_on_the_next_connection():
    """A PING stuck behind a full buffer dies with its connection.

    Sent on the next connection, its PONG would complete that connection's
    first flush before the server had that flush's data.
    """
    with FakeServer() as fake:
        with js.connect(fake.url, reconnect_time_wait=0.05, reconnect_buf_size=64 << 20) as nc:
            first = fake.connection(0)
            first.stop_reading()
            fill_past_high_water(nc)
            with pytest.raises(js.TimeoutError):
                nc.flush(timeout=0.3)  # its PING waits in the buffer, behind 32 MiB
            first.close()
            second = fake.connection(1)
            nc.flush(timeout=30)
        assert second.closed.wait(10)
        # The handshake's PING and the last flush's: none carried over from the first connection.
        assert second.pings == 2
        assert len(second.pubs) > 0 and all(p[0] == b"stall.fill" for p in second.pubs)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_publish_timeout_is_checked_before_sending(nc, timeout):
    """publish(timeout=) must be a positive, finite number of seconds; nothing is sent otherwise."""
    sub = nc.subscribe("deadline.checked")
    with pytest.raises(ValueError, match="timeout"):
        nc.publish("deadline.checked", b"no", timeout=timeout)
    nc.publish("deadline.checked", b"yes", timeout=1)
    assert sub.next_msg(timeout=5).data == b"yes"
