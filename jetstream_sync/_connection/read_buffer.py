"""A connection's read buffer: bytes received but not yet parsed, and the parse step.

There is one per connection. Whichever thread holds the read role (see
:mod:`jetstream_sync._connection.read_role`) receives into :meth:`ReadBuffer.free` and
calls :meth:`ReadBuffer.received`, which parses every whole op in one C call
and gives them to ``route(ops, view, consumed)`` (the client). ``route`` must
copy what it keeps: the buffer is reused. Between two holders the buffer
holds at most one incomplete frame, so the next holder carries on where the
last one stopped.

A lone requester's round trip (:meth:`ReadRole.round_trip
<jetstream_sync._connection.read_role.ReadRole.round_trip>`) receives into the same
space in its C call; when what arrived is its reply alone, it reads the reply
from :attr:`ReadBuffer.raw` and calls :meth:`ReadBuffer.consumed` instead of
:meth:`ReadBuffer.received`.

Nothing the server sends may raise out of here: bytes that are not protocol,
and any exception raised while routing a parsed buffer, are *returned* as the
:class:`~jetstream_sync.errors.ProtocolError` (chained to the original) that
ends the connection. One exception to that: on the main thread (a requester
reading for itself) an exception from routing is raised, because it may be a
signal handler's, which belongs to the caller; the caller then hands the
connection to the reader thread as failed.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

from .. import _protocol
from .._signals import on_signal_thread
from ..errors import ProtocolError

Route = Callable[[list[int], memoryview, int], None]

_INITIAL_BUFFER = 512 * 1024
_MIN_FREE = 64 * 1024


class EndOfStreamError(ConnectionError):
    """The server closed the connection (end of stream)."""


def unroutable(exc: Exception) -> ProtocolError:
    """The connection error for a parsed buffer the client could not handle.

    The text names only the exception's type: its message may quote what was
    received. The cause keeps message and traceback from the routing code on
    (for debugging), with the local variables of those frames cleared: they
    hold the data.
    """
    error = ProtocolError(
        f"could not handle what the server sent ({type(exc).__name__}); reconnecting"
    )
    tb = exc.__traceback__
    inner = tb.tb_next if tb is not None else None
    if inner is not None:
        traceback.clear_frames(inner)
    error.__cause__ = exc.with_traceback(inner)
    return error


def detached(exc: BaseException) -> BaseException:
    """``exc`` without the reading thread's frames in its traceback, nor a hidden context.

    Those frames hold the read buffer (as large as the largest frame the
    server sent, up to the parser's limits): an ``error_cb`` that keeps the
    error must not keep the buffer too. (The pure-Python parser raises its
    errors ``from None``: the suppressed context still held its frames.)
    """
    if exc.__suppress_context__:
        exc.__context__ = None
    return exc.with_traceback(None)


class ReadBuffer:
    """The unparsed bytes of one connection; used by one thread at a time.

    Args:
        leftover: bytes read during the handshake but not yet parsed.
        route: called with ``(ops, view, consumed)`` for every buffer holding whole ops.
    """

    __slots__ = ("_buf", "_view", "_have", "_route")

    def __init__(self, leftover: bytes, route: Route) -> None:
        self._buf = bytearray(max(_INITIAL_BUFFER, 2 * len(leftover)))
        self._have = len(leftover)
        self._buf[: self._have] = leftover
        self._view = memoryview(self._buf)
        self._route = route

    @property
    def raw(self) -> bytearray:
        """The buffer itself: received bytes from 0 to :attr:`have`, then the free space."""
        return self._buf

    @property
    def view(self) -> memoryview:
        """A memoryview of :attr:`raw` (slices of it copy once with ``tobytes``)."""
        return self._view

    @property
    def have(self) -> int:
        """How many bytes at the start of :attr:`raw` are received and not yet parsed."""
        return self._have

    def consumed(self, n: int, consumed: int, need: int) -> None:
        """``n`` bytes landed in :meth:`free` and their reply was read: drop it.

        Args:
            n: the bytes received.
            consumed: where the reply (the one whole op parsed) ends.
            need: the size of the incomplete frame after it, if its control
                line is complete (as the parser reports it).
        """
        self._have += n
        self._advance(consumed, need)

    def free(self) -> memoryview:
        """The space to receive into (at least 64 KiB, or the rest of a large frame)."""
        return self._view[self._have :]

    def received(self, n: int) -> BaseException | None:
        """``n`` bytes landed in :meth:`free`: parse and route every whole op.

        Returns:
            None, or the error that ends the connection (nothing is raised).
        """
        self._have += n
        return self.process()

    def process(self) -> BaseException | None:
        """Parse and route the whole ops held; grow or shrink the buffer for what comes next.

        Returns:
            None, or the error that ends the connection (nothing is raised).
        """
        have = self._have
        if not have:
            return None
        buf, view = self._buf, self._view
        try:
            try:
                ops, consumed, need = _protocol.parse(buf, 0, have)
            except ProtocolError as exc:
                self._route_before(exc)
                return detached(exc)
            if ops:
                self._route(ops, view, consumed)
        except ProtocolError as exc:
            return detached(exc)
        except Exception as exc:  # nothing the server sends may raise out of here
            if on_signal_thread():
                # It may be a signal handler's (an alarm's): the caller's. Raised,
                # the reading caller gives up the connection (routed in part) and
                # sees its exception, instead of the exception being swallowed.
                raise
            return unroutable(exc)
        self._advance(consumed, need)
        return None

    def _route_before(self, error: ProtocolError) -> None:
        """Route the whole ops received before the frame ``error`` is about.

        They were whole and valid: a bad frame after them (in the same read)
        must not cost them. Parsing stops right before the bad frame, so this
        parse cannot fail.
        """
        if error.offset:
            ops, consumed, _ = _protocol.parse(self._buf, 0, error.offset)
            if ops:
                self._route(ops, self._view, consumed)

    def _advance(self, consumed: int, need: int) -> None:
        """Drop the first ``consumed`` bytes; grow or shrink for what comes next."""
        have, buf = self._have, self._buf
        if consumed:
            left = have - consumed
            if left:
                view = self._view
                view[:left] = view[consumed:have]
            have = self._have = left
        wanted = max(need, have + _MIN_FREE)
        if wanted > len(buf):
            self._resize(max(wanted, 2 * len(buf)))
        elif len(buf) > _INITIAL_BUFFER and have < _INITIAL_BUFFER // 2 and not need:
            self._resize(_INITIAL_BUFFER)

    def _resize(self, size: int) -> None:
        self._view.release()
        new = bytearray(size)
        new[: self._have] = self._buf[: self._have]
        self._buf, self._view = new, memoryview(new)
