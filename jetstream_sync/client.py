"""The blocking, thread-safe NATS client: lifecycle, publish/subscribe, requests, reconnect."""

from __future__ import annotations

import atexit
import logging
import os
import ssl
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

import attrs

from . import _defaults as D
from . import _protocol, _subjects
from ._connection import (
    Connection,
    ConnectionOptions,
    HandshakeOptions,
    ReplyWaiter,
    check_choice,
)
from ._deadline import (
    Deadline,
    check_callback,
    check_count,
    check_seconds,
    check_timeout,
    seconds_text,
)
from ._dispatch import _READING, refuse_in_inline_callback
from ._events import EventRunner, log
from ._nuid import NUID
from ._protocol._py import DECODE_NONE, JOIN_ABOVE
from ._reply import Reply, ReplyDecoder
from ._server_pool import split_servers
from ._signals import in_handler_interrupting_a_call
from ._subjects import ApiSubject
from .errors import (
    AuthorizationError,
    ConnectionClosedError,
    ForkedClientError,
    LimitExceededError,
    MaxPayloadError,
    NoRespondersError,
    NoServersError,
    PermissionViolationError,
    ProtocolError,
    TimeoutError,
)
from .headers import header_pairs
from .msg import Msg
from .subscription import Subscription

if TYPE_CHECKING:
    from ._connection import Ready
    from .jetstream.context import JetStreamContext

HeadersIn = Mapping[str, str | Sequence[str]]
T = TypeVar("T")

_OP_MSG = _protocol.OP_MSG
_OP_HMSG = _protocol.OP_HMSG
_FIELDS = _protocol.OP_FIELDS
_SUBJECT_CACHE_MAX = 4096
_FOREVER = float("inf")
_CLOSE_FLUSH = 1.0  # seconds close() waits for what is buffered to go out
_EXIT_FLUSH = 1.0  # seconds the interpreter's exit waits for an unclosed client's buffer
# The largest UNSUB limit nats-server reads: it parses at most 9 digits, and
# takes a longer number as none, ending the subscription at once.
_MAX_UNSUB_LIMIT = 999_999_999
# What a control line adds to its subject, reply or queue group at most: the op,
# the spaces, a sid or the header and total sizes (10 digits each), the CRLF.
_LINE_OVERHEAD = 32
_TOKEN_DIGITS = 20  # a reply route's token: a non-negative int below 2**64
# What an inbox adds to inbox_prefix: ".<22-character NUID>." and a reply token.
_INBOX_TAIL = 1 + 22 + 1 + _TOKEN_DIGITS
# The PUB frame of the most frequent acknowledgement body, formatted with one argument.
_ACK_FRAMES = {b"+ACK": b"PUB %s 4\r\n+ACK\r\n"}

_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()


def _mark_forked() -> None:
    for client in list(_live_clients):
        client._forked = True
        # A thread that held it at the fork does not exist in the child to release it.
        client._state_lock = threading.RLock()
        client._connection.forked()


os.register_at_fork(after_in_child=_mark_forked)


def _flush_open_clients_at_exit() -> None:
    for client in list(_live_clients):
        client._flush_before_exit()


# A script that publishes and ends without close() would otherwise lose what its
# client still buffers: the writer is a daemon thread, stopped mid-buffer.
atexit.register(_flush_open_clients_at_exit)


def _check_bytes_like(data: object) -> None:
    """Refuse a payload that is neither ``str`` nor bytes-like, naming its type.

    Raises:
        TypeError: ``data`` does not offer the buffer protocol.
    """
    try:
        memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"payload must be bytes, str or a bytes-like object, not {type(data).__name__}"
        ) from None


@attrs.frozen(kw_only=True)
class ClientStats:
    """Counters of one client since it was created.

    Attributes:
        in_msgs: messages received.
        in_bytes: header and payload bytes of the messages received (not the protocol lines).
        out_msgs: messages published.
        out_bytes: protocol bytes written.
        reconnects: successful reconnections.
    """

    in_msgs: int
    in_bytes: int
    out_msgs: int
    out_bytes: int
    reconnects: int


