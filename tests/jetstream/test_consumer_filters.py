"""Every consumer kind with every filter kind consumes exactly what it should.

Kinds: durable pull, ephemeral pull, ``create_or_update_consumer``,
``update_consumer`` (from another filter), ordered, nats.py's ``subscribe``
(push) and ``pull_subscribe``. Filters: none, a literal, ``*`` in the
middle, ``>`` at the end, several (``filter_subjects``). The stream holds
messages on matching and non-matching subjects; each consumer takes the
matching ones, in order, and its info shows it was given nothing else. A
second round published while the consumer exists checks live delivery.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jetstream_sync.jetstream.consumer_config import ConsumerConfig
from jetstream_sync.jetstream.info import ConsumerInfo
from jetstream_sync.jetstream.stream import Stream
from tests.fixtures.polling import wait_for

# Published in this order (tails after the stream name), twice.
PUBLISHED = [
    "orders.eu.created",
    "orders.us.created",
    "orders.eu.paid",
    "ship.eu",
    "orders.eu.created.v2",
    "misc",
    "orders.us.paid",
]

# filter kind -> (filter tails, or None for no filter; the tails that match, in order)
FILTERS: dict[str, tuple[list[str] | None, list[str]]] = {
    "none": (None, PUBLISHED),
    "literal": (["orders.eu.created"], ["orders.eu.created"]),
    "star": (["orders.*.created"], ["orders.eu.created", "orders.us.created"]),
    "gt": (
        ["orders.>"],
        [
            "orders.eu.created",
            "orders.us.created",
            "orders.eu.paid",
            "orders.eu.created.v2",
            "orders.us.paid",
        ],
    ),
    "several": (["orders.*.paid", "ship.>"], ["orders.eu.paid", "ship.eu", "orders.us.paid"]),
}


def _publish_round(js, stream: Stream) -> None:
    for tail in PUBLISHED:
        js.publish(f"{stream.name}.{tail}", tail.encode())


def _filter_fields(stream: Stream, tails: list[str] | None) -> dict[str, Any]:
    """Config fields: one filter goes in filter_subject, several in filter_subjects."""
    if tails is None:
        return {}
    full = [f"{stream.name}.{t}" for t in tails]
    return {"filter_subject": full[0]} if len(full) == 1 else {"filter_subjects": full}


def _tails(stream: Stream, msgs) -> list[str]:
    prefix = stream.name + "."
    for m in msgs:
        assert m.subject.startswith(prefix)
    return [m.subject[len(prefix) :] for m in msgs]


class PullKind:
    """Consumes through a ``Consumer`` (or a compat ``PullSubscription``'s consumer)."""

    def __init__(self, consumer, info: Callable[[], ConsumerInfo]) -> None:
        self.consumer = consumer
        self.info = info

    def take(self, n: int) -> list:
        msgs = self.consumer.fetch(n, timeout=5)
        for m in msgs:
            m.ack_sync()
        return msgs

    def take_available(self) -> list:
        msgs = self.consumer.fetch_no_wait(50)
        for m in msgs:
            m.ack_sync()
        return msgs

    def close(self) -> None:
        """Nothing to stop: the stream (and its consumers) is deleted by the fixture."""


class OrderedKind(PullKind):
    """The ordered consumer: no acks, no consumer info to read from the test."""

    def __init__(self, consumer) -> None:
        super().__init__(consumer, info=lambda: None)

    def take(self, n: int) -> list:
        return self.consumer.fetch(n, timeout=5)

    def take_available(self) -> list:
        return self.consumer.fetch_no_wait(50)

    def close(self) -> None:
        self.consumer.close()


class PushKind:
    """nats.py's ``js.subscribe``: a push consumer on a deliver subject."""

    def __init__(self, sub) -> None:
        self.sub = sub
        self.info = sub.consumer_info

    def take(self, n: int) -> list:
        msgs = [self.sub.next_msg(timeout=5) for _ in range(n)]
        for m in msgs:
            m.ack_sync()
        return msgs

    def take_available(self) -> list:
        return []  # a push consumer's "nothing else" is read from its info

    def close(self) -> None:
        self.sub.unsubscribe()


def _durable(js, stream, tails):
    cons = stream.create_consumer(durable_name="dur", **_filter_fields(stream, tails))
    return PullKind(cons, cons.info)


def _ephemeral(js, stream, tails):
    cons = stream.create_consumer(**_filter_fields(stream, tails))
    assert cons.is_ephemeral
    return PullKind(cons, cons.info)


def _create_or_update(js, stream, tails):
    stream.create_or_update_consumer(durable_name="cu", filter_subject=f"{stream.name}.none")
    cons = stream.create_or_update_consumer(durable_name="cu", **_filter_fields(stream, tails))
    return PullKind(cons, cons.info)


def _update(js, stream, tails):
    stream.create_consumer(durable_name="up", filter_subject=f"{stream.name}.none")
    fields = _filter_fields(stream, tails) or {"filter_subject": None}
    cons = stream.update_consumer(durable_name="up", **fields)
    return PullKind(cons, cons.info)


def _ordered(js, stream, tails):
    filters = [f"{stream.name}.{t}" for t in tails or ()]
    return OrderedKind(stream.ordered_consumer(filter_subjects=filters))


def _compat_pull(js, stream, tails):
    full = [f"{stream.name}.{t}" for t in tails]
    config = ConsumerConfig(filter_subjects=full) if len(full) > 1 else None
    psub = js.pull_subscribe(full[0], durable="cp", config=config)
    return PullKind(psub.consumer, psub.consumer_info)


def _compat_push(js, stream, tails):
    full = [f"{stream.name}.{t}" for t in tails]
    config = ConsumerConfig(filter_subjects=full) if len(full) > 1 else None
    sub = js.subscribe(full[0], durable="cs", config=config, stream=stream.name, manual_ack=True)
    return PushKind(sub)


KINDS = {
    "durable": _durable,
    "ephemeral": _ephemeral,
    "create_or_update": _create_or_update,
    "update": _update,
    "ordered": _ordered,
    "compat_pull_subscribe": _compat_pull,
    "compat_subscribe": _compat_push,
}
# nats.py's subscribe/pull_subscribe always filter on the subject they are given.
CASES = [
    pytest.param(kind, flt, id=f"{kind}-{flt}")
    for kind in KINDS
    for flt in FILTERS
    if not (kind.startswith("compat") and flt == "none")
]


@pytest.mark.parametrize(("kind", "flt"), CASES)
def test_consumer_takes_exactly_its_filter(js, stream, kind, flt):
    """Stored and live messages: the matching ones in order, nothing else."""
    tails, expected = FILTERS[flt]
    _publish_round(js, stream)
    consumer = KINDS[kind](js, stream, tails)
    try:
        assert _tails(stream, consumer.take(len(expected))) == expected
        assert consumer.take_available() == []
        _publish_round(js, stream)
        assert _tails(stream, consumer.take(len(expected))) == expected
        assert consumer.take_available() == []
        info = consumer.info()
        if info is not None:
            # the consumer was given exactly the matching messages, and all were acked
            assert info.delivered.consumer_seq == 2 * len(expected)
            assert info.num_pending == 0
            wait_for(lambda: consumer.info().num_ack_pending == 0, timeout=5)
    finally:
        consumer.close()


def test_filter_table_agrees_with_the_server(js, stream):
    """The server's per-subject counts under each filter match the table's expectations."""
    _publish_round(js, stream)
    for flt, (tails, expected) in FILTERS.items():
        matched: set[str] = set()
        for tail in tails or [">"]:
            counts = stream.info(subjects_filter=f"{stream.name}.{tail}").state.subjects
            matched |= {s[len(stream.name) + 1 :] for s in counts or {}}
        assert matched == set(expected), flt
