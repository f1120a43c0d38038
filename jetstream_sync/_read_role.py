"""The read role: which thread reads the socket now, the reader thread or a requester.

Why: handing a reply parsed on the reader thread to the thread that waits for
it costs a cross-thread wake-up (30-40 us on a loaded 2-core machine, a third
of a loopback round trip). A requester blocked until its reply arrives can as
well read the socket itself: then its reply is parsed on the thread that wants
it, and the hand-off is gone from the round trip.

How the role moves (one holder at a time, under one lock):

* The reader thread holds it by default, waiting in ``poll`` on the socket and
  on a "kick" pipe.
* A requester that has sent its request takes the role if nobody holds it.
  Otherwise it queues in ``_wanted`` and waits on its
  :class:`~jetstream_sync._request_mux.ReplyWaiter`; if the reader thread holds
  the role it also kicks it (one byte on the pipe). A kicked reader thread
  releases the role.
* Releasing promotes the first queued requester not yet answered (its waiter
  wakes with ``promoted``); with none, the role is freed and the reader thread
  woken: it takes the role back unless a requester took it first. A requester
  issuing requests back to back thus usually finds the role free and reads
  its replies with no hand-off at all.
* The holder receives (with its caller's deadline), parses and routes
  *everything*: other requesters' replies wake their waiters and messages go
  to their subscriptions' queues, as on the reader thread. Routing never runs
  user code. A requester stops as soon as its own waiter is answered, or at
  its deadline, and releases the role. Since one thread at a time parses the
  stream, in order, subscriptions keep their order.
* An error (end of stream, socket error, bytes that are not protocol) seen by
  a requester is stored and the role freed without promoting anyone: the
  reader thread takes it, finds the error and runs ``connection_lost`` (the
  reconnect) as for its own errors. Requesters never reconnect; their waiters
  are failed by the reconnect as before. The reader thread holds the role
  while it reconnects and attaches the next connection.
* TLS connections stay with the reader thread (see
  :meth:`~jetstream_sync._transport.Transport.poll_fd`): replies are handed
  over as before.

Only the holder delivers replies (and, once the reader thread has ended,
``close()``), and promoting checks ``done`` under the lock: a waiter is woken
once.
"""

from __future__ import annotations

import math
import os
import select
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from ._read_buffer import EndOfStreamError, ReadBuffer, Route, detached
from ._transport import Transport

if TYPE_CHECKING:
    from ._deadline import Deadline
    from ._request_mux import ReplyWaiter

_READER = object()  # the holder when the reader thread reads
# How long a role a requester gave back may stay free before the reader thread
# takes it again (unless bytes were already waiting, or the connection failed).
# Waking the reader thread at every release costs more than the hand-off saved
# (a wake-up and a GIL switch per request): a requester issuing requests back
# to back finds the role free and takes it with no wake-up at all. The price:
# a message that arrives in that window waits up to this long for the reader.
_FREE_GRACE = 0.001
_EVENTS = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP


class _Link:
    """One connection as the holders see it: transport, buffer, and poll sets."""

    __slots__ = ("transport", "buffer", "fd", "poll_sock", "poll_both")

    def __init__(self, transport: Any, leftover: bytes, route: Route, kick_fd: int) -> None:
        self.transport = transport
        self.buffer = ReadBuffer(leftover, route)
        # Plain TCP only: a TLS transport (or a test's bare socket) is read by the
        # reader thread alone, in blocking reads.
        self.fd = transport.poll_fd() if isinstance(transport, Transport) else None
        self.poll_sock = select.poll()
        self.poll_both = select.poll()
        if self.fd is not None:
            self.poll_sock.register(self.fd, _EVENTS)
            self.poll_both.register(self.fd, _EVENTS)
            self.poll_both.register(kick_fd, select.POLLIN)


