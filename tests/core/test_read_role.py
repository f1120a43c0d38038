"""The read role: a requester reading its own reply, and handing the socket back.

See ``jetstream_sync/_connection/read_role.py``. These tests look at which thread holds
the role (``role._holder``: a requester's waiter or round-trip marker, the
reader thread's marker while it reads, or None when free and watched by the
reader thread) to set up each situation; what they check is behaviour.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync._connection.read_role import _READER, ReadRole
from jetstream_sync._connection.request_mux import ReplyWaiter
from tests.fixtures.faults import FAST, Events
from tests.fixtures.polling import wait_for


@pytest.fixture
def other(shared_server: Any) -> Iterator[jetstream_sync.Client]:
    """A second client on the shared server: the responders live there."""
    with jetstream_sync.connect(shared_server.url) as client:
        yield client


def _echo(client: jetstream_sync.Client, subject: str) -> None:
    client.subscribe(subject, cb=lambda m: m.respond(m.data))
    client.flush()


def _requester_reads(client: jetstream_sync.Client) -> bool:
    holder = client._connection._reader.role._holder
    return holder is not None and holder is not _READER


def _reading_request(
    nc: jetstream_sync.Client, silent: jetstream_sync.Subscription, timeout: float = 30
) -> tuple[Background, jetstream_sync.Msg]:
    """A request to ``silent`` (which never answers by itself) whose thread reads the
    socket, and the request as ``silent`` got it.

    A request made while the reader thread is busy waits for the hand-off
    instead: that one is answered, and another one made.
    """
    role = nc._connection._reader.role
    for _ in range(50):
        waiting = Background(lambda: nc.request(silent.subject, b"hold", timeout=timeout))
        request = silent.next_msg(timeout=5)
        wait_for(lambda: _requester_reads(nc) or role._waiters)
        if _requester_reads(nc):
            return waiting, request
        request.respond(b"")
        waiting.join()
    raise AssertionError("no request got to read the socket")


class Background:
    """Runs one call on a thread and keeps its result or exception."""

    def __init__(self, call: Any) -> None:
        """Start ``call()`` on a new thread."""
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(call,))
        self._thread.start()

    def _run(self, call: Any) -> None:
        try:
            self.result = call()
        except BaseException as exc:  # noqa: BLE001 - kept for the test to check
            self.error = exc

    def join(self, timeout: float = 10) -> None:
        """Wait for the call to end."""
        self._thread.join(timeout)
        assert not self._thread.is_alive()


def test_a_lone_requester_parses_its_reply_on_its_own_thread(nc, other):
    """Requests in a row from one thread are read on that thread: no hand-off.

    A reply that came alone is read by the round trip's C call and never
    routed (``role.round_trips`` counts those); any other is routed.
    """
    _echo(other, "role.echo")
    nc.request("role.echo", b"first", timeout=5)  # subscribes the reply inbox
    threads: list[threading.Thread] = []
    route = nc._connection._mux.route
    role = nc._connection._reader.role
    before = role.round_trips

    def spy(msg: jetstream_sync.Msg) -> None:
        threads.append(threading.current_thread())
        route(msg)

    nc._connection._mux.route = spy
    for i in range(20):
        assert nc.request("role.echo", b"%d" % i, timeout=5).data == b"%d" % i
    fast = role.round_trips - before
    assert len(threads) + fast == 20
    assert threads.count(threading.current_thread()) + fast > 10


def test_a_requester_reading_routes_everyone_elses_messages_in_order(nc, other):
    """While a requester holds the role, subscriptions get their messages, in order."""
    silent = other.subscribe("role.silent")
    other.flush()
    sub = nc.subscribe("role.flow")
    nc.flush()
    waiting, request = _reading_request(nc, silent)
    for i in range(200):
        other.publish("role.flow", b"%d" % i)
    assert [sub.next_msg(timeout=5).data for _ in range(200)] == [b"%d" % i for i in range(200)]
    assert _requester_reads(nc)  # the requester read them: its reply has not come
    request.respond(b"done")
    waiting.join()
    assert waiting.error is None and waiting.result.data == b"done"


def test_the_reader_thread_frees_the_role_once_every_waiter_is_answered(nc, other, monkeypatch):
    """After handing a waiting requester its reply, the reader thread lets go of the
    role at once, even before that requester's thread has woken up: the next lone
    request reads its own reply again instead of waiting for a hand-off.
    """
    silent = other.subscribe("role.silent")
    other.flush()
    role = nc._connection._reader.role
    slow: set[int] = set()
    answered, woken = threading.Event(), threading.Event()
    wait = ReplyWaiter.wait

    def slow_to_wake(self: ReplyWaiter, deadline: Any) -> bool:
        done = wait(self, deadline)
        if threading.get_ident() in slow:
            answered.set()
            woken.wait(10)  # this requester's thread is not scheduled yet
        return done

    monkeypatch.setattr(ReplyWaiter, "wait", slow_to_wake)
    leading, first = _reading_request(nc, silent)

    def slow_request() -> jetstream_sync.Msg:
        slow.add(threading.get_ident())
        return nc.request(silent.subject, b"second", timeout=30)

    handed = Background(slow_request)
    second = silent.next_msg(timeout=5)
    wait_for(lambda: role._waiters)  # the role is taken: it waits for a hand-off
    first.respond(b"one")
    leading.join()
    second.respond(b"two")  # read by the reader thread, which takes the free role
    assert answered.wait(5)
    try:
        wait_for(lambda: role._holder is None, message="the reader thread kept the role")
    finally:
        woken.set()
    handed.join()
    assert handed.error is None and handed.result.data == b"two"
    assert leading.error is None and leading.result.data == b"one"


def test_the_reader_thread_reads_on_while_several_callers_wait(nc, other, monkeypatch):
    """With several callers served but not yet awake the reader thread keeps the role
    (they are about to send again: reading for many threads is its job); once a lone
    caller is served it lets go, and that caller's next request reads for itself."""
    silent = other.subscribe("role.silent")
    other.flush()
    role = nc._connection._reader.role
    slow: set[int] = set()
    answered, woken = threading.Semaphore(0), threading.Event()
    wait = ReplyWaiter.wait

    def slow_to_wake(self: ReplyWaiter, deadline: Any) -> bool:
        done = wait(self, deadline)
        if threading.get_ident() in slow:
            answered.release()
            woken.wait(10)
        return done

    def slow_request() -> jetstream_sync.Msg:
        slow.add(threading.get_ident())
        return nc.request(silent.subject, b"handed", timeout=30)

    monkeypatch.setattr(ReplyWaiter, "wait", slow_to_wake)
    leading, first = _reading_request(nc, silent)
    handed = [Background(slow_request) for _ in range(2)]
    requests = [silent.next_msg(timeout=5) for _ in handed]
    wait_for(lambda: len(role._waiters) == 2)  # both wait for a hand-off
    first.respond(b"one")
    leading.join()
    for request in requests:
        request.respond(b"two")  # read by the reader thread
    try:
        assert answered.acquire(timeout=5) and answered.acquire(timeout=5)
        assert role._holder is _READER  # both asleep, served: it reads on
    finally:
        woken.set()
    for call in handed:
        call.join()
        assert call.error is None and call.result.data == b"two"
    lone = Background(lambda: nc.request(silent.subject, b"lone", timeout=30))
    silent.next_msg(timeout=5).respond(b"three")  # handed over: the reader thread holds the role
    lone.join()
    assert lone.error is None and lone.result.data == b"three"
    wait_for(lambda: role._holder is None, message="the reader thread kept the role")
    again, request = _reading_request(nc, silent)
    request.respond(b"four")
    again.join()
    assert again.error is None and again.result.data == b"four"


