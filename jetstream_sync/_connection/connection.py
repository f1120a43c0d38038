"""The connection to the server, owned by a :class:`~jetstream_sync.client.Client`.

:class:`Connection` owns everything that talks to the server: the transport,
the writer and its flusher thread, the reader thread and its read role, the
routing of every parsed buffer (messages to subscription queues in batches,
replies to the request multiplexer and to reply routes, PING/PONG, INFO,
-ERR), reconnecting when the link breaks, and the keep-alive pinger. The
client holds one and stays the public face: it validates and encodes what the
user asks, and hears back from the connection only through the callbacks it
gives it (errors, status changes, a new INFO, a connection lost for good).
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs

from .. import _protocol
from .._deadline import Deadline
from .._events import log
from .._reply import Reply
from .._server_errors import server_error
from .._server_pool import ServerPool
from .._signals import Flag
from ..errors import (
    AuthorizationError,
    ConnectionClosedError,
    ConnectionLostError,
    MaxPayloadError,
    MaxSubscriptionsExceededError,
    NatsError,
    NoServersError,
    PermissionViolationError,
    ProtocolError,
    SlowConsumerError,
    StaleConnectionError,
    TimeoutError,
)
from ..msg import AckSender, Msg, received
from .handshake import Connected, HandshakeOptions, handshake, parse_info
from .pings import PingTracker, ResubscribeCheck, SubscribeCheck
from .reader import Reader
from .request_mux import ReplyWaiter, RequestMux
from .sub_table import SubscriptionTable
from .wait import THREADS, WaitMode, choose
from .writer import CooperativeWriter, Writer

if TYPE_CHECKING:
    from .._server_pool import ServerAddress
    from ..subscription import Subscription
    from .pings import PongWaiter
    from .read_role import FastReply, Ready
    from .transport import Transport

__all__ = ["Connection", "ConnectionOptions"]

# A reply route's whole-buffer handler: (the read buffer, bytes parsed, the route's sid).
BufferHandler = Callable[[memoryview, int, int], object]
_ReplyRoute = tuple[int, Callable[[list[Reply]], object], bytes, BufferHandler | None]
# What :meth:`Connection.new_reply` gives a request to pass back to :meth:`Connection.request`:
# the inbox it is answered on (not necessarily the current one by then) and its token.
ReplyToken = tuple[RequestMux, str]


def _fresh(error: BaseException) -> BaseException:
    """A new error like ``error``, for one more thread to raise (each its own traceback)."""
    return type(error)(*error.args)


_OP_MSG = _protocol.OP_MSG
_OP_HMSG = _protocol.OP_HMSG
_FIELDS = _protocol.OP_FIELDS
# One bytes copy of a parsed buffer up to this size; larger ones are sliced in place.
_COPY_LIMIT = 4 << 20
_MESSAGE_KINDS = frozenset((_OP_MSG, _OP_HMSG))
# For one or two messages the general loop is as cheap as the one-pass one (measured).
_ONE_PASS_OPS = 3 * _FIELDS
CONNECT_ERRORS = (OSError, ssl.SSLError, NatsError, TimeoutError, ValueError, ConnectionError)
# A server refusing the credentials this many times in a row ends the reconnecting
# (and closes the client), as in nats.go: retrying them would only hammer it.
AUTH_FAILURES_BEFORE_CLOSE = 2


def _attempts_exhausted(last_error: BaseException | None) -> NoServersError:
    """The error a client that gave up reconnecting closes with: it names the last failure
    (a refused connection, a certificate that did not verify...), its ``__cause__``."""
    text = "reconnect attempts exhausted"
    if last_error is not None:
        text += f"; the last attempt failed: {type(last_error).__name__}: {last_error}"
    error = NoServersError(text)
    error.__cause__ = last_error
    return error


def sub_frame(subject: bytes, queue: bytes, sid: int) -> bytes:
    """The SUB frame for a subscription."""
    if queue:
        return b"SUB %s %s %d\r\n" % (subject, queue, sid)
    return b"SUB %s %d\r\n" % (subject, sid)


@attrs.frozen(kw_only=True)
class ConnectionOptions:
    """What a :class:`Connection` needs of the client's options (checked by the client).

    Attributes:
        handshake: credentials, TLS and the CONNECT fields.
        connect_timeout: seconds for one connection attempt.
        allow_reconnect: reconnect when the link breaks (else the client closes).
        max_reconnect_attempts: per server, ``-1`` for no limit.
        randomize: shuffle the server pool (see :class:`ServerPool`).
        reconnect_time_wait: seconds between attempts on one server.
        reconnect_jitter: random seconds added to that wait.
        reconnect_buf_size: bytes kept for sending while disconnected.
        ping_interval: seconds between keep-alive PINGs.
        max_outstanding_pings: unanswered keep-alives that declare the link stale.
        tag: the prefix of the threads' names (``jetstream_sync-<client id>``).
        wait: the ``wait`` option (``"auto"``, ``"threads"``, ``"cooperative"``),
            or None for ``JETSTREAM_SYNC_WAIT``; see :mod:`jetstream_sync._connection.wait`.
    """

    handshake: HandshakeOptions
    connect_timeout: float
    allow_reconnect: bool
    max_reconnect_attempts: int
    randomize: bool
    reconnect_time_wait: float
    reconnect_jitter: float
    reconnect_buf_size: int
    ping_interval: float
    max_outstanding_pings: int
    tag: str
    wait: str | None = None


def _not_open(*args: object, **kwargs: object) -> None:
    """:attr:`Connection.send` before :meth:`Connection.open` connected."""
    raise ConnectionClosedError("the connection is not open")


class Connection:
    """The link to the server and the threads that serve it; see the module docstring.

    Created with the client (nothing is sent); :meth:`open` connects and
    starts the threads; :meth:`close` stops and joins them. It owns the socket
    and every part that touches it (writer, reader and its read role, pings,
    request mux, subscription table, server pool): the client reaches none of
    them, only the verbs below (a layering test holds it to that).

    The verbs: :attr:`send` (the writer's own method, bound by :meth:`open`:
    nothing of ours between a publish and the buffer),
    :attr:`has_reply_inbox`, :meth:`new_reply` and :meth:`request`,
    :meth:`read_until`, :meth:`flush`, :meth:`wait_drained`, :meth:`subscribe`,
    :meth:`unsubscribe`, :meth:`stop_interest`, :meth:`stop_routing`,
    :meth:`subscriptions`, :meth:`add_route`, :meth:`servers` and :meth:`counters`.

    Args:
        options: see :class:`ConnectionOptions`.
        owner: what every routed :class:`Msg` acknowledges and replies through.
        report_error: hands an asynchronous error to the user (``error_cb``).
        announce: reports ``"disconnected"``, ``"reconnected"`` or ``"lame_duck"``.
        info_changed: called after an INFO changed :attr:`server_info`.
        lost: called on a new thread with the reason when the connection is
            lost for good (reconnecting disallowed, exhausted or refused); the
            client closes.

    Attributes:
        options: what it was made with (its repr shows no secret).
        current: the live connection, or None before :meth:`open`.
        server_info: the current server's INFO, merged over the connection's life.
        wait_mode: how the threads wait, chosen by :meth:`open` (threads until then).
        reconnecting: True while the link is down and being re-established.
        closing: set once the client started closing.
    """

    def __init__(
        self,
        options: ConnectionOptions,
        owner: AckSender,
        *,
        report_error: Callable[[BaseException], None],
        announce: Callable[[str], None],
        info_changed: Callable[[], None],
        lost: Callable[[BaseException], None],
    ) -> None:
        self.options = options
        self._owner = owner
        self._report_error = report_error
        self._announce = announce
        self._info_changed = info_changed
        self._lost = lost
        # Held while a reconnect adopts its link and while closing starts, so a
        # closing client never ends up attached to a new link.
        self._lock = threading.Lock()
        self.closing = Flag()
        self.reconnecting = False
        self._subs = SubscriptionTable()
        self._pings = PingTracker()
        # pool, writer and reader are set by open() before the client is handed
        # out; None only on a client that never connected (close() allows it).
        self.send: Callable[..., None] = _not_open  # Writer.write, bound by open()
        self._pool: ServerPool = None  # type: ignore[assignment]
        self._writer: Writer = None  # type: ignore[assignment]
        self._reader: Reader = None  # type: ignore[assignment]
        self.wait_mode = WaitMode(THREADS)
        self.current: Connected | None = None
        self.server_info: dict[str, Any] = {}
        self.in_msgs = 0
        self.in_bytes = 0
        self.reconnects = 0
        self._pid = os.getpid()
        self._pinger: threading.Thread | None = None
        self._mux: RequestMux | None = None  # made by the first request
        self._mux_sid = 0
        # 'Maximum Subscriptions Exceeded' -ERRs received (the reading thread's count).
        self._refused_subs = 0
        # Reply routes: sid -> (inbox prefix length, handler, subject, buffer handler or
        # None); copied on write.
        self._routes: dict[int, _ReplyRoute] = {}
        # Reply routes' prefixes -> what to tell when a request on one was dropped unsent
        # (see _connection_lost); copied on write.
        self._route_drops: dict[bytes, Callable[[str, BaseException], object]] = {}
        # Reply routes' prefixes -> what to tell once the writer stopped sending on a
        # lost link (see _connection_lost); copied on write.
        self._route_losses: dict[bytes, Callable[[], object]] = {}
        # Reply routes' prefixes -> what to tell when the server refused the route's SUB
        # at its subscription limit (see _route_refused); copied on write.
        self._route_refusals: dict[bytes, Callable[[BaseException], object]] = {}
        # Why the client itself shut a link down (stale, a failed write): the
        # reader then sees an end of stream that the server did not cause.
        self._dropped: tuple[Transport, BaseException] | None = None

    # ------------------------------------------------------------------ open

    def open(self, servers: Sequence[str]) -> None:
        """Connect to the first server that takes the client, then start the threads.

        A server that refuses the credentials passes the connect on to the next,
        as nats.go's first connect walks the whole pool (servers of a pool may
        hold different users, and URLs carry their own credentials).

        Raises:
            NoServersError: no server could be reached.
            AuthorizationError: no server took the client and one refused its
                credentials (the first refusal).
            WaitModeError: the wait mode asked for cannot work in this process
                (nothing was sent).
        """
        options = self.options
        self.wait_mode = choose(options.wait)  # before anything is sent
        self._pool = ServerPool(list(servers), options.max_reconnect_attempts, options.randomize)
        errors: list[BaseException] = []
        conn = None
        for address in self._pool.addresses():
            try:
                conn = handshake(address, options.handshake, options.connect_timeout)
                break
            except CONNECT_ERRORS as exc:  # a refusal of the credentials included
                errors.append(exc)
        if conn is None:
            refusals = [exc for exc in errors if isinstance(exc, AuthorizationError)]
            if refusals:
                raise refusals[0]
            urls = [a.url() for a in self._pool.addresses()]  # without their credentials
            raise NoServersError(f"could not connect to any server in {urls}: {errors}") from (
                errors[-1] if errors else None
            )
        self._pid = os.getpid()
        self._adopt(conn)
        tag = options.tag
        writer = CooperativeWriter if self.wait_mode.cooperative else Writer
        self._writer = writer(self._write_failed, options.reconnect_buf_size, f"{tag}-writer")
        self._writer.attach(conn.transport)
        self.send = self._writer.write
        self._reader = Reader(
            conn, self._route, self._connection_lost, f"{tag}-reader", self._reader_crashed,
            self.wait_mode.cooperative,
        )  # fmt: skip
        self._pinger = threading.Thread(target=self._ping_loop, name=f"{tag}-pinger", daemon=True)
        self._pinger.start()

    def _adopt(self, conn: Connected) -> None:
        """Make ``conn`` the current connection and learn from its INFO."""
        self.current = conn
        self._pool.connected(conn.address)
        self._apply_info(conn.info, new_server=True)

    def _apply_info(self, info: dict[str, Any], new_server: bool = False) -> None:
        """Learn from an INFO already checked by ``parse_info``.

        A new connection's INFO replaces what the last server said (its
        ``ldm``, its ``api_lvl``...); a later INFO on the same connection is
        merged over it. ``connect_urls`` entries that are not ``host:port`` are
        skipped and reported to ``error_cb`` as a :class:`ProtocolError`; the
        connection stays.
        """
        self.server_info = dict(info) if new_server else {**self.server_info, **info}
        urls = info.get("connect_urls")
        if urls and self.current is not None:
            bad = self._pool.add_discovered(urls, self.current.address)
            if bad:
                self._report_error(
                    ProtocolError(f"ignored connect_urls the server announced: {bad!r}")
                )
        self._info_changed()

    # ------------------------------------------------------------------ what the client asks

    @property
    def has_reply_inbox(self) -> bool:
        """Whether the requests' inbox is subscribed (by the first :meth:`new_reply`)."""
        return self._mux is not None

    def new_reply(self, new_inbox: Callable[[], str]) -> tuple[ReplyToken, bytes]:
        """A request's token and the reply subject it is answered on (``<inbox>.<token>``).

        The first call subscribes the requests' wildcard inbox (named by
        ``new_inbox()``), and so does the first after the server refused it
        (see :meth:`_inbox_refused`); the SUB never waits for room in the write
        buffer (the subscription lock is held): see :meth:`Writer.write_checked`.
        """
        mux = self._mux
        if mux is None:
            with self._subs.lock:
                mux = self._mux
                if mux is None:
                    mux = self._mux = self._subscribe_inbox(RequestMux(new_inbox()))
        token = mux.new_token()
        return (mux, token), mux.prefix_bytes + token.encode()

    def _subscribe_inbox(self, mux: RequestMux) -> RequestMux:
        """Send the SUB of ``mux``'s inbox, checked for a refusal; the subscription lock is held.

        The server may refuse it at the connection's subscription limit: then
        its requests fail with :class:`MaxSubscriptionsExceededError` as soon
        as that is known (see :mod:`~jetstream_sync._connection.pings`),
        not at their deadlines.
        """
        sid = self._subs.new_sid()
        check = SubscribeCheck(self._refusals, lambda: self._inbox_refused(mux))
        self._writer.write_checked(self._pings, sub_frame(mux.subject.encode(), b"", sid), check)
        self._mux_sid = sid
        return mux

    def _refusals(self) -> int:
        return self._refused_subs

    def _inbox_refused(self, mux: RequestMux, error: BaseException | None = None) -> None:
        """The reading thread: the server refused ``mux``'s SUB (at the subscription
        limit, or ``error``); the next request makes another."""
        with self._subs.lock:
            if self._mux is mux:
                self._mux = None
                self._mux_sid = 0  # no sid is 0: nothing routes there
        mux.refuse(
            error
            or MaxSubscriptionsExceededError(
                "server error: maximum subscriptions exceeded: the server refused the "
                f"subscription to the requests' reply inbox {mux.subject!r} (this connection "
                "has all the subscriptions it may have); unsubscribe what you no longer "
                "need: the next request subscribes the inbox again"
            )
        )

    def _permission_refused(self, error: PermissionViolationError) -> None:
        """The reading thread: fail what waits on the PUB or SUB the server refused; a
        refused subscription ends (its reader gets the error once what is pending is read)."""
        if error.operation == "publish":
            mux = self._mux
            if mux is not None:
                mux.refuse_publish(error.subject, lambda: _fresh(error))
        elif error.operation == "subscription":
            # Under the lock: new_reply() holds it from the inbox's SUB until it set
            # self._mux, and the refusal of that SUB may be read in between.
            with self._subs.lock:
                mux = self._mux
            if mux is not None and error.subject == mux.subject:
                self._inbox_refused(mux, _fresh(error))
            else:  # it receives nothing: it ends, and is not sent to the next server
                self._subs.refuse_interest(error.subject, error.queue, lambda: _fresh(error))

    def request(
        self,
        subject: str,
        frame: bytes,
        reply: bytes,
        token: ReplyToken,
        deadline: Deadline,
        decode: int,
    ) -> FastReply | ReplyWaiter:
        """Send a request ``frame`` to ``subject`` (answered on ``reply``, from
        :meth:`new_reply` with ``token``) and wait for its reply: see
        ``ReadRole.round_trip`` (``decode``: the core's reader of a reply that comes
        alone, ``_protocol``'s ``DECODE_*``). A refused PUB fails the waiter with
        :class:`PermissionViolationError` as soon as its ``-ERR`` arrives.

        Raises:
            MaxSubscriptionsExceededError, PermissionViolationError: the server
                refused the inbox ``reply`` is on (nothing was sent).
        """
        mux, name = token
        refused = mux.refused
        if refused is not None:
            raise _fresh(refused)
        return self._reader.role.round_trip(
            self._writer, frame, reply, mux, name, deadline, decode, subject
        )

    def read_until(self, ready: Ready, deadline: Deadline) -> None:
        """Read the socket on this thread until ``ready.done``, when nobody else reads it
        (``ReadRole.lead_until``); return at once otherwise."""
        self._reader.role.lead_until(ready, deadline)

    def flush(self, deadline: Deadline) -> ReplyWaiter | None:
        """Send a PING and wait for its PONG: the answered (or failed) waiter, or None when
        the deadline passed first (the PING is forgotten).

        A PING never waits for room in the write buffer: see :meth:`send_ping`.
        """
        waiter = ReplyWaiter()
        self.send_ping(waiter)
        if not self._reader.role.wait_reply(waiter, deadline):
            self._pings.forget(waiter)
            return None
        return waiter

    def wait_drained(self, deadline: Deadline) -> bool:
        """Wait until everything buffered is written; False if the deadline passed first."""
        return self._writer.wait_drained(deadline)

    def buffered_bytes(self) -> int:
        """How many bytes the writer holds, not yet written to the socket."""
        return self._writer.buffered_bytes()

    def subscribe(
        self,
        make: Callable[[int], Subscription],
        subject: bytes,
        queue: bytes,
        checked: bool = False,
    ) -> Subscription:
        """Route a new subscription (``make(sid)`` builds it) and send its SUB, which never
        waits for room in the write buffer (while disconnected, the next server gets it
        with the others: see :meth:`_resubscribe_frames`).

        ``checked``: the SUB goes between two PINGs (:class:`SubscribeCheck`), so a
        refusal at the connection's subscription limit is known and ends the
        subscription (see :meth:`_subscription_refused`).
        """
        if not checked:
            write = self._writer.write_interest
            return self._subs.add(make, lambda sub: write(sub_frame(subject, queue, sub.sid)))

        def send(sub: Subscription) -> None:
            check = SubscribeCheck(self._refusals, lambda: self._subscription_refused(sub))
            self._writer.write_checked(self._pings, sub_frame(subject, queue, sub.sid), check)

        return self._subs.add(make, send)

    def _subscription_refused(self, sub: Subscription) -> None:
        """The reading thread: the server refused ``sub``'s (checked) SUB at its subscription
        limit. It stops: its ``next_msg()`` raises :class:`MaxSubscriptionsExceededError`
        once what is pending is read; ``error_cb`` hears which subject."""
        error = MaxSubscriptionsExceededError(
            "server error: maximum subscriptions exceeded: the server refused the "
            f"subscription to {sub.subject!r} (this connection has all the subscriptions "
            "it may have); it receives nothing: subscribe again once there is room"
        )
        if self._subs.refuse(sub, error):
            self._report_error(_fresh(error))

    def unsubscribe(self, sub: Subscription, limit: int | None) -> bool:
        """Send ``sub``'s UNSUB (after ``limit`` messages in all, if given).

        Returns:
            True when ``sub`` stopped now (its queue closed, what was pending
            dropped); False when it goes on until ``limit`` messages.
        """
        write = self._writer.write_interest
        if limit is not None:
            if self._subs.limit(sub, limit, lambda: write(b"UNSUB %d %d\r\n" % (sub.sid, limit))):
                return False
            write(b"UNSUB %d\r\n" % sub.sid)
        else:
            self._subs.remove(sub, True, lambda: write(b"UNSUB %d\r\n" % sub.sid))
        return True

    def stop_interest(self, sub: Subscription) -> None:
        """Send ``sub``'s UNSUB and keep routing what is still on its way (a drain); a
        reconnect meanwhile does not subscribe it again."""
        write = self._writer.write_interest
        self._subs.stop_interest(sub, lambda: write(b"UNSUB %d\r\n" % sub.sid))

    def stop_routing(self, sub: Subscription) -> None:
        """Stop routing ``sub`` and close its queue; what is pending stays to be read."""
        self._subs.remove(sub, discard=False)

    def subscriptions(self) -> list[Subscription]:
        """The subscriptions routed now."""
        return self._subs.subscriptions()

    def servers(self) -> list[ServerAddress]:
        """Every server of the pool (configured and discovered); none before :meth:`open`."""
        return self._pool.addresses() if self._pool else []

    def counters(self) -> tuple[int, int, int, int, int]:
        """``(in_msgs, in_bytes, out_msgs, out_bytes, reconnects)`` for ``Client.stats``;
        replies read by a requester's round trip are never routed, so they count here."""
        writer, reader = self._writer, self._reader
        fast_msgs = reader.role.round_trips if reader else 0
        fast_bytes = reader.role.round_trip_bytes if reader else 0
        return (
            self.in_msgs + fast_msgs,
            self.in_bytes + fast_bytes,
            writer.msgs_out if writer else 0,
            writer.bytes_out if writer else 0,
            self.reconnects,
        )

    def add_route(
        self,
        prefix: str,
        handler: Callable[[list[Reply]], object],
        buffer_handler: BufferHandler | None = None,
        dropped: Callable[[str, BaseException], object] | None = None,
        link_lost: Callable[[], object] | None = None,
        refused: Callable[[BaseException], object] | None = None,
    ) -> None:
        """Subscribe ``<prefix>*`` and hand its replies to ``handler`` (reader thread).

        See ``Client.add_reply_route``. The SUB never waits for room in the
        write buffer (the subscription lock is held). ``dropped(token, error)``
        hears of a request on the route dropped unsent (see :meth:`_drop_too_big`);
        ``link_lost()`` that the writer stopped sending on a lost link (see
        :meth:`_connection_lost`); ``refused(error)`` that the server refused
        the SUB (or a re-subscription) at its subscription limit: the route is
        no longer routed nor re-subscribed, and the same prefix may be added
        again (see :meth:`_route_refused`). The SUB is checked for that as the
        requests' inbox's is (:class:`SubscribeCheck`).
        """
        key = prefix.encode()
        if dropped is not None:
            self._route_drops = {**self._route_drops, key: dropped}
        if link_lost is not None:
            self._route_losses = {**self._route_losses, key: link_lost}
        if refused is not None:
            self._route_refusals = {**self._route_refusals, key: refused}
        with self._subs.lock:
            sid = self._subs.new_sid()
            subject = key + b"*"
            route = (len(prefix), handler, subject, buffer_handler)
            self._routes = {**self._routes, sid: route}
            check = SubscribeCheck(self._refusals, lambda: self._route_refused(sid, subject))
            self._writer.write_checked(self._pings, sub_frame(subject, b"", sid), check)

    def send_ping(self, waiter: ReplyWaiter | None) -> None:
        """Write a PING for ``waiter`` (a flush) or a keep-alive (None).

        A PING never waits for room in the write buffer: stale-connection
        detection and flush deadlines must hold however full it is.
        """
        self._writer.write_ping(self._pings, waiter, urgent=True)

    # ------------------------------------------------------------------ close

    def mark_closing(self) -> None:
        """The client started closing: no reconnect adopts a new link from now on."""
        with self._lock:
            self.closing.set()

    def close_inherited(self) -> None:
        """In a forked child: close this process's copy of the socket, touch no lock.

        The parent still uses the connection: it is never shut down from here.
        """
        if self.current is not None:
            self.current.transport.close()
        if self._reader is not None:
            self._reader.role.close_inherited()

    def in_other_process(self) -> bool:
        """True in a process forked after :meth:`open`, whether or not Python's at-fork
        handlers ran there (uWSGI forks its workers from C)."""
        return os.getpid() != self._pid

    def forked(self) -> None:
        """In a forked child: end the client's greenlets the child inherited (gevent, eventlet).

        Threads do not survive a fork but greenlets do, with the hub: the child's
        copy of the reader would read (and route to the child's callbacks) what
        the server sends the parent, and its writer and pinger would write on the
        parent's connection. Closing the child's copy of the socket (never
        shutting the connection down) wakes them with an error, and ``closing``
        makes them end instead of reconnecting. Takes no lock.
        """
        if self.wait_mode.library is None:
            return
        self.closing.set()
        self.close_inherited()

    def close(self, flush_for: float) -> list[Subscription]:
        """Flush for up to ``flush_for`` seconds, close the link, join the threads.

        Fails every waiting request and flush with :class:`ConnectionClosedError`
        and ends every subscription. Call :meth:`mark_closing` first.

        Returns:
            The subscriptions ended (the caller joins their callback threads).
        """
        if not self.reconnecting and self._writer is not None:
            self._writer.wait_drained(Deadline(flush_for))
        closed = ConnectionClosedError("the client was closed")
        if self.current is not None:
            self.current.transport.shutdown()
        if self._writer is not None:
            self._writer.close()
        if self._reader is not None:
            self._reader.join()
        if self.current is not None:
            self.current.transport.close()
        if self._pinger is not None and self._pinger is not threading.current_thread():
            self._pinger.join()
        if self._mux is not None:
            self._mux.fail_all(closed)
        self._pings.fail_all(closed)
        return self._subs.remove_all(closed)

    # ------------------------------------------------------------------ threads

    def _ping_loop(self) -> None:
        while not self.closing.wait(self.options.ping_interval):
            if self.reconnecting:
                continue
            unanswered = self._pings.keepalives_unanswered
            if unanswered >= self.options.max_outstanding_pings:
                conn = self.current
                if conn is not None:
                    stale = StaleConnectionError(
                        f"stale connection: {unanswered} PINGs went unanswered; "
                        "the client closed the connection"
                    )
                    self._report_error(stale)
                    self._drop(conn.transport, stale)
                continue
            try:
                self.send_ping(None)
            except NatsError:
                return

    def _route(self, ops: list[int], view: memoryview, consumed: int) -> None:
        """Handle one parsed buffer (reader thread). Copies everything it keeps."""
        if self._routes and self._route_whole(ops, view, consumed):
            return
        # One copy of the parsed part makes every slice below a plain bytes
        # object (cheaper than a memoryview slice each); very large buffers
        # are sliced in place to avoid copying big payloads twice.
        copied = consumed <= _COPY_LIMIT
        whole = view[:consumed].tobytes() if copied else b""
        if copied and len(ops) >= _ONE_PASS_OPS and self._route_one_subscription(ops, whole):
            return
        src = whole if copied else view
        batches: dict[int, list[Msg]] = {}
        replies: dict[int, list[Reply]] = {}
        mux_sid = self._mux_sid
        owner = self._owner  # every Msg acknowledges through the client it came by
        routes = self._routes
        # Counted here, added to the client's counters before anything is handed
        # on (so a woken thread sees them).
        n_msgs = n_bytes = 0
        for i in range(0, len(ops), _FIELDS):
            kind = ops[i]
            if kind == _OP_MSG or kind == _OP_HMSG:
                _, so, sl, sid, ro, rl, ho, hl, po, pl = ops[i : i + _FIELDS]
                n_msgs += 1
                n_bytes += hl + pl
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
                # Copies of the fields, each its own bytes (a message kept keeps
                # nothing else of the buffer alive; bytes() of a slice of the
                # copied buffer is that slice); subject and reply are decoded by
                # the Msg when first read.
                msg = received(
                    bytes(src[so : so + sl]),
                    bytes(src[ro : ro + rl]),
                    bytes(src[po : po + pl]),
                    bytes(src[ho : ho + hl]) if hl else None,
                    owner,
                    sid,
                )
                if sid == mux_sid:
                    assert self._mux is not None  # set before any request is sent
                    self.in_msgs += n_msgs
                    self.in_bytes += n_bytes
                    n_msgs = n_bytes = 0
                    self._mux.route(msg)
                    continue
                batch = batches.get(sid)
                if batch is None:
                    batches[sid] = [msg]
                else:
                    batch.append(msg)
            else:
                self.in_msgs += n_msgs
                self.in_bytes += n_bytes
                n_msgs = n_bytes = 0
                if batches:  # what came before a PONG must be queued before it wakes anyone
                    self._deliver_batches(batches)
                    batches = {}
                if replies:
                    self._deliver_replies(replies)
                    replies = {}
                self._control(kind, ops, i, src)
        self.in_msgs += n_msgs
        self.in_bytes += n_bytes
        if batches:
            self._deliver_batches(batches)
        if replies:
            self._deliver_replies(replies)

    def _route_whole(self, ops: list[int], view: memoryview, consumed: int) -> bool:
        """Hand a buffer that holds only one buffer route's replies to it at once.

        No op is looked at in Python: the route decodes the buffer itself
        (the async-publish acks of a read, in one C call).
        """
        if not ops:
            return False
        sid = ops[3]
        route = self._routes.get(sid)
        if route is None or route[3] is None or ops[3::_FIELDS].count(sid) * _FIELDS != len(ops):
            return False
        self.in_msgs += len(ops) // _FIELDS
        self.in_bytes += sum(ops[7::_FIELDS]) + sum(ops[9::_FIELDS])
        route[3](view, consumed, sid)
        return True

    def _route_one_subscription(self, ops: list[int], whole: bytes) -> bool:
        """Queue a buffer that holds only messages of one subscription, in one pass.

        The common shape of a fetch's or a consumer's read: its messages are
        made by one comprehension over the ops' columns instead of the general
        loop's per-op branches (measured: a third less CPU per message).
        """
        sid = ops[3]
        if (
            sid == self._mux_sid
            or (self._routes and sid in self._routes)
            or ops[3::_FIELDS].count(sid) * _FIELDS != len(ops)
            or not _MESSAGE_KINDS.issuperset(ops[0::_FIELDS])
        ):
            return False
        owner = self._owner
        header_sizes = ops[7::_FIELDS]
        payload_sizes = ops[9::_FIELDS]
        fields = zip(
            ops[1::_FIELDS], ops[2::_FIELDS], ops[4::_FIELDS], ops[5::_FIELDS],
            ops[8::_FIELDS], payload_sizes, ops[6::_FIELDS], header_sizes,
            strict=True,
        )  # fmt: skip
        if any(header_sizes):
            msgs = [
                received(
                    whole[so : so + sl],
                    whole[ro : ro + rl],
                    whole[po : po + pl],
                    whole[ho : ho + hl] if hl else None,
                    owner,
                    sid,
                )
                for so, sl, ro, rl, po, pl, ho, hl in fields
            ]
        else:
            msgs = [
                received(
                    whole[so : so + sl], whole[ro : ro + rl], whole[po : po + pl], None, owner, sid
                )
                for so, sl, ro, rl, po, pl, _, _ in fields
            ]
        self.in_msgs += len(msgs)
        self.in_bytes += sum(header_sizes) + sum(payload_sizes)
        self._deliver_batches({sid: msgs})
        return True

    def _deliver_replies(self, replies: dict[int, list[Reply]]) -> None:
        routes = self._routes
        for sid, batch in replies.items():
            route = routes.get(sid)
            if route is not None:  # else refused meanwhile (see _route_refused)
                route[1](batch)

    def _deliver_batches(self, batches: dict[int, list[Msg]]) -> None:
        slow, inline = self._subs.deliver(batches)
        for sub in slow:
            self._report_error(SlowConsumerError(sub.subject, sub.sid))
        for callback, msgs in inline:
            callback.run(msgs)

    def _control(self, kind: int, ops: list[int], i: int, src: bytes | memoryview) -> None:
        if kind == _protocol.OP_PING:  # never waits for room: the reader must not block
            self._writer.write_control(b"PONG\r\n")
        elif kind == _protocol.OP_PONG:
            self._pings.pong()
        elif kind == _protocol.OP_INFO:  # a bad INFO raises ProtocolError: a reconnect
            info = parse_info(bytes(src[ops[i + 1] : ops[i + 1] + ops[i + 2]]))
            self._apply_info(info)
            if info.get("ldm"):
                assert self.current is not None  # an INFO arrives on a connection
                log.info("server %s entered lame duck mode", self.current.address.url())
                self._announce("lame_duck")
        elif kind == _protocol.OP_ERR:  # the server closes the connection if it must
            text = str(src[ops[i + 1] : ops[i + 1] + ops[i + 2]], "utf-8", "replace")
            error = server_error(text)
            if type(error) is MaxSubscriptionsExceededError:  # a SUB refused: see pings.py
                self._refused_subs += 1
            elif type(error) is PermissionViolationError:
                self._permission_refused(error)
            self._report_error(error)

    def _write_failed(self, exc: BaseException, transport: Transport) -> None:
        """A send on ``transport`` failed: wake its reader so it runs the reconnect.

        Only that transport is shut down: by now the client may be on a new one.
        """
        self._drop(
            transport,
            ConnectionLostError(f"a write failed ({exc}); the client closed the connection"),
        )

    def _drop(self, transport: Transport, reason: BaseException) -> None:
        """Shut ``transport`` down, the client's own decision: ``reason`` is why it was lost."""
        if self._dropped is None or self._dropped[0] is not transport:  # the first reason wins
            self._dropped = (transport, reason)
        transport.shutdown()

    def _connection_lost(self, exc: BaseException) -> Connected | None:
        """Reader thread: the connection broke. Reconnect, or return None to stop."""
        if not self.closing.is_set():
            self.reconnecting = True  # before the writer detaches: is_connected must say False
        self._writer.detach()  # drops the PINGs still buffered: failed just below
        # From here on a write is buffered for the next link: the reply routes mark
        # where that starts, before "disconnected" fails what went out on this one.
        for link_lost in self._route_losses.values():
            link_lost()
        old = self.current
        dropped, self._dropped = self._dropped, None
        if dropped is not None and old is not None and dropped[0] is old.transport:
            exc = dropped[1]  # not "closed by the server": the client closed it
        if old is not None and os.getpid() == self._pid:  # a forked child never shuts it
            old.transport.shutdown()
            old.transport.close()
        if self.closing.is_set():
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
        if not self.options.allow_reconnect:
            self._close_in_background(exc)
            return None
        auth_failures: dict[tuple[str, int], int] = {}  # per server, in a row
        last_error: BaseException | None = None  # why the client gives up, if it does
        while not self.closing.is_set():
            try:
                address, wait = self._pool.next_candidate(
                    self.options.reconnect_time_wait, self.options.reconnect_jitter
                )
            except LookupError:
                self._close_in_background(_attempts_exhausted(last_error))
                return None
            if wait and self.closing.wait(wait):
                return None
            try:
                conn = handshake(address, self.options.handshake, self.options.connect_timeout)
            except Exception as error:  # noqa: BLE001 - one bad attempt must not end the reader
                log.debug("reconnect to %s failed: %s", address.url(), error)
                last_error = error
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
            with self._lock:
                if self.closing.is_set():
                    conn.transport.close()
                    return None
                checked_against = self.server_info.get("max_payload")
                self._adopt(conn)
                self.reconnecting = False
                too_big = self._drop_too_big(checked_against)
                with self._subs.lock:  # no SUB or UNSUB between the snapshot and the attach
                    preamble, check = self._resubscribe_frames()
                    self._writer.attach(
                        conn.transport, preamble, partial(self._pings.resume, check)
                    )
                self.reconnects += 1
            log.info("reconnected to %s", conn.address.url())
            for subject, reply, size in too_big:
                refused = MaxPayloadError(
                    f"a publish to {subject!r} buffered while disconnected was dropped: it is "
                    f"{size} bytes, and the server reconnected to accepts "
                    f"{self.server_info['max_payload']}"
                )
                self._dropped_unsent(reply, refused)
                self._report_error(refused)
            self._announce("reconnected")
            return conn
        return None

    def _dropped_unsent(self, reply: bytes, error: MaxPayloadError) -> None:
        """What waits for the reply to a publish dropped unsent fails now, not at its
        timeout: a request, or a reply route's request (an async publish's ack)."""
        if not reply:
            return
        mux = self._mux
        if mux is not None and reply.startswith(mux.prefix_bytes):
            mux.fail(reply[len(mux.prefix_bytes) :].decode(), _fresh(error))
            return
        for prefix, dropped in self._route_drops.items():
            if reply.startswith(prefix):
                dropped(reply[len(prefix) :].decode("utf-8", "surrogateescape"), _fresh(error))
                return

    def _drop_too_big(self, checked_against: object) -> list[tuple[str, bytes, int]]:
        """Drop the buffered publishes the new server's smaller ``max_payload`` refuses.

        ``checked_against`` is the limit they were checked against (the last
        server's). Returns each dropped publish's subject, reply subject and size.
        """
        limit = self.server_info.get("max_payload")
        if not isinstance(limit, int) or not isinstance(checked_against, int):
            return []
        if limit >= checked_against:
            return []
        return self._writer.drop_too_big(limit)

    def _resubscribe_frames(self) -> tuple[bytes, list[PongWaiter]]:
        """SUB frames for every live subscription (sent first on a new connection), and
        what stands for the PINGs between them.

        Call with the subscription lock held. Every SUB and UNSUB is written
        under that lock too, and one written while disconnected (or still
        buffered when the link was lost) is dropped by the writer: this
        snapshot is what the new server learns, each subscription once. One
        with an auto-unsubscribe limit is followed by an UNSUB with the
        messages it still takes (as nats.go does). A PING goes before, between
        and after the SUBs, so a refusal at the subscription limit is known
        per SUB (:class:`ResubscribeCheck`, :meth:`_resubscription_refused`).
        """
        frames = [b"PING\r\n"]
        what: list[RequestMux | tuple[int, bytes] | Subscription] = []
        if self._mux is not None:
            frames += (sub_frame(self._mux.subject.encode(), b"", self._mux_sid), b"PING\r\n")
            what.append(self._mux)
        for sid, (_, _, subject, _) in self._routes.items():
            frames += (sub_frame(subject, b"", sid), b"PING\r\n")
            what.append((sid, subject))
        for sub, left in self._subs.routed():
            subject = sub.subject.encode("utf-8", "surrogateescape")
            frames.append(sub_frame(subject, sub.queue.encode(), sub.sid))
            if left is not None:
                frames.append(b"UNSUB %d %d\r\n" % (sub.sid, left))
            frames.append(b"PING\r\n")
            what.append(sub)
        if not what:
            return b"", []
        check = ResubscribeCheck(self._refusals, lambda k: self._resubscription_refused(what[k]))
        return b"".join(frames), [check] * (len(what) + 1)

    def _resubscription_refused(self, what: RequestMux | tuple[int, bytes] | Subscription) -> None:
        """The reading thread: the server reconnected to refused a re-subscription at its
        subscription limit. A subscription stops (its ``next_msg()`` raises once what is
        pending is read), the requests' inbox is subscribed again by the next request, a
        reply route by its next use (see :meth:`_route_refused`); ``error_cb`` hears
        which subject."""
        if isinstance(what, RequestMux):
            self._inbox_refused(what)
            return
        if isinstance(what, tuple):
            self._route_refused(*what)
            return
        text = (
            "server error: maximum subscriptions exceeded: the server reconnected to refused "
            "the subscription to {!r} (this connection has all the subscriptions it may "
            "have){}"
        )
        error = MaxSubscriptionsExceededError(
            text.format(what.subject, "; it receives nothing: subscribe again once there is room")
        )
        if self._subs.refuse(what, error):
            self._report_error(_fresh(error))

    def _route_refused(self, sid: int, subject: bytes) -> None:
        """The reading thread: the server refused reply route ``sid``'s SUB at its
        subscription limit. The route is no longer routed nor re-subscribed; its owner
        hears of it (what waits for its replies fails now, and its next use subscribes
        the same prefix again), then ``error_cb``."""
        with self._subs.lock:
            if sid not in self._routes:
                return
            self._routes = {k: v for k, v in self._routes.items() if k != sid}
            refused = self._route_refusals.get(subject[:-1])
        error = MaxSubscriptionsExceededError(
            "server error: maximum subscriptions exceeded: the server refused the "
            f"subscription to {subject.decode('utf-8', 'surrogateescape')!r}, a reply inbox "
            "of this client (this connection has all the subscriptions it may have): "
            "the replies to it will not come; its next use subscribes it again"
        )
        if refused is not None:
            refused(_fresh(error))
        self._report_error(error)

    def _reader_crashed(self, exc: BaseException) -> None:
        """Reader thread: reading or reconnecting failed on a bug; close rather than go deaf.

        Logged at ERROR here (the thread ends), reported to ``error_cb`` by the
        close, which fails every waiting call at once.
        """
        log.error("the reader thread failed; closing the client", exc_info=exc)
        self._close_in_background(exc)

    def _close_in_background(self, reason: BaseException) -> None:
        name = f"{self.options.tag}-closer"
        threading.Thread(target=self._lost, args=(reason,), name=name).start()
