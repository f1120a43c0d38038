"""JetStream consuming through a fault proxy: fetch, messages(), consume(), ordered consumers.

A pull consumer with acks is at-least-once: a message whose delivery or ack
was cut is delivered again (its ``num_delivered`` grows) once ``ack_wait``
passes, never lost. An ordered consumer has no acks: it must hand over every
stream sequence once, in order, across cuts and stalls.
"""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync
from tests.fixtures.faults import assert_works
from tests.fixtures.jetstream import publish_numbered
from tests.fixtures.polling import wait_for
from tests.fixtures.proxy import TO_CLIENT

RETRYABLE = (
    jetstream_sync.ConnectionLostError,
    jetstream_sync.TimeoutError,
    jetstream_sync.DuplicateMsgIdInProcessError,
)
ACK_WAIT = 1.0


class Deliveries:
    """Every delivery of every message, by payload, against what the server says is acked.

    An ``ack_sync`` that fails with ``ConnectionLostError`` may or may not have
    reached the server: either the server has the ack, or it redelivers the
    message after ``ack_wait``. So "done" is asked of the server, not of the acks.
    """

    def __init__(self, expected: int, js: jetstream_sync.JetStreamContext, stream: str) -> None:
        """Expect payloads ``b"0"`` .. ``b"<expected - 1>"`` from the consumer ``faults``."""
        self.expected = {b"%d" % i for i in range(expected)}
        self.counts: dict[bytes, list[int]] = {}
        self.cond = threading.Condition()
        self._info = lambda: js.consumer(stream, "faults").info()

    def record(self, msg: jetstream_sync.Msg) -> None:
        """Note a delivery, then ack it synchronously (a lost ack is retried by redelivery)."""
        with self.cond:
            self.counts.setdefault(msg.data, []).append(msg.metadata.num_delivered)
            self.cond.notify_all()
        try:
            msg.ack_sync(timeout=1)
        except RETRYABLE:
            pass

    @property
    def received(self) -> int:
        """How many deliveries so far."""
        with self.cond:
            return sum(len(d) for d in self.counts.values())

    def done(self) -> bool:
        """Every message was delivered, and the server has nothing pending or unacked."""
        with self.cond:
            if set(self.counts) != self.expected:
                return False
        info = self._info()
        return info.num_pending == 0 and info.num_ack_pending == 0

    def check(self) -> None:
        """Nothing was lost; a message came again only as a redelivery by the server."""
        assert set(self.counts) == self.expected
        for data, delivered in self.counts.items():
            assert delivered == sorted(set(delivered)), (data, delivered)


@pytest.fixture
def durable(js, stream):
    """A durable pull consumer with a short ack_wait, made by the direct client."""
    return stream.create_consumer(durable_name="faults", ack_wait=ACK_WAIT)


def test_fetch_through_cuts_returns_or_fails_typed_and_loses_nothing(
    fault_proxy, fault_client, js, stream, durable
):
    """fetch during cuts returns messages or raises a typed error within its timeout;
    every message ends up delivered and acked."""
    publish_numbered(js, f"{stream.name}.f", 100)
    consumer = fault_client.jetstream(timeout=2).consumer(stream.name, "faults")
    seen = Deliveries(100, js, stream.name)
    calls = errors = 0
    while not seen.done():
        calls += 1
        assert calls < 200, "fetch never got through"
        if calls in (2, 4, 7):
            fault_proxy.cut_after(700, TO_CLIENT)  # a few messages into the batch
        started = time.monotonic()
        try:
            batch = consumer.fetch(10, timeout=1)
        except RETRYABLE:
            errors += 1
            batch = []
        assert time.monotonic() - started < 3
        for msg in batch:
            seen.record(msg)
    fault_proxy.wait(lambda p: p.cuts == 3)
    seen.check()
    assert_works(fault_client)


