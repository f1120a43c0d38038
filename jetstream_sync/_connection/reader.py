"""The reader thread: owns the connection's read side across reconnects.

It holds the read role (:mod:`jetstream_sync._connection.read_role`) by default: it
receives, parses whole buffers and gives them to ``route(ops, view,
consumed)`` (the client), lending the role to requesters that read their own
replies. When the connection breaks (seen by the reader thread or by a
requester) it asks ``connection_lost(exc)`` for the next connection (the client
reconnects, or returns ``None`` once it is closing) and carries on with it. It
never runs user code.

Nothing the server sends may end the thread: bytes that are not protocol, and
any exception raised while routing a parsed buffer, end the *connection* with a
:class:`~jetstream_sync.errors.ProtocolError` (chained to the original
exception) that ``connection_lost`` receives like any other disconnect. An
exception from the reading itself or from ``connection_lost`` is a bug: it
goes to ``crashed``, which closes the client (failing every waiting call at
once) rather than leaving the calls to wait out their timeouts.

Under gevent or eventlet the reader is a greenlet of the main thread, where a
signal handler's exception (Ctrl-C) can land while it routes: the exception
goes to the main greenlet (:func:`~jetstream_sync._signals.raise_in_main`) and,
the buffer being routed in part, the connection is given up as lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._signals import INTERRUPTS, raise_in_main
from ..errors import ConnectionLostError
from .read_buffer import EndOfStreamError, Route
from .read_role import ReadRole

if TYPE_CHECKING:
    from .handshake import Connected

__all__ = ["EndOfStreamError", "Reader"]


class Reader:
    """Owns the read side of the connection, across reconnects.

    Args:
        first: the connection to start with (an object with ``transport`` and
            ``leftover`` — bytes read during the handshake but not yet parsed).
        route: called with ``(ops, view, consumed)`` for every buffer holding whole ops.
        connection_lost: called with the error; returns the next connection or None.
        name: the thread's name.
        crashed: called with the exception if reading or ``connection_lost``
            raised (a bug): the thread then ends, and the client must close
            rather than stay connected to nothing.
        cooperative: the cooperative wait mode (see :mod:`jetstream_sync._connection.wait`).

    Attributes:
        role: the read role, which requesters borrow to read their own replies.
    """

    def __init__(
        self,
        first: Connected,
        route: Route,
        connection_lost: Callable[[BaseException], Connected | None],
        name: str,
        crashed: Callable[[BaseException], None] | None = None,
        cooperative: bool = False,
    ) -> None:
        self._first: Connected | None = first
        self.role = ReadRole(route, cooperative)
        self._connection_lost = connection_lost
        self._crashed = crashed
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn = self._first
        self._first = None
        try:
            while conn is not None:
                try:
                    try:
                        error: BaseException = self.role.serve(conn.transport, conn.leftover)
                    except INTERRUPTS as exc:  # a signal's, on this greenlet (gevent, eventlet)
                        raise_in_main(exc)
                        error = ConnectionLostError(
                            f"reading was interrupted ({type(exc).__name__}); reconnecting"
                        )
                    conn = self._connection_lost(error)
                except Exception as exc:
                    if self._crashed is None:
                        raise
                    self._crashed(exc)
                    return
        finally:
            self.role.retire()

    def join(self) -> None:
        """Wait for the thread to end (the client closes the socket first)."""
        if self._thread is not threading.current_thread():
            self._thread.join()
