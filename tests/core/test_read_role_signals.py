"""A signal handler's exception between the steps of taking and giving back the read role.

Signal handlers run on the main thread, between any two steps of Python code:
so a requester on the main thread (a lone request reads its reply itself) can
be interrupted after it took the role and before it reads, half-way through
giving the socket back to the reader thread, or between handing its request to
the writer and reading. Each test raises, at one such point, the exception a
handler would raise there, and checks that the caller sees it and that the
client goes on as before: the role free, the reader thread alive and reading,
the writer free, no reconnect, ``close()`` prompt.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream_sync as js
from jetstream_sync._connection import read_role as _read_role
from jetstream_sync._connection.read_buffer import ReadBuffer
from jetstream_sync._connection.writer import Writer
from jetstream_sync.errors import ProtocolError
from tests.fixtures.polling import wait_for
from tests.fixtures.signals import Interrupted, interrupted_at

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def other(shared_server: Any) -> Iterator[js.Client]:
    """A second client on the shared server: the responder and the publisher."""
    with js.connect(shared_server.url) as client:
        yield client


@pytest.fixture
def echoed(other: js.Client) -> list[bytes]:
    """Requests to ``signals.echo`` answered by ``other``; what it was asked, in order."""
    asked: list[bytes] = []

    def answer(msg: js.Msg) -> None:
        asked.append(msg.data)
        msg.respond(msg.data)

    other.subscribe("signals.echo", cb=answer)
    other.flush()
    return asked


def _interrupt_once(
    monkeypatch: pytest.MonkeyPatch,
    owner: type,
    name: str,
    after: Callable[[Any], None] = lambda _: None,
    *,
    when: Callable[[Any], bool] = lambda _: True,
) -> list[str]:
    """Make ``owner.name`` raise Interrupted once, on the main thread, after doing its work
    (when its result passes ``when``) and then ``after(self)``: as a signal handler's
    exception right after it. Returns the calls hit (one at most)."""
    original = getattr(owner, name)
    hits: list[str] = []

    def interrupted(self: Any, *args: Any) -> Any:
        result = original(self, *args)
        if not hits and threading.current_thread() is threading.main_thread() and when(result):
            hits.append(name)
            after(self)
            raise Interrupted
        return result

    monkeypatch.setattr(owner, name, interrupted)
    return hits


def _request_until_interrupted(nc: js.Client, hits: list[str]) -> bytes:
    """Request until one request is interrupted; its payload.

    A request reads for itself only when the role (and the writer) are free at
    that moment: on a loaded machine the reader thread may still hold it.
    """
    for i in range(200):
        payload = b"first-%d" % i
        try:
            nc.request("signals.echo", payload, timeout=10)
        except Interrupted:
            assert hits
            return payload
    raise AssertionError("no request took the path that was to be interrupted")


def _carries_on(nc: js.Client, other: js.Client, echoed: list[bytes]) -> None:
    """The client reads, requests and closes as if nothing had happened."""
    role = nc._connection._reader.role
    # free once the reader thread is idle (it takes the role whenever bytes arrive)
    wait_for(lambda: role._holder is None and role._link.watching, timeout=10)
    got: list[bytes] = []
    nc.subscribe("signals.cb", cb=lambda m: got.append(m.data))
    nc.flush()
    for i in range(5):
        other.publish("signals.cb", b"%d" % i)
    other.flush()
    wait_for(lambda: len(got) == 5, timeout=10, message=lambda: f"the reader routed {got}")
    before = role.round_trips
    for i in range(200):  # the role can be taken again (when the reader thread is idle)
        assert nc.request("signals.echo", b"r%d" % i, timeout=10).data == b"r%d" % i
        if role.round_trips > before:
            break
    assert role.round_trips > before
    assert nc._connection._reader._thread.is_alive()
    assert nc.stats.reconnects == 0 and nc.is_connected
    start = time.monotonic()
    nc.close()
    assert time.monotonic() - start < 5


def test_a_signal_right_after_the_role_is_taken_gives_it_back(
    shared_server, other, echoed, monkeypatch
):
    """Interrupted once the socket left the reader thread's watch, before the send."""
    nc = js.connect(shared_server.url)
    hits = _interrupt_once(monkeypatch, _read_role._Link, "unwatch_socket")
    _request_until_interrupted(nc, hits)
    assert hits == ["unwatch_socket"]
    wait_for(lambda: not nc._connection._writer._sending, timeout=10)
    _carries_on(nc, other, echoed)


