"""The read role: which thread reads the socket now, the reader thread or a requester.

Why: handing a reply parsed on the reader thread to the thread that waits for
it costs a cross-thread wake-up (30-40 us on a loaded 2-core machine, a third
of a loopback round trip). A requester blocked until its reply arrives can as
well read the socket itself: then its reply is parsed on the thread that wants
it, and the hand-off is gone from the round trip.

How the role moves (one holder at a time, under one lock):

* While nobody holds the role, the reader thread watches the socket: it
  waits in ``epoll`` on the socket (one-shot) and on a "kick" pipe. When
  bytes arrive it takes the role, reads and routes them, frees the role and
  watches again. While a thread waits for a reply not yet come (so that no
  caller may take the role), or several threads wait (served ones are about
  to send again), it keeps the role and goes on reading, as cheaply as
  before; a lone caller, once served, finds the role free for its next call.
* A requester that has sent its request takes the role when it is free and
  nobody else waits for a reply, and takes the socket out of the reader
  thread's watch (no wake-up: the reader thread sleeps on). Otherwise it waits
  on its :class:`~jetstream_sync._connection.request_mux.ReplyWaiter` as before, and the
  thread reading hands its reply over. So a lone requester (the common case:
  a script, a request loop) never pays a hand-off, and many threads at once
  keep the reader thread reading for all of them, which serves them best
  (see ``docs/performance.md``).
* The holder receives (with its caller's deadline), parses and routes
  *everything*: other requesters' replies wake their waiters and messages go
  to their subscriptions' queues, as on the reader thread. Routing never runs
  user code. It stops as soon as its own waiter is answered, or at its
  deadline, frees the role and puts the socket back in the reader thread's
  watch (which wakes it at once if bytes are already waiting). One thread at
  a time parses the stream, in order: subscriptions keep their order.
* An error (end of stream, socket error, bytes that are not protocol) seen by
  a requester is stored and the reader thread kicked (one byte on the pipe):
  it takes the role, finds the error and runs ``connection_lost`` (the
  reconnect) as for its own errors. Requesters never reconnect; their waiters
  are failed by the reconnect as before. The reader thread holds the role
  while it reconnects and attaches the next connection.
* A fetch waiting for its batch does the same (:meth:`ReadRole.lead_until`,
  through ``Subscription.read_pending``): when it may take the role, it reads
  and routes until its subscription's queue holds the batch or a status
  message (which ends a pull request), or until its deadline. Otherwise it
  waits on its queue as before. Only subscriptions nothing else wakes use it:
  the read notices its queue between waits, not at once. Never on the main
  thread (see :meth:`ReadRole.lead_until`).
* TLS connections stay with the reader thread (see
  :meth:`~jetstream_sync._connection.transport.Transport.poll_fd`): replies are handed
  over as before. So do all connections in the cooperative wait mode
  (gevent, eventlet; see :mod:`jetstream_sync._connection.wait`): no ``epoll``, no C
  call that waits; the reader reads in the patched socket's blocking reads
  and requesters wait on their waiters, both through the hub.

The role is the one token for the socket: its holder alone reads it, and
sends nothing past the writer. A requester that took it (:meth:`ReadRole.round_trip`)
hands its request to the writer as every thread does (:meth:`Writer.write_nowait
<jetstream_sync._connection.writer.Writer.write_nowait>`: sent on this thread when
the socket is idle, never waiting for room, since the holder must not wait on a
server that may be waiting for it to read), then waits in the protocol core's
``round_trip``, which polls the socket until the deadline's slice, receives into
the connection's read buffer and parses, all with the GIL released. When what
arrived is its reply alone, only the reply's parts are made in Python: no
waiter, no routing, no ``Msg`` unless the caller wants one. Anything else
(other ops in the same read, a partial frame, a signal, the deadline, an
error) is routed by :meth:`ReadBuffer.received`, and the requester reads on in
the same loop, its waiter registered; a reply that comes alone after other
traffic is still read without routing. A signal handler's exception (Ctrl-C)
during a wait gives the role back; only when the interrupted call had
received bytes not yet parsed is the connection handed to the reader thread
as failed (the buffer can no longer be trusted). Such an exception can come
between any two steps of taking or giving back the role too: each caller ends
in :meth:`ReadRole._leave`, which frees a role still held, and the socket's
watch heals a flag left behind. What an interrupted send leaves is the
writer's to put back (see :mod:`jetstream_sync._connection.writer`).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading
from time import monotonic
from typing import TYPE_CHECKING, Any, Protocol

from .. import _protocol
from .._protocol._py import (
    DECODE_NONE,
    RT_CONSUMED,
    RT_EOF,
    RT_ERRNO,
    RT_NEED,
    RT_OP,
    RT_OTHER,
    RT_RECEIVED,
    RT_RECV_ERROR,
    RT_REPLY,
)
from .._signals import on_signal_thread
from .read_buffer import EndOfStreamError, ReadBuffer, Route, detached
from .transport import Transport
from .wait import COOPERATIVE_SLICE, pause

if TYPE_CHECKING:
    from .._deadline import Deadline
    from .request_mux import ReplyWaiter, RequestMux
    from .writer import Writer

# What a round trip gives when its reply came alone: the reply's own reply
# subject, its sid, payload, header block (or None), and what the core's reader
# named by ``decode`` read from the body (None without one, or when it read nothing).
FastReply = tuple[str, int, bytes, bytes | None, tuple[Any, ...] | None]


class Ready(Protocol):
    """What a thread reading for itself waits for: a reply waiter, or a subscription's queue."""

    @property
    def done(self) -> bool:
        """True once the wait is over (answered, failed, or something queued)."""
        ...


