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
"""

from __future__ import annotations

import threading
from collections import deque

from .request_mux import ReplyWaiter

# Stands in the FIFO for a flush that timed out: its PONG wakes no one.
_ABANDONED = ReplyWaiter()


class PingTracker:
    """The FIFO of outstanding PINGs, with the keep-alive count."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Guards the FIFO; ``Writer.write_ping`` holds it around :meth:`register_locked`."""
        self._in_flight: deque[ReplyWaiter | None] = deque()
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

    def resume(self) -> int:
        """A new connection is up: return how many deferred PINGs to send on it.

        Called by ``Writer.attach`` under the writer's lock.
        """
        with self.lock:
            deferred, self._deferred = self._deferred, []
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
