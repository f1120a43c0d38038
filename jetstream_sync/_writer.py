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

While disconnected the buffer keeps filling up to ``reconnect_buf_size``; past
that, writes raise instead of dropping anything silently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ._deadline import Deadline
from .errors import ConnectionClosedError, NatsError

# Above this many pending bytes, writers wait for the socket (bounded memory).
_HIGH_WATER = 32 << 20


class ReconnectBufferFullError(NatsError):
    """A write while reconnecting found the reconnect buffer full."""


class Writer:
    """Coalescing writer; see the module docstring.

    Args:
        on_error: called (on the writing thread) with the exception when a send
            fails; the client turns it into a disconnect.
        reconnect_buf_size: the most bytes kept while disconnected.
        name: the flusher thread's name.
    """

    def __init__(
        self, on_error: Callable[[BaseException], None], reconnect_buf_size: int, name: str
    ) -> None:
        self._on_error = on_error
        self._reconnect_buf_size = reconnect_buf_size
        self._lock = threading.Lock()
        # Released (once) to wake the flusher: cheaper than a Condition.notify
        # on the hot path. Only a False -> True change of _kicked releases it,
        # and only the flusher sets _kicked back after acquiring it.
        self._kick = threading.Lock()
        self._kick.acquire()
        self._idle = threading.Condition(self._lock)  # waiters: buffer drained / space
        self._idle_waiters = 0
        self._buf = bytearray()
        self._transport = None
        self._sending = False
        self._kicked = False  # the flusher was woken and has not run yet
        self._closed = False
        self.bytes_out = 0
        self.msgs_out = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- called by publishers -------------------------------------------------

    def write(self, frame: bytes, urgent: bool = False, msgs: int = 0) -> None:
        """Queue ``frame`` for sending; ``msgs`` counts user messages in it.

        Raises:
            ConnectionClosedError: the writer is closed.
            ReconnectBufferFullError: disconnected and the reconnect buffer is full.
        """
        with self._lock:
            if self._transport is not None and len(self._buf) <= _HIGH_WATER and not self._closed:
                self._buf += frame  # the common case, inline
                self.msgs_out += msgs
            else:
                self._append(frame, msgs)
            if self._sending or self._transport is None:
                return
            if not urgent:
                if self._kicked:  # one wake-up per burst, not one per frame
                    return
                self._kicked = True
            else:
                self._sending = True
        if urgent:
            self._send_until_empty()
        else:
            self._kick.release()

    def _append(self, frame: bytes, msgs: int) -> None:
        if self._closed:
            raise ConnectionClosedError("connection closed")
        if self._transport is None:
            if len(self._buf) + len(frame) > self._reconnect_buf_size:
                raise ReconnectBufferFullError(
                    f"reconnect buffer full ({self._reconnect_buf_size} bytes) while disconnected"
                )
        else:
            while len(self._buf) > _HIGH_WATER and self._transport is not None:
                self._idle_waiters += 1
                try:
                    self._idle.wait(0.5)
                finally:
                    self._idle_waiters -= 1
                if self._closed:
                    raise ConnectionClosedError("connection closed")
        self._buf += frame
        self.msgs_out += msgs

    # -- sending ----------------------------------------------------------------

    def _take(self) -> tuple[bytearray, object] | None:
        """Under the lock: take the buffer to send, or give up the sender role."""
        if not self._buf or self._transport is None:
            self._sending = False
            if self._idle_waiters:
                self._idle.notify_all()
            return None
        chunk, self._buf = self._buf, bytearray()
        # Counted when handed to the socket: a reply can arrive before sendall returns.
        self.bytes_out += len(chunk)
        if self._idle_waiters:  # publishers waiting for room
            self._idle.notify_all()
        return chunk, self._transport

    def _send_until_empty(self) -> None:
        while True:
            with self._lock:
                taken = self._take()
            if taken is None:
                return
            chunk, transport = taken
            try:
                transport.sendall(chunk)
            except (OSError, ValueError) as exc:
                with self._lock:
                    self._sending = False
                    if self._transport is transport:
                        self._transport = None
                    self._idle.notify_all()
                self._on_error(exc)
                return

    def _run(self) -> None:
        while True:
            self._kick.acquire()
            with self._lock:
                self._kicked = False
                if self._closed:
                    return
                if self._sending or not self._buf or self._transport is None:
                    continue
                self._sending = True
            self._send_until_empty()

    # -- lifecycle (called by the client) ------------------------------------------

    def attach(self, transport, preamble: bytes = b"", postamble: bytes = b"") -> None:
        """Start sending on ``transport``.

        ``preamble`` goes before what was buffered while disconnected, ``postamble`` after it.
        """
        with self._lock:
            if preamble:
                self._buf[:0] = preamble
            self._buf += postamble
            self._transport = transport
            kick = not self._kicked
            self._kicked = True
        if kick:
            self._kick.release()

    def detach(self) -> None:
        """Stop sending (disconnected); writes keep buffering up to the limit."""
        with self._lock:
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
                    self._idle.wait(deadline.slice())
                finally:
                    self._idle_waiters -= 1
            return not self._buf

    def close(self) -> None:
        """Stop the flusher thread and join it."""
        with self._lock:
            self._closed = True
            self._transport = None
            self._idle.notify_all()
            kick = not self._kicked
            self._kicked = True
        if kick:
            self._kick.release()
        if self._thread is not threading.current_thread():
            self._thread.join()
