"""JetStream publishing: blocking publish, async publish with a bounded ack window."""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import _protocol
from .._deadline import Deadline, check_timeout
from ..errors import (
    ConnectionClosedError,
    ConnectionLostError,
    NatsError,
    NoRespondersError,
    TimeoutError,
    TooManyPendingAcksError,
    api_error,
)
from ..headers import Headers, header_pairs
from .info import PubAck

if TYPE_CHECKING:
    from ..client import Client
    from ..msg import Msg

HeadersIn = Mapping[str, str | Sequence[str]]

MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
MSG_TTL = "Nats-TTL"

RETRY_WAIT = 0.25


def ttl_header_value(ttl: float | str) -> str:
    """The ``Nats-TTL`` value for a TTL in seconds (``"never"`` passes through).

    Raises:
        ValueError: the TTL is not at least one second (the server's minimum).
    """
    if ttl == "never":
        return "never"
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or math.isnan(ttl):
        raise ValueError(f"ttl must be a number of seconds or 'never', got {ttl!r}")
    if ttl < 1:
        raise ValueError(f"ttl must be at least 1 second, got {ttl!r}")
    if float(ttl).is_integer():
        return f"{int(ttl)}s"
    return f"{round(ttl * 1000)}ms"


def publish_headers(
    headers: HeadersIn | None,
    msg_id: str | None = None,
    expected_stream: str | None = None,
    expected_last_seq: int | None = None,
    expected_last_subject_seq: int | None = None,
    expected_last_msg_id: str | None = None,
    ttl: float | str | None = None,
) -> Headers | None:
    """The headers of a JetStream publish, or None when there are none."""
    pairs = header_pairs(headers) if headers else []
    if msg_id is not None:
        pairs.append((MSG_ID, str(msg_id)))
    if expected_stream is not None:
        pairs.append((EXPECTED_STREAM, expected_stream))
    if expected_last_seq is not None:
        pairs.append((EXPECTED_LAST_SEQ, str(int(expected_last_seq))))
    if expected_last_subject_seq is not None:
        pairs.append((EXPECTED_LAST_SUBJECT_SEQ, str(int(expected_last_subject_seq))))
    if expected_last_msg_id is not None:
        pairs.append((EXPECTED_LAST_MSG_ID, expected_last_msg_id))
    if ttl is not None:
        pairs.append((MSG_TTL, ttl_header_value(ttl)))
    return Headers.from_pairs(pairs) if pairs else None


class _AckPrefixes:
    """Recognises the server's usual PubAck quickly.

    A stream answers every stored message with the same prefix
    (``{"stream":"S","seq":`` or with a domain) then the sequence and ``}``.
    The first ack of each prefix is checked by the protocol core's parser;
    afterwards a match on the prefix is enough.
    """

    _MAX = 256

    def __init__(self) -> None:
        self._known: dict[bytes, tuple[str, str | None]] = {}

    def parse(self, data: bytes) -> tuple[str, int, bool, str | None] | None:
        """``(stream, seq, duplicate, domain)``, or None when the body needs full JSON."""
        cut = data.rfind(b":") + 1
        digits = data[cut:-1]
        if cut and data[-1:] == b"}" and digits.isdigit():
            known = self._known.get(data[:cut])
            if known is not None:
                return known[0], int(digits), False, known[1]
        if b'"batch"' in data or b'"val"' in data:
            return None  # batch acks and counter values need every key
        parsed = _protocol.parse_puback(data)
        if parsed is not None and not parsed[2] and digits.isdigit():
            if len(self._known) >= self._MAX:
                self._known.clear()
            self._known[data[:cut]] = (parsed[0], parsed[3])
        return parsed


_ACK_PREFIXES = _AckPrefixes()


def _fast_ack(msg: Msg) -> tuple[str, int, bool, str | None] | None:
    """The PubAck fields of a plain success reply, or None (status, error, batch...)."""
    if msg._raw_headers is not None:
        return None
    return _ACK_PREFIXES.parse(msg.data)


def _pub_ack(fields: tuple[str, int, bool, str | None]) -> PubAck:
    stream, seq, duplicate, domain = fields
    return PubAck(stream=stream, seq=seq, duplicate=duplicate, domain=domain)


def _pub_ack_from_body(data: bytes) -> PubAck:
    """The ``PubAck`` of a success reply's body (one without an ``error``)."""
    fast = _ACK_PREFIXES.parse(data)
    if fast is not None:
        return _pub_ack(fast)
    return PubAck.from_api(json.loads(data))


