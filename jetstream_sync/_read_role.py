"""The read role: which thread reads the socket now, the reader thread or a requester.

Why: handing a reply parsed on the reader thread to the thread that waits for
it costs a cross-thread wake-up (30-40 us on a loaded 2-core machine, a third
of a loopback round trip). A requester blocked until its reply arrives can as
well read the socket itself: then its reply is parsed on the thread that wants
it, and the hand-off is gone from the round trip.

How the role moves (one holder at a time, under one lock):

* The reader thread holds it by default. Reading it is ``_busy``; idle, it
  waits in ``poll`` on the socket and on a "kick" pipe.
* A requester that has sent its request takes the role when nobody else waits
  for a reply and the role is free or held by the idle reader thread (which it
  then kicks out of its ``poll``: one byte on the pipe). Otherwise it waits on
  its :class:`~jetstream_sync._request_mux.ReplyWaiter` as before, and the
  thread reading hands its reply over. So a lone requester (the common case:
  a script, a request loop) never pays a hand-off, and many threads at once
  keep the reader thread reading for all of them, which is what they gain
  most from (see ``docs/performance.md``).
* The holder receives (with its caller's deadline), parses and routes
  *everything*: other requesters' replies wake their waiters and messages go
  to their subscriptions' queues, as on the reader thread. Routing never runs
  user code. It stops as soon as its own waiter is answered, or at its
  deadline, and frees the role. One thread at a time parses the stream, in
  order: subscriptions keep their order.
* The reader thread takes a freed role back at once when someone else waits,
  bytes are already waiting or the connection failed; otherwise within
  :data:`_FREE_GRACE`, so that a requester issuing requests back to back
  finds the role free and takes it with no wake-up at all.
* An error (end of stream, socket error, bytes that are not protocol) seen by
  a requester is stored and the role freed: the reader thread takes it, finds
  the error and runs ``connection_lost`` (the reconnect) as for its own
  errors. Requesters never reconnect; their waiters are failed by the
  reconnect as before. The reader thread holds the role (busy) while it
  reconnects and attaches the next connection.
* TLS connections stay with the reader thread (see
  :meth:`~jetstream_sync._transport.Transport.poll_fd`): replies are handed
  over as before.
"""

from __future__ import annotations

import math
import os
import select
import threading
from typing import TYPE_CHECKING, Any

from ._read_buffer import EndOfStreamError, ReadBuffer, Route, detached
from ._transport import Transport

if TYPE_CHECKING:
    from ._deadline import Deadline
    from ._request_mux import ReplyWaiter

_READER = object()  # the holder when the reader thread reads
# How long a role a requester freed may stay free before the reader thread takes
# it back when nothing calls for it sooner. Waking the reader thread at every
# release costs as much as the hand-off saved (a wake-up and a GIL switch per
# request). The price: a message that arrives in that window, while no
# request waits, waits up to this long for the reader.
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
        self._waiting = 0  # requesters waiting for a reply someone else reads
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
        """Read and route until a requester took the role (None) or an error.

        Idle in ``poll``, the reader thread is not ``_busy``: a requester may
        take the role then, and kicks it out of ``poll``.
        """
        poll, sock_fd = link.poll_both.poll, link.fd
        lock = self._lock
        while True:
            with lock:
                self._busy = False
            ready = poll()  # close() and the pinger shut the socket down: it wakes
            with lock:
                if self._kicked:
                    self._kicked = False
                    os.read(self._kick_r, 64)
                if self._holder is not _READER:  # taken while polling
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
        """Requester: block until ``waiter`` is answered, reading the socket if nobody else does.

        Returns:
            True when the waiter was delivered or failed; False at the deadline.
        """
        with self._lock:
            holder, link = self._holder, self._link
            lead = (
                (holder is None or (holder is _READER and not self._busy))
                and not self._waiting
                and link is not None
                and link.fd is not None
                and not self._retired
                and self._error is None
            )
            if lead:
                self._holder = waiter
                if holder is _READER and not self._kicked:  # out of its poll
                    self._kicked = True
                    os.write(self._kick_w, b"k")
            else:
                self._waiting += 1
                if holder is None:  # in its grace wait: someone must read now
                    self._free.notify()
        if not lead:
            try:
                return waiter.wait(deadline)
            finally:
                with self._lock:
                    self._waiting -= 1
        if self._lead(waiter, deadline):
            return True
        if deadline.expired():
            return False
        return waiter.wait(deadline)  # the connection failed: the reconnect fails the waiter

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
                    try:
                        error = self._receive(link)
                    except BaseException:  # Ctrl-C mid-parse: the buffer can no longer be trusted
                        error = ConnectionAbortedError("interrupted while reading the connection")
                        raise
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
        """Requester: free the role; wake the reader thread to take it if ``urgent``.

        Args:
            error: what ended the connection, for the reader thread to handle; or None.
            urgent: bytes are waiting (or ``error``): the reader must not wait
                for :data:`_FREE_GRACE`. It never does while others wait.
        """
        with self._lock:
            if error is not None:
                self._error = error
            self._holder = None
            if urgent or self._waiting:
                self._free.notify()
