"""MsgQueue: a batch is queued whole when it fits, else up to the limits; the rest is refused."""

from __future__ import annotations

import functools
from collections import deque
from typing import Any

import pytest

from jetstream_sync._deadline import Deadline
from jetstream_sync._dispatch import MsgQueue
from jetstream_sync.msg import Msg
from tests.fixtures.signals import interrupted_at, taken_by_another_thread


def _msgs(*sizes: int) -> list[Msg]:
    return [Msg("q.x", "", b"x" * size) for size in sizes]


@pytest.mark.parametrize(
    ("msgs_limit", "bytes_limit", "batches", "refused", "kept"),
    [
        (10, 1000, [(5, 5, 5)], [0], 3),  # fits: queued whole
        (3, 1000, [(5, 5), (5, 5)], [0, 1], 3),  # the message limit, exactly
        (10, 12, [(5, 5), (5, 1)], [0, 1], 3),  # the byte limit: the small one still fits
        (10, 10, [(5, 5)], [0], 2),  # bytes exactly at the limit
    ],
)
def test_put_batch_keeps_what_fits_in_order(msgs_limit, bytes_limit, batches, refused, kept):
    """Each put_batch returns how many it refused; what it kept comes out in order."""
    queue = MsgQueue(msgs_limit, bytes_limit)
    sent = []
    for batch, expected in zip(batches, refused, strict=True):
        msgs = _msgs(*batch)
        sent.extend(msgs)
        assert queue.put_batch(msgs) == expected
    taken = queue.get_batch(100, Deadline(1))
    assert len(taken) == kept and queue.pending_bytes == 0
    assert all(m in sent for m in taken)
    assert [sent.index(m) for m in taken] == sorted(sent.index(m) for m in taken)


def test_pending_bytes_follow_a_whole_batch():
    """A batch queued whole counts its bytes; taking part of it gives them back."""
    queue = MsgQueue(100, 1000)
    assert queue.put_batch(_msgs(1, 2, 3, 4)) == 0
    assert (len(queue), queue.pending_bytes) == (4, 10)
    assert [len(m.data) for m in queue.get_batch(2, None)] == [1, 2]
    assert queue.pending_bytes == 7


def test_filled_counts_messages_and_stops_at_a_status():
    """filled(): enough messages, or a status message last (it ends a pull), or closed."""
    queue = MsgQueue(100, 1 << 20)
    assert not queue.filled(1)
    queue.put_batch(_msgs(1, 1))
    assert queue.filled(2) and not queue.filled(3)
    queue.put_batch([Msg("q.x", "", b"", b"NATS/1.0 408 Request Timeout\r\n\r\n")])
    assert queue.filled(10)
    woken = MsgQueue(100, 1 << 20)
    woken.interrupt()
    assert woken.filled(10)


class _EmptiedAfterCounting(deque):  # type: ignore[type-arg]
    """A deque that another thread empties between reading its length and its last item."""

    def __getitem__(self, index: Any) -> Any:
        self.clear()
        return super().__getitem__(index)


def test_filled_read_without_the_lock_survives_a_queue_emptied_meanwhile():
    """The queue cleared between the length and the last item (a close): False, no error."""
    queue = MsgQueue(100, 1 << 20)
    queue._items = _EmptiedAfterCounting(_msgs(1))
    assert queue.filled(2) is False


@pytest.mark.parametrize(
    "step",
    [
        lambda q: q.put_batch(_msgs(1, 2)),
        lambda q: q.get_batch(10, Deadline(1)),
        lambda q: q.get(Deadline(1)),
        lambda q: q.interrupt(),
        lambda q: q.close(),
    ],
    ids=["put_batch", "get_batch", "get", "interrupt", "close"],
)
def test_a_step_interrupted_at_any_point_leaves_the_queue_unlocked(step):
    """Ctrl-C on the main thread, at each point of a step in turn (the reader routes on
    the main thread when a request there reads for itself; users take messages there):
    the queue's lock is never left held, or the reader thread would block on it for good."""
    points = 0
    while True:
        points += 1
        queue = MsgQueue(100, 1 << 20)
        queue.put_batch(_msgs(3))
        if not interrupted_at(points, functools.partial(step, queue)):
            break
        assert taken_by_another_thread(queue._lock), f"left locked at point {points}"
    assert points > 2
