"""The single write path: a coalescing, buffered writer shared by every thread.

Every byte sent to the server goes through :class:`Writer`, so frames from
different threads (a PONG from the reader, PUBs from publishers) never
interleave mid-frame. Frames are appended to one buffer under one lock. Whoever
finds the socket idle takes the whole buffer and writes it outside the lock:

* ``write(frame)`` wakes the flusher thread, which coalesces whatever
  accumulated meanwhile into one ``sendall`` (throughput: async publishes,
  acks, core publishes);
* ``write(frame, urgent=True)`` writes on the caller's thread when the socket
  is idle, saving a thread hop (latency: requests, blocking publishes, PING).
  That write never blocks (``Transport.send_nowait``): what the socket does not
  take at once is left to the flusher, so no caller waits on a stalled server.

Above :data:`HIGH_WATER` pending bytes, ``write`` waits for room until the
caller's deadline (raising :class:`~jetstream_sync.errors.WriteBufferTimeoutError`,
a ``TimeoutError``); a frame is appended whole or not at all. ``write_control`` (PONG) and
``write_ping`` never wait: keep-alives must get through however full the
buffer is. A PONG is not queued while an earlier one still waits in the
buffer: the server resets its count of PINGs out on any PONG, so the waiting
one answers them all, and a server that sends PINGs but reads nothing cannot
make the buffer grow. Neither does ``write_interest`` wait (SUB, UNSUB: a few
bytes, from calls such as ``subscribe()`` that have no timeout to wait by); it
appends in order.

PINGs are answered in order, so each PONG must answer a PING the client
still expects an answer to on *this* connection. The writer remembers where
each PING it holds sits in the buffer; when the connection is lost, the PINGs
still buffered are removed (their flushes fail with the lost connection) so
none is answered on the next connection, and ``write_ping`` registers a PING
with the caller's tracker under the writer's lock, atomically with appending it.

While disconnected the buffer keeps filling up to ``reconnect_buf_size``; past
that, writes raise instead of dropping anything silently. Publishes buffered
then were checked against the last server's ``max_payload``; before the buffer
goes to a server that accepts less, :meth:`Writer.drop_too_big` takes out the
frames it would refuse (it would close the connection on the first, losing
every frame after it), so the caller can report each.

A requester that reads its own reply (the read role, see
:mod:`jetstream_sync._connection.read_role`) sends its request with
:meth:`Writer.write_nowait`: as an urgent write, but never waiting for room, since
a thread holding the read role must not wait on the server (which may be waiting
for it to read).

On the main thread a signal handler's exception (Ctrl-C, an alarm) can land
after any call into C or on entry to any Python function (see
:mod:`jetstream_sync._signals`), so no state change here spans such a point
unprotected:

* the flusher is kicked in the same locked step that records the kick, and it
  also wakes every ``WAIT_SLICE`` to send a buffer that an interrupted caller
  left queued without a kick;
* an urgent send takes the send turn and the chunk by plain stores, and the
  protocol core reports the bytes a send took in memory the writer owns
  (``_protocol.send_nowait``): an interrupted send puts back exactly what did
  not go out and frees the turn.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING

from .. import _protocol
from .._deadline import WAIT_SLICE, Deadline
from .._signals import INTERRUPTS, drop_stray_timeouts, mend, raise_in_main, wait
from ..errors import (
    ConnectionClosedError,
    ForkedClientError,
    ReconnectBufferFullError,
    WriteBufferTimeoutError,
)
from .wait import COOPERATIVE_SLICE, pause

if TYPE_CHECKING:
    from .pings import PingTracker, PongWaiter
    from .request_mux import ReplyWaiter
    from .transport import Transport

# Above this many pending bytes, writers wait for the socket (bounded memory).
HIGH_WATER = 32 << 20
_PING = b"PING\r\n"

__all__ = ["HIGH_WATER", "CooperativeWriter", "Writer"]


class Writer:
    """Coalescing writer; see the module docstring.

    Args:
        on_error: called (on the writing thread) with the exception and the
            transport when a send fails; the client turns it into a disconnect.
        reconnect_buf_size: the most bytes kept while disconnected.
        name: the flusher thread's name.
    """

    def __init__(
        self,
        on_error: Callable[[BaseException, Transport], None],
        reconnect_buf_size: int,
        name: str,
    ) -> None:
        self._on_error = on_error
        self._reconnect_buf_size = reconnect_buf_size
        self._lock = threading.RLock()  # waited on through wait(): see jetstream_sync._signals
        # Released (once) to wake the flusher: cheaper than a Condition.notify
        # on the hot path. Only a False -> True change of _kicked releases it,
        # and only the flusher sets _kicked back after acquiring it.
        self._kick = threading.Lock()
        self._kick.acquire()
        self._idle = threading.Condition(self._lock)  # waiters: buffer drained / space
        self._idle_waiters = 0
        self._buf = bytearray()
        # The first _partial bytes of _buf end a frame whose start went out on
        # the current transport (a non-blocking send took part of a chunk):
        # they are dropped if that transport is detached, never sent elsewhere.
        self._partial = 0
        # Where each PING frame still in _buf ends, in bytes since the start
        # (bytes_out + offset in _buf); older ones are pruned lazily.
        self._ping_ends: deque[int] = deque()
        # Where the last PONG queued ends (same count); past bytes_out: still in _buf.
        self._pong_end = 0
        # Where each SUB/UNSUB frame written on the current transport starts and ends
        # (same count); those still in _buf when it is lost are dropped by detach().
        self._interest: deque[tuple[int, int]] = deque()
        self._transport: Transport | None = None
        self._sending = False
        self._kicked = False  # the flusher was woken and has not run yet
        self._report = _protocol.send_report()  # what _send_now's last send took
        self._closed = False
        self._pid = os.getpid()
        self.bytes_out = 0
        self.msgs_out = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- called by publishers -------------------------------------------------

    def write(
        self,
        frame: bytes,
        urgent: bool = False,
        msgs: int = 0,
        deadline: Deadline | float | None = None,
    ) -> None:
        """Queue ``frame`` for sending; ``msgs`` counts user messages in it.

        Over :data:`HIGH_WATER` pending bytes this waits for room: until
        ``deadline`` (a :class:`Deadline`, or a timeout in seconds counted
        from when the wait starts: no ``Deadline`` is made on the hot path),
        or with no deadline until there is room, the connection is lost (then
        the reconnect buffer's limit applies) or the writer closes.

        Raises:
            WriteBufferTimeoutError: no room before ``deadline``; nothing of ``frame``
                was queued.
            ConnectionClosedError: the writer is closed.
            ReconnectBufferFullError: disconnected and the reconnect buffer is full.
        """
        with self._lock:
            buf = self._buf
            if self._transport is not None and len(buf) <= HIGH_WATER and not self._closed:
                buf += frame  # the common case, inline
                self.msgs_out += msgs
            else:
                self._append(frame, msgs, deadline)
            if self._sending or self._transport is None:
                return
            if not urgent:
                if not self._kicked:  # one wake-up per burst, not one per frame
                    self._check_process()
                    self._kicked = True
                    self._kick.release()
                return
            self._check_process()
        self._send_now()

    def write_interest(self, frame: bytes) -> None:
        """Queue a SUB or UNSUB in order; never waits for room; dropped while disconnected.

        The subscription table says which subscriptions the next connection
        gets (the ``preamble`` of :meth:`attach`): a SUB or UNSUB written while
        disconnected, or written and still buffered when the connection was
        lost (:meth:`detach` takes those out), is part of it, so it is never
        sent a second time behind it. The caller holds the table's lock, so a
        frame is either in its snapshot or written after the attach.

        Raises:
            ConnectionClosedError: the writer is closed.
        """
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("connection closed")
            if self._transport is None:
                return
            start = self.bytes_out + len(self._buf)
            spans = self._pruned_interest()
            self._buf += frame
            spans += ((start, start + len(frame)),)  # after the frame: no call between
            self._send_here(False)

    def _check_process(self) -> None:
        """Under the lock, before this thread sends or wakes the flusher (once per burst):
        refuse a process forked without Python's at-fork handlers.

        uWSGI forks its workers from C, so the client cannot learn of that fork
        from ``os.register_at_fork``. There no thread of this writer runs and the
        socket is the parent's: a frame would wait unsent for good, and a send or
        a reply read would mix with the parent's.

        Raises:
            ForkedClientError: this is not the process that connected.
        """
        if os.getpid() != self._pid:
            raise ForkedClientError(
                "this client was created before a fork that ran no at-fork handler "
                "(uWSGI forks its workers from C); connect again in the child process"
            )

    def _pruned_interest(self) -> deque[tuple[int, int]]:
        """Under the lock: the SUB/UNSUB spans, without those already sent.

        A span is recorded right after its frame is appended, with no call
        between (a signal handler's exception can land on any call): one
        recorded for bytes that are not the frame's would drop others.
        """
        spans = self._interest
        while spans and spans[0][1] <= self.bytes_out:
            spans.popleft()
        return spans

    def write_checked(self, pings: PingTracker, frame: bytes, check: PongWaiter) -> None:
        """Queue a SUB ``frame`` between two PINGs whose PONGs both go to ``check``.

        ``PING``, ``frame`` and ``PING`` are appended in one step, under the
        writer's lock and the tracker's, so nothing else is written between
        them (see :mod:`jetstream_sync._connection.pings`). While
        disconnected nothing is queued, as by :meth:`write_interest`, and
        ``check`` hears nothing. Never waits for room.

        Raises:
            ConnectionClosedError: the writer is closed.
        """
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("connection closed")
            if self._transport is None:
                return
            ends = self._ping_ends
            while ends and ends[0] <= self.bytes_out:
                ends.popleft()
            framed = _PING + frame + _PING
            first = self.bytes_out + len(self._buf) + len(_PING)
            second = first + len(framed) - len(_PING)
            spans = self._pruned_interest()
            with pings.lock:
                pings.register_pair_locked(check)
                self._buf += framed
                ends += (first, second)
                spans += ((first, first + len(frame)),)
            self._send_here(False)

    def write_control(self, frame: bytes, urgent: bool = False) -> None:
        """Queue a PONG (dropped while disconnected, or while one waits): never waits for room.

        Raises:
            ConnectionClosedError: the writer is closed.
        """
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("connection closed")
            if self._transport is None:  # it answers a connection that is gone
                return
            if self._pong_end > self.bytes_out:  # the PONG still waiting answers this PING too
                return
            self._buf += frame
            self._pong_end = self.bytes_out + len(self._buf)
            send_now = self._send_here(urgent)
        if send_now:
            self._send_now()

    def write_ping(
        self, pings: PingTracker, waiter: ReplyWaiter | None, urgent: bool = False
    ) -> None:
        """Queue a PING for ``waiter`` (a flush, or None: a keep-alive) if ``pings`` takes it.

        Never waits for room. The PING is registered with ``pings`` and
        appended under the writer's lock and the tracker's, so the order of
        registered PINGs is their order in the stream, and no PING registered
        as sent on a connection ends up on the next one. From the registration
        to the PING's place in the buffer nothing is called, so a signal
        handler's exception cannot leave one without the other.

        Raises:
            ConnectionClosedError: the writer is closed.
        """
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("connection closed")
            ends = self._ping_ends
            while ends and ends[0] <= self.bytes_out:
                ends.popleft()
            end = self.bytes_out + len(self._buf) + len(_PING)
            connected = self._transport is not None
            with pings.lock:
                if not pings.register_locked(waiter, connected):
                    return
                self._buf += _PING
                ends += (end,)
            send_now = self._send_here(urgent)
        if send_now:
            self._send_now()

    def _send_here(self, urgent: bool) -> bool:
        """Under the lock, after appending: True to send on this thread now (urgent, socket idle).

        Otherwise the frame is left to whoever sends, or to the flusher.
        """
        if self._sending or self._transport is None:
            return False
        if urgent or not self._kicked:
            self._check_process()
        if urgent:
            return True  # _send_now takes the send turn
        if not self._kicked:
            self._kicked = True
            self._kick.release()
        return False

    def write_nowait(self, frame: bytes) -> bool:
        """Queue one message's ``frame`` and send it now if the socket is idle; never wait.

        For a requester holding the read role. Refuses (False, nothing queued)
        what :meth:`write` would have to wait for: no room in the buffer, or no
        connection; the caller then gives the role back before writing.

        Raises:
            ConnectionClosedError: the writer is closed.
            ForkedClientError: this is not the process that connected.
        """
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("connection closed")
            if self._transport is None or len(self._buf) > HIGH_WATER:
                return False
            # Checked on every call: a requester that took the read role in a child forked
            # from C would otherwise send and read its reply on the parent's socket.
            self._check_process()
            self._buf += frame
            self.msgs_out += 1
            if self._sending:
                return True  # whoever sends takes it too
        self._send_now()
        return True

    def _append(self, frame: bytes, msgs: int, deadline: Deadline | float | None) -> None:
        """Under the lock: wait for room (see :meth:`write`), then append ``frame``."""
        if self._closed:
            raise ConnectionClosedError("connection closed")
        if deadline is not None and not isinstance(deadline, Deadline):
            deadline = Deadline(deadline)  # a timeout in seconds: it starts now
        while len(self._buf) > HIGH_WATER and self._transport is not None:
            if deadline is not None and deadline.expired():
                raise WriteBufferTimeoutError(
                    f"timed out waiting for room in the write buffer ({len(self._buf)} bytes "
                    "wait for a server that is not reading them); nothing of this was sent"
                )
            self._idle_waiters += 1
            try:
                wait(self._idle, self._lock, WAIT_SLICE if deadline is None else deadline.slice())
            finally:
                self._idle_waiters -= 1
            if self._closed:
                raise ConnectionClosedError("connection closed")
        if self._transport is None and len(self._buf) + len(frame) > self._reconnect_buf_size:
            raise ReconnectBufferFullError(
                f"reconnect buffer full ({self._reconnect_buf_size} bytes) while disconnected"
            )
        self._buf += frame
        self.msgs_out += msgs

    # -- sending ----------------------------------------------------------------

    def _take(self) -> tuple[bytearray, Transport] | None:
        """Under the lock: take the buffer to send, or give up the send turn."""
        if not self._buf or self._transport is None:
            self._sending = False
            if self._idle_waiters:
                self._idle.notify_all()
            return None
        chunk, self._buf = self._buf, bytearray()
        self._partial = 0
        # Counted when handed to the socket: a reply can arrive before sendall returns.
        self.bytes_out += len(chunk)
        if self._idle_waiters:  # publishers waiting for room
            self._idle.notify_all()
        return chunk, self._transport

    def _send_until_empty(self) -> None:
        """The flusher: blocking writes until the buffer is empty.

        A signal handler's exception in a write (gevent, eventlet: the flusher
        is a greenlet of the main thread) may leave a frame half sent: the
        connection is given up as lost, and the exception goes on.
        """
        while True:
            with self._lock:
                taken = self._take()
            if taken is None:
                return
            chunk, transport = taken
            try:
                transport.sendall(chunk)
            except (OSError, ValueError) as exc:
                self._send_failed(exc, transport)
                return
            except INTERRUPTS as exc:
                interrupted = InterruptedError(f"interrupted ({type(exc).__name__})")
                self._send_failed(interrupted, transport)
                raise

    def _send_now(self) -> None:
        """An urgent writer's thread: send what the socket takes at once, if nobody sends.

        The rest goes back to the head of the buffer for the flusher, so a
        stalled server never holds up the caller (nor its deadline).

        Safe against a signal handler's exception on the main thread: the
        send turn, the chunk in hand and the bytes sent (which the protocol
        core reports in ``self._report`` before the send returns) are recorded
        by stores with no call between them, and the handler below gives back
        what an interrupted send left in hand.
        """
        report = self._report
        holding = False  # this call holds the send turn
        chunk: bytearray | None = None  # taken from the buffer, not yet accounted for
        partial = 0
        transport: Transport | None = None
        try:
            while True:
                with self._lock:
                    transport = self._transport
                    if not holding:
                        if self._sending or transport is None:
                            return  # whoever sends takes this frame too
                        self._sending = holding = True
                    if not self._buf or transport is None:
                        self._sending = holding = False
                        if self._idle_waiters:
                            self._idle.notify_all()
                        return
                    size = len(self._buf)
                    fresh = bytearray()
                    report[0] = -1  # not sent yet
                    report[1] = 0
                    partial, self._partial = self._partial, 0
                    chunk, self._buf = self._buf, fresh
                    # Counted when handed to the socket: a reply can arrive before the send returns.
                    self.bytes_out += size
                    if self._idle_waiters:  # publishers waiting for room
                        self._idle.notify_all()
                transport.send_nowait(chunk, report)
                sent, failed = report[0], report[1]
                if failed:
                    error = OSError(failed, os.strerror(failed))
                    with self._lock:
                        chunk = None  # lost with the connection
                        self._sending = holding = False
                        if self._transport is transport:
                            self._transport = None
                        self._idle.notify_all()
                    self._on_error(error, transport)
                    return
                if sent < size:
                    tail = memoryview(chunk)[sent:]
                    with self._lock:
                        if self._transport is transport:  # else: lost with that connection
                            self._buf[:0] = tail
                            self._partial = size - sent if sent else partial
                            self.bytes_out -= size - sent
                        chunk = None
                        self._sending = holding = False
                        if self._buf and self._transport is not None and not self._kicked:
                            self._kicked = True
                            self._kick.release()
                    return
                chunk = None
        except BaseException:
            if holding:  # interrupted (a signal handler's exception, on the main thread)
                self._give_back(chunk, report[0], partial, transport)
            raise

    def _give_back(
        self, chunk: bytearray | None, sent: int, partial: int, transport: Transport | None
    ) -> None:
        """After an interrupted :meth:`_send_now`: put back what was not sent, free the turn."""
        with self._lock:
            if chunk is not None and self._transport is transport:
                done = max(sent, 0)
                if done < len(chunk):
                    self._buf[:0] = memoryview(chunk)[done:]
                    self._partial = len(chunk) - done if done else partial
                    self.bytes_out -= len(chunk) - done
            self._sending = False
            if self._buf and self._transport is not None and not self._kicked:
                self._kicked = True
                self._kick.release()
            if self._idle_waiters:
                self._idle.notify_all()

    def _send_failed(self, exc: BaseException, transport: Transport) -> None:
        with self._lock:
            self._sending = False
            if self._transport is transport:
                self._transport = None
            self._idle.notify_all()
        self._on_error(exc, transport)

    def _run(self) -> None:
        # Woken by a kick, or every WAIT_SLICE to send what a signal handler's
        # exception left queued without a kick (on the main thread, between
        # appending a frame and kicking).
        while True:
            holding = False  # the send turn
            try:
                kicked = self._kick.acquire(timeout=WAIT_SLICE)
                with self._lock:
                    if kicked:
                        self._kicked = False
                    if self._closed:
                        return
                    if self._sending or not self._buf or self._transport is None:
                        continue
                    self._sending = holding = True
                self._send_until_empty()
            except INTERRUPTS as exc:  # a signal's, on this greenlet (gevent, eventlet)
                mend(self._lock)  # it may have landed inside the lock's own code
                drop_stray_timeouts()
                if holding:
                    self._give_back(None, 0, 0, None)
                raise_in_main(exc)

    # -- lifecycle (called by the client) ------------------------------------------

    def attach(
        self, transport: Transport, preamble: bytes = b"", resume: Callable[[], int] | None = None
    ) -> None:
        """Start sending on ``transport``.

        ``preamble`` (the re-subscriptions: SUB and UNSUB frames only) goes
        before what was buffered while disconnected; then, after it, as many
        PINGs as ``resume()`` (called under the lock) returns.
        """
        with self._lock:
            if preamble:
                self._buf[:0] = preamble
                self._interest += ((self.bytes_out, self.bytes_out + len(preamble)),)
            for _ in range(resume() if resume is not None else 0):
                self._buf += _PING
                self._ping_ends.append(self.bytes_out + len(self._buf))
            self._transport = transport
            # Only with something to send: a flusher left kicked with nothing to do would
            # keep a child forked from C right after connect (uWSGI) from the process check.
            if self._buf and not self._kicked:
                self._kicked = True
                self._kick.release()

    def drop_too_big(self, max_payload: int) -> list[tuple[str, bytes, int]]:
        """Take the PUB/HPUB frames larger than ``max_payload`` out of the buffer.

        Called while detached (the buffer then starts at a frame and holds no
        PING), before :meth:`attach` to a server that accepts less than the one
        the frames were checked against. Returns each dropped frame's subject,
        reply subject (``b""`` when none) and size (headers and payload), in order.
        """
        dropped: list[tuple[str, bytes, int]] = []
        with self._lock:
            buf = self._buf
            spans = []
            at, end = 0, len(buf)
            while at < end:
                eol = buf.find(b"\r\n", at)
                if eol < 0:
                    break
                if buf.startswith((b"PUB ", b"HPUB "), at):
                    line = bytes(buf[at:eol]).split()
                    size = int(line[-1])
                    frame_end = eol + 2 + size + 2
                    if size > max_payload:
                        spans.append((at, frame_end))
                        # PUB subject [reply] size; HPUB subject [reply] header-size size
                        has_reply = len(line) == (4 if line[0] == b"PUB" else 5)
                        reply = line[2] if has_reply else b""
                        subject = line[1].decode("utf-8", "surrogateescape")
                        dropped.append((subject, reply, size))
                    at = frame_end
                else:  # SUB, UNSUB, PONG: one line
                    at = eol + 2
            for start, stop in reversed(spans):
                del buf[start:stop]
        return dropped

    def detach(self) -> None:
        """Stop sending (disconnected); writes keep buffering up to the limit.

        The tail of a frame whose start went out on the lost connection is
        dropped, and so are the PINGs (none outlives its connection) and the
        SUB and UNSUB frames still buffered: the next connection gets every
        subscription from the table (see :meth:`write_interest`).
        """
        with self._lock:
            start = self.bytes_out + self._partial  # where the bytes to keep start
            del self._buf[: self._partial]
            self._partial = 0
            spans = [(end - len(_PING), end) for end in self._ping_ends if end > start]
            spans += [span for span in self._interest if span[1] > start]
            spans.sort()
            for first, end in reversed(spans):
                del self._buf[first - start : end - start]
            self._ping_ends.clear()
            self._interest.clear()
            self._pong_end = 0  # positions changed; the next connection's PINGs get PONGs
            self._transport = None
            self._idle.notify_all()

    def wait_drained(self, deadline: Deadline) -> bool:
        """Wait until the buffer is written; False if the deadline passed first."""
        with self._lock:
            while (self._buf or self._sending) and self._transport is not None:
                if deadline.expired():
                    return False
                self._idle_waiters += 1
                try:
                    wait(self._idle, self._lock, deadline.slice())
                finally:
                    self._idle_waiters -= 1
            return not self._buf

    def buffered_bytes(self) -> int:
        """How many bytes wait in the buffer, not yet written to the socket."""
        with self._lock:
            return len(self._buf)

    def close(self) -> None:
        """Stop the flusher thread and join it."""
        with self._lock:
            self._closed = True
            self._transport = None
            self._idle.notify_all()
            if not self._kicked:
                self._kicked = True
                self._kick.release()
        if self._thread is not threading.current_thread():
            self._thread.join()


class CooperativeWriter(Writer):
    """The writer of the cooperative wait mode (gevent, eventlet; see ``_connection/wait.py``).

    A loop of publishes never waits (the buffer takes them all), so under a
    hub it would keep every other greenlet (the flusher and the reader
    included) waiting until it ends. Here :meth:`write` yields to the hub once
    it has been :data:`~jetstream_sync._connection.wait.COOPERATIVE_SLICE` since the last
    time it did. The OS-thread mode uses :class:`Writer`, untouched.
    """

    _yield_at = 0.0

    def write(
        self,
        frame: bytes,
        urgent: bool = False,
        msgs: int = 0,
        deadline: Deadline | float | None = None,
    ) -> None:
        """As :meth:`Writer.write`, then a yield to the hub when its time has come.

        The lock is pure Python under a monkey-patch: a Ctrl-C landing in its
        release would keep it taken and stop every later write, so it is mended.
        """
        try:
            super().write(frame, urgent, msgs, deadline)
        except INTERRUPTS:
            mend(self._lock)
            raise
        if monotonic() >= self._yield_at:
            pause()
            self._yield_at = monotonic() + COOPERATIVE_SLICE