def test_a_requester_gives_the_role_back_at_its_deadline(nc, other):
    """A request that times out frees the role; the reader thread reads again."""
    other.subscribe("role.silent")
    other.flush()
    start = time.monotonic()
    with pytest.raises(jetstream_sync.TimeoutError):
        nc.request("role.silent", b"never answered", timeout=0.5)
    assert time.monotonic() - start < 2.0
    wait_for(lambda: nc._connection._reader.role._holder is None)  # free: the reader thread watches
    sub = nc.subscribe("role.after")
    nc.flush()
    other.publish("role.after", b"still read")
    assert sub.next_msg(timeout=5).data == b"still read"


def test_callbacks_never_run_on_a_thread_that_reads(nc, other, monkeypatch):
    """Callbacks that make requests (and so read the socket) run one after another, never
    while their own thread holds the role."""
    reading: set[int] = set()
    lead = ReadRole._lead

    def tracking_lead(self: ReadRole, *args: Any) -> bool:
        reading.add(threading.get_ident())
        try:
            return lead(self, *args)
        finally:
            reading.discard(threading.get_ident())

    monkeypatch.setattr(ReadRole, "_lead", tracking_lead)
    _echo(other, "role.echo")
    seen: list[tuple[bytes, bytes, bool]] = []

    def handle(msg: jetstream_sync.Msg) -> None:
        in_role = threading.get_ident() in reading
        reply = nc.request("role.echo", msg.data, timeout=5)
        seen.append((msg.data, reply.data, in_role))

    nc.subscribe("role.cb", cb=handle)
    nc.flush()
    for i in range(100):
        other.publish("role.cb", b"%d" % i)
    wait_for(lambda: len(seen) == 100)
    assert seen == [(b"%d" % i, b"%d" % i, False) for i in range(100)]


