"""PINGs in flight and the flushes waiting for their PONGs.

The server answers PINGs in order, so PONGs are matched to PINGs first in,
first out. A flush waits on a :class:`~jetstream_sync._connection.request_mux.ReplyWaiter`;
a keep-alive PING has no waiter. A flush that gave up waiting leaves a
placeholder in its place, so its late PONG is consumed by no one instead of
completing the next flush before the server has that flush's data. While the
connection is down, new flushes are deferred: their PINGs go out on the next
connection, after whatever was buffered meanwhile. ``Writer.write_ping``
registers a PING and appends it to the write buffer under the writer's lock
and this tracker's, so the FIFO's order is the order of the PINGs in the
stream; between the registration and the append there is no call, so a signal
handler's exception (see :mod:`jetstream_sync._signals`) cannot leave one
without the other.

Whether the server refused one SUB at the connection's subscription limit is
read off the PONGs too. nats-server answers a SUB past a connection's
``max_subscriptions`` (the server's, the account's or the user's, whichever is
lowest) with ``-ERR 'Maximum Subscriptions Exceeded'`` and keeps the
connection; the text names no subscription. But the server handles a
connection's operations in order and sends their -ERRs and PONGs in that order
(``processSubEx`` sends the -ERR as it reads the SUB). So a SUB written between
two PINGs, with nothing else between them, was refused exactly when such an
-ERR arrives between their two PONGs: the -ERR of an earlier SUB comes before
the first PONG, that of a later SUB after the second. A :class:`SubscribeCheck`
stands for both PINGs in the FIFO; ``Writer.write_checked`` writes ``PING SUB
PING`` in one step. It costs two PINGs and no wait.

The re-subscription sent first on a new connection is checked the same way,
one PING between each two SUBs (``PING SUB1 PING SUB2 ... SUBn PING``): a
:class:`ResubscribeCheck` stands for its ``n + 1`` PINGs, and the -ERRs that
arrive between the PONGs ``k`` and ``k + 1`` are those of ``SUBk``. A server
that came back with a lower limit refuses the subscriptions past it: each is
then named, not left looking alive.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from .request_mux import ReplyWaiter


class PongWaiter(Protocol):
    """What a PING's PONG goes to: a flush's :class:`ReplyWaiter`, or a :class:`SubscribeCheck`."""

    def deliver(self, msg: None) -> None:
        """The PONG arrived (the reading thread)."""

    def fail(self, error: BaseException) -> None:
        """The connection dropped (or the client closed) before the PONG."""


# Stands in the FIFO for a flush that timed out: its PONG wakes no one.
_ABANDONED = ReplyWaiter()


class PingTracker:
    """The FIFO of outstanding PINGs, with the keep-alive count."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Guards the FIFO; ``Writer.write_ping`` holds it around :meth:`register_locked`."""
        self._in_flight: deque[PongWaiter | None] = deque()
        self._deferred: list[ReplyWaiter] = []
        self.keepalives_unanswered = 0

    def register_locked(self, waiter: ReplyWaiter | None, connected: bool) -> bool:
        """Account for a PING about to be written; False when it must not be written now.

        The caller holds :attr:`lock`. While the connection is down
        (``connected`` False) a flush's waiter is kept for the next connection
        and a keep-alive is dropped. The registration is the last step, and
        neither it nor what follows calls anything (``+=``, not ``append``):
        the caller appends the PING before any signal handler can run.
        """
        if not connected:
            if waiter is not None:
                self._deferred.append(waiter)
            return False
        self._in_flight += (waiter,)
        if waiter is None:
            self.keepalives_unanswered += 1
        return True

    def register_pair_locked(self, check: PongWaiter) -> None:
        """Account for two PINGs about to be written on the connection, both ``check``'s.

        As :meth:`register_locked`, in one step (``Writer.write_checked``).
        """
        self._in_flight += (check, check)

    def pong(self) -> None:
        """A PONG arrived: it answers the oldest PING; wake its flush (reader thread)."""
        with self.lock:
            self.keepalives_unanswered = 0
            waiter = self._in_flight.popleft() if self._in_flight else None
        if waiter is not None and waiter is not _ABANDONED:
            waiter.deliver(None)

    def forget(self, waiter: ReplyWaiter) -> None:
        """A flush gave up waiting: its PING, if sent, still gets a PONG that wakes no one."""
        with self.lock:
            for i, waiting in enumerate(self._in_flight):
                if waiting is waiter:
                    self._in_flight[i] = _ABANDONED
                    return
            if waiter in self._deferred:  # its PING was never written
                self._deferred.remove(waiter)

    def connection_lost(self, error: BaseException) -> None:
        """Fail the flushes whose PINGs went out on the lost connection (or were dropped)."""
        with self.lock:
            lost, self._in_flight = self._in_flight, deque()
            self.keepalives_unanswered = 0
        for waiter in lost:
            if waiter is not None and waiter is not _ABANDONED:
                waiter.fail(error)

    def resume(self, first: Sequence[PongWaiter] = ()) -> int:
        """A new connection is up: return how many deferred PINGs to send on it.

        ``first`` stands for the PINGs of the re-subscription sent before them
        (see :class:`ResubscribeCheck`). Called by ``Writer.attach`` under the
        writer's lock.
        """
        with self.lock:
            deferred, self._deferred = self._deferred, []
            self._in_flight.extend(first)
            self._in_flight.extend(deferred)
            return len(deferred)

    def fail_all(self, error: BaseException) -> None:
        """Wake every waiting flush with ``error`` (the client is closing)."""
        with self.lock:
            waiters = [*self._in_flight, *self._deferred]
            self._in_flight, self._deferred = deque(), []
        for waiter in waiters:
            if waiter is not None and waiter is not _ABANDONED:
                waiter.fail(error)


