"""``_signals.mend``: a pure-Python RLock left taken by an interrupt is freed, even when
another interrupt lands inside the mending (gevent's hang of the window_lock check)."""

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest

from jetstream_sync._signals import mend
from tests.fixtures.signals import interrupted_at


def _owned(lock: Any) -> None:
    lock.acquire()


def _taken_without_owner(lock: Any) -> None:
    lock._block.acquire()  # an interrupt between the inner acquire and setting the owner


@pytest.mark.parametrize("leave", [_owned, _taken_without_owner])
def test_mend_interrupted_at_any_point_still_frees_the_lock(leave):
    """At every point inside mend in turn, a KeyboardInterrupt lands; mend drops it, starts
    over, and the lock is free afterwards: a later acquire does not wait (one that escaped
    mend is dropped by interrupted_at, and the lock is found taken). Point 1, the entry to
    mend itself, is the caller's: one landing there escapes before mend began."""
    point = 2
    while True:
        lock = threading._PyRLock()  # what threading.RLock is under gevent and eventlet
        leave(lock)
        reached = interrupted_at(point, functools.partial(mend, lock), KeyboardInterrupt)
        assert lock._owner is None and lock._count == 0
        assert lock._block.acquire(blocking=False), f"left taken, interrupted at {point}"
        lock._block.release()
        if not reached:
            break
        point += 1
    assert point > 3  # mend has points to land on


def test_mend_leaves_a_c_rlock_alone():
    """The C RLock of OS threads has whole steps: mend does not touch it."""
    lock = threading.RLock()
    with lock:
        mend(lock)
        assert lock._is_owned()
