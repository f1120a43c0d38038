"""The reply-route engine (jetstream_sync/_routes.py) against a real server: slots, grouping,
replies nobody holds, a dropped connection and a closed client."""

from __future__ import annotations

import queue
import sys
import threading

import pytest

import jetstream_sync
from jetstream_sync._routes import ReplyRoute
from jetstream_sync.errors import ConnectionClosedError, ConnectionLostError
from tests.fixtures.polling import wait_for


class Sink:
    """Records what a route hands it."""

    def __init__(self) -> None:
        self.got: queue.SimpleQueue[list] = queue.SimpleQueue()
        self.failures: list[BaseException] = []

    def deliver(self, replies: list) -> None:
        self.got.put(replies)

    def fail(self, error: BaseException, below: int | None = None) -> None:
        self.failures.append(error)

    def lost(self, token: int, error: BaseException) -> None:
        self.failures.append(error)

    def tokens(self, count: int) -> list[str]:
        """The tokens of the next ``count`` replies, in arrival order."""
        out: list[str] = []
        while len(out) < count:
            out += [token for token, _, _ in self.got.get(timeout=5)]
        return out


def _reply(nc, route: ReplyRoute, token: object, data: bytes = b"x") -> None:
    nc.publish(f"{route.prefix}{token}", data)


def _settled(nc) -> None:
    """Every reply published before this has been read and routed (a PING's PONG follows it)."""
    nc.flush(timeout=5)


def test_a_one_shot_slot_takes_one_reply(nc):
    """The first reply to a one-shot token reaches its sink; a second one is dropped."""
    route: ReplyRoute[Sink] = ReplyRoute(nc)
    sink = Sink()
    route.prefix  # noqa: B018 - routed before open_once, as its docstring asks
    token = route.open_once(sink)
    _reply(nc, route, token, b"first")
    _reply(nc, route, token, b"again")
    _settled(nc)
    assert sink.got.get(timeout=5) == [(str(token), b"first", None)]
    assert sink.got.empty()
    assert route.take(token, None) is None


def test_a_range_holds_its_tokens_until_released(nc):
    """Replies to any token of a lasting range reach its sink in order; outside it or after
    release they are dropped."""
    route: ReplyRoute[Sink] = ReplyRoute(nc)
    sink, other = Sink(), Sink()
    first = route.open(sink, 100)
    after = route.open(other)
    assert after == first + 100  # the counter moved past the whole range
    for offset in (0, 99, 50, 100, 0):
        _reply(nc, route, first + offset)
    _settled(nc)
    assert sink.tokens(4) == [str(first + n) for n in (0, 99, 50, 0)]
    assert other.tokens(1) == [str(after)]
    route.release(first)
    _reply(nc, route, first + 1)
    _reply(nc, route, after, b"still")
    _settled(nc)
    assert other.tokens(1) == [str(after)]
    assert sink.got.empty()


@pytest.mark.parametrize(
    "token",
    ["abc", "1" * 25, "+5", "-1", "1_0", "\u0663", "0x1", "5\u00b2"],
    ids=[
        "letters",
        "25-digits",
        "plus",
        "minus",
        "underscore",
        "arabic-digit",
        "hex",
        "superscript",
    ],
)
def test_a_reply_whose_token_is_not_ours_is_dropped(nc, token):
    """Other clients may write anything to the inbox: it reaches no sink and ends nothing."""
    route: ReplyRoute[Sink] = ReplyRoute(nc)
    sink = Sink()
    held = route.open(sink, 10)
    _reply(nc, route, token)
    nc.publish(route.prefix + token + ".deeper", b"x")  # not matched by <prefix>*
    _reply(nc, route, held)
    _settled(nc)
    assert sink.tokens(1) == [str(held)]
    assert sink.got.empty() and nc.is_connected


