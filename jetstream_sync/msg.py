"""The message object handed to subscribers and returned by requests."""

from __future__ import annotations

import builtins
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, SupportsIndex

from . import _defaults as D
from . import _protocol
from ._ack_subject import ACK as _ACK
from ._ack_subject import ACK_PREFIX as _ACK_PREFIX
from ._ack_subject import IN_PROGRESS as _WPI
from ._ack_subject import NAK as _NAK
from ._ack_subject import MsgMetadata, nak_body, parse_metadata, term_body
from ._deadline import check_timeout
from ._reply import STATUS_OPENINGS
from .errors import (
    MsgAlreadyAckedError,
    NatsError,
    NotJetStreamMsgError,
    WriteBufferTimeoutError,
)
from .headers import Headers

_NO_HEADERS = Headers()
_ACK_PREFIX_BYTES = _ACK_PREFIX.encode()
# The frame of one ``+ACK``; ack_batch() joins many: "PUB " + reply + (separator + reply)... + tail.
_ACK_TAIL = b" %d\r\n%s\r\n" % (len(_ACK), _ACK)
_ACK_SEPARATOR = _ACK_TAIL + b"PUB "
_ACK_FRAME = b"PUB %s" + _ACK_TAIL
_new = object.__new__
# Makes "not acknowledged yet? then it is mine" one step for threads racing on a message.
_CLAIM = threading.Lock()


def _new_claim_lock() -> None:
    # A parent's thread acking at os.fork() leaves the lock held in the child. Not a
    # ProcessLock: its process check would add a system call to every ack, so after a
    # fork from C (no at-fork handler) an ack can still wait for it (docs/app-servers.md).
    global _CLAIM
    _CLAIM = threading.Lock()


os.register_at_fork(after_in_child=_new_claim_lock)