def test_messages_iterator_survives_cuts_and_a_stall(
    fault_proxy, fault_client, events, js, stream, durable
):
    """messages() keeps going through cuts and a stale stall; nothing is lost."""
    publish_numbered(js, f"{stream.name}.m", 200)
    consumer = fault_client.jetstream(timeout=2).consumer(stream.name, "faults")
    seen = Deliveries(200, js, stream.name)
    with consumer.messages(max_messages=20, expires=2, heartbeat=0.5) as it:
        while not seen.done():
            received = seen.received
            if received == 50:
                fault_proxy.cut()
            elif received == 100:
                fault_proxy.cut_after(300, TO_CLIENT)
            elif received == 150:
                fault_proxy.stall()
                events.wait(lambda e: e.disconnects == 3, timeout=5)
                fault_proxy.resume()
            seen.record(it.next(timeout=10))
    assert events.disconnects == 3
    fault_proxy.wait(lambda p: p.cuts == 2)
    seen.check()
    assert_works(fault_client)


def test_consume_callback_survives_cuts(fault_proxy, fault_client, events, js, stream, durable):
    """consume() delivers every message to the callback across two cuts."""
    publish_numbered(js, f"{stream.name}.c", 150)
    consumer = fault_client.jetstream(timeout=2).consumer(stream.name, "faults")
    seen = Deliveries(150, js, stream.name)
    warnings: list[BaseException] = []
    running = consumer.consume(
        seen.record, error_handler=warnings.append, max_messages=20, expires=2, heartbeat=0.5
    )
    try:
        for cut in (30, 90):
            with seen.cond:
                assert seen.cond.wait_for(lambda n=cut: len(seen.counts) >= n, 10)
            fault_proxy.cut()
            events.wait(lambda e, n=cut: e.reconnects == 1 + (n == 90))
        wait_for(seen.done, timeout=20, message=lambda: f"not done: {seen.counts}")
    finally:
        running.stop()
    seen.check()
    assert_works(fault_client)
    assert all(isinstance(w, jetstream_sync.NatsError) for w in warnings), warnings


def test_ordered_consumer_hands_over_every_sequence_once_in_order(
    fault_proxy, fault_client, events, js, stream
):
    """An ordered consumer's messages() across a cut, a mid-frame cut and a stall: every
    stream sequence exactly once, in order."""
    publish_numbered(js, f"{stream.name}.o", 300)
    ordered = fault_client.jetstream(timeout=2).ordered_consumer(stream.name)
    got: list[int] = []
    with ordered.messages(max_messages=25, expires=2, heartbeat=0.5) as it:
        while len(got) < 300:
            if len(got) == 60:
                fault_proxy.cut()
            elif len(got) == 150:
                fault_proxy.cut_after(500, TO_CLIENT)
            elif len(got) == 220:
                fault_proxy.stall()
                events.wait(lambda e: e.disconnects == 3, timeout=5)
                fault_proxy.resume()
            msg = it.next(timeout=10)
            got.append(msg.metadata.sequence.stream)
            assert msg.data == b"%d" % (len(got) - 1)
    assert got == list(range(1, 301))
    assert events.disconnects == 3
    assert_works(fault_client)


def test_ordered_fetch_through_cuts_has_no_gap_and_no_repeat(fault_proxy, fault_client, js, stream):
    """Ordered fetch() calls between and during cuts: sequences come once, in order."""
    publish_numbered(js, f"{stream.name}.of", 120)
    ordered = fault_client.jetstream(timeout=2).ordered_consumer(stream.name)
    got: list[int] = []
    calls = 0
    while len(got) < 120:
        calls += 1
        assert calls < 100, f"stuck at {len(got)}"
        if calls in (2, 5):
            fault_proxy.cut_after(600, TO_CLIENT)
        try:
            batch = ordered.fetch(15, timeout=1)
        except RETRYABLE:
            continue
        got += [m.metadata.sequence.stream for m in batch]
    assert got == list(range(1, 121))
    # The last fetches may have left a cut armed and not yet spent, or just spent: let
    # the link be, and the client reconnect if that cut caught it.
    fault_proxy.pass_through()
    wait_for(
        lambda: fault_client.flush(timeout=5) is None, ignore=jetstream_sync.ConnectionLostError
    )
    assert_works(fault_client)
