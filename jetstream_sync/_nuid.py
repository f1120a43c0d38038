"""Unique, subject-safe identifiers for inboxes (NUID style: random prefix + counter)."""

from __future__ import annotations

import os
import secrets

from ._process_lock import ProcessLock

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_PREFIX_LEN = 12
_SEQ_LEN = 10
_MAX_SEQ = 62**_SEQ_LEN


def _base62(value: int, width: int) -> str:
    out = []
    for _ in range(width):
        value, digit = divmod(value, 62)
        out.append(_DIGITS[digit])
    return "".join(reversed(out))


class Nuid:
    """A thread-safe generator of 22-character base62 identifiers, unique per process.

    A forked child starts a new random prefix. Not only through
    ``os.register_at_fork``: servers that fork from C (uWSGI's workers, unless
    ``--py-call-osafterfork``) run no at-fork handler, so :meth:`next` also
    compares the pid. Two workers sharing a prefix would share their request
    inboxes, and each would read the other's replies. Its lock is a
    :class:`ProcessLock`: a parent's thread making an inbox at the fork must
    not leave the child's first request waiting for it.
    """

    def __init__(self) -> None:
        self._lock = ProcessLock()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._prefix = "".join(secrets.choice(_DIGITS) for _ in range(_PREFIX_LEN))
        self._seq = secrets.randbelow(_MAX_SEQ // 2)
        self._inc = 33 + secrets.randbelow(300)

    def next(self) -> str:
        """Return a new identifier, unique for this process."""
        with self._lock.here():
            self._seq += self._inc
            if self._seq >= _MAX_SEQ or self._pid != os.getpid():
                self._reset()
            return self._prefix + _base62(self._seq, _SEQ_LEN)


NUID = Nuid()
# A forked child must not hand out the parent's next identifiers.
os.register_at_fork(after_in_child=NUID._reset)