class ReadRole:
    """Who reads the connection, across reconnects (one per reader thread).

    Args:
        route: called with ``(ops, view, consumed)`` for every buffer holding whole ops.
    """

    def __init__(self, route: Route) -> None:
        self._route = route
        self._lock = threading.Lock()
        self._free = threading.Condition(self._lock)  # the reader thread waits for the role
        self._holder: object | None = _READER
        self._wanted: deque[ReplyWaiter] = deque()
        self._error: BaseException | None = None  # seen by a requester, for the reader thread
        self._kicked = False  # a byte is in the kick pipe
        self._busy = True  # the reader thread holds the role and is not idle in poll
        self._retired = False
        self._link: _Link | None = None
        self._kick_r, self._kick_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    # ------------------------------------------------------------ reader thread

    def serve(self, transport: Any, leftover: bytes) -> BaseException:
        """Reader thread, holding the role: read ``transport`` until the connection fails.

        Lends the role to requesters that ask for it, and takes it back.

        Returns:
            The error that ended the connection; the reader thread holds the role again.
        """
        self._link = link = _Link(transport, leftover, self._route, self._kick_r)
        error = link.buffer.process()
        if link.fd is None:
            return error or self._read_blocking(link)
        while error is None:
            error = self._read_until_lent(link)
            if error is None:
                error = self._take_back()
        return error

    def retire(self) -> None:
        """Reader thread, ending: nobody reads any more; requesters wait for ``close()``."""
        with self._lock:
            self._retired = True
            self._holder = None
            self._wanted.clear()
            os.close(self._kick_r)
            os.close(self._kick_w)

    def close_inherited(self) -> None:
        """In a forked child: close this process's copies of the kick pipe (takes no lock)."""
        if not self._retired:
            self._retired = True
            os.close(self._kick_r)
            os.close(self._kick_w)

    @staticmethod
    def _read_blocking(link: _Link) -> BaseException:
        """Read and route in blocking reads until an error (TLS: never lent)."""
        transport, buffer = link.transport, link.buffer
        while True:
            try:
                n = transport.recv_into(buffer.free())
            except (OSError, ValueError) as exc:
                return detached(exc)
            if n == 0:
                return EndOfStreamError("connection closed by the server")
            error = buffer.received(n)
            if error is not None:
                return error

    def _read_until_lent(self, link: _Link) -> BaseException | None:
        """Read and route until a requester has the role (None) or an error.

        Idle in ``poll``, the reader thread is not ``_busy``: a requester takes
        the role at once and kicks it out of ``poll``. Reading, it is busy:
        requesters queue, and it promotes the first before polling again.
        """
        poll, sock_fd = link.poll_both.poll, link.fd
        lock = self._lock
        while True:
            with lock:
                if self._wanted:
                    self._release_locked(urgent=False)
                    return None
                self._busy = False
            ready = poll()  # close() and the pinger shut the socket down: it wakes
            with lock:
                if self._kicked:
                    self._kicked = False
                    os.read(self._kick_r, 64)
                if self._holder is not _READER:  # lent while polling
                    return None
                self._busy = True
            if any(fd == sock_fd for fd, _ in ready):
                error = self._receive(link)
                if error is not None:
                    return error

    def _take_back(self) -> BaseException | None:
        """Reader thread: wait until the role is free and take it; the error a requester left."""
        with self._lock:
            while self._holder is not None:
                self._free.wait(_FREE_GRACE)
            self._holder = _READER
            self._busy = True
            error, self._error = self._error, None
        return error

    # ------------------------------------------------------------ requesters

    def wait_reply(self, waiter: ReplyWaiter, deadline: Deadline) -> bool:
        """Requester: block until ``waiter`` is answered, reading the socket while nobody else does.

        Returns:
            True when the waiter was delivered or failed; False at the deadline.
        """
        with self._lock:
            holder, link = self._holder, self._link
            able = link is not None and link.fd is not None
            able = able and not self._retired and self._error is None
            lead = able and (holder is None or (holder is _READER and not self._busy))
            if lead:
                self._holder = waiter
            elif able:
                self._wanted.append(waiter)
            if lead and holder is _READER and not self._kicked:  # out of its poll
                self._kicked = True
                os.write(self._kick_w, b"k")
        if not lead:
            woken = waiter.wait(deadline)
            if not able:  # never queued: the thread reading hands the reply over
                return woken
            if not woken or not waiter.promoted:
                return self._withdraw(waiter) or woken
        if self._lead(waiter, deadline):
            return True
        if deadline.expired():
            return False
        return waiter.wait(deadline)  # the connection failed: the reconnect fails the waiter

    def _withdraw(self, waiter: ReplyWaiter) -> bool:
        """Leave the queue (answered, or at the deadline); whether the waiter is done."""
        with self._lock:
            try:
                self._wanted.remove(waiter)
            except ValueError:
                pass
        if waiter.promoted and not waiter.done:  # promoted as its deadline passed: pass it on
            self._release(None, urgent=True)
        return waiter.done

    def _lead(self, waiter: ReplyWaiter, deadline: Deadline) -> bool:
        """Holding the role: read and route until ``waiter`` is done; then release the role."""
        link = self._link
        assert link is not None  # set before any requester can hold the role
        poll = link.poll_sock.poll
        error: BaseException | None = None
        try:
            while not waiter.done:
                left = deadline.slice()
                if left <= 0:
                    break
                if poll(math.ceil(left * 1000)):
                    error = self._receive(link)
                    if error is not None:
                        break
        finally:
            self._release(error, urgent=error is not None or bool(poll(0)))
        return waiter.done

    def _receive(self, link: _Link) -> BaseException | None:
        """Read what arrived on a readable socket and route it; the error that ends it, if any."""
        buffer = link.buffer
        try:
            n = link.transport.recv_nowait(buffer.free())
        except (OSError, ValueError) as exc:
            return detached(exc)
        if n is None:
            return None
        if n == 0:
            return EndOfStreamError("connection closed by the server")
        return buffer.received(n)

    # ------------------------------------------------------------ both

    def _release(self, error: BaseException | None, urgent: bool) -> None:
        """Requester: give the role up, to the first queued requester, else free.

        A free role is taken back by the reader thread within
        :data:`_FREE_GRACE`, at once when ``urgent`` (bytes are waiting, or
        ``error``). With ``error`` (the connection failed) nobody is promoted:
        the reader thread takes the role and handles the error.
        """
        with self._lock:
            if error is not None:
                self._error = error
            self._release_locked(urgent)

    def _release_locked(self, urgent: bool) -> None:
        wanted = self._wanted
        if self._error is None:
            while wanted:
                waiter = wanted.popleft()
                if not waiter.done:
                    self._holder = waiter
                    waiter.promote()
                    return
        self._holder = None
        if urgent:
            self._free.notify()
