"""Joining the client's threads without waiting in a circle.

A callback may end another subscription (joining its thread) while that
subscription's callback, or a connection callback, ends this one or closes the
client (joining this thread): each would wait for the other forever. Every
such join records who waits for whom, and the join that would close a circle
does not wait: the thread it skipped goes on once the caller's callback returns.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ._process_lock import ProcessLock

_lock = ProcessLock()
_waits: dict[int, int] = {}  # thread ident -> ident of the thread it is joining


@contextmanager
def waiting_for(target: int | None) -> Iterator[bool]:
    """Record that this thread waits for thread ``target`` while the block runs.

    Yields False, recording nothing, when ``target`` already waits (directly or
    through others) for this thread: the caller must not wait then.
    """
    me = threading.get_ident()
    with _lock.here():
        waiter = target
        while waiter is not None and waiter != me:
            waiter = _waits.get(waiter)
        cycle = waiter == me
        previous = _waits.get(me)  # set when a signal handler's close() runs during a join
        if not cycle and target is not None:
            _waits[me] = target
    if cycle or target is None:
        yield not cycle
        return
    try:
        yield True
    finally:
        with _lock.here():
            if previous is None:
                del _waits[me]
            else:
                _waits[me] = previous


def join_thread(thread: threading.Thread, timeout: float | None = None) -> bool:
    """Join ``thread`` unless that closes a circle of waits; False if it still runs.

    Returns True at once when ``thread`` waits for the caller's thread: it ends
    once the caller's callback returns.
    """
    with waiting_for(thread.ident) as may_wait:
        if may_wait:
            thread.join(timeout)
            return not thread.is_alive()
    return True