def test_keepalives_are_read_when_nobody_calls(shared_server, other):
    """After requesters have read the socket, the reader thread reads PONGs on its own."""
    _echo(other, "role.echo")
    events = Events()
    with jetstream_sync.connect(
        # PINGs often, but a PONG late by a loaded machine's stall is not a stale connection
        shared_server.url,
        ping_interval=0.05,
        max_outstanding_pings=20,
        **events.callbacks(),
    ) as nc:
        for i in range(5):
            nc.request("role.echo", b"%d" % i, timeout=5)
        pongs = [0]
        pong = nc._connection._pings.pong

        def counting_pong() -> None:
            pongs[0] += 1
            pong()

        nc._connection._pings.pong = counting_pong
        wait_for(lambda: pongs[0] >= 10)
        assert nc.is_connected and events.disconnects == 0


def test_a_connection_lost_under_a_reading_requester_is_reconnected_by_the_reader(
    fault_proxy, other
):
    """The requester fails at once with ConnectionLostError; the reader thread reconnects."""
    _echo(other, "role.echo")
    silent = other.subscribe("role.silent")
    other.flush()
    events = Events()
    with jetstream_sync.connect(fault_proxy.url, **FAST, **events.callbacks()) as nc:
        waiting, _ = _reading_request(nc, silent)
        start = time.monotonic()
        fault_proxy.cut()
        waiting.join()
        assert isinstance(waiting.error, jetstream_sync.ConnectionLostError)
        assert time.monotonic() - start < 5
        events.wait(lambda e: e.reconnects >= 1)
        assert nc.request("role.echo", b"again", timeout=5).data == b"again"


def test_close_wakes_a_reading_requester(nc, other):
    """close() while a requester holds the role: it fails with ConnectionClosedError."""
    silent = other.subscribe("role.silent")
    other.flush()
    waiting, _ = _reading_request(nc, silent)
    nc.close()
    waiting.join()
    assert isinstance(waiting.error, jetstream_sync.ConnectionClosedError)


def test_tls_replies_are_handed_over_by_the_reader_thread(tls_server, monkeypatch):
    """On TLS the reader thread keeps the role: requests work, no requester reads."""
    leads: list[int] = []
    lead = ReadRole._lead
    monkeypatch.setattr(ReadRole, "_lead", lambda self, *a: leads.append(1) or lead(self, *a))
    server, ca = tls_server
    context = ssl.create_default_context(cafile=str(ca))
    with jetstream_sync.connect(server.url, tls=context) as nc:
        _echo(nc, "role.tls")
        for i in range(20):
            assert nc.request("role.tls", b"%d" % i, timeout=5).data == b"%d" % i
        nc.flush()
    assert leads == []
