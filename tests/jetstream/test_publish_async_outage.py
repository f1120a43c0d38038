"""publish_async over an outage: which futures fail, and which get their PubAck after it.

A future whose frame may have gone out on the link that was lost fails with
:class:`ConnectionLostError` (its ack was addressed to that link). One whose
frame was buffered once the loss was known goes out on the next link: it stays
pending and gets its PubAck after the reconnect, though the status handler that
fails the others runs later, on the client's events thread. A server that comes
back refusing the ack inbox at its subscription limit fails the pending futures
at once with :class:`MaxSubscriptionsExceededError`. The server is stopped and
started again on the same port.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream_sync as js
from tests.fixtures.faults import FAST, Events, stored_payloads
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

# The acks' timeout: a future failed by a refusal fails well before it.
ACK_TIMEOUT = 30.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    """A JetStream server with a stream on ``gap.>``, to be restarted on its port."""
    server = NatsServer(directory=tmp_path).start()
    with js.connect(server.url) as admin:
        admin.jetstream().create_stream(name="GAP", subjects=["gap.>"])
    yield server
    server.stop()


class HeldEvents(Events):
    """:class:`Events` whose ``disconnected_cb`` holds the events thread until released:
    the connection's own status handlers, which run after it, wait meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = threading.Event()
        self.release = threading.Event()

    def _disconnected(self) -> None:
        self.holding.set()
        self.release.wait(30)
        super()._disconnected()


def test_a_publish_buffered_after_the_loss_gets_its_ack_after_the_reconnect(server):
    """publish_async once the loss was noticed, before the disconnect handler ran: every
    future resolves to a PubAck after the reconnect, and the stream holds each message once."""
    events = HeldEvents()
    with js.connect(server.url, **FAST, **events.callbacks()) as nc:
        ctx = nc.jetstream(ack_timeout=30)
        assert ctx.publish_async("gap.warm", b"warm").result(timeout=10).seq == 1
        server.stop(keep_store=True)
        assert events.holding.wait(10)  # the reader saw the loss; the handler waits
        assert not nc.is_connected
        futures = [ctx.publish_async("gap.later", b"%d" % i) for i in range(3)]
        events.release.set()
        events.wait(lambda e: e.disconnects == 1)
        server.start()
        events.wait(lambda e: e.reconnects == 1)
        assert [f.result(timeout=10).seq for f in futures] == [2, 3, 4]
        ctx.publish_async_completed(timeout=10)
    with js.connect(server.url) as admin:
        stream = admin.jetstream().stream("GAP")
        assert stored_payloads(stream) == [b"warm", b"0", b"1", b"2"]


def test_an_ack_inbox_the_new_server_refuses_fails_the_futures_at_once(server, events):
    """The server comes back allowing one subscription, the requests' inbox's: the ack
    inbox's re-subscription is refused; the pending futures raise MaxSubscriptionsExceeded-
    Error at once, each later publish_async subscribes the inbox again, acked once there
    is room."""
    with js.connect(server.url, **FAST, **events.callbacks()) as nc:
        ctx = nc.jetstream(ack_timeout=ACK_TIMEOUT)
        ctx.account_info()  # the requests' inbox: subscribed first after a reconnect
        assert ctx.publish_async("gap.warm", b"warm").result(timeout=10).seq == 1
        server.stop(keep_store=True)
        events.wait(lambda e: e.disconnects == 1)
        futures = [ctx.publish_async("gap.buffered", b"%d" % i) for i in range(2)]
        server.extra_config = ["max_subscriptions: 1"]
        started = time.monotonic()
        server.start()
        events.wait(lambda e: e.reconnects == 1)
        for future in futures:
            with pytest.raises(js.MaxSubscriptionsExceededError, match="reply inbox"):
                future.result(timeout=ACK_TIMEOUT)
        assert time.monotonic() - started < ACK_TIMEOUT / 2
        events.wait(lambda e: any("reply inbox" in str(x) for x in e.errors))  # named
        # Still no room: the next publish subscribes the inbox again, refused again.
        with pytest.raises(js.MaxSubscriptionsExceededError):
            ctx.publish_async("gap.again", b"again").result(timeout=ACK_TIMEOUT)
        assert time.monotonic() - started < ACK_TIMEOUT / 2
        # Its message went out after the refused SUB: the stream may store it only after
        # the future failed, so it is waited for before the server stops.
        with js.connect(server.url) as admin:  # one subscription: its requests' inbox
            gap = admin.jetstream().stream_no_info("GAP")
            wait_for(lambda: gap.info().state.messages == 4)
        # Room again (the server's limit is gone): the next publish is acknowledged.
        server.stop(keep_store=True)
        events.wait(lambda e: e.disconnects == 2)
        server.extra_config = []
        server.start()
        events.wait(lambda e: e.reconnects == 2)
        assert ctx.publish_async("gap.room", b"room").result(timeout=10).seq == 5
        ctx.publish_async_completed(timeout=10)
    with js.connect(server.url) as admin:
        stream = admin.jetstream().stream("GAP")
        # The refused futures' messages were stored: only their acks were lost.
        assert stored_payloads(stream) == [b"warm", b"0", b"1", b"again", b"room"]


@pytest.fixture
def full_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A JetStream server allowing each connection one subscription, a stream on ``gap.>``."""
    server = NatsServer(directory=tmp_path, extra_config="max_subscriptions: 1").start()
    with js.connect(server.url) as admin:
        admin.jetstream().create_stream(name="GAP", subjects=["gap.>"])
    yield server
    server.stop()


def test_an_ack_inbox_refused_at_first_use_fails_the_future_at_once(full_server):
    """The connection has its one subscription: the first publish_async's ack inbox is
    refused, its future raises at once; once there is room the next one is acknowledged."""
    with js.connect(full_server.url) as nc:
        sub = nc.subscribe("gap.other")
        nc.flush(timeout=5)
        ctx = nc.jetstream(ack_timeout=ACK_TIMEOUT)
        started = time.monotonic()
        with pytest.raises(js.MaxSubscriptionsExceededError, match="reply inbox"):
            ctx.publish_async("gap.first", b"first").result(timeout=ACK_TIMEOUT)
        assert time.monotonic() - started < ACK_TIMEOUT / 2
        sub.unsubscribe()
        nc.flush(timeout=5)
        assert ctx.publish_async("gap.next", b"next").result(timeout=10).seq == 2


def test_a_columnar_publish_whose_ack_inbox_is_refused_raises_at_once(full_server):
    """The connection has its one subscription: publish_arrow's ack inbox is refused, it
    raises RowPublishError with MaxSubscriptionsExceededError at once, not at its ack wait."""
    pa = pytest.importorskip("pyarrow")
    with js.connect(full_server.url) as nc:
        sub = nc.subscribe("gap.other")
        nc.flush(timeout=5)
        ctx = nc.jetstream(timeout=ACK_TIMEOUT)
        table = pa.table({"data": [b"a", b"b"]})
        started = time.monotonic()
        with pytest.raises(js.RowPublishError, match="MaxSubscriptionsExceededError"):
            ctx.publish_arrow(table, "gap.arrow")
        assert time.monotonic() - started < ACK_TIMEOUT / 2
        sub.unsubscribe()
        nc.flush(timeout=5)
        ctx.publish_arrow(table, "gap.arrow")