def test_replies_of_one_read_are_grouped_per_sink(nc):
    """Interleaved replies of two sinks: each gets its own, in arrival order, a list per read."""
    route: ReplyRoute[Sink] = ReplyRoute(nc)
    left, right = Sink(), Sink()
    a, b = route.open(left, 1000), route.open(right, 1000)
    for i in range(500):
        _reply(nc, route, a + i)
        _reply(nc, route, b + i)
    _settled(nc)
    assert left.tokens(500) == [str(a + i) for i in range(500)]
    assert right.tokens(500) == [str(b + i) for i in range(500)]


def test_sixteen_threads_get_distinct_tokens(nc):
    """One-shot tokens taken from 16 threads at once never collide."""
    route: ReplyRoute[Sink] = ReplyRoute(nc)
    route.prefix  # noqa: B018
    sink = Sink()
    tokens: list[int] = []
    start = threading.Barrier(16)

    def take() -> None:
        start.wait()
        mine = [route.open_once(sink) for _ in range(500)]
        tokens.extend(mine)

    threads = [threading.Thread(target=take) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(tokens)) == len(tokens) == 8000


def test_a_dropped_connection_fails_every_sink_and_drops_one_shot_slots(fault_client, fault_proxy):
    """On a disconnect each sink with a slot hears ConnectionLostError once; one-shot slots are
    gone (their replies went to the old connection), ranges stay until released."""
    route: ReplyRoute[Sink] = ReplyRoute(fault_client)
    once, lasting, idle = Sink(), Sink(), Sink()
    route.prefix  # noqa: B018
    tokens = [route.open_once(once) for _ in range(3)]
    first = route.open(lasting, 5)
    fault_proxy.cut()
    wait_for(lambda: once.failures and lasting.failures, timeout=10, message="no failure")
    assert [type(e) for e in once.failures + lasting.failures] == [ConnectionLostError] * 2
    assert idle.failures == []
    assert all(route.take(token, None) is None for token in tokens)
    wait_for(lambda: fault_client.is_connected, timeout=10, message="no reconnect")
    _reply(fault_client, route, first + 1)  # the range still routes on the new connection
    _settled(fault_client)
    assert lasting.tokens(1) == [str(first + 1)]


def test_a_closed_client_fails_every_sink_and_refuses_new_slots(shared_server):
    """Client.close() closes a shared route: every sink hears ConnectionClosedError once."""
    nc = jetstream_sync.connect(shared_server.url)
    route = nc.shared_resource("tests.route", ReplyRoute)
    once, lasting = Sink(), Sink()
    route.prefix  # noqa: B018
    route.open_once(once)
    route.open(lasting, 3)
    nc.close()
    assert [type(e) for e in once.failures + lasting.failures] == [ConnectionClosedError] * 2
    with pytest.raises(ConnectionClosedError):
        route.open(Sink())
    route.close()  # again: nothing more happens
    assert len(once.failures) == len(lasting.failures) == 1


def test_a_lookup_while_other_threads_open_and_release_ranges(nc):
    """The reading thread's lock-free lookup of a range's token, while ranges are opened and
    released (a read_arrow iterator closed while its replies arrive): it never raises (an
    IndexError there made the client drop the connection and reconnect)."""
    route: ReplyRoute[Sink] = ReplyRoute(nc)
    kept = route.open(Sink(), 10)
    errors: list[BaseException] = []
    done = threading.Event()

    def churn() -> None:
        try:
            while not done.is_set():
                route.release(route.open(Sink(), 3))
        except BaseException as exc:  # reported below
            errors.append(exc)

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads between any two steps of the lookup
    churner = threading.Thread(target=churn)
    churner.start()
    try:
        for _ in range(100_000):
            assert route.lasting_slot(kept + 1)[1:] == (kept, kept + 10)
            route.lasting_slot(kept + 10**6)  # past every range: the end of the list
    finally:
        done.set()
        churner.join()
        sys.setswitchinterval(previous)
    assert errors == []
