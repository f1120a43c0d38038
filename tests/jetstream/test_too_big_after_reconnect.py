"""Publishes buffered while disconnected, too big for the server reconnected to, fail at once.

The client checks a payload against the ``max_payload`` of the server it last
knew. A publish buffered while disconnected is dropped unsent when the server
it reconnects to announces less (it would close the connection on it); what
waits for the reply to it raises :class:`MaxPayloadError` then, not at its
timeout: a request, an async publish's future, a columnar publish's row.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import jetstream_sync as js
from tests.fixtures.faults import FAST, Events
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer

SMALL = 1024
# The acks' timeout: a future failed by the drop fails well before it.
ACK_TIMEOUT = 30.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    """A JetStream server with the default max_payload and a stream on ``big.>``."""
    server = NatsServer(directory=tmp_path).start()
    with js.connect(server.url) as admin:
        admin.jetstream().create_stream(name="BIG", subjects=["big.>"])
    yield server
    server.stop()


@pytest.fixture
def nc(server: NatsServer, events: Events) -> Iterator[js.Client]:
    """A client of ``server`` (fast reconnects), its callbacks recorded in ``events``."""
    with js.connect(server.url, **FAST, **events.callbacks()) as client:
        yield client


def _restart_smaller(server: NatsServer, events: Events) -> None:
    """Start the stopped server again, on the same port, accepting ``SMALL`` bytes."""
    server.max_payload = SMALL
    server.start()
    events.wait(lambda e: e.reconnects == 1)


def test_an_async_publish_dropped_unsent_fails_at_once(server, nc, events):
    """publish_async while disconnected, one payload too big for the restarted server: its
    future raises MaxPayloadError at the reconnect; the others are acknowledged."""
    ctx = nc.jetstream(ack_timeout=ACK_TIMEOUT)
    assert ctx.publish_async("big.warm", b"warm").result(timeout=10).seq == 1
    server.stop(keep_store=True)
    events.wait(lambda e: e.disconnects == 1)
    before = ctx.publish_async("big.a", b"small")
    dropped = ctx.publish_async("big.b", b"x" * 4000)
    after = ctx.publish_async("big.c", b"small")
    started = time.monotonic()
    _restart_smaller(server, events)
    with pytest.raises(js.MaxPayloadError):
        dropped.result(timeout=ACK_TIMEOUT)
    assert time.monotonic() - started < ACK_TIMEOUT / 2
    assert [before.result(timeout=10).seq, after.result(timeout=10).seq] == [2, 3]
    ctx.publish_async_completed(timeout=10)
    events.wait(lambda e: len(e.errors_of(js.MaxPayloadError)) == 1)
    assert nc.is_connected and events.disconnects == 1


def test_a_jetstream_publish_dropped_unsent_raises_at_once(server, nc, events):
    """A blocking JetStream publish waiting while disconnected, too big for the restarted
    server: it raises MaxPayloadError at the reconnect, not at its timeout."""
    ctx = nc.jetstream(timeout=ACK_TIMEOUT)
    raised = _raised_across_the_restart(
        server, nc, events, lambda: ctx.publish("big.p", b"x" * 4000), 1
    )
    assert isinstance(raised, js.MaxPayloadError), raised


def test_a_columnar_publish_whose_row_was_dropped_unsent_raises_at_once(server, nc, events):
    """publish_arrow while disconnected, one row too big for the restarted server: it raises
    RowPublishError naming that row and MaxPayloadError at the reconnect."""
    pa = pytest.importorskip("pyarrow")
    ctx = nc.jetstream(timeout=ACK_TIMEOUT)
    table = pa.table({"data": [b"small", b"x" * 4000, b"small"]})
    raised = _raised_across_the_restart(
        server, nc, events, lambda: ctx.publish_arrow(table, "big.arrow"), 3
    )
    assert isinstance(raised, js.RowPublishError), raised
    assert "row 1" in str(raised) and "MaxPayloadError" in str(raised)


def _raised_across_the_restart(
    server: NatsServer, nc: js.Client, events: Events, call: Callable[[], object], frames: int
) -> BaseException:
    """Run ``call`` on a thread while disconnected until its ``frames`` are buffered,
    restart the server smaller; return what ``call`` raised, within half the ack timeout."""
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # inspected by the caller
            outcome.append(exc)

    server.stop(keep_store=True)
    events.wait(lambda e: e.disconnects == 1)
    out = nc.stats.out_msgs
    thread = threading.Thread(target=run, name="test-publisher")
    thread.start()
    wait_for(lambda: nc.stats.out_msgs == out + frames)  # buffered
    started = time.monotonic()
    _restart_smaller(server, events)
    thread.join(ACK_TIMEOUT)
    assert time.monotonic() - started < ACK_TIMEOUT / 2
    assert len(outcome) == 1, outcome
    return outcome[0]