def parse_pub_ack(msg: Msg) -> PubAck:
    """Turn a PubAck reply into a :class:`PubAck`, or raise its error.

    The error check comes first: a failed PubAck still carries ``stream`` and
    ``"seq": 0``.

    Raises:
        NoRespondersError: no stream listens on the subject (status 503).
        APIError (a subclass by err_code): the stream refused the message.
    """
    fast = _fast_ack(msg)
    if fast is not None:
        return _pub_ack(fast)
    if msg.status == 503:
        raise NoRespondersError(f"no stream is listening on {msg.subject!r}")
    body: dict[str, Any] = json.loads(msg.data)
    error = body.get("error")
    if error:
        raise api_error(
            int(error.get("code", 0)), int(error.get("err_code", 0)), error.get("description", "")
        )
    return PubAck.from_api(body)


_LAZY = threading.Lock()
_PENDING = concurrent.futures._base.PENDING
_FINISHED = concurrent.futures._base.FINISHED


class PubAckFuture(concurrent.futures.Future):
    """The future of one :meth:`JetStreamContext.publish_async`: a ``PubAck`` or an error.

    A full ``concurrent.futures.Future``. To keep async publishing cheap, its
    condition variable is only made when someone waits on it or adds a
    callback, and a successful reply is only parsed into its ``PubAck`` when
    the result is read (errors are recognised at once and fail the future).

    Attributes:
        subject: where the message was published.
    """

    def __init__(self, subject: str) -> None:  # noqa: D107 - Future.__init__ is replaced
        # Future.__init__ would make a Condition and two lists per message; they
        # are made by _condition on first use instead (every Future method that
        # touches them goes through _condition first).
        self._cond: threading.Condition | None = None
        self._expires = 0.0  # when the ack is overdue (monotonic seconds)
        self._state = _PENDING
        self._result = None
        self._exception = None
        self.subject = subject

    @property
    def _condition(self) -> threading.Condition:
        cond = self._cond
        if cond is None:
            with _LAZY:
                cond = self._cond
                if cond is None:
                    self._waiters = []
                    self._done_callbacks = []
                    cond = self._cond = threading.Condition()
        return cond

    def _complete(self, result=None, error: BaseException | None = None) -> None:
        """Resolve from the ack thread; quiet if the user cancelled first."""
        with _LAZY:
            if self._cond is None:
                # Nobody waits or listens yet (that would have made the condition).
                if self._state == _PENDING:
                    self._result, self._exception = result, error
                    self._state = _FINISHED
                return
        try:
            if error is not None:
                self.set_exception(error)
            else:
                self.set_result(result)
        except concurrent.futures.InvalidStateError:
            pass

    def result(self, timeout: float | None = None) -> PubAck:
        """The ``PubAck``, waiting up to ``timeout`` seconds.

        Raises:
            TimeoutError: not resolved in time (the builtin ``TimeoutError``).
            The publish's error: ``WrongLastSequenceError``, ``NoRespondersError``,
                ``ConnectionLostError``, ``TimeoutError`` (no ack in ``ack_timeout``)...
        """
        value = super().result(timeout)
        if type(value) is bytes:
            value = self._result = _pub_ack_from_body(value)
        return value


