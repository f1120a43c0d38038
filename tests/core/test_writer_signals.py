"""A signal handler's exception on the main thread, in the middle of the writer's steps.

Signal handlers run on the main thread after a call into C returns or on entry
to a Python function (see ``jetstream_sync._signals``). The writer must never
be left in a state no later call can leave: a buffer nobody sends, a sender
role nobody gives back. The first tests use a bare writer over a socket pair and
raise, at one point each, the exception a handler would raise there; the last
one fires real alarms at random while the main thread makes requests.
"""

from __future__ import annotations

import random
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import jetstream_sync as js
from jetstream_sync._connection import writer as _writer
from jetstream_sync._connection.pings import PingTracker
from jetstream_sync._connection.request_mux import ReplyWaiter
from jetstream_sync._connection.writer import Writer
from tests.fixtures.polling import wait_for
from tests.fixtures.signals import Interrupted, interrupted_at, taken_by_another_thread
from tests.fixtures.socket_transport import SocketTransport

pytestmark = pytest.mark.timeout(120)

FRAME = b"PUB signals.w 1\r\nx\r\n"


class Peer:
    """The server's end of the writer's socket: what it received so far."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received = bytearray()
        sock.setblocking(False)

    def got(self, expected: bytes) -> bool:
        """Read what arrived; whether it is exactly ``expected`` by now."""
        try:
            self.received += self.sock.recv(1 << 16)
        except BlockingIOError:
            pass
        return bytes(self.received) == expected


@pytest.fixture
def wired() -> Iterator[tuple[Writer, SocketTransport, Peer]]:
    """A writer attached to one end of a socket pair, and the other end."""
    client_end, server_end = socket.socketpair()
    writer = Writer(lambda exc, transport: None, 1 << 20, "test-writer")
    transport = SocketTransport(client_end)
    writer.attach(transport)
    wait_for(lambda: not writer._kicked)  # the flusher took attach()'s kick: it is idle
    try:
        yield writer, transport, Peer(server_end)
    finally:
        client_end.shutdown(socket.SHUT_RDWR)
        writer.close()
        client_end.close()
        server_end.close()


def _on_a_thread(fn: Any, name: str = "other") -> None:
    thread = threading.Thread(target=fn, name=name)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()


def _interrupt_send(transport: SocketTransport, monkeypatch, *, before: bool) -> list[int]:
    """Make the transport's next send on the main thread raise Interrupted, before it sends
    anything or right after the protocol core returned; the reports seen (one at most)."""
    send = transport.send_nowait
    hits: list[int] = []

    def interrupted(data: bytearray, report: Any) -> None:
        if hits or threading.current_thread() is not threading.main_thread():
            return send(data, report)
        if not before:
            send(data, report)
        hits.append(report[0])
        raise Interrupted

    monkeypatch.setattr(transport, "send_nowait", interrupted)
    return hits


def test_an_urgent_send_interrupted_before_it_sent_puts_the_whole_chunk_back(wired, monkeypatch):
    """Interrupted with the chunk taken from the buffer and nothing sent: the chunk goes
    back whole, the send turn is free, and the flusher sends it, once."""
    writer, transport, peer = wired
    hits = _interrupt_send(transport, monkeypatch, before=True)
    with pytest.raises(Interrupted):
        writer.write(FRAME, urgent=True, msgs=1)
    assert hits == [-1]
    wait_for(lambda: peer.got(FRAME), message=lambda: f"received {peer.received!r}")
    wait_for(lambda: not writer._sending)
    writer.write(FRAME, urgent=True, msgs=1)  # the caller's thread sends again
    wait_for(lambda: peer.got(FRAME * 2))
    assert writer.bytes_out == 2 * len(FRAME)


def test_an_urgent_send_interrupted_after_the_socket_took_part_puts_back_only_the_rest(
    wired, monkeypatch
):
    """Interrupted right after a send the socket took only part of (the peer reads
    nothing yet): exactly the rest goes back and out, nothing twice, nothing lost."""
    writer, transport, peer = wired
    big = bytes(range(256)) * (16 << 10)  # 4 MiB: more than the socket pair holds
    hits = _interrupt_send(transport, monkeypatch, before=False)
    with pytest.raises(Interrupted):
        writer.write(big, urgent=True, msgs=1)
    (sent,) = hits
    assert 0 < sent < len(big)
    wait_for(lambda: peer.got(big), timeout=20, message=lambda: f"{len(peer.received)} bytes")
    assert writer.bytes_out == len(big)


def test_a_frame_queued_without_its_kick_is_sent_by_the_flusher_within_a_slice(wired, monkeypatch):
    """Interrupted between appending a frame and kicking the flusher (on entry to the
    step that kicks): the frame is in the buffer, and the flusher still sends it."""
    writer, _, peer = wired

    def interrupted(self: Writer, here: bool) -> bool:
        raise Interrupted

    monkeypatch.setattr(Writer, "_send_here", interrupted)
    with pytest.raises(Interrupted):
        writer.write_interest(b"SUB signals.w 1\r\n")
    assert writer._buf == b"SUB signals.w 1\r\n" and not writer._kicked
    wait_for(lambda: peer.got(b"SUB signals.w 1\r\n"), timeout=10)
    assert not writer._sending and not writer._buf


def test_a_request_handed_over_without_waiting_is_sent_even_when_interrupted(wired, monkeypatch):
    """write_nowait (a requester holding the read role): interrupted in its send, after the
    socket took part of the frame: the rest goes out with the flusher, and a buffer over the
    high-water mark is refused whole instead of waited for."""
    writer, transport, peer = wired
    big = b"PUB signals.w %d\r\n%s\r\n" % (1 << 22, b"x" * (1 << 22))
    send_nowait = transport.send_nowait
    hits: list[int] = []

    def sent_then_interrupted(data: Any, report: Any) -> None:
        send_nowait(data, report)
        if not hits:
            hits.append(report[0])
            raise Interrupted

    monkeypatch.setattr(transport, "send_nowait", sent_then_interrupted)
    with pytest.raises(Interrupted):
        writer.write_nowait(big)
    wait_for(lambda: peer.got(big), timeout=20, message=lambda: f"{len(peer.received)} bytes")
    assert hits and writer.bytes_out == len(big) and writer.msgs_out == 1
    monkeypatch.setattr(_writer, "HIGH_WATER", 0)
    with writer._lock:
        writer._buf += b"PING\r\n"  # over the mark: a write would have to wait
        assert not writer.write_nowait(FRAME)
        assert writer._buf == b"PING\r\n"


class _LockInterruptedOnExit:
    """A lock whose first release on the main thread is followed by Interrupted (as a
    signal handler's exception right after the release call returns)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hits = 0

    def __enter__(self) -> None:
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()
        if not self.hits and threading.current_thread() is threading.main_thread():
            self.hits += 1
            raise Interrupted


def test_a_ping_registered_is_a_ping_queued_even_when_interrupted(wired):
    """Interrupted as the tracker's lock is released: the PING was registered and queued in
    one step, so it still goes out and its PONG will answer the flush that registered it."""
    writer, _, peer = wired
    pings = PingTracker()
    interrupted = _LockInterruptedOnExit()
    pings.lock = interrupted  # type: ignore[assignment]
    waiter = ReplyWaiter()
    with pytest.raises(Interrupted):
        writer.write_ping(pings, waiter, urgent=True)
    assert interrupted.hits == 1
    assert list(pings._in_flight) == [waiter] and list(writer._ping_ends) == [len(b"PING\r\n")]
    wait_for(lambda: peer.got(b"PING\r\n"), timeout=10)
    pings.pong()
    assert waiter.done


@pytest.mark.slow
def test_requests_on_the_main_thread_under_random_alarms_leave_the_client_working(
    shared_server,
):
    """Alarms every 10-500 us raise in a handler while the main thread makes requests
    and another client floods one of its subscriptions: afterwards the client still
    sends, answers, flushes and closes (reconnects on the way are allowed)."""
    with js.connect(shared_server.url) as other:
        other.subscribe("signals.storm.echo", cb=lambda m: m.respond(m.data))
        other.flush()
        nc = js.connect(shared_server.url, reconnect_time_wait=0.05, max_reconnect_attempts=-1)
        flood = nc.subscribe("signals.storm.flood")
        stop = threading.Event()

        def flooding() -> None:
            while not stop.is_set():
                for i in range(200):
                    other.publish("signals.storm.flood", b"%d" % i)
                other.flush()

        def draining() -> None:
            while not stop.is_set():
                try:
                    flood.next_msgs(1000, timeout=0.2)
                except js.TimeoutError:
                    pass

        def interrupt(signum: int, frame: Any) -> None:
            raise Interrupted

        threads = [threading.Thread(target=flooding), threading.Thread(target=draining)]
        for thread in threads:
            thread.start()
        old = signal.signal(signal.SIGALRM, interrupt)
        interrupted = 0
        try:
            end = time.monotonic() + 8
            while time.monotonic() < end:
                try:
                    signal.setitimer(signal.ITIMER_REAL, random.uniform(1e-5, 5e-4))
                    try:
                        nc.request("signals.storm.echo", b"x", timeout=5)
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                except Interrupted:
                    interrupted += 1
                except js.ConnectionLostError:
                    pass  # Ctrl-C while routing others' traffic costs the connection
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            stop.set()
            for thread in threads:
                thread.join(10)
        assert interrupted > 0
        wait_for(lambda: nc.is_connected, timeout=10)
        nc.flush(timeout=10)
        assert nc.request("signals.storm.echo", b"after", timeout=10).data == b"after"
        writer = nc._connection._writer
        wait_for(lambda: not writer._sending and not writer._buf, timeout=10)
        start = time.monotonic()
        nc.close()
        assert time.monotonic() - start < 10


def test_a_write_waiting_for_room_interrupted_at_any_point_leaves_the_writer_usable(
    wired, monkeypatch
):
    """Ctrl-C at each point in turn of a publish waiting for room in a full buffer (a
    server that reads nothing): the writer's lock is never left held nor released twice,
    and once the server reads again everything queued goes out."""
    writer, _, peer = wired
    monkeypatch.setattr(_writer, "HIGH_WATER", 1 << 20)
    chunk = b"x" * (1 << 20)
    queued = 0
    # until the flusher is stuck in a send and more than HIGH_WATER waits behind it
    while not (writer._sending and len(writer._buf) > _writer.HIGH_WATER):
        writer.write(chunk, deadline=5)
        queued += len(chunk)
        assert queued < 64 * len(chunk), "the socket pair took everything"
    point = 0
    while True:
        point += 1
        try:
            if not interrupted_at(point, lambda: writer.write(FRAME, deadline=0.05)):
                raise AssertionError("a write to a full buffer returned")
        except js.TimeoutError:
            break  # the wait ran to its deadline: every point before it was tried
        assert taken_by_another_thread(writer._lock), f"left held at point {point}"
    assert point > 5
    wait_for(lambda: peer.got(b"x" * queued) or len(peer.received) >= queued, timeout=30)
    assert bytes(peer.received) == b"x" * queued
