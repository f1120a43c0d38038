"""Walk-throughs end to end against a real server, checking the stream's state at each step.

The first follows NATS by Example's "Interest-based Stream in JetStream"
(stream ``EVENTS`` on ``events.>``, interest retention, durable pull
consumers on ``events.>`` and on a narrower filter); the numbers asserted
are the ones its output shows. The second walks an ORDERS workflow on
``orders.>`` with consumers on ``orders.>``, ``orders.*.created`` and several
filters. Each test has its own server, so the walk-throughs' own names are used.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jetstream_sync
from jetstream_sync.errors import BadSubjectError
from jetstream_sync.jetstream.enums import AckPolicy, RetentionPolicy
from tests.fixtures.polling import wait_for


@pytest.fixture
def js_fresh(nats_server) -> Iterator[jetstream_sync.JetStreamContext]:
    """A JetStream context on a server of this test's own."""
    with jetstream_sync.connect(nats_server.url) as client:
        yield client.jetstream()


def _state(stream) -> tuple[int, int, int, int, int]:
    """(messages, bytes, first_seq, last_seq, consumer_count) as the server reports them now."""
    s = stream.info().state
    return s.messages, s.bytes, s.first_seq, s.last_seq, s.consumer_count


# Stored size of an empty message on a 20-character subject (the file store's record).
EMPTY_ON_20 = 50


def test_interest_based_stream_walk_through(js_fresh):
    """NATS by Example, interest-based stream: every state the walk-through prints."""
    js = js_fresh
    events = js.create_stream(
        name="EVENTS", retention=RetentionPolicy.INTEREST, subjects=["events.>"]
    )

    # No consumers: messages are appended and dropped at once.
    js.publish("events.page_loaded", b"")
    js.publish("events.mouse_clicked", b"")
    ack = js.publish("events.input_focused", b"")
    assert ack.seq == 3
    assert _state(events) == (0, 0, 4, 3, 0)

    # A consumer (no subscription needed) shows interest: new messages stay.
    first = events.create_consumer(
        durable_name="processor-1", filter_subject="events.>", ack_policy=AckPolicy.EXPLICIT
    )
    js.publish("events.mouse_clicked", b"")
    js.publish("events.input_focused", b"")
    assert _state(events) == (2, 2 * EMPTY_ON_20, 4, 5, 1)

    # Fetched and acked (synchronously): gone.
    for msg in first.fetch(2, timeout=5):
        msg.ack_sync()
    assert _state(events) == (0, 0, 6, 5, 1)

    # Two consumers: a message stays until both acked it.
    second = events.create_consumer(
        durable_name="processor-2", filter_subject="events.>", ack_policy=AckPolicy.EXPLICIT
    )
    js.publish("events.input_focused", b"")
    js.publish("events.mouse_clicked", b"")
    msgs = second.fetch(2, timeout=5)
    # a late consumer cannot show interest in what is already gone
    assert [m.metadata.sequence.stream for m in msgs] == [6, 7]
    msgs[0].ack()
    msgs[1].ack_sync()
    assert _state(events) == (2, 2 * EMPTY_ON_20, 6, 7, 2)

    for msg in first.fetch(2, timeout=5):
        msg.ack_sync()
    assert _state(events) == (0, 0, 8, 7, 2)

    # Interest follows the filter: processor-3 wants only events.mouse_clicked.
    third = events.create_consumer(
        durable_name="processor-3",
        filter_subject="events.mouse_clicked",
        ack_policy=AckPolicy.EXPLICIT,
    )
    js.publish("events.mouse_clicked", b"")
    (msg,) = first.fetch(1, timeout=5)
    msg.term()
    (msg,) = second.fetch(1, timeout=5)
    msg.ack_sync()
    assert _state(events) == (1, EMPTY_ON_20, 8, 8, 3)
    wait_for(lambda: first.info().ack_floor.stream_seq == 8, message="the term was not applied")
    assert _state(events) == (1, EMPTY_ON_20, 8, 8, 3)

    # Past the walk-through's end: the narrow consumer acks, the stream empties.
    (msg,) = third.fetch(1, timeout=5)
    assert msg.subject == "events.mouse_clicked"
    msg.ack_sync()
    assert _state(events) == (0, 0, 9, 8, 3)

    # A message nobody's filter matches is not kept once the wide consumers are gone.
    first.delete()
    second.delete()
    js.publish("events.page_loaded", b"")
    assert _state(events) == (0, 0, 10, 9, 1)


