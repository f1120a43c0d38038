"""A lock shared by every client of the process, which a forked child gets unheld."""

from __future__ import annotations

import os
import threading
import weakref

_every: weakref.WeakSet[ProcessLock] = weakref.WeakSet()


class ProcessLock:
    """A ``threading.Lock`` (as a context manager) made anew in a forked child.

    A lock that one of the parent's threads held at the fork stays held in the
    child, where no thread is left to release it: the child's first use of a
    process-wide lock would wait forever. This one is replaced in the child by an
    at-fork handler after ``os.fork()``, and, after a fork from C (uWSGI forks its
    workers so, and no at-fork handler runs), by the first acquire that sees a new
    process id. That check is a system call per acquire: for locks taken once per
    call or per thread, not per message.
    """

    def __init__(self) -> None:
        self._renew()
        _every.add(self)

    def _renew(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def __enter__(self) -> bool:
        if self._pid != os.getpid():
            self._renew()
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _renew_all() -> None:
    for lock in list(_every):
        lock._renew()


os.register_at_fork(after_in_child=_renew_all)