class AckSender(Protocol):
    """What a :class:`Msg` answers through: its client (``Client.send_reply`` is the seam).

    A message never writes to the connection itself, nor reads its client's
    state: every reply goes through ``send_reply``, every ``+ACK`` through
    ``send_acks``, and a double ack through the public ``request``.
    """

    def send_reply(
        self,
        reply: str,
        data: bytes | str,
        headers: Mapping[str, str | Sequence[str]] | None = None,
        ack: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Publish to a reply subject the server gave (see ``Client.send_reply``)."""

    def send_acks(self, frames: bytes, count: int, timeout: float | None = None) -> None:
        """Queue ``count`` acknowledgement frames in one write (see ``Client.send_acks``)."""

    def request(
        self,
        subject: str,
        data: bytes | str = b"",
        timeout: float = D.REQUEST_TIMEOUT,
        headers: Mapping[str, str | Sequence[str]] | None = None,
    ) -> Msg:
        """Publish a request and wait for its reply (see ``Client.request``)."""
        ...


def received(
    raw_subject: bytes,
    raw_reply: bytes,
    data: bytes,
    raw_headers: bytes | None,
    client: AckSender,
    sid: int,
) -> Msg:
    """A message as received: subject and reply are decoded when first read.

    For the connection's routing, which makes one per received message and
    copies each field out of the read buffer, but decodes none: a consumer
    that never reads ``subject`` or ``reply`` (a fetch loop that acks, with
    the reply as received) never pays for it.

    Args:
        raw_subject: the subject's bytes (any bytes but space and control
            characters: decoded with ``surrogateescape``).
        raw_reply: the reply subject's bytes (``b""`` when none).
        data: the payload.
        raw_headers: the header block, or None.
        client: what the message acknowledges and replies through.
        sid: the id of the subscription that received it.
    """
    msg = _new(Msg)
    msg._raw_subject = raw_subject
    msg._raw_reply = raw_reply
    msg.data = data
    msg._raw_headers = raw_headers
    msg._client = client
    msg.sid = sid
    msg._subject = msg._reply = msg._parsed = None
    msg._ackd = False
    return msg


def pull_size(msg: Msg) -> int:
    """The bytes the server counts for ``msg`` against a pull request's ``max_bytes``.

    Subject, reply subject, header block and payload, in bytes as received
    (a subject that is not ASCII counts its UTF-8 bytes, not its characters),
    without decoding a subject or reply that was not read yet.
    """
    subject = msg._raw_subject or msg.subject.encode("utf-8", "surrogateescape")
    return len(subject) + len(msg._reply_bytes()) + len(msg.data) + msg.header_size


def first_status(msgs: Sequence[Msg], start: int = 0) -> int:
    """The index of the first status message in ``msgs[start:]``, or ``len(msgs)``.

    What :attr:`Msg.is_status` tells of one message, for a whole batch at
    about the cost of an attribute read per message: layers that take
    messages in batches (the JetStream pull engine) hand out the user
    messages between two statuses with one slice.
    """
    for i in range(start, len(msgs)):
        raw = msgs[i]._raw_headers
        if raw is not None and raw[:9] in STATUS_OPENINGS:
            return i
    return len(msgs)


def header_block(msg: Msg) -> bytes | None:
    """The header block of ``msg`` as received (``NATS/1.0`` ... blank line), or None.

    For library decoders that read a few known headers in one pass (the
    Key-Value direct get, through ``_protocol.parse_direct_meta``) instead of
    building the :attr:`Msg.headers` mapping.
    """
    return msg._raw_headers


def ack_batch(msgs: Iterable[Msg], timeout: float | None = None) -> None:
    """Acknowledge every message of ``msgs`` (``+ACK``) with one write per client.

    What ``for msg in msgs: msg.ack()`` does, at a fraction of the cost: the
    acknowledgements are queued as one buffer (fire and forget, as
    :meth:`Msg.ack`; ``client.flush()`` waits until the server has them).
    The messages may come from several consumers, and from several clients
    (one write each). Every message is checked first: when one cannot be
    acknowledged, nothing is sent and none is marked.

    Args:
        msgs: messages a JetStream consumer delivered (a ``fetch()`` result,
            for example); an empty list sends nothing.
        timeout: seconds each client's write may wait for room in its write
            buffer (default 5).

    Raises:
        WriteBufferTimeoutError: (a ``TimeoutError``) no room in time (a server
            that reads nothing): the messages of that client, and of the clients
            after it, were not sent and are not marked.
        NotJetStreamMsgError: a message did not come from a JetStream consumer.
        MsgAlreadyAckedError: a message was already acked, nak'ed or
            terminated (or appears twice in ``msgs``).
        ConnectionClosedError: a client is closed.
    """
    wait = check_timeout("timeout", timeout, D.JS_TIMEOUT)
    marked: list[Msg] = []
    replies: list[bytes] = []
    client = None
    others: dict[int, tuple[AckSender, list[bytes]]] | None = None
    sent: set[int] = set()  # the clients whose write went out
    batch = list(msgs)  # an iterable runs no code of the caller's under the lock
    try:
        with _CLAIM:
            for msg in batch:
                owner = msg._client
                reply = msg._raw_reply or msg._reply_bytes()
                if owner is None or not reply.startswith(_ACK_PREFIX_BYTES):
                    raise NotJetStreamMsgError(f"not a JetStream message (reply {msg.reply!r})")
                if msg._ackd:
                    raise MsgAlreadyAckedError(f"message {msg.reply!r} was already acknowledged")
                msg._ackd = True  # a second sight of the same message in msgs is caught above
                marked.append(msg)
                if client is None:
                    client = owner
                if owner is client:
                    replies.append(reply)
                    continue
                if others is None:
                    others = {}
                group = others.get(id(owner))
                if group is None:
                    others[id(owner)] = (owner, [reply])
                else:
                    group[1].append(reply)
        if client is None:
            return
        for owner, group_replies in [(client, replies), *(others or {}).values()]:
            owner.send_acks(
                b"PUB " + _ACK_SEPARATOR.join(group_replies) + _ACK_TAIL, len(group_replies), wait
            )
            sent.add(id(owner))
    except BaseException:  # a refused check or write sent nothing: those are not acked
        for msg in marked:
            if id(msg._client) not in sent:
                msg._ackd = False
        raise


class Msg:
    """A message received from the server.

    Subject and reply of a message the client received are decoded from the
    bytes received when they are first read (and kept).

    Attributes:
        data: the payload.
        sid: the id of the subscription that received it.
    """

    __slots__ = (
        "_subject",
        "_reply",
        "_raw_subject",
        "_raw_reply",
        "data",
        "sid",
        "_raw_headers",
        "_parsed",
        "_client",
        "_ackd",
    )

    def __init__(
        self,
        subject: str,
        reply: str,
        data: bytes,
        raw_headers: bytes | None = None,
        client: AckSender | None = None,
        sid: int = 0,
    ) -> None:
        # None in a message made by received() until the field is first read.
        self._subject: str | None = subject
        self._reply: str | None = reply
        # The bytes received (received()); b"": encode the str when needed.
        self._raw_subject = b""
        self._raw_reply = b""
        self.data = data
        self.sid = sid
        self._raw_headers = raw_headers
        self._parsed: tuple[int | None, str, Headers] | None = None
        self._client = client
        self._ackd = False

    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[Any, ...]:
        if self._client is not None:
            raise TypeError(
                "a received Msg cannot be pickled: it holds the client it acks and replies "
                "through, which stays in this process: pickle the parts you need "
                "(msg.subject, msg.data, dict(msg.headers), msg.metadata)"
            )
        return super().__reduce_ex__(protocol)

    def __copy__(self) -> Msg:
        clone = _new(Msg)
        for name in Msg.__slots__:
            setattr(clone, name, getattr(self, name))
        return clone

    @property
    def subject(self) -> str:
        """The subject it was published to."""
        subject = self._subject
        if subject is None:
            # Any client may publish subjects that are not UTF-8 (the server allows
            # every byte but space and control characters): surrogateescape keeps
            # them, and encoding back gives the bytes.
            subject = self._subject = str(self._raw_subject, "utf-8", "surrogateescape")
        return subject

    @subject.setter
    def subject(self, value: str) -> None:
        self._subject, self._raw_subject = value, b""

    @property
    def reply(self) -> str:
        """The reply subject, or ``""`` when there is none."""
        reply = self._reply
        if reply is None:
            reply = self._reply = str(self._raw_reply, "utf-8", "surrogateescape")
        return reply

    @reply.setter
    def reply(self, value: str) -> None:
        self._reply, self._raw_reply = value, b""

    def _reply_bytes(self) -> bytes:
        """The reply subject as received (not decoded when it was not read yet)."""
        return self._raw_reply or self.reply.encode("utf-8", "surrogateescape")

    def _parse_headers(self) -> tuple[int | None, str, Headers]:
        parsed = self._parsed
        if parsed is None:
            if self._raw_headers is None:
                parsed = (None, "", _NO_HEADERS)
            else:
                status, description, pairs = _protocol.parse_headers(self._raw_headers)
                parsed = (status, description, Headers.from_pairs(pairs))
            self._parsed = parsed
        return parsed

    @property
    def headers(self) -> Headers:
        """The message headers (empty when it had none)."""
        return self._parse_headers()[2]

    @property
    def is_status(self) -> bool:
        """True for a status message (``NATS/1.0 <code>``: 100, 404, 408, 409, 503...).

        Cheap: nothing is parsed. A message without headers, or with headers
        but no status code, is not one.
        """
        raw = self._raw_headers
        return raw is not None and raw[:9] in STATUS_OPENINGS

    @property
    def header_size(self) -> int:
        """Bytes of the header block as received (0 when the message has none).

        With the subject, reply and payload lengths, what the server counts
        against a pull request's ``max_bytes``.
        """
        raw = self._raw_headers
        return 0 if raw is None else len(raw)

    @property
    def status(self) -> int | None:
        """The status code of a status message (e.g. 503, 408), else ``None``."""
        raw = self._raw_headers
        # "NATS/1.0\r\n" has no status; only parse when a code follows the version.
        if raw is None or raw[:9] not in STATUS_OPENINGS:
            return None
        return self._parse_headers()[0]

    @property
    def description(self) -> str:
        """The text after a status code (e.g. ``"Request Timeout"``), else ``""``."""
        return self._parse_headers()[1] if self.status is not None else ""

    def respond(
        self, data: bytes | str = b"", headers: Mapping[str, str | Sequence[str]] | None = None
    ) -> None:
        """Publish ``data`` to this message's reply subject.

        Raises:
            NatsError: the message has no reply subject or no client.
        """
        if not self.reply or self._client is None:
            raise NatsError("message has no reply subject to respond to")
        self._client.send_reply(self.reply, data, headers)

    # ------------------------------------------------------------------ JetStream

    @property
    def metadata(self) -> MsgMetadata:
        """What the ack subject says: stream, consumer, sequences, deliveries, time.

        Both ack-subject layouts are understood (v1 with 9 tokens; v2 with a
        domain and an account hash, 11 tokens or more).

        Raises:
            NotJetStreamMsgError: the message did not come from a JetStream consumer.
        """
        return parse_metadata(self.reply)

    @property
    def is_acked(self) -> bool:
        """True once :meth:`ack`, :meth:`nak` or :meth:`term` was sent (or is being sent).

        One of them that fails having sent nothing sets it back to False.
        """
        return self._ackd

    def _claim(self) -> None:
        """Mark the message acknowledged, unless it was (one step for racing threads).

        Raises:
            MsgAlreadyAckedError: it was already acked, nak'ed or terminated.
        """
        with _CLAIM:
            if self._ackd:
                raise MsgAlreadyAckedError(f"message {self.reply!r} was already acknowledged")
            self._ackd = True

    def _send_ack(self, body: bytes, final: bool, timeout: float | None) -> None:
        wait = check_timeout("timeout", timeout, D.JS_TIMEOUT)
        reply = self.reply
        if not reply.startswith(_ACK_PREFIX) or self._client is None:
            raise NotJetStreamMsgError(f"not a JetStream message (reply {reply!r})")
        if not final:
            self._client.send_reply(reply, body, ack=True, timeout=wait)
            return
        self._claim()
        try:
            self._client.send_reply(reply, body, ack=True, timeout=wait)
        except BaseException:  # a send that raised sent nothing
            self._ackd = False
            raise

    def ack(self, timeout: float | None = None) -> None:
        """Acknowledge the message (fire and forget; returns once buffered).

        To acknowledge many messages at once, :func:`ack_batch` is cheaper.

        Args:
            timeout: seconds to wait for room in the write buffer (default 5):
                it blocks only while more than 32 MiB wait for a server that
                reads nothing.

        Raises:
            WriteBufferTimeoutError: (a ``TimeoutError``) no room in time: the
                ack was not sent, the message is not acknowledged, and the
                server redelivers it after ``ack_wait`` unless it is acked again.
            MsgAlreadyAckedError: the message was already acked, nak'ed or terminated.
            NotJetStreamMsgError: the message did not come from a JetStream consumer.
            ConnectionClosedError: the client is closed.
        """
        # The hot path of every consumer: the frame is made of the reply as
        # received (never decoded), and written as it is.
        client = self._client
        reply = self._raw_reply or self._reply_bytes()
        if client is None or not reply.startswith(_ACK_PREFIX_BYTES) or timeout is not None:
            self._send_ack(_ACK, True, timeout)  # checks the timeout, raises what applies
            return
        with _CLAIM:  # self._claim() inline: the hot path of every consumer
            if self._ackd:
                raise MsgAlreadyAckedError(f"message {self.reply!r} was already acknowledged")
            self._ackd = True
        try:
            client.send_acks(_ACK_FRAME % reply, 1, D.JS_TIMEOUT)
        except BaseException:  # a send that raised sent nothing
            self._ackd = False
            raise

    def ack_sync(self, timeout: float | None = None) -> None:
        """Acknowledge and block until the server confirms it (a "double ack").

        Args:
            timeout: seconds to wait for the confirmation (default 5).

        Raises:
            TimeoutError: no confirmation in time; the ack may still have
                been applied (the message then counts as acknowledged here).
            WriteBufferTimeoutError: (a ``TimeoutError``) no room to send the ack
                in time (a server that reads nothing): it was not sent, the
                message is not acknowledged and ``ack_sync`` may be called again.
            NoRespondersError: nobody received the ack (the consumer has no
                leader, e.g. during an election, or it was deleted); the
                message is not acknowledged and ``ack_sync`` may be called again.
            MsgAlreadyAckedError: the message was already acked, nak'ed or terminated.
            NotJetStreamMsgError: the message did not come from a JetStream consumer.

        After any failure but a ``TimeoutError`` that may have reached the server
        the message is not counted as acknowledged here, and ``ack_sync`` may be
        called again.
        """
        reply = self.reply
        if not reply.startswith(_ACK_PREFIX) or self._client is None:
            raise NotJetStreamMsgError(f"not a JetStream message (reply {reply!r})")
        self._claim()
        try:
            self._client.request(reply, _ACK, timeout=D.JS_TIMEOUT if timeout is None else timeout)
        except WriteBufferTimeoutError:
            self._ackd = False  # never sent: the ack may be sent again
            raise
        except builtins.TimeoutError:
            raise  # the ack may have been applied: it stays counted
        except BaseException:
            # Nobody got it (the server's 503: no consumer leader), or it was never
            # sent (client closed, bad timeout): the ack may be sent again.
            self._ackd = False
            raise

    double_ack = ack_sync

    def nak(self, delay: float | None = None, timeout: float | None = None) -> None:
        """Negatively acknowledge: ask for redelivery, at once or after ``delay`` seconds.

        A ``delay`` of zero or less redelivers at once, like no delay (as in nats.go).
        ``timeout`` is as in :meth:`ack`.

        Raises:
            WriteBufferTimeoutError: no room to send it in time (see :meth:`ack`).
            MsgAlreadyAckedError: the message was already acked, nak'ed or terminated.
            NotJetStreamMsgError: the message did not come from a JetStream consumer.
            ValueError: ``delay`` is NaN, infinite or past about 292 years (what
                the wire's int64 nanoseconds hold); nothing was sent.
        """
        self._send_ack(_NAK if delay is None else nak_body(delay), True, timeout)

    def in_progress(self, timeout: float | None = None) -> None:
        """Tell the server the message is still being worked on (resets its ack wait).

        May be sent any number of times before the final ack. ``timeout`` is as in
        :meth:`ack`.

        Raises:
            WriteBufferTimeoutError: no room to send it in time (see :meth:`ack`).
            MsgAlreadyAckedError: the message was already acked, nak'ed or terminated.
            NotJetStreamMsgError: the message did not come from a JetStream consumer.
        """
        if self._ackd:
            raise MsgAlreadyAckedError(f"message {self.reply!r} was already acknowledged")
        self._send_ack(_WPI, False, timeout)

    def term(self, reason: str | None = None, timeout: float | None = None) -> None:
        """Tell the server never to redeliver the message (``reason`` goes to the advisory).

        ``timeout`` is as in :meth:`ack`.

        Raises:
            WriteBufferTimeoutError: no room to send it in time (see :meth:`ack`).
            MsgAlreadyAckedError: the message was already acked, nak'ed or terminated.
            NotJetStreamMsgError: the message did not come from a JetStream consumer.
            TypeError: ``reason`` is not a str.
            MaxPayloadError: ``reason`` is longer than the server's ``max_payload``
                allows; nothing was sent.
        """
        self._send_ack(term_body(reason), True, timeout)

    def __repr__(self) -> str:
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={self.data[:32]!r}>"

    @property
    def scheduled_by(self) -> str | None:
        """The schedule subject that produced this message (``Nats-Scheduler``), or None."""
        return self.headers.get("Nats-Scheduler")

    @property
    def schedule_next(self) -> datetime | None:
        """When its schedule runs next (``Nats-Schedule-Next``), or None.

        None too when the schedule will not run again (the server's ``purge`` marker
        after an ``@at`` schedule fired).
        """
        from ._timefmt import parse_rfc3339

        text = self.headers.get("Nats-Schedule-Next")
        if not text:
            return None
        try:
            return parse_rfc3339(text)
        except ValueError:
            return None