def test_orders_workflow(js_fresh):
    """An ORDERS stream on ``orders.>``: consumers by region, by event and by several events."""
    js = js_fresh
    orders = js.create_stream(name="ORDERS", subjects=["orders.>"], allow_direct=True)
    assert js.stream_name_by_subject("orders.>") == "ORDERS"
    assert js.stream_name_by_subject("orders.*.created") == "ORDERS"

    audit = orders.create_consumer(durable_name="audit", filter_subject="orders.>")
    created = orders.create_consumer(durable_name="created", filter_subject="orders.*.created")
    money = orders.create_consumer(
        durable_name="money", filter_subjects=["orders.*.paid", "orders.*.refunded"]
    )
    europe = js.pull_subscribe("orders.eu.>", durable="europe")

    flow = [
        ("orders.eu.created", b"o1"),
        ("orders.us.created", b"o2"),
        ("orders.eu.paid", b"o1"),
        ("orders.eu.shipped", b"o1"),
        ("orders.us.paid", b"o2"),
        ("orders.us.refunded", b"o2"),
        ("orders.eu.created", b"o3"),
    ]
    for subject, data in flow:
        js.publish(subject, data)
    state = orders.info().state
    assert (state.messages, state.first_seq, state.last_seq, state.consumer_count) == (7, 1, 7, 4)

    # Publishing to a wildcard is refused before anything is sent.
    with pytest.raises(BadSubjectError):
        js.publish("orders.*.created", b"nope")
    assert orders.info().state.last_seq == 7

    def pending() -> dict[str, int]:
        return {c.name: c.info().num_pending for c in (audit, created, money, europe.consumer)}

    def settles_at(expected: dict[str, int]) -> None:
        # The server counts a stored message into each existing consumer's
        # num_pending from its own signal queue, a moment after the PubAck.
        wait_for(lambda: pending() == expected, message=lambda: f"{pending()} != {expected}")

    settles_at({"audit": 7, "created": 3, "money": 3, "europe": 4})

    got = created.fetch(10, timeout=1)
    assert [(m.subject, m.data) for m in got] == [
        ("orders.eu.created", b"o1"),
        ("orders.us.created", b"o2"),
        ("orders.eu.created", b"o3"),
    ]
    for m in got:
        m.ack_sync()
    got = money.fetch(10, timeout=1)
    assert [m.subject for m in got] == ["orders.eu.paid", "orders.us.paid", "orders.us.refunded"]
    for m in got:
        m.ack_sync()
    got = europe.fetch(10, timeout=1)
    assert [m.metadata.sequence.stream for m in got] == [1, 3, 4, 7]
    for m in got:
        m.ack_sync()
    got = audit.fetch(5, timeout=1)
    assert [m.metadata.sequence.stream for m in got] == [1, 2, 3, 4, 5]
    for m in got:
        m.ack_sync()
    assert pending() == {"audit": 2, "created": 0, "money": 0, "europe": 0}
    info = audit.info()
    assert (info.ack_floor.stream_seq, info.num_ack_pending) == (5, 0)

    # Lookups by wildcard: the newest per filter, the counts per subject.
    assert orders.direct_get_last_for_subject("orders.*.paid").data == b"o2"
    assert orders.direct_get_last_for_subject("orders.eu.>").subject == "orders.eu.created"
    assert orders.get_last_msg_for_subject("orders.*.shipped").seq == 4
    counts = orders.info(subjects_filter="orders.*.created").state.subjects
    assert counts == {"orders.eu.created": 2, "orders.us.created": 1}
    assert [m.seq for m in orders.get_msgs(subject="orders.us.>")] == [2, 5, 6]

    # A new order flows to exactly the consumers whose filters match it.
    js.publish("orders.us.created", b"o4")
    settles_at({"audit": 3, "created": 1, "money": 0, "europe": 0})

    # Purging by wildcard removes what matches; a limits stream keeps the rest.
    assert orders.purge(subject="orders.*.refunded") == 1
    state = orders.info().state
    assert (state.messages, state.first_seq, state.last_seq) == (7, 1, 8)
    settles_at({"audit": 2, "created": 1, "money": 0, "europe": 0})
