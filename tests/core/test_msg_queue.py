"""MsgQueue: a batch is queued whole when it fits, else up to the limits; the rest is refused.
The callback thread's wait on its Doorbell: woken by a put, never left with a stale ring."""

from __future__ import annotations

import functools
import threading
from collections import deque
from time import monotonic
from typing import Any

import pytest

from jetstream_sync import _dispatch
from jetstream_sync._deadline import Deadline
from jetstream_sync._dispatch import Doorbell, MsgQueue
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


def test_next_for_worker_takes_in_order_then_none_once_closed_and_empty():
    queue = MsgQueue(100, 1 << 20)
    queue.put_batch(_msgs(1, 2))
    queue.close()
    assert [len(queue.next_for_worker().data), len(queue.next_for_worker().data)] == [1, 2]
    assert queue.next_for_worker() is None
    assert queue.pending_bytes == 0


@pytest.mark.parametrize(
    "wake",
    [lambda q: q.put_batch(_msgs(7)), lambda q: q.close(), lambda q: q.close_at(0, 0)],
    ids=["put_batch", "close", "close_at"],
)
def test_a_waiting_worker_is_woken_by_the_ring_not_by_its_wait_slice(monkeypatch, wake):
    """With a wait slice longer than the test's patience, only the doorbell can wake it."""
    monkeypatch.setattr(_dispatch, "WORKER_WAIT_SLICE", 600.0)
    queue = MsgQueue(100, 1 << 20)
    got: list[Msg | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.next_for_worker()), daemon=True)
    worker.start()
    with queue._lock:  # armed under the queue's lock before it waits: ring after that
        while not queue._bell._armed:
            queue._wait(0.01)  # the worker takes the lock in turn; no ring is missed
    wake(queue)
    worker.join(timeout=10)
    woken = not worker.is_alive()
    if not woken:  # free it for the test's own end: the ring it missed, by hand
        queue._bell._lock.release()
        worker.join()
    assert woken
    assert [None if m is None else len(m.data) for m in got] in ([7], [None])


def test_an_idle_worker_waits_twice_as_long_each_time_up_to_the_idle_slice(monkeypatch):
    """Each look that finds nothing doubles the next wait (0.5 s, then up to 8 s), so 3,000
    idle callback subscriptions cost about 1 % of a core instead of 18 %; a message
    starts the waits over at 0.5 s. The doorbell's wait is replaced by one that times
    out at once and, at the 7th and 9th wait, queues a message without the worker."""
    queue = MsgQueue(100, 1 << 20)
    waits: list[float] = []

    def times_out(bell: Doorbell, timeout: float) -> bool:
        waits.append(timeout)
        if len(waits) in (7, 9):
            queue.put_batch(_msgs(len(waits)))  # rings; settle() takes the ring back
        return False

    monkeypatch.setattr(Doorbell, "wait", times_out)
    assert len(queue.next_for_worker().data) == 7
    assert len(queue.next_for_worker().data) == 9
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 0.5, 1.0]


def test_a_waiting_reader_waits_twice_as_long_each_time_within_its_deadline(monkeypatch):
    """next_msg(), a messages() iterator and the consume and watch threads wait the same
    way, bounded by their deadline: 500 idle consume() consumers cost 2.9 % of a core
    where they cost 7.4 %. The Condition wait is replaced by one that returns at once
    and queues a message at the 6th wait."""
    queue = MsgQueue(100, 1 << 20)
    waits: list[float] = []

    def returns_at_once(self: MsgQueue, timeout: float) -> None:
        waits.append(timeout)
        if len(waits) == 6:
            queue.put_batch(_msgs(6))

    monkeypatch.setattr(MsgQueue, "_wait", returns_at_once)
    assert len(queue.get(None).data) == 6
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    waits.clear()
    deadline = Deadline(1.2)

    def expires_at_the_third(self: MsgQueue, timeout: float) -> None:
        waits.append(timeout)
        if len(waits) == 3:
            deadline.end = monotonic() - 1

    monkeypatch.setattr(MsgQueue, "_wait", expires_at_the_third)
    with pytest.raises(TimeoutError):
        queue.get(deadline)
    assert waits[:2] == [0.5, 1.0] and 1.0 < waits[2] <= 1.2  # the third: what was left


def test_a_doorbell_rings_only_an_armed_waiter():
    bell = Doorbell()
    bell.ring()  # nobody armed: no effect
    assert not bell.wait(0)
    bell.arm()
    bell.ring()
    bell.ring()  # one ring per wait: the second is not a release of a free lock
    assert bell.wait(0)
    assert not bell.wait(0)


def test_a_ring_after_a_timed_out_wait_is_taken_back():
    """Rung between the timeout and ``settle``: the next wait blocks, the next ring works."""
    bell = Doorbell()
    bell.arm()
    assert not bell.wait(0)
    bell.ring()  # the reading thread, just after the timeout
    bell.settle()
    assert not bell.wait(0)  # no stale ring left behind
    bell.arm()
    bell.ring()  # would raise RuntimeError on a lock left released
    assert bell.wait(0)


def test_a_put_interrupted_at_any_point_leaves_the_doorbell_whole():
    """Ctrl-C at each point of a put for an armed worker (the main thread may route):
    the worker's next look finds the message, and the doorbell is armed no more and held."""
    points = 0
    while True:
        points += 1
        queue = MsgQueue(100, 1 << 20)
        bell = queue._bell
        bell.arm()  # a callback thread waits
        reached = interrupted_at(points, functools.partial(queue.put_batch, _msgs(5)))
        if not bell.wait(0):  # the worker's wait: rung, or its slice ended
            with queue._lock:
                bell.settle()
        assert not bell._armed and not bell.wait(0), f"doorbell left rung at point {points}"
        if not reached:
            break
    assert points > 2
