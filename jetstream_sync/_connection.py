"""The connection's background work, mixed into :class:`~jetstream_sync.client.Client`.

What runs on the client's own threads: the reader thread's handling of every
parsed buffer (routing messages to subscription queues in batches, PING/PONG,
INFO, -ERR), reconnecting when the connection breaks, and the keep-alive
pinger. Kept apart from ``client.py`` so the public API reads on its own; the
state it uses is the client's, set up in ``Client.__init__``.
"""

from __future__ import annotations

import ssl
import threading
from typing import TYPE_CHECKING, Any, cast

from . import _protocol
from ._events import log
from ._handshake import Connected, handshake, parse_info
from ._server_errors import server_error
from .errors import (
    AuthorizationError,
    ConnectionLostError,
    NatsError,
    NoServersError,
    ProtocolError,
    SlowConsumerError,
    StaleConnectionError,
    TimeoutError,
)
from .msg import Msg

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._handshake import HandshakeOptions
    from ._pings import PingTracker
    from ._request_mux import ReplyWaiter, RequestMux
    from ._server_pool import ServerPool
    from ._sub_table import SubscriptionTable
    from ._transport import Transport
    from ._writer import Writer
    from .client import Client

_OP_MSG = _protocol.OP_MSG
_OP_HMSG = _protocol.OP_HMSG
_FIELDS = _protocol.OP_FIELDS
# One bytes copy of a parsed buffer up to this size; larger ones are sliced in place.
_COPY_LIMIT = 4 << 20
CONNECT_ERRORS = (OSError, ssl.SSLError, NatsError, TimeoutError, ValueError, ConnectionError)
# A server refusing the credentials this many times in a row ends the reconnecting
# (and closes the client), as in nats.go: retrying them would only hammer it.
AUTH_FAILURES_BEFORE_CLOSE = 2
# What Client.add_reply_route hands its handler per reply: (token, payload, raw headers).
Reply = tuple[str, bytes, bytes | None]


def sub_frame(subject: bytes, queue: bytes, sid: int) -> bytes:
    """The SUB frame for a subscription."""
    if queue:
        return b"SUB %s %s %d\r\n" % (subject, queue, sid)
    return b"SUB %s %d\r\n" % (subject, sid)


