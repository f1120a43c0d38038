"""After a reconnect every live subscription is sent once, as the client's table holds it.

The new server learns the subscriptions from the re-subscription the client sends
first on the new link: one SUB per subscription still routed (an ``UNSUB`` with
the messages still to come after it, for one with an auto-unsubscribe limit).
What was done while disconnected (a subscribe, an unsubscribe, a limit) is in
that table: it is never sent a second time behind it. The server is stopped and
started again on the same port; what it holds is read off its ``/connz``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync as js
from tests.fixtures.faults import FAST, Events
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

LIMIT = 3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    """A core server allowing each connection ``LIMIT`` subscriptions, to be restarted."""
    server = NatsServer(
        jetstream=False, directory=tmp_path, extra_config=f"max_subscriptions: {LIMIT}"
    ).start()
    yield server
    server.stop()


@pytest.fixture
def nc(server: NatsServer, events: Events) -> Iterator[js.Client]:
    """A client of ``server`` (fast reconnects), its callbacks recorded in ``events``."""
    with js.connect(server.url, name="resub", **FAST, **events.callbacks()) as client:
        yield client


def _outage(server: NatsServer, events: Events) -> None:
    """Stop the server and wait until the client saw the disconnect."""
    server.stop(keep_store=True)
    events.wait(lambda e: e.disconnects == 1)


def _back(server: NatsServer, events: Events, nc: js.Client) -> None:
    """Start the server on the same port and wait until the client reconnected and flushed."""
    server.start()
    events.wait(lambda e: e.reconnects == 1)
    nc.flush(timeout=5)


def _subs(server: NatsServer) -> list[dict[str, Any]]:
    """The subscriptions the server holds for the client under test (``/connz``)."""
    conns = server.monitor("connz", subs="detail")["connections"]
    [conn] = [c for c in conns if c.get("name") == "resub"]
    return conn.get("subscriptions_list_detail") or []


def _refusals(events: Events) -> list[BaseException]:
    return events.errors_of(js.MaxSubscriptionsExceededError)


def test_a_subscription_made_while_disconnected_is_sent_once(server, nc, events):
    """Subscribing while disconnected, up to the server's limit: after the reconnect the
    server holds each subscription once and refused none."""
    subs = [nc.subscribe(f"resub.{i}") for i in range(LIMIT - 1)]
    nc.flush()
    _outage(server, events)
    subs.append(nc.subscribe(f"resub.{LIMIT - 1}"))
    _back(server, events, nc)
    assert sorted(s["subject"] for s in _subs(server)) == [f"resub.{i}" for i in range(LIMIT)]
    for i in range(LIMIT):
        nc.publish(f"resub.{i}", b"%d" % i)
    assert [sub.next_msg(timeout=5).data for sub in subs] == [b"%d" % i for i in range(LIMIT)]
    assert not _refusals(events), events.errors


def test_a_subscription_made_while_disconnected_is_held_once_over_two_outages(server, nc, events):
    """A subscription made while disconnected, then a second outage: the server of the
    second reconnect holds each subscription once too."""
    subs = [nc.subscribe(f"resub.{i}") for i in range(LIMIT - 1)]
    nc.flush()
    _outage(server, events)
    subs.append(nc.subscribe(f"resub.{LIMIT - 1}"))
    _back(server, events, nc)
    server.stop(keep_store=True)
    events.wait(lambda e: e.disconnects == 2)
    server.start()
    events.wait(lambda e: e.reconnects == 2)
    nc.flush(timeout=5)
    assert sorted(s["subject"] for s in _subs(server)) == [f"resub.{i}" for i in range(LIMIT)]
    assert not _refusals(events), events.errors


def test_an_unsubscribe_while_disconnected_is_not_sent_again(server, nc, events):
    """A subscription ended while disconnected is not re-subscribed; its room is free for
    one made while disconnected too."""
    subs = [nc.subscribe(f"resub.{i}") for i in range(LIMIT)]
    nc.flush()
    _outage(server, events)
    subs[0].unsubscribe()
    late = nc.subscribe("resub.late")
    _back(server, events, nc)
    assert sorted(s["subject"] for s in _subs(server)) == ["resub.1", "resub.2", "resub.late"]
    nc.publish("resub.late", b"late")
    assert late.next_msg(timeout=5).data == b"late"
    assert not _refusals(events), events.errors


@pytest.mark.parametrize("when", ["before", "during"])
def test_an_auto_unsubscribe_goes_on_with_the_messages_still_to_come(server, nc, events, when):
    """A subscription limited to 5 messages that received 2: after the reconnect the server
    holds it with a max of 3 (whether the limit was set before or during the outage), and it
    receives exactly 3 more."""
    sub = nc.subscribe("resub.max")
    if when == "before":
        sub.unsubscribe(limit=5)
    for i in range(2):
        nc.publish("resub.max", b"%d" % i)
    assert [sub.next_msg(timeout=5).data for _ in range(2)] == [b"0", b"1"]
    _outage(server, events)
    if when == "during":
        sub.unsubscribe(limit=5)
    _back(server, events, nc)
    [held] = _subs(server)
    assert held["subject"] == "resub.max" and held["max"] == 3, held
    for i in range(2, 10):
        nc.publish("resub.max", b"%d" % i)
    assert [sub.next_msg(timeout=5).data for _ in range(3)] == [b"2", b"3", b"4"]
    nc.flush(timeout=5)
    wait_for(lambda: not _subs(server))  # the server ended it after its last message
    with pytest.raises(js.NatsError):  # it ended with nothing left
        sub.next_msg(timeout=5)


def test_a_subscription_draining_over_the_reconnect_is_not_re_subscribed(
    server, nc, events, monkeypatch
):
    """A drain started while disconnected waits for the reconnect (its flush); the new
    server never holds the subscription it stopped."""
    nc.subscribe("resub.keep")
    gone = nc.subscribe("resub.gone")
    nc.flush()
    _outage(server, events)
    connection = nc._connection
    stopped = threading.Event()
    stop_interest = connection.stop_interest

    def noted(sub: js.Subscription) -> None:
        stop_interest(sub)
        stopped.set()

    monkeypatch.setattr(connection, "stop_interest", noted)
    drained: list[BaseException | None] = []

    def drain() -> None:
        try:
            gone.drain(timeout=10)
            drained.append(None)
        except BaseException as exc:  # inspected below
            drained.append(exc)

    thread = threading.Thread(target=drain, name="test-drain")
    thread.start()
    assert stopped.wait(5)
    _back(server, events, nc)
    thread.join(15)
    assert drained == [None]
    assert [s["subject"] for s in _subs(server)] == ["resub.keep"]


def test_a_subscription_the_new_server_refuses_does_not_look_alive(server, nc, events):
    """The server comes back with a lower max_subscriptions: the re-subscriptions past it
    are refused; error_cb hears which subject, and next_msg() on them raises at once."""
    subs = [nc.subscribe(f"resub.{i}") for i in range(LIMIT)]
    nc.flush()
    _outage(server, events)
    server.extra_config = ["max_subscriptions: 1"]
    _back(server, events, nc)
    # Each refusal is read as it comes: wait for both, not for the first.
    wait_for(
        lambda: (
            {str(e).split("'")[1] for e in _refusals(events) if "resub." in str(e)}
            == {"resub.1", "resub.2"}
        ),
        message=lambda: repr(events.errors),
    )
    started = time.monotonic()
    for sub in subs[1:]:
        with pytest.raises(js.MaxSubscriptionsExceededError, match=sub.subject):
            sub.next_msg(timeout=10)
    assert time.monotonic() - started < 5
    nc.publish("resub.0", b"kept")
    assert subs[0].next_msg(timeout=5).data == b"kept"
    assert [s["subject"] for s in _subs(server)] == ["resub.0"]