def test_a_signal_half_way_through_giving_the_socket_back_leaves_the_reader_reading(
    shared_server, other, echoed, monkeypatch
):
    """Interrupted after the socket is back in the watch but before its flag is set:
    the reader thread's next watch must not fail on the socket already there."""

    def flag_not_set(link: Any) -> None:
        link.watching = False

    nc = js.connect(shared_server.url)
    hits = _interrupt_once(monkeypatch, _read_role._Link, "watch_socket", flag_not_set)
    _request_until_interrupted(nc, hits)  # its reply came; the caller was interrupted first
    assert hits == ["watch_socket"]
    _carries_on(nc, other, echoed)


def test_a_signal_between_handing_the_request_over_and_reading_frees_the_role(
    shared_server, other, echoed, monkeypatch
):
    """Interrupted with the request handed to the writer, before the wait for its reply:
    the request goes out (unanswered), the role and the writer are free."""
    nc = js.connect(shared_server.url)
    hits = _interrupt_once(monkeypatch, Writer, "write_nowait", when=lambda queued: queued)
    payload = _request_until_interrupted(nc, hits)
    assert hits == ["write_nowait"]
    wait_for(lambda: not nc._connection._writer._sending, timeout=10)
    nc.flush()
    wait_for(lambda: payload in echoed, timeout=10, message=lambda: f"asked {echoed}")
    _carries_on(nc, other, echoed)


def _unroutable(ops: list[int], view: memoryview, consumed: int) -> None:
    raise Interrupted


def test_an_exception_while_routing_is_raised_on_the_main_thread_and_returned_elsewhere():
    """On the main thread it may be a signal handler's: raised to the reading caller
    (which then gives the connection up). On any other thread it is the server's doing:
    returned as the ProtocolError that ends the connection, never raised."""
    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(Interrupted):
        ReadBuffer(b"PING\r\n", _unroutable).process()
    returned: list[BaseException | None] = []
    reader = threading.Thread(
        target=lambda: returned.append(ReadBuffer(b"PING\r\n", _unroutable).process())
    )
    reader.start()
    reader.join(10)
    (error,) = returned
    assert isinstance(error, ProtocolError) and isinstance(error.__cause__, Interrupted)


def _flushes(nc: js.Client) -> bool:
    """Whether a flush completes (False: the connection it went out on was given up)."""
    try:
        nc.flush(timeout=10)
    except js.ConnectionLostError:
        return False
    return True


def test_a_request_interrupted_at_every_point_leaves_the_client_working(shared_server, other):
    """Ctrl-C can land at any of a request's interruption points, while it holds the role
    and routes what arrives before its reply: messages for a subscription another thread
    waits on. Raised at each point in turn, the client afterwards still flushes and
    answers, and that thread still takes messages (no lock left held, no role, no claim).
    """

    def publish_then_answer(msg: js.Msg) -> None:
        for i in range(3):
            other.publish("signals.routed", b"%d" % i)
        msg.respond(msg.data)

    other.subscribe("signals.route.echo", cb=publish_then_answer)
    other.flush()
    with js.connect(shared_server.url, reconnect_time_wait=0.01, max_reconnect_attempts=-1) as nc:
        routed = nc.subscribe("signals.routed", pending_msgs_limit=100_000)
        nc.flush()
        taken = [0]
        stop = threading.Event()

        def take() -> None:
            while not stop.is_set():
                with contextlib.suppress(js.TimeoutError):
                    routed.next_msgs(100, timeout=0.05)
                taken[0] += 1

        taker = threading.Thread(target=take, name="taker")
        taker.start()
        point = 0
        try:
            while True:
                point += 1
                try:
                    fired = interrupted_at(
                        point, lambda: nc.request("signals.route.echo", b"x", timeout=10)
                    )
                except js.ConnectionLostError:
                    fired = True  # interrupted with bytes not parsed: the connection is given up
                wait_for(lambda: _flushes(nc), timeout=20, message=f"a flush ({point})")
                wait_for(lambda: not nc._connection._writer._sending, timeout=10)
                wait_for(
                    functools.partial(lambda seen: taken[0] > seen + 1, taken[0]),
                    timeout=10,
                    message=f"the taker went on ({point})",
                )
                if not fired:
                    break
        finally:
            stop.set()
            taker.join(10)
        assert not taker.is_alive()
        assert point > 50  # the request's points were counted, not skipped
        assert nc.request("signals.route.echo", b"after", timeout=10).data == b"after"
