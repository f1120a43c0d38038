"""The reader thread: recv_into a reused buffer, parse whole buffers, hand ops on.

The reader never runs user code. It gives every parsed buffer to
``route(ops, view, consumed)`` (the client), which must copy what it keeps before
returning: the buffer is reused for the next read. When the connection breaks
it asks ``connection_lost(exc)`` for the next connection (the client
reconnects, or returns ``None`` once it is closing) and carries on with it.

Nothing the server sends may end the thread: bytes that are not protocol, and
any exception raised while routing a parsed buffer, end the *connection* with a
:class:`~jetstream_sync.errors.ProtocolError` (chained to the original
exception) that ``connection_lost`` receives like any other disconnect.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import _protocol
from .errors import ProtocolError

if TYPE_CHECKING:
    from ._handshake import Connected
    from ._transport import Transport

_INITIAL_BUFFER = 512 * 1024
_MIN_FREE = 64 * 1024


class EndOfStreamError(ConnectionError):
    """The server closed the connection (end of stream)."""


def _unroutable(exc: Exception) -> ProtocolError:
    """The connection error for a parsed buffer the client could not handle.

    The cause keeps its traceback from the routing code on (for debugging),
    with the local variables of those frames cleared: they hold the data.
    """
    error = ProtocolError(
        f"could not handle what the server sent ({type(exc).__name__}: {exc}); reconnecting"
    )
    tb = exc.__traceback__
    inner = tb.tb_next if tb is not None else None
    if inner is not None:
        traceback.clear_frames(inner)
    error.__cause__ = exc.with_traceback(inner)
    return error


def _detached(exc: BaseException) -> BaseException:
    """``exc`` without the reader's frame in its traceback, nor a hidden context.

    Those frames hold the read buffer (as large as the largest frame the
    server sent, up to the parser's limits): an ``error_cb`` that keeps the
    error must not keep the buffer too. (The pure-Python parser raises its
    errors ``from None``: the suppressed context still held its frames.)
    """
    if exc.__suppress_context__:
        exc.__context__ = None
    return exc.with_traceback(None)


class Reader:
    """Owns the read side of the connection, across reconnects.

    Args:
        first: the connection to start with (an object with ``transport`` and
            ``leftover`` — bytes read during the handshake but not yet parsed).
        route: called with ``(ops, view, consumed)`` for every buffer holding whole ops.
        connection_lost: called with the error; returns the next connection or None.
        name: the thread's name.
        crashed: called with the exception if ``connection_lost`` itself raised
            (a bug): the thread then ends, and the client must close rather
            than stay connected to nothing.
    """

    def __init__(
        self,
        first: Connected,
        route: Callable[[list[int], memoryview, int], None],
        connection_lost: Callable[[BaseException], Connected | None],
        name: str,
        crashed: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._first: Connected | None = first
        self._route = route
        self._connection_lost = connection_lost
        self._crashed = crashed
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn = self._first
        self._first = None
        while conn is not None:
            error = self._read_until_error(conn.transport, conn.leftover)
            try:
                conn = self._connection_lost(error)
            except Exception as exc:
                if self._crashed is None:
                    raise
                self._crashed(exc)
                return

    def _read_until_error(self, transport: Transport, leftover: bytes) -> BaseException:
        buf = bytearray(max(_INITIAL_BUFFER, 2 * len(leftover)))
        have = len(leftover)
        buf[:have] = leftover
        view = memoryview(buf)
        parse = _protocol.parse
        route = self._route
        while True:
            if have:
                try:
                    ops, consumed, need = parse(buf, 0, have)
                    if ops:
                        route(ops, view, consumed)
                except ProtocolError as exc:
                    return _detached(exc)
                except Exception as exc:  # nothing the server sends may end the thread
                    return _unroutable(exc)
                if consumed:
                    left = have - consumed
                    if left:
                        view[:left] = view[consumed:have]
                    have = left
                wanted = max(need, have + _MIN_FREE)
                if wanted > len(buf):
                    view.release()
                    bigger = bytearray(max(wanted, 2 * len(buf)))
                    bigger[:have] = buf[:have]
                    buf, view = bigger, memoryview(bigger)
                elif len(buf) > _INITIAL_BUFFER and have < _INITIAL_BUFFER // 2 and not need:
                    view.release()
                    smaller = bytearray(_INITIAL_BUFFER)
                    smaller[:have] = buf[:have]
                    buf, view = smaller, memoryview(smaller)
            try:
                n = transport.recv_into(view[have:])
            except (OSError, ValueError) as exc:
                return _detached(exc)
            if n == 0:
                return EndOfStreamError("connection closed by the server")
            have += n

    def join(self) -> None:
        """Wait for the thread to end (the client closes the socket first)."""
        if self._thread is not threading.current_thread():
            self._thread.join()
