"""A lock shared by every client of the process, which a forked child gets unheld."""

from __future__ import annotations

import os
import threading
import weakref

_every: weakref.WeakSet[ProcessLock] = weakref.WeakSet()


class ProcessLock:
    """Holds this process's ``threading.Lock`` of some state every client shares.

    A lock that one of the parent's threads held at a fork stays held in the
    child, where no thread is left to release it: the child's first use of a
    process-wide lock would wait forever. This one is replaced in the child by an
    at-fork handler after ``os.fork()``, and, after a fork from C (uWSGI forks its
    workers so, and no at-fork handler runs), by the first :meth:`here` that sees
    a new process id. That check is a system call: for locks taken once per call
    or per thread, not per message.

    Take it as ``with lock.here():``. The ``with`` then holds a plain lock, whose
    acquire and release no signal handler's exception can come between (a
    ``with`` on a lock whose ``__exit__`` is Python code could be left unreleased
    by one: the handler runs as that method starts).
    """

    def __init__(self) -> None:
        self._renew()
        _every.add(self)

    def _renew(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def here(self) -> threading.Lock:
        """The lock of this process (made anew if this is a forked child's first use)."""
        if self._pid != os.getpid():
            self._renew()
        return self._lock


def _renew_all() -> None:
    for lock in list(_every):
        lock._renew()


os.register_at_fork(after_in_child=_renew_all)