_READER = object()  # the holder while the reader thread reads
# Cooperative mode: the most one read takes, so that routing one buffer keeps
# the other greenlets waiting for a millisecond or so, not for a whole buffer.
COOPERATIVE_READ = 64 * 1024
_POLL_EVENTS = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP
_WATCH = select.EPOLLIN | select.EPOLLONESHOT


class _Link:
    """One connection as the holders see it: transport, buffer, and wait sets.

    ``poll`` is the holder's wait for bytes; ``watch`` is the reader thread's
    wait, on the kick pipe and, while nobody holds the role, on the socket.
    Neither exists when the link is never lent (``fd`` is None): TLS, a
    test's bare socket, and the cooperative wait mode, where no ``epoll`` nor
    ``poll`` is made and the reader waits in the socket's ``recv_into``.
    """

    __slots__ = ("transport", "buffer", "fd", "poll", "watch", "watching")

    def __init__(
        self, transport: Any, leftover: bytes, route: Route, kick_fd: int, cooperative: bool
    ) -> None:
        self.transport = transport
        self.buffer = ReadBuffer(leftover, route)
        # Plain TCP only: a TLS transport (or a test's bare socket) is read by the
        # reader thread alone, in blocking reads.
        lent = isinstance(transport, Transport) and not cooperative
        self.fd = transport.poll_fd() if lent else None
        self.watching = False
        if self.fd is not None:
            self.poll = select.poll()
            self.watch = select.epoll()
            self.poll.register(self.fd, _POLL_EVENTS)
            self.watch.register(kick_fd, select.EPOLLIN)

    def close(self) -> None:
        """Release the reader thread's wait set (the socket is the transport's)."""
        if self.fd is not None:
            self.watch.close()

    def watch_socket(self) -> None:
        """Let the reader thread wake for the socket (at once if bytes wait); under the lock.

        ``watching`` may be wrong when a signal handler's exception came
        between the epoll call and the flag (a requester on the main thread):
        the other call then does it.
        """
        assert self.fd is not None  # only plain TCP links are watched
        try:
            if self.watching:
                self.watch.modify(self.fd, _WATCH)  # re-arm the one-shot
            else:
                self.watch.register(self.fd, _WATCH)
        except FileExistsError:
            self.watch.modify(self.fd, _WATCH)
        except FileNotFoundError:
            self.watch.register(self.fd, _WATCH)
        self.watching = True

    def unwatch_socket(self) -> None:
        """Take the socket out of the reader thread's wait; under the lock."""
        if self.watching:
            assert self.fd is not None
            with contextlib.suppress(FileNotFoundError):  # see watch_socket
                self.watch.unregister(self.fd)
            self.watching = False