class AsyncPublisher:
    """The async-publish machinery of one context.

    One wildcard reply subscription (``<inbox>.*``) receives every ack; each
    message gets a token. The in-flight count lives under one condition, so
    any number of publishing threads together never exceed the window. One
    ack thread takes acks off the subscription in batches and resolves their
    futures; a publisher waiting for room is woken once the window has
    drained to three quarters, not once per ack. Acks not back within
    ``ack_timeout`` fail their futures with :class:`TimeoutError`; when the
    connection drops, every pending future fails with
    :class:`ConnectionLostError` (its ack was addressed to the old
    connection and cannot arrive).
    """

    _ACK_BATCH = 1024

    def __init__(
        self, client: Client, max_inflight: int, backpressure: bool, ack_timeout: float
    ) -> None:
        self._client = client
        self._max_inflight = max_inflight
        self._low_water = max_inflight * 3 // 4
        self._backpressure = backpressure
        self._ack_timeout = ack_timeout
        self._cond = threading.Condition(threading.Lock())
        self._waiting = 0  # threads blocked on the window or on completion
        self._pending: dict[str, PubAckFuture] = {}
        self._tokens = itertools.count(1)
        self._prefix: str | None = None
        self._ack_thread: threading.Thread | None = None
        self._timer: threading.Thread | None = None

    def _ensure_subscription(self) -> str:
        prefix = self._prefix
        if prefix is not None:
            return prefix
        with self._cond:
            if self._prefix is None:
                prefix = self._client.new_inbox() + "."
                sub = self._client.subscribe(prefix + "*")
                self._client.add_status_listener(self._on_status)
                self._ack_thread = threading.Thread(
                    target=self._ack_loop,
                    args=(sub, len(prefix)),
                    name="jetstream_sync-acks",
                    daemon=True,
                )
                self._ack_thread.start()
                self._prefix = prefix
            return self._prefix

    def publish(
        self, subject: str, data: bytes | str, headers: Headers | None, timeout: float
    ) -> PubAckFuture:
        """Register a future, send the message with its reply token, return the future."""
        prefix = self._ensure_subscription()
        future = PubAckFuture(subject)
        with self._cond:
            if len(self._pending) >= self._max_inflight:
                self._wait_for_room(timeout)
            token = str(next(self._tokens))
            future._expires = time.monotonic() + self._ack_timeout
            self._pending[token] = future
            if self._timer is None:
                self._timer = threading.Thread(
                    target=self._expire_loop, name="jetstream_sync-ack-timer", daemon=True
                )
                self._timer.start()
        try:
            self._client.publish(subject, data, reply=prefix + token, headers=headers)
        except BaseException:
            with self._cond:
                self._pending.pop(token, None)
            raise
        return future

    def _wait_for_room(self, timeout: float) -> None:
        """Under the lock: block until the window has room (or raise)."""
        if not self._backpressure:
            raise TooManyPendingAcksError(f"{len(self._pending)} acks pending (max_ack_inflight)")
        deadline = Deadline(timeout)
        self._waiting += 1
        try:
            while len(self._pending) >= self._max_inflight:
                if deadline.expired():
                    raise TimeoutError("timed out waiting for room in the async publish window")
                self._cond.wait(deadline.slice())
        finally:
            self._waiting -= 1

    def _ack_loop(self, sub, prefix_len: int) -> None:
        """The ack thread: resolve futures batch by batch until the subscription ends."""
        while True:
            try:
                msgs = sub.next_msgs(self._ACK_BATCH, timeout=None)
            except NatsError:
                return
            if not msgs:
                return
            settled = []
            with self._cond:
                pending = self._pending
                for msg in msgs:
                    future = pending.pop(msg.subject[prefix_len:], None)
                    if future is not None:  # else a late ack for a timed-out future
                        settled.append((future, msg))
                if self._waiting and len(pending) <= self._low_water:
                    self._cond.notify_all()
            for future, msg in settled:
                data = msg.data
                if msg._raw_headers is None and b'"error"' not in data:
                    future._complete(data)  # a success: parsed when the result is read
                    continue
                try:
                    ack = parse_pub_ack(msg)
                except Exception as exc:
                    future._complete(error=exc)
                else:
                    future._complete(ack)

    def _expire_loop(self) -> None:
        """Fail futures whose ack is overdue; ends when nothing is pending.

        ``_pending`` keeps publish order and every future gets the same
        ``ack_timeout``, so the overdue ones are always at its front.
        """
        while True:
            with self._cond:
                now = time.monotonic()
                next_due = None
                overdue = []
                for token, future in self._pending.items():
                    if future._expires > now:
                        next_due = future._expires
                        break
                    overdue.append(token)
                expired = [self._pending.pop(token) for token in overdue]
                if expired:
                    self._cond.notify_all()
                elif next_due is None:
                    self._timer = None
                    return
                else:
                    self._cond.wait(min(next_due - now, 0.5))
            for future in expired:
                future._complete(
                    error=TimeoutError(
                        f"no PubAck for {future.subject!r} within {self._ack_timeout} s"
                    )
                )

    def _on_status(self, status: str) -> None:
        if status not in ("disconnected", "closed"):
            return
        with self._cond:
            lost, self._pending = list(self._pending.values()), {}
            self._cond.notify_all()
        if status == "closed":
            error: Exception = ConnectionClosedError("client closed before the PubAck arrived")
        else:
            error = ConnectionLostError(
                "connection lost before the PubAck arrived; the message may or may not be "
                "stored (republish with the same msg_id to be sure)"
            )
        for future in lost:
            future._complete(error=error)
        if status == "closed":
            with self._cond:
                timer, ack_thread = self._timer, self._ack_thread
                self._cond.notify_all()
            for thread in (timer, ack_thread):
                if thread is not None:
                    thread.join()

    def pending(self) -> int:
        """Async publishes whose ack has not arrived yet."""
        return len(self._pending)

    def wait_completed(self, timeout: float) -> None:
        """Block until no ack is pending.

        Raises:
            TimeoutError: acks were still pending after ``timeout``.
        """
        deadline = Deadline(check_timeout("timeout", timeout))
        with self._cond:
            self._waiting += 1
            try:
                while self._pending:
                    if deadline.expired():
                        raise TimeoutError(
                            f"{len(self._pending)} acks still pending after {timeout} s"
                        )
                    self._cond.wait(deadline.slice())
            finally:
                self._waiting -= 1