class ConnectionMixin:
    """Reader-thread routing, reconnects and keep-alives of a :class:`Client`."""

    if TYPE_CHECKING:  # the client's state and methods this uses (see Client.__init__)
        _id: int
        _handshake_opts: HandshakeOptions
        _connect_timeout: float
        _allow_reconnect: bool
        _reconnect_time_wait: float
        _reconnect_jitter: float
        _ping_interval: float
        _max_outstanding_pings: int
        _state_lock: threading.RLock
        _closing: threading.Event
        _forked: bool
        _reconnecting: bool
        _pool: ServerPool
        _conn: Connected | None
        _subs: SubscriptionTable
        _mux: RequestMux | None
        _mux_sid: int
        _routes: dict[int, tuple[int, Callable[[list[Reply]], object], bytes]]
        _pings: PingTracker
        _in_msgs: int
        _in_bytes: int
        _reconnects: int
        _writer: Writer

        def _adopt(self, conn: Connected) -> None: ...
        def _apply_info(self, info: dict[str, Any]) -> None: ...
        def _announce(self, status: str) -> None: ...
        def _report_error(self, exc: BaseException) -> None: ...
        def _send_ping(self, waiter: ReplyWaiter | None) -> None: ...
        def _close(self, reason: BaseException | None) -> None: ...

    def _ping_loop(self) -> None:
        while not self._closing.wait(self._ping_interval):
            if self._reconnecting:
                continue
            if self._pings.keepalives_unanswered >= self._max_outstanding_pings:
                conn = self._conn
                if conn is not None:
                    self._report_error(
                        StaleConnectionError("stale connection: PINGs went unanswered")
                    )
                    conn.transport.shutdown()
                continue
            try:
                self._send_ping(None)
            except NatsError:
                return

    def _route(self, ops: list[int], view: memoryview, consumed: int) -> None:
        """Handle one parsed buffer (reader thread). Copies everything it keeps."""
        # One copy of the parsed part makes every slice below a plain bytes
        # object (cheaper than a memoryview slice each); very large buffers
        # are sliced in place to avoid copying big payloads twice.
        src = view[:consumed].tobytes() if consumed <= _COPY_LIMIT else view
        batches: dict[int, list[Msg]] = {}
        replies: dict[int, list[Reply]] = {}
        mux_sid = self._mux_sid
        client = cast("Client", self)  # every Msg names the client it came through
        routes = self._routes
        for i in range(0, len(ops), _FIELDS):
            kind = ops[i]
            if kind == _OP_MSG or kind == _OP_HMSG:
                _, so, sl, sid, ro, rl, ho, hl, po, pl = ops[i : i + _FIELDS]
                # Counted before anything is handed on, so a woken thread sees it.
                self._in_msgs += 1
                self._in_bytes += hl + pl
                route = routes.get(sid) if routes else None
                if route is not None:  # add_reply_route(): a tuple, no Msg
                    reply = (
                        str(src[so + route[0] : so + sl], "utf-8", "surrogateescape"),
                        bytes(src[po : po + pl]),
                        bytes(src[ho : ho + hl]) if hl else None,
                    )
                    pending = replies.get(sid)
                    if pending is None:
                        replies[sid] = [reply]
                    else:
                        pending.append(reply)
                    continue
                # Any client may publish subjects that are not UTF-8 (the server
                # allows every byte but space and control characters):
                # surrogateescape keeps them, and encoding back gives the bytes.
                msg = Msg(
                    str(src[so : so + sl], "utf-8", "surrogateescape"),
                    str(src[ro : ro + rl], "utf-8", "surrogateescape") if rl else "",
                    bytes(src[po : po + pl]),
                    bytes(src[ho : ho + hl]) if hl else None,
                    client,
                    sid,
                )
                if sid == mux_sid:
                    assert self._mux is not None  # set before any request is sent
                    self._mux.route(msg)
                    continue
                batch = batches.get(sid)
                if batch is None:
                    batches[sid] = [msg]
                else:
                    batch.append(msg)
            else:
                if batches:  # what came before a PONG must be queued before it wakes anyone
                    self._deliver_batches(batches)
                    batches = {}
                if replies:
                    self._deliver_replies(replies)
                    replies = {}
                self._control(kind, ops, i, src)
        if batches:
            self._deliver_batches(batches)
        if replies:
            self._deliver_replies(replies)

    def _deliver_replies(self, replies: dict[int, list[Reply]]) -> None:
        routes = self._routes
        for sid, batch in replies.items():
            routes[sid][1](batch)

    def _deliver_batches(self, batches: dict[int, list[Msg]]) -> None:
        for sub in self._subs.deliver(batches):
            self._report_error(SlowConsumerError(sub.subject, sub.sid))

    def _control(self, kind: int, ops: list[int], i: int, src: bytes | memoryview) -> None:
        if kind == _protocol.OP_PING:  # never waits for room: the reader must not block
            self._writer.write_control(b"PONG\r\n")
        elif kind == _protocol.OP_PONG:
            self._pings.pong()
        elif kind == _protocol.OP_INFO:  # a bad INFO raises ProtocolError: a reconnect
            info = parse_info(bytes(src[ops[i + 1] : ops[i + 1] + ops[i + 2]]))
            self._apply_info(info)
            if info.get("ldm"):
                assert self._conn is not None  # an INFO arrives on a connection
                log.info("server %s entered lame duck mode", self._conn.address.url())
                self._announce("lame_duck")
        elif kind == _protocol.OP_ERR:  # the server closes the connection if it must
            text = str(src[ops[i + 1] : ops[i + 1] + ops[i + 2]], "utf-8", "replace")
            self._report_error(server_error(text))

    def _write_failed(self, exc: BaseException, transport: Transport) -> None:
        """A send on ``transport`` failed: wake its reader so it runs the reconnect.

        Only that transport is shut down: by now the client may be on a new one.
        """
        transport.shutdown()

    def _connection_lost(self, exc: BaseException) -> Connected | None:
        """Reader thread: the connection broke. Reconnect, or return None to stop."""
        if not self._closing.is_set():
            self._reconnecting = True  # before the writer detaches: is_connected must say False
        self._writer.detach()  # drops the PINGs still buffered: failed just below
        old = self._conn
        if old is not None and not self._forked:
            old.transport.shutdown()
            old.transport.close()
        if self._closing.is_set():
            return None
        if isinstance(exc, ProtocolError):  # the server (or a client) sent what we cannot use
            self._report_error(exc)
        self._pings.connection_lost(
            ConnectionLostError(f"connection lost before the PONG arrived: {exc}")
        )
        if self._mux is not None:  # replies to the old connection can no longer come
            self._mux.fail_all(
                ConnectionLostError(
                    f"connection lost before the reply arrived ({exc}); the request may or may "
                    "not have been processed by the server: retry (a JetStream publish with "
                    "the same msg_id)"
                )
            )
        log.info("disconnected from %s: %s", old.address.url() if old else "-", exc)
        self._announce("disconnected")
        if not self._allow_reconnect:
            self._close_in_background(exc)
            return None
        auth_failures: dict[tuple[str, int], int] = {}  # per server, in a row
        while not self._closing.is_set():
            try:
                address, wait = self._pool.next_candidate(
                    self._reconnect_time_wait, self._reconnect_jitter
                )
            except LookupError:
                self._close_in_background(NoServersError("reconnect attempts exhausted"))
                return None
            if wait and self._closing.wait(wait):
                return None
            try:
                conn = handshake(address, self._handshake_opts, self._connect_timeout)
            except Exception as error:  # noqa: BLE001 - one bad attempt must not end the reader
                log.debug("reconnect to %s failed: %s", address.url(), error)
                # 'Authorization Timeout' means a slow CONNECT, not refused credentials.
                if isinstance(error, AuthorizationError) and "timeout" not in str(error).lower():
                    failures = auth_failures[address.key] = auth_failures.get(address.key, 0) + 1
                    if failures >= AUTH_FAILURES_BEFORE_CLOSE:
                        self._close_in_background(error)  # error_cb gets it, then closed_cb
                        return None
                else:
                    auth_failures.pop(address.key, None)
                if isinstance(error, (AuthorizationError, ProtocolError)) or not isinstance(
                    error, CONNECT_ERRORS
                ):
                    self._report_error(error)
                continue
            with self._state_lock:
                if self._closing.is_set():
                    conn.transport.close()
                    return None
                self._adopt(conn)
                self._reconnecting = False
                self._writer.attach(conn.transport, self._resubscribe_frames(), self._pings.resume)
                self._reconnects += 1
            log.info("reconnected to %s", conn.address.url())
            self._announce("reconnected")
            return conn
        return None

    def _resubscribe_frames(self) -> bytes:
        """SUB frames for every live subscription (sent first on a new connection)."""
        frames = []
        with self._subs.lock:
            if self._mux is not None:
                frames.append(sub_frame(self._mux.subject.encode(), b"", self._mux_sid))
            for sid, (_, _, subject) in self._routes.items():
                frames.append(sub_frame(subject, b"", sid))
            for sub, left in self._subs.routed():
                subject = sub.subject.encode("utf-8", "surrogateescape")
                frames.append(sub_frame(subject, sub.queue.encode(), sub.sid))
                if left is not None:
                    frames.append(b"UNSUB %d %d\r\n" % (sub.sid, left))
        return b"".join(frames)

    def _reader_crashed(self, exc: BaseException) -> None:
        """Reader thread: reconnecting failed on a bug; close (reporting it) rather than go deaf."""
        self._close_in_background(exc)

    def _close_in_background(self, reason: BaseException) -> None:
        threading.Thread(
            target=self._close, args=(reason,), name=f"jetstream_sync-{self._id}-closer"
        ).start()