class Client:
    """A connection to a NATS server (or cluster), shared by any number of threads.

    Create it with :func:`jetstream_sync.connect`. See ``docs/connecting.md``
    for every option.
    """

    _ids = iter(range(1, 1 << 62))

    def __init__(
        self,
        *,
        name: str | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        nkeys_seed: str | os.PathLike[str] | None = None,
        user_credentials: str | os.PathLike[str] | None = None,
        tls: ssl.SSLContext | bool | None = None,
        tls_handshake_first: bool = False,
        connect_timeout: float = D.CONNECT_TIMEOUT,
        allow_reconnect: bool = True,
        max_reconnect_attempts: int = D.MAX_RECONNECT_ATTEMPTS,
        no_randomize: bool = False,
        reconnect_time_wait: float = D.RECONNECT_TIME_WAIT,
        reconnect_jitter: float = D.RECONNECT_JITTER,
        reconnect_buf_size: int = D.RECONNECT_BUF_SIZE,
        ping_interval: float = D.PING_INTERVAL,
        max_outstanding_pings: int = D.MAX_OUTSTANDING_PINGS,
        inbox_prefix: str = D.INBOX_PREFIX,
        no_echo: bool = False,
        pending_msgs_limit: int = D.PENDING_MSGS_LIMIT,
        pending_bytes_limit: int = D.PENDING_BYTES_LIMIT,
        disconnected_cb: Callable[[], object] | None = None,
        reconnected_cb: Callable[[], object] | None = None,
        error_cb: Callable[[BaseException], object] | None = None,
        closed_cb: Callable[[], object] | None = None,
        lame_duck_cb: Callable[[], object] | None = None,
        wait: str | None = None,
    ) -> None:
        self._id = next(Client._ids)
        handshake_options = HandshakeOptions(
            name=name, user=user, password=password, token=token, tls=tls,
            tls_handshake_first=tls_handshake_first, no_echo=no_echo,
            nkeys_seed=nkeys_seed, user_credentials=user_credentials,
        )  # fmt: skip
        # Checked here: a bad value must fail now, not later in the reader thread.
        options = ConnectionOptions(
            handshake=handshake_options,
            connect_timeout=check_timeout("connect_timeout", connect_timeout),
            allow_reconnect=allow_reconnect,
            max_reconnect_attempts=check_count("max_reconnect_attempts", max_reconnect_attempts),
            randomize=not no_randomize,
            reconnect_time_wait=check_seconds("reconnect_time_wait", reconnect_time_wait),
            reconnect_jitter=check_seconds("reconnect_jitter", reconnect_jitter),
            reconnect_buf_size=check_count("reconnect_buf_size", reconnect_buf_size, 0),
            ping_interval=check_timeout("ping_interval", ping_interval),
            max_outstanding_pings=check_count("max_outstanding_pings", max_outstanding_pings, 1),
            tag=f"jetstream_sync-{self._id}",
            wait=check_choice(wait),
        )
        _subjects.publish_subject(inbox_prefix, "inbox_prefix")
        self._inbox_prefix = inbox_prefix
        self._pending_msgs_limit = check_count("pending_msgs_limit", pending_msgs_limit, 1)
        self._pending_bytes_limit = check_count("pending_bytes_limit", pending_bytes_limit, 1)
        self._callbacks: dict[str, Callable[..., object] | None] = {
            "disconnected": disconnected_cb, "reconnected": reconnected_cb,
            "error": error_cb, "closed": closed_cb, "lame_duck": lame_duck_cb,
        }  # fmt: skip
        for status, callback in self._callbacks.items():
            if callback is not None:
                check_callback(f"{status}_cb", callback)

        self._state_lock = threading.RLock()
        self._listeners: list[Callable[[str], object]] = []
        # A dict, not a copied list: each fetch adds and removes one (O(1) under the lock).
        self._refusal_listeners: dict[Callable[[PermissionViolationError], object], None] = {}
        self._closed = False
        self._forked = False
        self._max_payload = 1024 * 1024
        # The bytes a control line has for its subject, reply or queue group
        # together: one comparison per publish (see _check_line).
        self._line_room = D.MAX_CONTROL_LINE - _LINE_OVERHEAD
        self._subject_cache: dict[str, bytes] = {}
        self._route_prefixes: dict[str, bytes] = {}  # add_reply_route() prefixes, encoded
        self._events: EventRunner | None = None
        self._resources: dict[str, Any] = {}  # shared_resource(): closed by close()
        self._connection = Connection(
            options,
            self,
            report_error=self._report_error,
            announce=self._announce,
            info_changed=self._info_changed,
            lost=self._close,
        )
        # The connection's send verb, bound here for the hot paths (one attribute
        # read per publish): the writer's own method, bound by _connect().
        self._send = self._connection.send

    # ------------------------------------------------------------------ connect

    def _connect(self, servers: str | Sequence[str]) -> None:
        connection = self._connection
        self._events = EventRunner(f"jetstream_sync-{self._id}-events")
        try:
            connection.open(split_servers(servers))
        except BaseException:
            self._events.stop()
            raise
        self._send = connection.send
        _live_clients.add(self)
        try:  # the server's limit is known now; every inbox must fit in its lines
            _subjects.check_control_line(
                "inbox_prefix",
                len(self._inbox_prefix.encode("utf-8", "surrogateescape")),
                _INBOX_TAIL + _LINE_OVERHEAD,
                self.max_control_line,
            )
        except LimitExceededError:
            self.close()
            raise
        conn = connection.current
        assert conn is not None  # open() returned: connected
        log.info(
            "connected to %s (nats-server %s)", conn.address.url(), conn.info.get("version", "?")
        )

    def _info_changed(self) -> None:
        """The connection learnt a new INFO: refresh the limits the hot paths use."""
        info = self._connection.server_info
        self._max_payload = info.get("max_payload", self._max_payload)
        self._line_room = self.max_control_line - _LINE_OVERHEAD

    # ------------------------------------------------------------------ state

    def _check_same_process(self) -> None:
        if self._forked:
            raise ForkedClientError(
                "this client was created before os.fork(); connect again in the child process"
            )

    def _noticed_fork(self) -> bool:
        """Whether this process is a child forked after the client connected.

        A fork from C (uWSGI's workers) runs no at-fork handler: it is found by the
        process id here, and every client is then marked as :func:`_mark_forked`
        would have. Not on the hot paths (a system call); the writer checks the
        process when a burst of sends starts.
        """
        if not self._forked and self._connection.in_other_process():
            _mark_forked()
        return self._forked

    def _check_this_process(self) -> None:
        """:meth:`_check_usable`, a fork from C included: for calls that wait for the
        server (a request, a flush, a subscribe), before they take any lock of the
        client, which a thread of the parent may have held at the fork."""
        if self._noticed_fork() or self._closed:
            self._check_usable()

    def _check_usable(self) -> None:
        if self._forked:
            self._check_same_process()
        if self._closed:
            raise ConnectionClosedError("the client is closed")

    @property
    def is_connected(self) -> bool:
        """True while a connection to a server is up (never in a forked child)."""
        return (
            not self._closed
            and not self._connection.reconnecting
            and self._connection.current is not None
            and not self._noticed_fork()
        )

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` (or a fatal error) closed the client."""
        return self._closed

    @property
    def is_reconnecting(self) -> bool:
        """True while the connection is lost and being re-established."""
        return self._connection.reconnecting and not self._closed

    @property
    def connected_url(self) -> str | None:
        """The URL (without credentials) of the current server, or None."""
        conn = self._connection.current
        if not self.is_connected or conn is None:
            return None
        return conn.address.url()

    @property
    def wait_mode(self) -> str:
        """How this client waits: ``"threads"`` or ``"cooperative"`` (gevent, eventlet).

        Chosen when it connected (see the ``wait`` option in ``docs/connecting.md``).
        """
        return self._connection.wait_mode.name

    @property
    def servers(self) -> list[str]:
        """Every server URL in the pool (configured and discovered), without credentials."""
        return [a.url() for a in self._connection.servers()]

    @property
    def discovered_servers(self) -> list[str]:
        """The server URLs learnt from the cluster (INFO ``connect_urls``)."""
        return [a.url() for a in self._connection.servers() if a.implicit]

    @property
    def server_info(self) -> dict[str, Any]:
        """The INFO of the server connected to (merged with its later INFOs), as a dict."""
        return dict(self._connection.server_info)

    @property
    def max_payload(self) -> int:
        """The largest payload (headers included) the server accepts."""
        return self._max_payload

    @property
    def max_control_line(self) -> int:
        """The longest protocol control line the server accepts (INFO's, or 4,096).

        A subject, reply subject, key or name that would make a longer line is
        refused with :class:`~jetstream_sync.errors.LimitExceededError` before sending.
        """
        value = self._connection.server_info.get("max_control_line")
        return value if isinstance(value, int) and value > 0 else D.MAX_CONTROL_LINE

    @property
    def control_line_room(self) -> int:
        """The bytes a PUB or HPUB line leaves its subject and reply subject together.

        :attr:`max_control_line` less what the op, the sizes, the spaces and the
        CRLF take at most: for library machinery that encodes its frames itself
        (the columnar publishers), which must refuse a longer subject as
        :meth:`publish` does, before anything is sent.
        """
        return self._line_room

    @property
    def stats(self) -> ClientStats:
        """Message and byte counters, and the number of reconnects."""
        in_msgs, in_bytes, out_msgs, out_bytes, reconnects = self._connection.counters()
        return ClientStats(
            in_msgs=in_msgs,
            in_bytes=in_bytes,
            out_msgs=out_msgs,
            out_bytes=out_bytes,
            reconnects=reconnects,
        )

    def add_status_listener(self, listener: Callable[[str], object]) -> None:
        """Call ``listener(status)`` on every change of the connection's state.

        ``status`` is ``"disconnected"``, ``"reconnected"``, ``"lame_duck"`` or
        ``"closed"``. Listeners run on the client's events thread, in order,
        after the matching user callback; JetStream uses this to fail
        publishes whose acknowledgements can no longer arrive.
        """
        check_callback("listener", listener)
        with self._state_lock:
            self._listeners = [*self._listeners, listener]

    def remove_status_listener(self, listener: Callable[[str], object]) -> None:
        """Stop calling a listener added with :meth:`add_status_listener`."""
        with self._state_lock:
            self._listeners = [f for f in self._listeners if f != listener]

    def add_refusal_listener(self, listener: Callable[[PermissionViolationError], object]) -> None:
        """Call ``listener(error)`` for each publish or subscription the server refuses
        by permission (``-ERR 'Permissions Violation ...'``).

        For library machinery that waits for what a refused publish would have
        brought (a pull request's messages, an async publish's ack), so that it
        fails at once instead of at its timeout: JetStream's pulls and
        ``publish_async`` use it. A refused request needs none: ``request()``
        raises the error itself. The listener runs on the thread that read the
        ``-ERR``, before ``error_cb``: it must only hand the error on (set a flag,
        wake a waiter), never block, never raise. ``error`` is its own copy:
        ``.operation`` and ``.subject`` say what was refused.
        """
        check_callback("listener", listener)
        with self._state_lock:
            self._refusal_listeners[listener] = None

    def remove_refusal_listener(
        self, listener: Callable[[PermissionViolationError], object]
    ) -> None:
        """Stop calling a listener added with :meth:`add_refusal_listener`."""
        with self._state_lock:
            self._refusal_listeners.pop(listener, None)

    def _status_changed(self, status: str) -> None:
        """Run the user's callback for ``status``, then the listeners (events thread)."""
        callback = self._callbacks[status]
        if callback is not None:
            try:
                callback()
            except Exception:  # the listeners must still hear about it
                log.exception("jetstream_sync: %s_cb raised", status)
        for listener in self._listeners:
            listener(status)

    def _announce(self, status: str) -> None:
        if self._events is not None:
            self._events.submit(self._status_changed, status)

    def _report_error(self, exc: BaseException) -> None:
        """Log an asynchronous error, and hand it to ``error_cb`` on the events thread."""
        fatal = isinstance(exc, (AuthorizationError, ProtocolError, NoServersError))
        log.log(logging.ERROR if fatal else logging.WARNING, "%s: %s", type(exc).__name__, exc)
        if type(exc) is PermissionViolationError:
            with self._state_lock:
                listeners = list(self._refusal_listeners)
            for listener in listeners:
                listener(PermissionViolationError(exc.text))
        if self._events is not None:
            self._events.submit(self._callbacks["error"], exc)

    # ------------------------------------------------------------------ publish

    def _subject_bytes(
        self, subject: str, what: str = "subject", wildcards: bool = False, cache: bool = True
    ) -> bytes:
        """Check ``subject`` by its role (publish, or ``wildcards`` for interest); its bytes.

        An :class:`ApiSubject` was assembled from parts checked by their roles
        (its tail may be a filter with wildcards) and is sent as it is, uncached.
        """
        cached = self._subject_cache.get(subject) if cache and not wildcards else None
        if cached is not None:
            return cached
        if type(subject) is ApiSubject:
            return subject.encode()
        if wildcards:
            # An inbox (a fetch subscribes a new one each time) has no wildcard:
            # this spares a C call, which lets go of the GIL.
            if self._token_under_checked(subject):
                return subject.encode("utf-8", "surrogateescape")
            return _subjects.filter_subject(subject, what).encode("utf-8", "surrogateescape")
        raw = _subjects.publish_subject(subject, what)
        if cache:
            if len(self._subject_cache) >= _SUBJECT_CACHE_MAX:
                self._subject_cache.clear()
            self._subject_cache[subject] = raw
        return raw

    def _reply_bytes(self, reply: str) -> bytes:
        """Validate a reply subject; ``<known subject>.<alphanumeric token>`` is fast.

        Replies are mostly one-off inboxes: caching each one would evict the
        publish subjects, so their (validated, cached) prefix is looked up instead.
        """
        if type(reply) is str:
            if self._token_under_checked(reply):
                return reply.encode("utf-8", "surrogateescape")
            # The whole reply first: an error quotes it, not the prefix.
            reply_b = self._subject_bytes(reply, "reply subject", cache=False)
            head, _, token = reply.rpartition(".")
            if head and token:
                self._subject_bytes(head, "reply subject")  # cache the prefix for next time
            return reply_b
        return self._subject_bytes(reply, "reply subject", cache=False)

    def _token_under_checked(self, subject: str) -> bool:
        """Whether ``subject`` is ``<a subject already checked>.<alphanumeric token>``
        (an inbox): valid as a publish subject and as a filter, without a check."""
        head, _, token = subject.rpartition(".")
        return token.isalnum() and token.isascii() and head in self._subject_cache

    def _check_line(self, *arguments: tuple[str, int]) -> None:
        """Refuse arguments (name, length) too long together for one control line.

        Called once the one-comparison check against ``_line_room`` failed; the
        error names the longest argument, the one to shorten.

        Raises:
            LimitExceededError: the line would pass the server's ``max_control_line``.
        """
        total = sum(length for _, length in arguments)
        argument, length = max(arguments, key=lambda pair: pair[1])
        overhead = total - length + _LINE_OVERHEAD
        _subjects.check_control_line(argument, length, overhead, self.max_control_line)

    def _encode_publish(
        self,
        subject: str,
        data: bytes | str,
        reply: str | bytes | None,
        headers: HeadersIn | None,
    ) -> bytes:
        """The PUB or HPUB frame; a ``bytes`` reply is the client's own, already valid."""
        subject_b = self._subject_cache.get(subject) or self._subject_bytes(subject)
        if reply:
            reply_b = reply if type(reply) is bytes else self._reply_bytes(reply)  # type: ignore[arg-type]
        else:
            reply_b = b""
        if len(subject_b) + len(reply_b) > self._line_room:  # the server would drop the link
            self._check_line(("subject", len(subject_b)), ("reply subject", len(reply_b)))
        if isinstance(data, str):
            data = data.encode()
        elif type(data) is not bytes:
            _check_bytes_like(data)
        if headers:
            frame = _protocol.encode_hpub_pairs(subject_b, reply_b, header_pairs(headers), data)
            # What counts against max_payload: everything after the control line.
            size = len(frame) - frame.index(b"\r\n") - 4
            if size > self._max_payload:
                raise MaxPayloadError(
                    f"headers and payload are {size} bytes; the server accepts {self._max_payload}"
                )
            return frame
        if len(data) > self._max_payload:
            raise MaxPayloadError(
                f"payload is {len(data)} bytes; the server accepts {self._max_payload}"
            )
        return _protocol.encode_pub(subject_b, reply_b, data)

    def validate_publish(
        self,
        subject: str,
        data: bytes | str = b"",
        reply: str | None = None,
        headers: HeadersIn | None = None,
    ) -> None:
        """Raise what :meth:`publish` would raise for this input; send nothing.

        Lets a caller check a whole set of messages before sending the first.

        Raises:
            BadSubjectError, BadHeaderError, MaxPayloadError: the input is bad.
            LimitExceededError: the subject and reply together pass the server's
                ``max_control_line``.
        """
        self._encode_publish(subject, data, reply, headers)

    def publish(
        self,
        subject: str,
        data: bytes | str = b"",
        reply: str | None = None,
        headers: HeadersIn | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        """Publish a message (fire and forget: returns once it is buffered).

        Blocks only while more than 32 MiB wait for a server that does not read
        them: up to ``timeout``, or without one until there is room or the
        connection is declared lost (``ping_interval`` × ``max_outstanding_pings``).

        Args:
            subject: where to publish; no wildcards.
            data: the payload (a ``str`` is UTF-8 encoded).
            reply: the reply subject receivers should answer to.
            headers: a mapping of key to a value or a list of values.
            timeout: seconds to wait for room in the write buffer.

        Raises:
            TimeoutError: no room within ``timeout``; nothing was sent.
            BadSubjectError, BadHeaderError, MaxPayloadError: bad input; nothing was sent.
            LimitExceededError: the subject (with the reply) passes the server's
                ``max_control_line``; nothing was sent.
            ConnectionClosedError: the client is closed.
            ReconnectBufferFullError: disconnected, and ``reconnect_buf_size`` is used up.
        """
        # The timeout is checked first: bad input is refused whatever the state.
        deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        if self._closed or self._forked:
            self._check_usable()
        self._send(self._encode_publish(subject, data, reply, headers), msgs=1, deadline=deadline)

    def publish_frames(
        self, frames: bytes, msgs: int, *, timeout: float, send_now: bool = False
    ) -> None:
        """Queue PUB/HPUB frames the protocol core encoded, in one piece (batch publishers).

        For library machinery that encodes many messages in one call (the
        Spark sink, ``_protocol.encode_batch_hpub``): it has checked every
        subject, header and size against :attr:`max_payload`; nothing is checked
        here. The frames are appended whole, after what is buffered, and block
        like :meth:`publish` while more than 32 MiB wait for the server.

        Args:
            frames: whole frames, back to back.
            msgs: how many messages they hold (for :meth:`stats`).
            timeout: seconds to wait for room in the write buffer.
            send_now: when the socket is idle, write what is buffered (these
                frames included) on this thread, without blocking, instead of
                waking the flusher thread. A publisher that appends frames in a
                tight loop holds the GIL, so the flusher runs late; sending
                itself every so often keeps the server busy.

        Raises:
            TimeoutError: no room within ``timeout``; nothing was sent.
            ConnectionClosedError: the client is closed.
            ReconnectBufferFullError: disconnected, and ``reconnect_buf_size`` is used up.
        """
        # Per message for a fast batch: a finite positive float skips the full check,
        # and the writer starts counting it only if it has to wait for room.
        if not (type(timeout) is float and 0.0 < timeout < _FOREVER):
            timeout = check_timeout("timeout", timeout)
        if self._closed or self._forked:
            self._check_usable()
        self._send(frames, send_now, msgs, timeout)

    def send_reply(
        self,
        reply: str,
        data: bytes | str,
        headers: HeadersIn | None = None,
        ack: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Publish to the reply subject of a received message: the seam :class:`Msg` uses.

        A :class:`Msg` answers only through this method (``respond``, and
        ``ack``, ``nak``, ``in_progress``, ``term`` with ``ack=True``); it never
        touches the connection. Like :meth:`publish` without a timeout, it
        blocks only while the write buffer is over its high-water mark.

        Args:
            reply: the message's reply subject, as received.
            data: the payload (a ``str`` is UTF-8 encoded).
            headers: headers of a response.
            ack: ``data`` is a JetStream acknowledgement body (``bytes``, no
                headers) for the ack subject the server made: it is sent as
                it is, unchecked, and coalesced with other writes (the hot
                path of every consumer). Otherwise the reply is checked as
                :meth:`publish` checks and written at once when the socket is
                idle (latency of a request's answer).
            timeout: seconds to wait for room in the write buffer (checked by
                the caller); None: until there is room or the connection is lost.

        Raises:
            WriteBufferTimeoutError: no room within ``timeout``; nothing was sent.
            ConnectionClosedError: the client is closed.
            ForkedClientError: called in a process forked after the client connected.
            BadSubjectError, BadHeaderError, MaxPayloadError, LimitExceededError:
                a response (not an ack) is not valid; nothing was sent.
            MaxPayloadError: an ack body (a term reason) passes ``max_payload``;
                nothing was sent.
        """
        if self._closed or self._forked:
            self._check_usable()
        if ack and type(data) is bytes:
            # Decoded with surrogateescape (bytes that are not UTF-8): encoded back so.
            subject = reply.encode("utf-8", "surrogateescape")
            frame = _ACK_FRAMES.get(data)
            if frame is None:
                if len(data) > self._max_payload:  # a long term reason: the server would hang up
                    raise MaxPayloadError(
                        f"acknowledgement is {len(data)} bytes; the server accepts "
                        f"{self._max_payload}"
                    )
                frame = b"PUB %s %d\r\n%s\r\n" % (subject, len(data), data)
            else:
                frame %= subject
            self._send(frame, msgs=1, deadline=timeout)
            return
        frame = self._encode_publish(reply, data, None, headers)
        self._send(frame, urgent=True, msgs=1, deadline=timeout)

    def send_acks(self, frames: bytes, count: int, timeout: float | None = None) -> None:
        """Queue acknowledgement frames in one write: the seam of ``Msg.ack`` and ``ack_batch``.

        ``frames`` are whole PUB frames to ack subjects the server gave, made
        by :mod:`jetstream_sync.msg`: appended as they are, unchecked, and
        coalesced with other writes. Blocks like :meth:`send_reply`, up to
        ``timeout`` (checked by the caller).

        Raises:
            WriteBufferTimeoutError: no room within ``timeout``; nothing was sent.
            ConnectionClosedError: the client is closed.
            ForkedClientError: called in a process forked after the client connected.
        """
        if self._closed or self._forked:
            self._check_usable()
        self._send(frames, False, count, timeout)

    # ------------------------------------------------------------------ subscribe

    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        cb: Callable[[Msg], object] | None = None,
        *,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
        inline: bool = False,
        checked: bool = False,
    ) -> Subscription:
        """Express interest in ``subject`` (wildcards ``*`` and ``>`` allowed).

        Args:
            subject: the subject to listen on.
            queue: a queue group: each message goes to one member of the group.
            cb: called with each message on the subscription's own thread, in order.
            pending_msgs_limit: messages held before the subscription counts as slow.
            pending_bytes_limit: payload bytes held before it counts as slow.
            inline: run ``cb`` on the thread that read the message (the reader
                thread, or a requester reading its own reply), with no hand-off to
                a thread of the subscription's own: a responder answers a request
                from the same process without a thread switch. ``cb`` must be quick
                and must not wait for what the connection reads: it may publish
                (``msg.respond()``, ``publish``, ``msg.ack()``); a request, flush,
                fetch, ``next_msg``, ``drain`` or ``close`` raises
                :class:`InlineCallbackError` there. While it runs, no other
                message of the connection is read (see docs/threads-and-fork.md).
            checked: send the SUB between two PINGs, so that a refusal at the
                connection's subscription limit (``max_subscriptions``) is known: the
                subscription then ends, its ``next_msg()`` and ``next_msgs()`` raise
                :class:`MaxSubscriptionsExceededError` (once what is pending is read)
                and ``error_cb`` hears its subject. Without it, ``error_cb`` gets only
                the server's ``-ERR``, which names no subscription. Costs two PINGs,
                no wait; the library's pulls check their inboxes so.

        Raises:
            BadSubjectError: the subject or queue group is not valid; nothing was sent.
            LimitExceededError: the subject with the queue group passes the server's
                ``max_control_line``; nothing was sent.
            ValueError, TypeError: a pending limit is not an int >= 1,
                ``inline`` without ``cb``, or ``cb`` is not callable or is an
                ``async def`` (the client would never await its coroutine).
        """
        if inline and cb is None:
            raise ValueError("inline=True runs a callback: pass cb= as well")
        if cb is not None:
            check_callback("cb", cb)
        self._check_this_process()
        subject_b = self._subject_bytes(subject, wildcards=True)
        queue_b = b""
        if queue:
            queue_b = _subjects.name_token(queue, "queue group").encode()
        if len(subject_b) + len(queue_b) > self._line_room:
            self._check_line(("subject", len(subject_b)), ("queue group", len(queue_b)))
        msgs_limit = self._pending_msgs_limit
        if pending_msgs_limit is not None:
            msgs_limit = check_count("pending_msgs_limit", pending_msgs_limit, 1)
        bytes_limit = self._pending_bytes_limit
        if pending_bytes_limit is not None:
            bytes_limit = check_count("pending_bytes_limit", pending_bytes_limit, 1)
        return self._connection.subscribe(
            lambda sid: Subscription(
                self, sid, subject, queue or "", cb, msgs_limit, bytes_limit, inline
            ),
            subject_b,
            queue_b,
            checked,
        )

    def _unsubscribe(self, sub: Subscription, limit: int | None) -> None:
        self._check_usable()
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError(f"limit must be a positive int, got {limit!r}")
            if limit > _MAX_UNSUB_LIMIT:
                raise ValueError(
                    f"limit must be at most {_MAX_UNSUB_LIMIT:,} (nats-server reads no more "
                    f"than 9 digits and would end the subscription at once), got {limit!r}"
                )
        if self._connection.unsubscribe(sub, limit) and sub._worker is not None:
            sub._worker.join()

    def _drain_subscription(self, sub: Subscription, timeout: float | None) -> None:
        deadline = Deadline(check_timeout("timeout", timeout, D.DRAIN_TIMEOUT))
        self._check_usable()
        refuse_in_inline_callback("drain()")
        self._connection.stop_interest(sub)
        try:
            self.flush(deadline.remaining() or 0.001)
        finally:  # whatever happens, the local side ends: no waiter is left hanging
            self._connection.stop_routing(sub)
        worker = sub._worker
        # From its own callback the worker cannot be joined: it handles what is
        # left once the callback returns, then ends by itself.
        if worker is not None and not worker.is_current() and not worker.join(deadline.remaining()):
            raise TimeoutError(f"subscription {sub.sid} did not finish draining in time")

    # ------------------------------------------------------------------ request/reply

    def new_inbox(self) -> str:
        """A new, unique inbox subject under ``inbox_prefix``."""
        return f"{self._inbox_prefix}.{NUID.next()}"

    def add_reply_route(
        self,
        handler: Callable[[list[Reply]], object],
        buffer_handler: Callable[[memoryview, int, int], object] | None = None,
        dropped: Callable[[str, BaseException], object] | None = None,
        link_lost: Callable[[], object] | None = None,
        refused: Callable[[BaseException], object] | None = None,
        prefix: str | None = None,
    ) -> str:
        """Receive the replies to a new inbox as plain tuples, a list per received buffer.

        For library machinery that gets many small replies (JetStream's
        async-publish acks): it subscribes ``<new inbox>.*`` and, instead of a
        :class:`Msg` per reply and a subscription queue, the reader thread
        calls ``handler(replies)`` once per buffer it parsed, with a list of
        ``(token, payload, raw_headers)`` in arrival order: ``token`` is the
        reply subject after the prefix, ``raw_headers`` the header block or
        ``None``. The handler runs on the reader thread: it must only hand
        the list on (a queue put), never block, never raise. The route lasts
        as long as the client (it is subscribed again after a reconnect); the
        handler is never called once :meth:`close` has joined the reader.

        With ``buffer_handler``, a received buffer that holds nothing but this
        route's replies goes to ``buffer_handler(buffer, end, sid)`` instead,
        with no tuple made: every op in ``buffer[:end]`` is an ``MSG`` or
        ``HMSG`` of subscription ``sid`` (``_protocol.puback_batch`` decodes
        such a buffer in one C call). The same rules hold, and the buffer is
        reused once it returns: it must copy what it keeps.

        With ``dropped``, a publish replied to on the route that was buffered
        while disconnected and then dropped unsent, because the server
        reconnected to accepts smaller payloads, is told as
        ``dropped(token, error)`` (a :class:`MaxPayloadError`), on the reader
        thread, before ``error_cb`` hears of it: its reply will not come. The
        same rules hold.

        With ``link_lost``, ``link_lost()`` is called on the reader thread when
        the connection drops, as soon as nothing more is written on the lost
        link and before the ``"disconnected"`` status listeners run (maybe
        much later, on the events thread): a request written from then on is
        buffered for the next link and its reply will come. The same rules hold.

        With ``refused``, a refusal of the route's subscription by the server
        at its subscription limit (the first SUB or a re-subscription after a
        reconnect) is told as ``refused(error)`` (a
        :class:`MaxSubscriptionsExceededError`), on the reader thread, before
        ``error_cb`` hears of it: the route is then no longer routed, nor
        subscribed again by a reconnect. Pass its ``prefix`` to a new call to
        subscribe the same inbox again. The same rules hold.

        Returns:
            The prefix (``<inbox>.``) to put before a token in a reply subject.

        Raises:
            ConnectionClosedError: the client is closed.
            ValueError: ``prefix`` is not one this returned before.
        """
        self._check_usable()
        if prefix is None:
            prefix = self.new_inbox() + "."
        elif prefix not in self._route_prefixes:
            raise ValueError(f"{prefix!r} is not a reply route's prefix")
        # Its SUB never waits for room: a full buffer must not stall this caller
        # (it has no deadline here) nor, through the lock, other subscribers.
        self._connection.add_route(prefix, handler, buffer_handler, dropped, link_lost, refused)
        self._route_prefixes[prefix] = prefix.encode()
        return prefix

    def publish_routed(
        self, subject: str, data: bytes, prefix: str, token: int, timeout: float
    ) -> None:
        """:meth:`publish` of ``data`` with the reply ``<prefix><token>``, for a reply route.

        The hot path of library machinery that numbers its replies (the
        async-publish acks): ``prefix`` is one :meth:`add_reply_route`
        returned (so it is not checked again), ``token`` a non-negative int,
        ``data`` ``bytes``, no headers, ``timeout`` a positive float already
        checked. Otherwise as :meth:`publish`: ``timeout`` bounds the wait for
        room in the write buffer.

        Raises:
            ValueError: ``prefix`` is not one :meth:`add_reply_route` returned.
            BadSubjectError, LimitExceededError, MaxPayloadError, TimeoutError,
                ConnectionClosedError, ReconnectBufferFullError: as :meth:`publish`.
        """
        if self._closed or self._forked:
            self._check_usable()
        reply = self._route_prefixes.get(prefix)
        if reply is None:
            raise ValueError(f"{prefix!r} is not a reply route's prefix")
        subject_b = self._subject_cache.get(subject) or self._subject_bytes(subject)
        if len(subject_b) + len(reply) + _TOKEN_DIGITS > self._line_room:
            self._check_line(
                ("subject", len(subject_b)), ("reply subject", len(reply) + _TOKEN_DIGITS)
            )
        size = len(data)
        if size > self._max_payload:
            raise MaxPayloadError(
                f"payload is {size} bytes; the server accepts {self._max_payload}"
            )
        if size > JOIN_ABOVE:  # a large payload: joined, not %-formatted (one copy)
            frame = _protocol.encode_pub(subject_b, b"%s%d" % (reply, token), data)
        else:
            frame = b"PUB %s %s%d %d\r\n%s\r\n" % (subject_b, reply, token, size, data)
        self._send(frame, msgs=1, deadline=timeout)

    @overload
    def request(
        self,
        subject: str,
        data: bytes | str = b"",
        timeout: float = D.REQUEST_TIMEOUT,
        headers: HeadersIn | None = None,
        *,
        decode: None = None,
    ) -> Msg: ...

    @overload
    def request(
        self,
        subject: str,
        data: bytes | str = b"",
        timeout: float = D.REQUEST_TIMEOUT,
        headers: HeadersIn | None = None,
        *,
        decode: ReplyDecoder,
    ) -> tuple[tuple[Any, ...], bytes] | Msg: ...

    def request(
        self,
        subject: str,
        data: bytes | str = b"",
        timeout: float = D.REQUEST_TIMEOUT,
        headers: HeadersIn | None = None,
        *,
        decode: ReplyDecoder | None = None,
    ) -> tuple[tuple[Any, ...], bytes] | Msg:
        """Publish a request and block until its first reply.

        Args:
            decode: for library code (the JetStream publish passes
                ``PUBACK_FIELDS``): a reader of the reply's body
                (``jetstream_sync._reply.ReplyDecoder``) that the protocol core
                runs in the round trip that received the reply, when the calling
                thread read its own reply and it came alone, without headers.

        Returns:
            The reply :class:`Msg`; with ``decode``, ``(fields, body)`` when the
            core read the body (no ``Msg`` is made), else the reply ``Msg``
            (another thread read it, it has headers or another shape).

        Raises:
            TimeoutError: no reply within ``timeout`` (also the builtin ``TimeoutError``).
            NoRespondersError: nobody is subscribed to ``subject`` (the server's
                status 503, with no body; a responder's 503 with a body is returned).
            BadSubjectError, BadHeaderError, MaxPayloadError: bad input; nothing was sent.
            LimitExceededError: the subject (with the reply) passes the server's
                ``max_control_line``; nothing was sent.
            ConnectionLostError: the connection dropped while the request waited
                (raised at once, not at the timeout); the request may or may not
                have been processed.
            ConnectionClosedError: the client closed while waiting.
            MaxSubscriptionsExceededError: the server refused the subscription to
                the requests' reply inbox (the connection has all the subscriptions
                it may have), raised as soon as its ``-ERR`` arrives; the next
                request subscribes the inbox again.
            PermissionViolationError: the server refused, by permission, to let
                this client publish to ``subject`` or subscribe to the requests'
                reply inbox (``<inbox_prefix>.<id>.*``), raised as soon as its
                ``-ERR`` arrives.
            ReconnectBufferFullError: disconnected, and ``reconnect_buf_size`` is
                used up; nothing was sent.
            InlineCallbackError: called from an inline callback.
        """
        deadline = Deadline(check_timeout("timeout", timeout))
        self._check_this_process()
        if _READING.inline:
            refuse_in_inline_callback("a request")
        connection = self._connection
        if not connection.has_reply_inbox:  # the first request subscribes it: not for bad input
            self._encode_publish(subject, data, None, headers)
        token, reply = connection.new_reply(self.new_inbox)
        frame = self._encode_publish(subject, data, reply, headers)
        # Reads the socket itself while nobody else does: no hand-off, and when
        # the writer is idle one C call from send to reply (see _connection/read_role.py).
        got = connection.request(
            subject, frame, reply, token, deadline, DECODE_NONE if decode is None else decode.code
        )
        if type(got) is tuple:
            reply_to, sid, payload, raw_headers, fields = got
            if fields is not None:
                return fields, payload
            msg = Msg(reply.decode(), reply_to, payload, raw_headers, self, sid)
        else:
            waiter = cast("ReplyWaiter", got)
            if not waiter.done:
                raise TimeoutError(f"no reply on {subject!r} within {seconds_text(timeout)} s")
            if waiter.error is not None:
                raise waiter.error
            msg = waiter.msg  # type: ignore[assignment]
        # The server's no-responders status has no body; a 503 with one is a responder's reply.
        if msg.status == 503 and not msg.data:
            raise NoRespondersError(f"no responders on {subject!r}", subject)
        return msg

    def _read_until(self, ready: Ready, deadline: Deadline) -> None:
        """Read the socket on this thread until ``ready.done``, when nobody else reads it."""
        self._connection.read_until(ready, deadline)

    # ------------------------------------------------------------------ flush / ping

    def flush(self, timeout: float = D.FLUSH_TIMEOUT) -> None:
        """Block until everything published so far on this connection has reached the server.

        Sends a PING and waits for its PONG. Called while reconnecting, it waits
        for the new connection and for what was buffered meanwhile; messages
        already written to the lost connection are not covered (they may be
        lost: core publishing is at most once, as in nats.go).

        Raises:
            TimeoutError: no PONG within ``timeout``.
            ConnectionLostError: the connection broke before the PONG came.
            ConnectionClosedError: the client closed while waiting.
            InlineCallbackError: called from an inline callback.
        """
        deadline = Deadline(check_timeout("timeout", timeout))
        self._check_this_process()
        refuse_in_inline_callback("flush()")
        waiter = self._connection.flush(deadline)
        if waiter is None:
            raise TimeoutError(f"flush did not complete within {seconds_text(timeout)} s")
        if waiter.error is not None:
            raise waiter.error

    def rtt(self, timeout: float = D.FLUSH_TIMEOUT) -> float:
        """The round-trip time to the server in seconds (one PING/PONG)."""
        start = time.perf_counter()
        self.flush(timeout)
        return time.perf_counter() - start

    # ------------------------------------------------------------------ close / drain

    def drain(self, timeout: float = D.DRAIN_TIMEOUT) -> None:
        """Stop every subscription, let pending messages be handled, flush, then close.

        The whole call, closing included, keeps ``timeout``. Called from a
        subscription's callback, it does not wait for that callback's own thread
        (which handles what is left once the callback returns).

        Raises:
            TimeoutError: draining took longer than ``timeout`` (the client is
                closed anyway).
            InlineCallbackError: called from an inline callback (nothing was done).
        """
        deadline = Deadline(check_timeout("timeout", timeout))
        self._check_usable()
        refuse_in_inline_callback("drain()")
        connection = self._connection
        subs = connection.subscriptions()
        try:
            for sub in subs:
                connection.stop_interest(sub)
            self.flush(deadline.remaining() or 0.001)
            for sub in subs:
                connection.stop_routing(sub)
            for sub in subs:
                worker = sub._worker
                # Called from a callback, that callback's worker is not joined: it
                # handles what is left once the callback returns, then ends.
                if worker is None or worker.is_current():
                    continue
                if not worker.join(deadline.remaining()):
                    raise TimeoutError("subscriptions did not finish draining in time")
            connection.wait_drained(deadline)
        finally:
            self._close(None, deadline)

    def shared_resource(self, key: str, factory: Callable[[Client], T]) -> T:
        """The client's one object under ``key``, made by ``factory(client)`` on first use.

        For machinery that must exist once per client, not once per user of it
        (JetStream's async-publish ack multiplexer is shared this way by every
        context): every caller gets the same object. :meth:`close` calls its
        ``close()`` after the connection and the subscriptions are closed and
        before the closed callbacks; it must fail what still waits and join
        its threads — except the calling thread, which may be one of them.

        Raises:
            ConnectionClosedError: the client is closed.
        """
        resource = self._resources.get(key)
        if resource is None:
            with self._state_lock:
                self._check_usable()
                resource = self._resources.get(key)
                if resource is None:
                    resource = self._resources[key] = factory(self)
        return resource

    def close(self) -> None:
        """Flush what is buffered (briefly), close the connection and join every thread.

        Safe to call more than once and from any thread, including callbacks
        (subscription callbacks, ``PubAckFuture`` done-callbacks,
        ``error_cb``, ``disconnected_cb``...). Called on one of the client's
        own threads, it joins every other thread but not that one: it returns,
        and that thread ends as soon as the callback returns. Not from an inline
        callback, which runs on the thread reading the connection. From a signal
        handler that interrupted a call of this client on the main thread, it
        closes the connection and returns at once; that call raises
        ``ConnectionClosedError`` once the handler returned, and a thread of the
        client's own (``jetstream_sync-<n>-closer``) joins the others.

        Raises:
            InlineCallbackError: called from an inline callback (nothing was done).
        """
        refuse_in_inline_callback("close()")
        self._close(None)

    def _close(self, reason: BaseException | None, deadline: Deadline | None = None) -> None:
        """Close; the brief flush of what is buffered ends by ``deadline`` (drain's) if given."""
        forked = self._noticed_fork()  # before the lock: marking a fork replaces it
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        connection = self._connection
        connection.mark_closing()
        if forked:  # the parent still uses this socket: never shut it down
            connection.close_inherited()
            return
        if in_handler_interrupting_a_call():
            # The threads to join may wait for what the interrupted call holds (the
            # read role, the writer's lock), which it gives back only after this
            # handler returned: they are joined on a thread of their own.
            threading.Thread(
                target=self._finish_close, args=(reason, deadline),
                name=f"jetstream_sync-{self._id}-closer",
            ).start()  # fmt: skip
            return
        self._finish_close(reason, deadline)

    def _flush_before_exit(self) -> None:
        """At the interpreter's exit: send what is buffered, or warn that it was not."""
        if self._closed or self._noticed_fork():
            return
        connection = self._connection
        if connection.wait_drained(Deadline(_EXIT_FLUSH)):
            return
        # A warning, not a log record: the library's logger has a NullHandler, and a
        # program that configured no logging must still hear of lost publishes.
        warnings.warn(
            f"exiting without close(): {connection.buffered_bytes()} bytes of publishes were "
            "not sent ("
            + ("the connection was down" if connection.reconnecting else "the server took none")
            + f" for {seconds_text(_EXIT_FLUSH)} s); call close() or flush() before the end",
            RuntimeWarning,
            stacklevel=1,
        )

    def _finish_close(self, reason: BaseException | None, deadline: Deadline | None) -> None:
        connection = self._connection
        flush_for = _CLOSE_FLUSH if deadline is None else min(_CLOSE_FLUSH, deadline.remaining())
        for sub in connection.close(flush_for):
            if sub._worker is not None:
                sub._worker.join()
        with self._state_lock:
            resources, self._resources = list(self._resources.values()), {}
        for resource in resources:
            resource.close()
        if reason is not None:
            self._report_error(reason)
        conn = connection.current
        log.info("closed the connection to %s", conn.address.url() if conn else "-")
        self._announce("closed")
        if self._events is not None:
            self._events.stop()
        _live_clients.discard(self)

    def jetstream(self, **options: Any) -> JetStreamContext:
        """A JetStream context on this connection.

        Args:
            **options: ``prefix``, ``domain``, ``timeout`` (default 5 s),
                ``max_ack_inflight`` (5000), ``backpressure_on_inflight`` (True),
                ``ack_timeout`` (30 s); see :class:`JetStreamContext`.
        """
        from .jetstream.context import JetStreamContext

        self._check_usable()
        return JetStreamContext(self, **options)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = (
            "closed"
            if self._closed
            else ("reconnecting" if self._connection.reconnecting else "connected")
        )
        url = self.connected_url
        return f"<Client {state} {url}>" if url else f"<Client {state}>"


def connect(servers: str | Sequence[str] = D.SERVER_URL, **options: Any) -> Client:
    """Connect to a NATS server and return a ready, thread-safe :class:`Client`.

    Args:
        servers: a URL, URLs separated by commas (as ``NATS_URL`` may hold them)
            or a list of URLs (``nats://``, ``tls://``; ``user:pass@`` and
            ``token@`` work), tried in a random order unless
            ``no_randomize=True``. Servers the cluster announces join the pool.
        **options: see :class:`Client` and ``docs/connecting.md``.

    Raises:
        NoServersError: no server could be reached.
        AuthorizationError: no server took the client and one rejected the
            credentials (a refusal passes the connect on to the next server).
        LimitExceededError: ``inbox_prefix`` is too long for the server's
            ``max_control_line`` (the client is closed again).
        ValueError, TypeError: an option is out of range or of the wrong type;
            nothing was sent.
    """
    client = Client(**options)
    client._connect(servers)
    return client