class ReadRole:
    """Who reads the connection, across reconnects (one per reader thread).

    Args:
        route: called with ``(ops, view, consumed)`` for every buffer holding whole ops.
        cooperative: the cooperative wait mode (see :mod:`jetstream_sync._connection.wait`):
            the role is never lent, and the reader thread reads in blocking
            reads, yielding to the other greenlets after each buffer it routes.
    """

    def __init__(self, route: Route, cooperative: bool = False) -> None:
        self._route = route
        self._cooperative = cooperative
        self._lock = threading.Lock()
        self._holder: object | None = _READER
        # Requesters waiting for a reply someone else reads. A delivered waiter
        # counts as answered at once, before its thread wakes to leave this set:
        # otherwise the reader thread would keep the role for a requester
        # already served, and the next request would find the role taken.
        self._waiters: set[ReplyWaiter] = set()
        self._error: BaseException | None = None  # seen by a requester, for the reader thread
        self._kicked = False  # a byte is in the kick pipe
        self._retired = False
        # Replies read by round_trip alone (never routed): counted for the
        # client's stats, and to show the path is taken.
        self.round_trips = 0
        self.round_trip_bytes = 0
        self.subscriber_reads = 0  # lead_until calls that took the role (a fetch read itself)
        self._link: _Link | None = None
        self._kick_r, self._kick_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    # ------------------------------------------------------------ reader thread

    def serve(self, transport: Any, leftover: bytes) -> BaseException:
        """Reader thread, holding the role: read ``transport`` until the connection fails.

        Frees the role whenever it is idle, so that requesters can take it.

        Returns:
            The error that ended the connection; the reader thread holds the role again.
        """
        link = _Link(transport, leftover, self._route, self._kick_r, self._cooperative)
        with self._lock:
            old, self._link = self._link, link
        if old is not None:
            old.close()
        error = link.buffer.process()
        if error is not None:
            return error
        if link.fd is None:
            return self._read_blocking(link, self._cooperative)
        return self._watch(link)

    def retire(self) -> None:
        """Reader thread, ending: nobody reads any more; requesters wait for ``close()``."""
        with self._lock:
            self._holder = None
            if self._retired:  # a forked child's close_inherited() closed them already
                return
            self._retired = True
            if self._link is not None:
                self._link.close()
            os.close(self._kick_r)
            os.close(self._kick_w)

    def close_inherited(self) -> None:
        """In a forked child: close this process's copies of the kick pipe (takes no lock)."""
        if not self._retired:
            self._retired = True
            if self._link is not None:
                self._link.close()
            os.close(self._kick_r)
            os.close(self._kick_w)

    @staticmethod
    def _read_blocking(link: _Link, cooperative: bool) -> BaseException:
        """Read and route in blocking reads until an error (TLS, cooperative: never lent).

        Cooperative: a read takes at most :data:`COOPERATIVE_READ` bytes, and
        the hub runs the other greenlets every ``COOPERATIVE_SLICE`` seconds (a
        patched ``recv_into`` only switches when nothing has arrived).
        """
        transport, buffer = link.transport, link.buffer
        yield_at = 0.0
        while True:
            free = buffer.free()
            if cooperative:
                free = free[:COOPERATIVE_READ]
            try:
                n = transport.recv_into(free)
            except (OSError, ValueError) as exc:
                return detached(exc)
            if n == 0:
                return EndOfStreamError("connection closed by the server")
            error = buffer.received(n)
            if error is not None:
                return error
            if cooperative and monotonic() >= yield_at:
                pause()
                yield_at = monotonic() + COOPERATIVE_SLICE

    def _watch(self, link: _Link) -> BaseException:
        """Read whenever bytes arrive while the role is free, until the connection fails.

        Returns:
            The error, seen here or left by a requester; the reader thread holds the role.
        """
        wait, sock_fd, lock = link.watch.poll, link.fd, self._lock
        with lock:
            self._holder = None
            link.watch_socket()
        while True:
            ready = wait()  # close() and the pinger shut the socket down: it wakes
            with lock:
                if self._kicked:
                    self._kicked = False
                    os.read(self._kick_r, 64)
                if self._holder is not None:  # a requester reads (it unwatched the socket)
                    continue
                self._holder = _READER
                error, self._error = self._error, None
            if error is None and any(fd == sock_fd for fd, _ in ready):
                error = self._receive(link)
                while error is None and self._keep_reading():
                    link.poll.poll()  # as cheap as a blocking recv
                    error = self._receive(link)
            if error is not None:
                return error
            with lock:
                self._holder = None
                link.watch_socket()

    def _keep_reading(self) -> bool:
        """Reader thread: whether to keep the role and read on (takes the lock).

        Yes while a caller waits for a reply not yet come (no caller can take
        the role then), and while several callers wait at all: served ones
        are about to send their next request, and with many threads the
        reader thread reading for all of them serves them best. A lone
        caller, once served, finds the role free for its next request.
        """
        with self._lock:
            return len(self._waiters) > 1 or self._unanswered()

    def _unanswered(self) -> bool:
        """Whether a waiting requester's reply has not come yet; under the lock."""
        waiters = self._waiters
        return bool(waiters) and any(not waiter.done for waiter in waiters)

    # ------------------------------------------------------------ requesters

    def _take(self, holder: object) -> _Link | None:
        """Under the lock: give the role to ``holder`` when it may read; its link, else None.

        It may when the role is free, no requester waits for a reply not yet
        come, and the connection is plain TCP and healthy. The socket then
        leaves the reader thread's watch (no wake-up: it sleeps on).
        """
        link = self._link
        if (
            self._holder is None
            and not self._unanswered()
            and link is not None
            and link.fd is not None
            and not self._retired
            and self._error is None
        ):
            self._holder = holder
            link.unwatch_socket()
            return link
        return None

    def wait_reply(self, waiter: ReplyWaiter, deadline: Deadline) -> bool:
        """Requester: block until ``waiter`` is answered, reading the socket if nobody else does.

        Returns:
            True when the waiter was delivered or failed; False at the deadline.
        """
        try:
            with self._lock:
                lead = self._take(waiter) is not None
                if not lead:
                    self._waiters.add(waiter)
            if not lead:
                return waiter.wait(deadline)
            self._lead(waiter, deadline)
        finally:
            self._leave(waiter)
        if waiter.done:
            return True
        if deadline.expired():
            return False
        return waiter.wait(deadline)  # the connection failed: the reconnect fails the waiter

    def lead_until(self, ready: Ready, deadline: Deadline) -> None:
        """Subscriber: read and route until ``ready.done`` or the deadline, if nobody reads.

        A thread about to wait for its subscription's next messages (a
        fetch) reads the socket itself when it can take the role, as a lone
        requester does: its messages are then routed on the thread that wants
        them, with no hand-off. When it cannot (the reader thread or another
        caller reads, a requester waits for its reply, TLS) it returns at once
        and the caller waits on its queue as before.

        Never on the main thread: there a signal handler's exception (Ctrl-C,
        an alarm) could land in the middle of routing a buffer, and a buffer
        routed in part can only be given up with the connection. A fetch
        routes far longer than a request waits for its reply, so on the main
        thread it leaves the reading to the reader thread.
        """
        if on_signal_thread():
            return
        with self._lock:
            if self._take(ready) is None:
                return
            self.subscriber_reads += 1
        self._lead(ready, deadline)

    def round_trip(
        self,
        writer: Writer,
        frame: bytes,
        reply: bytes,
        mux: RequestMux,
        token: str,
        deadline: Deadline,
        decode: int = DECODE_NONE,
        subject: str = "",
    ) -> FastReply | ReplyWaiter:
        """Requester: send ``frame`` (a request to ``subject`` for a reply to ``reply``) and
        wait for the reply.

        ``reply`` is ``<mux.prefix><token>``; ``token`` is registered with
        ``mux`` (with ``subject``, see ``RequestMux.refuse_publish``) only when
        the reply does not come alone. ``decode`` names the
        core's reader of a reply that comes alone (``DECODE_*``).

        Reading the socket itself when this thread can take the role and the
        writer has room (see the module docstring); otherwise as
        :meth:`wait_reply`, after writing ``frame`` (urgently).

        Returns:
            The reply's parts when it came alone; else the waiter the reply
            went to: done (answered or failed), or not done when the
            deadline passed.

        Raises:
            TimeoutError: no room in the write buffer before the deadline
                (nothing was sent).
        """
        try:
            with self._lock:
                link = self._take(token)  # the holder: this call's own token
            if link is not None:
                if writer.write_nowait(frame):
                    return self._read_reply(link, reply, mux, token, deadline, decode, subject)
                self._release(link, None)  # never hold the role while a write may wait
        except BaseException:
            self._leave(token)
            raise
        waiter = mux.register(token, subject)
        try:
            writer.write(frame, urgent=True, msgs=1, deadline=deadline)
            self.wait_reply(waiter, deadline)
        finally:
            mux.forget(token)
        return waiter

    def _read_reply(
        self,
        link: _Link,
        reply: bytes,
        mux: RequestMux,
        token: str,
        deadline: Deadline,
        decode: int,
        subject: str,
    ) -> FastReply | ReplyWaiter:
        """Holding the role, the request sent: the first C call, then the reply or the fallback."""
        buffer = link.buffer
        waiter: ReplyWaiter | None = None
        received = 0  # of the call; stays set until those bytes are parsed
        try:
            status, out, decoded = _protocol.round_trip(
                link.transport.sock, buffer.raw, buffer.have,
                reply, math.ceil(deadline.slice() * 1000), decode,
            )  # fmt: skip
            received = out[RT_RECEIVED]
            if status == RT_REPLY:
                parts = self._take_reply(buffer, out, decoded)
            else:
                # From here on the reply is routed to the waiter, as on the path above.
                waiter = mux.register(token, subject)
                error = self._handle(buffer, status, out)
            received = 0
        except BaseException:
            self._interrupted(link, received or _protocol.last_round_trip())
            mux.forget(token)
            raise
        if waiter is None:
            self._release(link, None)
            return parts
        try:
            if error is not None:
                self._release(link, error)
            elif not waiter.done:
                found = self._lead(waiter, deadline, reply, decode)
                if found is not None:
                    return found
            else:
                self._release(link, None)
            if not waiter.done and not deadline.expired():
                waiter.wait(deadline)  # the connection failed: the reconnect fails the waiter
        finally:
            mux.forget(token)
        return waiter

    def _take_reply(
        self, buffer: ReadBuffer, out: list[int], decoded: tuple[Any, ...] | None
    ) -> FastReply:
        """The parts of a reply the C call found alone; the buffer moves past it."""
        _, _, _, sid, ro, rl, ho, hl, po, pl = out[RT_OP : RT_OP + 10]
        view = buffer.view
        parts = (
            str(view[ro : ro + rl], "utf-8", "surrogateescape") if rl else "",
            sid,
            view[po : po + pl].tobytes(),
            view[ho : ho + hl].tobytes() if hl else None,
            decoded,
        )
        self.round_trips += 1
        self.round_trip_bytes += hl + pl
        buffer.consumed(out[RT_RECEIVED], out[RT_CONSUMED], out[RT_NEED])
        return parts

    @staticmethod
    def _handle(buffer: ReadBuffer, status: int, out: list[int]) -> BaseException | None:
        """Route what a C call received that was not the reply alone; the error, if any.

        The other statuses (the deadline's slice, a signal, a frame queued
        behind, a send not whole) leave nothing to do: the caller reads on.
        """
        if status == RT_OTHER:
            return buffer.received(out[RT_RECEIVED])
        if status == RT_EOF:
            return EndOfStreamError("connection closed by the server")
        if status == RT_RECV_ERROR:
            return _os_error(out[RT_ERRNO])
        return None

    def _interrupted(self, link: _Link, received: int) -> None:
        """Free the role after an exception (Ctrl-C) in the middle of reading.

        Bytes the last C call received may not have been parsed: then the
        buffer can no longer be trusted, and the connection is handed to the
        reader thread as failed. Otherwise (a signal during the wait) the role
        is just given back.
        """
        error = None
        if received:
            error = ConnectionAbortedError("interrupted while reading the connection")
        self._release(link, error)

    def _lead(
        self,
        waiter: Ready,
        deadline: Deadline,
        reply: bytes = b"",
        decode: int = DECODE_NONE,
    ) -> FastReply | None:
        """Holding the role: read and route until ``waiter`` is done; then release the role.

        Each wait is a C call that polls and receives (nothing to send); when
        what it receives is the reply to ``reply`` alone, its parts are
        returned instead of routed (``b""``: the waiter's reply is routed).
        """
        link = self._link
        assert link is not None  # set before any requester can hold the role
        buffer, sock = link.buffer, link.transport.sock
        error: BaseException | None = None
        received = 0  # bytes of the last call not yet parsed
        try:
            while not waiter.done:
                left = deadline.slice()
                if left <= 0:
                    break
                status, out, decoded = _protocol.round_trip(
                    sock, buffer.raw, buffer.have, reply, math.ceil(left * 1000), decode
                )
                received = out[RT_RECEIVED]
                if status == RT_REPLY:
                    return self._take_reply(buffer, out, decoded)
                error = self._handle(buffer, status, out)
                received = 0
                if error is not None:
                    break
        except BaseException:
            if received or _protocol.last_round_trip():
                # Ctrl-C mid-parse: the buffer can no longer be trusted
                error = ConnectionAbortedError("interrupted while reading the connection")
            raise
        finally:
            self._release(link, error)
        return None

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

    def _leave(self, holder: object) -> None:
        """A caller is done: out of the waiters, and the role freed if it still holds it.

        It still does only when a signal handler's exception (on the main
        thread) came after it took the role and before the code that gives the
        role back began; nothing was received then (a request already handed
        to the writer goes out, its reply unawaited).
        """
        with self._lock:
            self._waiters.discard(holder)
            if self._holder is holder:
                self._holder = None
                link = self._link
                if link is not None and not self._retired and self._error is None:
                    link.watch_socket()

    def _release(self, link: _Link, error: BaseException | None) -> None:
        """Requester: free the role and give the socket back to the reader thread's watch.

        With ``error`` (the connection failed) the reader thread is kicked to
        take the role and handle it.

        The role is freed last: a signal handler's exception before that
        leaves it held, and the caller's :meth:`_leave` frees it.
        """
        with self._lock:
            if error is not None:
                self._error = error
                if not self._kicked:
                    os.write(self._kick_w, b"k")
                    self._kicked = True
            elif not self._retired:
                link.watch_socket()
            self._holder = None


def _os_error(code: int) -> OSError:
    """The OSError of a system call the protocol core made (its errno)."""
    return detached(OSError(code, os.strerror(code)))  # type: ignore[return-value]
