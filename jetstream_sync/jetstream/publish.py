"""JetStream publishing: blocking publish, async publish with a bounded ack window."""

from __future__ import annotations

import collections
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


def parse_pub_ack(msg: Msg) -> PubAck:
    """Turn a PubAck reply into a :class:`PubAck`, or raise its error.

    The error check comes first: a failed PubAck still carries ``stream`` and
    ``"seq": 0``.

    Raises:
        NoRespondersError: no stream listens on the subject (status 503).
        APIError (a subclass by err_code): the stream refused the message.
    """
    if msg.status == 503:
        raise NoRespondersError(f"no stream is listening on {msg.subject!r}")
    data = msg.data
    # The fast parser keeps stream/seq/duplicate/domain only: batch acks and
    # counter values take the full JSON path.
    fast = None if b'"batch"' in data or b'"val"' in data else _protocol.parse_puback(data)
    if fast is not None:
        stream, seq, duplicate, domain = fast
        return PubAck(stream=stream, seq=seq, duplicate=duplicate, domain=domain)
    body: dict[str, Any] = json.loads(data)
    error = body.get("error")
    if error:
        raise api_error(
            int(error.get("code", 0)), int(error.get("err_code", 0)), error.get("description", "")
        )
    return PubAck.from_api(body)


def _resolve(future: concurrent.futures.Future, result=None, error=None) -> None:
    """Complete ``future`` unless the user already cancelled it."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


class PubAckFuture(concurrent.futures.Future):
    """The future of one :meth:`JetStreamContext.publish_async`: a ``PubAck`` or an error.

    Attributes:
        subject: where the message was published.
    """

    def __init__(self, subject: str) -> None:
        super().__init__()
        self.subject = subject


class AsyncPublisher:
    """The async-publish machinery of one context.

    One wildcard reply subscription (``<inbox>.*``) receives every ack; each
    message gets a token. The in-flight count lives under one condition, so
    any number of publishing threads together never exceed the window.
    Acks not back within ``ack_timeout`` fail their futures with
    :class:`TimeoutError`; when the connection drops, every pending future
    fails with :class:`ConnectionLostError` (its ack was addressed to the old
    connection and cannot arrive).
    """

    def __init__(
        self, client: Client, max_inflight: int, backpressure: bool, ack_timeout: float
    ) -> None:
        self._client = client
        self._max_inflight = max_inflight
        self._backpressure = backpressure
        self._ack_timeout = ack_timeout
        self._cond = threading.Condition(threading.Lock())
        self._pending: dict[str, tuple[PubAckFuture, float]] = {}
        self._expiry: collections.deque[tuple[float, str]] = collections.deque()
        self._tokens = itertools.count(1)
        self._prefix: str | None = None
        self._timer: threading.Thread | None = None

    def _ensure_subscription(self) -> str:
        with self._cond:
            if self._prefix is None:
                prefix = self._client.new_inbox() + "."
                self._client.subscribe(prefix + "*", cb=self._on_ack)
                self._client.add_status_listener(self._on_status)
                self._prefix = prefix
            return self._prefix

    def publish(
        self, subject: str, data: bytes | str, headers: Headers | None, timeout: float
    ) -> PubAckFuture:
        """Register a future, send the message with its reply token, return the future."""
        prefix = self._ensure_subscription()
        future = PubAckFuture(subject)
        deadline = None
        with self._cond:
            while len(self._pending) >= self._max_inflight:
                if not self._backpressure:
                    raise TooManyPendingAcksError(
                        f"{len(self._pending)} acks pending (max_ack_inflight)"
                    )
                if deadline is None:
                    deadline = Deadline(timeout)
                if deadline.expired():
                    raise TimeoutError("timed out waiting for room in the async publish window")
                self._cond.wait(deadline.slice())
            token = str(next(self._tokens))
            expires = time.monotonic() + self._ack_timeout
            self._pending[token] = (future, expires)
            self._expiry.append((expires, token))
            if self._timer is None:
                self._timer = threading.Thread(
                    target=self._expire_loop, name="jetstream_sync-ack-timer", daemon=True
                )
                self._timer.start()
        try:
            self._client.publish(subject, data, reply=prefix + token, headers=headers)
        except BaseException:
            self._settle(token)
            raise
        return future

    def _settle(self, token: str) -> PubAckFuture | None:
        with self._cond:
            entry = self._pending.pop(token, None)
            self._cond.notify_all()
        return entry[0] if entry else None

    def _on_ack(self, msg: Msg) -> None:
        future = self._settle(msg.subject[len(self._prefix) :])
        if future is None:
            return  # a late ack for a future that already timed out
        try:
            ack = parse_pub_ack(msg)
        except Exception as exc:
            _resolve(future, error=exc)
        else:
            _resolve(future, result=ack)

    def _expire_loop(self) -> None:
        """Fail futures whose ack is overdue; ends when nothing is pending."""
        while True:
            expired = []
            with self._cond:
                now = time.monotonic()
                while self._expiry and (
                    self._expiry[0][0] <= now or self._expiry[0][1] not in self._pending
                ):
                    _, token = self._expiry.popleft()
                    entry = self._pending.pop(token, None)
                    if entry is not None:
                        expired.append(entry[0])
                if expired:
                    self._cond.notify_all()
                elif not self._expiry:
                    self._timer = None
                    return
                else:
                    self._cond.wait(min(self._expiry[0][0] - now, 0.5))
            for future in expired:
                _resolve(
                    future,
                    error=TimeoutError(
                        f"no PubAck for {future.subject!r} within {self._ack_timeout} s"
                    ),
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
        for future, _ in lost:
            _resolve(future, error=error)
        if status == "closed":
            with self._cond:
                timer = self._timer
                self._cond.notify_all()
            if timer is not None:
                timer.join()

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
            while self._pending:
                if deadline.expired():
                    raise TimeoutError(f"{len(self._pending)} acks still pending after {timeout} s")
                self._cond.wait(deadline.slice())