class SubscribeCheck:
    """The two PONGs around one SUB: calls ``refused()`` when the SUB was refused.

    Args:
        refusals: how many 'Maximum Subscriptions Exceeded' -ERRs the connection
            has received so far (read on the reading thread, as the PONGs are).
        refused: called on the reading thread when the SUB was refused.
    """

    __slots__ = ("_refusals", "_refused", "_before")

    def __init__(self, refusals: Callable[[], int], refused: Callable[[], object]) -> None:
        self._refusals = refusals
        self._refused = refused
        self._before = -1  # the count at the first PONG

    def deliver(self, msg: None) -> None:
        """A PONG (the reading thread): the first opens the window, the second closes it."""
        count = self._refusals()
        if self._before < 0:
            self._before = count
        elif count > self._before:
            self._refused()

    def fail(self, error: BaseException) -> None:
        """The connection dropped before the second PONG: nothing is known, nothing done.

        (The requests' inbox is the first SUB sent on the next connection, which
        only a limit of 0, a JWT user or an account allowed no subscription, refuses.)
        """


class ResubscribeCheck:
    """The PONGs of a re-subscription's ``n + 1`` PINGs: calls ``refused(k)`` for each
    of its ``n`` SUBs the server refused at the subscription limit (see the module
    docstring).

    Args:
        refusals: as for :class:`SubscribeCheck`.
        refused: called on the reading thread with the index of a refused SUB.
    """

    __slots__ = ("_refusals", "_refused", "_next", "_count")

    def __init__(self, refusals: Callable[[], int], refused: Callable[[int], object]) -> None:
        self._refusals = refusals
        self._refused = refused
        self._next = -1  # the SUB the next PONG closes the window of (-1: none yet)
        self._count = 0  # the refusals counted at the last PONG

    def deliver(self, msg: None) -> None:
        """A PONG (the reading thread): it closes one SUB's window and opens the next."""
        count = self._refusals()
        if self._next >= 0 and count > self._count:
            self._refused(self._next)
        self._next += 1
        self._count = count

    def fail(self, error: BaseException) -> None:
        """The connection dropped first: the next one re-subscribes all again."""
