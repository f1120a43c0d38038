"""Request/reply over one wildcard inbox subscription (``<prefix>.<nuid>.*``).

Each request gets a token; the reply subject is ``<inbox>.<token>``. Whichever
thread reads the socket (see :mod:`jetstream_sync._connection.read_role`) hands a reply to
the waiting thread by releasing a lock the waiter blocks on: the cheapest
cross-thread wake-up CPython has (and none at all when the waiter is the thread
that read it). When the connection
drops, every request then waiting is woken at once with the reason
(:meth:`RequestMux.fail_all`): its reply was addressed to the lost connection.
When the server refuses the inbox's SUB (the connection's subscription limit,
or a permission), :meth:`RequestMux.refuse` fails its requests for good; the
connection then subscribes a new inbox for the next request. When it refuses a
request's PUB by permission, :meth:`RequestMux.refuse_publish` fails that
request: no reply can come, and the ``-ERR`` names only the subject.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from .._deadline import Deadline
from ..msg import Msg


class ReplyWaiter:
    """One outstanding request: the requester blocks in :meth:`wait`.

    Attributes:
        msg: the reply, once delivered (None answers a flush's PING).
        error: why the request failed, once failed.
        done: True once delivered or failed.
        subject: the subject the request was published to ("" for a PING).
    """

    __slots__ = ("_lock", "msg", "error", "done", "subject")

    def __init__(self, subject: str = "") -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.msg: Msg | None = None
        self.error: BaseException | None = None
        self.done = False
        self.subject = subject

    def deliver(self, msg: Msg | None) -> None:
        """Hand over the reply (the thread reading); None answers a flush's PING."""
        self.msg = msg
        self.done = True
        self._lock.release()

    def fail(self, error: BaseException) -> None:
        """Wake the requester with ``error`` (the connection dropped or the client closed)."""
        self.error = error
        self.done = True
        self._lock.release()

    def wait(self, deadline: Deadline) -> bool:
        """Block until delivered or failed; False when the deadline passed first."""
        acquire = self._lock.acquire
        while True:
            left = deadline.slice()
            if left <= 0:
                return acquire(blocking=False)
            if acquire(timeout=left):
                return True


class RequestMux:
    """The token → waiter table behind one wildcard inbox.

    Every method may be called from any thread: a waiter leaves the table
    exactly once (answered, failed or forgotten), under one lock, so it is
    woken at most once.
    """

    def __init__(self, inbox: str) -> None:
        self.prefix = inbox + "."
        self.prefix_bytes = self.prefix.encode()
        self.subject = inbox + ".*"
        self._prefix_len = len(self.prefix)
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()
        self._waiters: dict[str, ReplyWaiter] = {}
        #: Why no reply can ever come (the server refused the inbox), or None.
        self.refused: BaseException | None = None

    def new_token(self) -> str:
        """A fresh token: the reply subject is :attr:`prefix` + token (nothing registered yet).

        A requester that reads its own reply registers the token only if the
        reply did not come alone (see ``ReadRole.round_trip``): until it
        frees the read role, nobody else can route that reply.
        """
        return str(next(self._tokens))  # itertools.count: atomic under the GIL

    def register(self, token: str, subject: str) -> ReplyWaiter:
        """The waiter the reply to ``<prefix><token>`` (a request published to
        ``subject``) will wake; :meth:`forget` ends it."""
        waiter = ReplyWaiter(subject)
        with self._lock:
            refused = self.refused
            if refused is None:
                self._waiters[token] = waiter
        if refused is not None:
            waiter.fail(refused)
        return waiter

    def forget(self, token: str) -> None:
        """Drop a finished or abandoned request."""
        with self._lock:
            self._waiters.pop(token, None)

    def route(self, msg: Msg) -> None:
        """Wake the requester ``msg`` answers; late or unknown replies are dropped."""
        with self._lock:
            waiter = self._waiters.pop(msg.subject[self._prefix_len :], None)
        if waiter is not None:
            waiter.deliver(msg)

    def fail(self, token: str, error: BaseException) -> None:
        """Wake the requester waiting for ``token``'s reply with ``error`` (if it still waits)."""
        with self._lock:
            waiter = self._waiters.pop(token, None)
        if waiter is not None:
            waiter.fail(error)

    def refuse_publish(self, subject: str, error: Callable[[], BaseException]) -> None:
        """The server refused one PUB to ``subject``: fail the oldest request published
        there with ``error()``.

        The server checks a connection's PUBs in the order it sent them and
        answers each refusal with its own ``-ERR``, in that order. (A plain
        publish refused there may fail a request a moment before its own
        ``-ERR`` would: the same permission refuses both.)
        """
        with self._lock:
            for token, waiter in self._waiters.items():
                if waiter.subject == subject:
                    del self._waiters[token]
                    break
            else:
                return
        waiter.fail(error())

    def fail_all(self, error: BaseException) -> None:
        """Wake every waiting requester with ``error``."""
        with self._lock:
            waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.fail(error)

    def refuse(self, error: BaseException) -> None:
        """The server refused the inbox: fail every request, now and later, with ``error``."""
        with self._lock:
            self.refused = error
            waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.fail(error)
