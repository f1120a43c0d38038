"""Continuous pulling for ``messages`` and ``consume`` (the ordered consumer builds on it).

A :class:`MessageIterator` keeps one inbox for its life, keeps requests
outstanding up to its limits, and counts what is pending on the server with
``Nats-Pending-Messages`` / ``Nats-Pending-Bytes``. The statuses it sorts
are those of ``_pull.py``. It knows no recovery policy beyond pulling again:
missed heartbeats and no responders are reported to ``on_warning`` (the
ordered consumer, in ``ordered.py``, recreates its consumer on them), a
deleted consumer ends it with :class:`ConsumerDeletedError`, a pull the
server refuses by permission with :class:`PermissionViolationError`, an inbox
it refuses at the subscription limit with :class:`MaxSubscriptionsExceededError`.
"""

from __future__ import annotations

import abc
import threading
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING, Self

from .. import _defaults as D
from .._deadline import Deadline, check_timeout
from .._log import logger
from ..errors import (
    ConnectionClosedError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    IteratorClosedError,
    LeadershipChangedError,
    MaxSubscriptionsExceededError,
    NatsError,
    NoHeartbeatError,
    NoRespondersError,
    PermissionViolationError,
    PinIdMismatchError,
    PullStatusError,
    ServerShutdownError,
    StreamNotFoundError,
    TimeoutError,
)
from ..msg import Msg, first_status, pull_size
from ._pull import (
    DONE,
    HEARTBEAT,
    NO_LIMITS,
    NO_RESPONDERS,
    TERMINAL,
    Priority,
    Refusal,
    RequestLimits,
    check_heartbeat,
    check_size,
    classify,
    refused_limit,
    request_fields,
)

if TYPE_CHECKING:
    from ..client import Client
    from ..subscription import Subscription

log = logger("jetstream")

PENDING_MSGS = "Nats-Pending-Messages"
PENDING_BYTES = "Nats-Pending-Bytes"

# The largest batch of a bytes-limited request (as nats.go).
BYTES_BATCH = 1_000_000
# Waits after a refused or unanswered pull before the next one.
RETRY_WAIT = 0.5


def pending_of(msg: Msg) -> tuple[int, int]:
    """The (messages, bytes) a status says are no longer pending for its request."""
    h = msg.headers
    try:
        return int(h.get(PENDING_MSGS, 0)), int(h.get(PENDING_BYTES, 0))
    except ValueError:
        return 0, 0


def check_limits(
    max_messages: int,
    max_bytes: int | None,
    expires: float,
    heartbeat: float | None,
    limits: RequestLimits = NO_LIMITS,
) -> tuple[int, int | None, float, float]:
    """Check the limits of continuous pulling; return (batch, max_bytes, expires, heartbeat).

    The batch, ``max_bytes`` and ``expires`` returned keep within the consumer's
    ``limits``, so the server does not refuse every pull.

    Raises:
        ValueError: a limit out of range (``expires`` under 1 s, ``heartbeat`` over
            half of ``expires``...).
        TypeError: ``max_messages`` is not an int.
    """
    if max_bytes is not None:
        check_size("max_bytes", max_bytes)
        batch = BYTES_BATCH
        if limits.bytes:
            max_bytes = min(max_bytes, limits.bytes)
    else:
        if isinstance(max_messages, bool) or not isinstance(max_messages, int):
            raise TypeError("max_messages must be an int")
        if max_messages < 1:
            raise ValueError("max_messages must be at least 1")
        batch = check_size("max_messages", max_messages)
    expires = check_timeout("expires", expires)
    if expires < 1.0:
        raise ValueError("expires must be at least 1 second")
    if heartbeat is None:
        heartbeat = min(expires / 2, D.MESSAGES_MAX_HEARTBEAT)
    heartbeat = check_heartbeat(heartbeat, expires)
    if limits.expires and limits.expires < expires:
        expires = limits.expires
        heartbeat = min(heartbeat, expires / 2)  # type: ignore[type-var]
    return limits.cap_batch(batch), max_bytes, expires, heartbeat  # type: ignore[return-value]


class BaseMessageIterator(abc.ABC):
    """``for msg in it`` and ``with it:`` on top of a subclass's ``next()`` and ``stop()``.

    The abstract base of :class:`MessageIterator` and the ordered consumer's
    iterator, which the consume loop takes alike. Iteration ends
    (``StopIteration``) when ``next()`` raises :class:`IteratorClosedError`;
    leaving the ``with`` block calls ``stop()``.
    """

    @abc.abstractmethod
    def next(self, timeout: float | None = None) -> Msg:
        """Block until the next message and return it."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop iterating; ``next()`` raises :class:`IteratorClosedError` afterwards."""

    _one: deque[Msg] | None = None  # next_buffered's deque, made on first use

    def next_buffered(self) -> deque[Msg]:
        """Block like ``next()``; return the messages to take next, in order.

        For the consume loop: it takes them with ``popleft()`` until the
        deque is empty, then calls again. Here one message, in a deque kept
        for the purpose; the plain iterator hands out its own buffer, which
        :meth:`stop` empties (so a stop discards what was not taken, as with
        ``next()``).
        """
        msg = self.next()
        one = self._one
        if one is None:
            one = self._one = deque()
        one.append(msg)
        return one

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Msg:
        try:
            return self.next()
        except IteratorClosedError:
            raise StopIteration from None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MessageIterator(BaseMessageIterator):
    """Continuous pulling with a pre-fetched buffer; made by ``Consumer.messages()``.

    Iterate it (blocks until a message arrives) or call :meth:`next`. It keeps
    up to ``max_messages`` (or ``max_bytes``) requested from the server and
    asks for more whenever what is pending falls to the threshold. It
    survives reconnects, server restarts and missed heartbeats by pulling
    again; it ends (raising :class:`ConsumerDeletedError`) when the consumer
    is deleted. Not meant to be shared by several threads at once.

    ``on_warning`` hears, on the thread calling :meth:`next`, what it
    recovered from: :class:`NoHeartbeatError` (two heartbeats missed),
    :class:`NoRespondersError` (nobody served a pull), refused pulls and
    pin losses. ``exists`` tells a consumer that is gone (no responders)
    from one briefly unreachable. ``limits`` are the consumer's own limits on
    a request: each pull keeps within them (see :func:`check_limits`). When the
    server refuses a pull past one of them (they were changed since), ``refresh``
    gives the consumer's limits now (None: unknown); if they changed, the next
    pull goes out at once, within them (the refusal is still a warning).
    """

    def __init__(
        self,
        client: Client,
        next_subject: str,
        *,
        max_messages: int = D.MESSAGES_MAX,
        max_bytes: int | None = None,
        expires: float = D.MESSAGES_EXPIRES,
        heartbeat: float | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        priority: Priority | None = None,
        on_warning: Callable[[BaseException], object] | None = None,
        exists: Callable[[], bool | None] | None = None,
        limits: RequestLimits = NO_LIMITS,
        refresh: Callable[[], RequestLimits | None] | None = None,
    ) -> None:
        self._asked = (max_messages, max_bytes, expires, heartbeat)
        self._thresholds = (threshold_messages, threshold_bytes)
        self._lock = threading.Lock()
        self._size(limits)
        self._refresh = refresh
        self._client = client
        self._next_subject = next_subject
        self._priority = priority
        self._track = priority is not None and priority.group is not None
        self._group = priority.group if priority is not None else None
        self._sent_pin: str | None = None  # the pin id of the latest request
        self._on_warning = on_warning
        self._exists = exists
        self._pending_msgs = 0
        self._pending_bytes = 0
        self._retry_at = 0.0
        self._activity = monotonic()
        self._reconnected = False
        self._buf: deque[Msg] = deque()
        self._error: BaseException | None = None
        self._stopped = False
        self._discard = False
        self._inbox = client.new_inbox()
        # Listening before the SUB goes out: its refusal may be read before subscribe returns.
        self._refusal = Refusal(next_subject, self._inbox)
        client.add_refusal_listener(self._refusal)
        try:
            # Checked: at the subscription limit the refused inbox fails the iterator.
            self._sub: Subscription = client.subscribe(self._inbox, checked=True)
        except BaseException:
            client.remove_refusal_listener(self._refusal)
            raise
        self._refusal.watch(self._sub)
        self._check_usable = self._sub.check_usable
        self._listener = self._on_status  # one bound method, so it can be removed
        client.add_status_listener(self._listener)
        try:
            self._pull(Deadline(RETRY_WAIT))
        except TimeoutError:  # no room in the write buffer (a stalled server): next() pulls
            self._reset_pending()
        except BaseException:
            self._close_sub(drain=False)
            raise

    # -- pulling ------------------------------------------------------------------

    def _size(self, limits: RequestLimits) -> None:
        """Size the pulls: what the caller asked for, within the consumer's ``limits``.

        Raises:
            ValueError, TypeError: what the caller asked for is out of range.
        """
        batch, max_bytes, expires, heartbeat = check_limits(*self._asked, limits)
        threshold_msgs, threshold_bytes = self._thresholds
        with self._lock:
            self._limits = limits
            self._batch = batch
            self._max_bytes = max_bytes
            self._expires = expires
            self._heartbeat = heartbeat
            self._threshold_msgs = threshold_msgs if threshold_msgs is not None else batch // 2
            self._threshold_bytes = (
                threshold_bytes if threshold_bytes is not None else (max_bytes or 0) // 2
            )

    def _resized(self, error: BaseException | None) -> bool:
        """After a refused pull: whether the consumer's limits changed (the pulls now
        keep within the new ones)."""
        if self._refresh is None or refused_limit(error) is None:
            return False
        limits = self._refresh()
        if limits is None or limits == self._limits:
            return False
        self._size(limits)
        return True

    def _pull(self, deadline: Deadline | None = None) -> None:
        """Ask for what is missing up to the limits (consumer thread or events thread).

        The request waits for room in the write buffer until ``deadline`` at most.

        Raises:
            TimeoutError: no room before ``deadline``; nothing was sent.
        """
        with self._lock:
            if self._max_bytes is not None:
                want_bytes = self._max_bytes - self._pending_bytes
                if want_bytes <= 0:
                    return
                body, self._sent_pin = request_fields(
                    self._batch, self._expires, want_bytes, self._heartbeat, False, self._priority
                )
                self._pending_msgs = self._batch
                self._pending_bytes = self._max_bytes
            else:
                want = self._batch - self._pending_msgs
                if want <= 0:
                    return
                body, self._sent_pin = request_fields(
                    want, self._expires, None, self._heartbeat, False, self._priority
                )
                self._pending_msgs = self._batch
            self._activity = monotonic()
        timeout = None if deadline is None else max(deadline.remaining(), 0.001)
        self._client.publish(self._next_subject, body, reply=self._inbox, timeout=timeout)

    def _needs_pull(self) -> bool:
        if self._max_bytes is not None:
            return self._pending_bytes <= self._threshold_bytes
        return self._pending_msgs <= self._threshold_msgs

    def _reset_pending(self, retry_wait: float = 0.0) -> None:
        with self._lock:
            self._pending_msgs = 0
            self._pending_bytes = 0
            if retry_wait:
                self._retry_at = monotonic() + retry_wait

    def pull_after(self, pause: float) -> None:
        """Send the next pull ``pause`` seconds from now, instead of after the pause a
        warning set (for the warning handler: the ordered consumer's sooner retries)."""
        with self._lock:
            self._retry_at = monotonic() + pause

    def _on_status(self, status: str) -> None:
        """Client status listener (events thread): wake the reader of the inbox."""
        if status == "reconnected" and not self._stopped:
            self._reconnected = True
            self._sub.interrupt()

    def _warn(self, error: BaseException) -> None:
        if self._on_warning is not None:
            self._on_warning(error)
        else:
            log.warning("pull consumer recovered: %s", error)

    # -- taking messages ----------------------------------------------------------

    def next(self, timeout: float | None = None) -> Msg:
        """Block until the next message and return it.

        Args:
            timeout: seconds to wait; ``None`` waits until a message comes or
                the iterator ends.

        Raises:
            TimeoutError: nothing arrived within ``timeout``.
            ConsumerDeletedError: the consumer was deleted (the iterator is closed).
            ConsumerPushBasedError, PullBadRequestError: the server refused
                the requests for good (the iterator is closed).
            PermissionViolationError: the user may not publish the pull requests
                or subscribe to their inbox (the iterator is closed).
            MaxSubscriptionsExceededError: the server refused the inbox's
                subscription at the connection's subscription limit (the iterator
                is closed).
            IteratorClosedError: :meth:`stop` was called.
            ConnectionClosedError: the client was closed.
            ForkedClientError: called in a process forked after the iterator was made.
        """
        deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        self._check_usable()
        buf = self._buf
        while True:
            if buf:
                return buf.popleft()
            if self._error is not None:
                raise self._error
            self._fill(deadline)

    def buffered(self) -> deque[Msg]:
        """The messages received and not taken yet: the buffer itself, as it is (never waits).

        Who takes from it takes them in order with ``popleft()``, as :meth:`next` would.
        """
        return self._buf

    def next_buffered(self) -> deque[Msg]:
        """Block until a message is buffered; return the buffer itself (see the base class).

        Raises:
            As :meth:`next` without a timeout.
        """
        self._check_usable()
        buf = self._buf
        while not buf:
            if self._error is not None:
                raise self._error
            self._fill(None)
        return buf

    def _fill(self, deadline: Deadline | None) -> None:
        """Wait for the next batch from the inbox and sort it into the buffer."""
        if self._reconnected:
            self._reconnected = False
            self._reset_pending()
        now = monotonic()
        if not self._stopped and self._needs_pull() and now >= self._retry_at:
            # Waiting for room in the write buffer in slices keeps stop() prompt.
            room = Deadline(RETRY_WAIT)
            if deadline is not None and deadline.end < room.end:
                room = deadline
            try:
                self._pull(room)
            except ConnectionClosedError as exc:
                self._fail(exc)
                return
            except TimeoutError:  # no room to send it yet: pull again after a pause
                self._reset_pending(RETRY_WAIT)
            except NatsError as exc:  # e.g. the reconnect buffer is full
                self._warn(exc)
                self._reset_pending(RETRY_WAIT)
        wait = self._wait_deadline(deadline)
        try:
            got = self._sub.next_msgs(self._batch, None, deadline=wait)
        except TimeoutError:
            if deadline is not None and wait is deadline:
                raise TimeoutError("no message within the timeout") from None
            self._check_alive()
            return
        except (
            ConnectionClosedError,
            MaxSubscriptionsExceededError,
            PermissionViolationError,
        ) as exc:
            self._fail(exc)  # the client closed, or the server refused the inbox
            return
        if not got:
            refused = self._refusal.error
            if refused is not None:  # a pull or the inbox refused: so will every later one
                self._fail(refused)
                return
            if self._sub.is_active:  # interrupted: a reconnect to handle
                return
            self._fail(IteratorClosedError("the message iterator was stopped"))
            return
        self._activity = monotonic()
        self._sort(got)

    def _wait_deadline(self, deadline: Deadline | None) -> Deadline | None:
        """The earlier of the caller's deadline and the next housekeeping time."""
        if self._stopped:
            return deadline
        now = monotonic()
        wake = self._activity + 2 * self._heartbeat
        if self._needs_pull() and self._retry_at > now:
            wake = min(wake, self._retry_at)
        if deadline is not None and deadline.end <= wake:
            return deadline
        d = Deadline(0)
        d.end = wake
        return d

    def _check_alive(self) -> None:
        """Housekeeping after a wait ran out: retry a pull or notice missed heartbeats."""
        if self._stopped:
            return
        now = monotonic()
        if now - self._activity >= 2 * self._heartbeat:
            # Restart the clock: while a retry pause holds the next pull back
            # (e.g. after a slow check of a 503), an expired clock would make
            # every wait end at once and repeat this warning in a busy loop.
            self._activity = now
            self._warn(NoHeartbeatError("missed two idle heartbeats; pulling again"))
            self._reset_pending()

    def _sort(self, got: list[Msg]) -> None:
        buf = self._buf
        taken_msgs = 0
        taken_bytes = 0
        bytes_mode = self._max_bytes is not None
        i, n = 0, len(got)
        while i < n:
            j = first_status(got, i)
            if j > i:  # user messages up to the next status
                user = got[i:j] if i or j < n else got
                buf.extend(user)
                taken_msgs += len(user)
                if bytes_mode:
                    taken_bytes += sum(map(pull_size, user))
                if self._track:
                    for msg in user:
                        self._priority.track(msg)  # type: ignore[union-attr]
            if j < n:
                self._status(got[j])
            i = j + 1
        if self._discard:  # stop() was called meanwhile (e.g. by a warning handler)
            buf.clear()
        if taken_msgs:
            with self._lock:
                self._pending_msgs = max(self._pending_msgs - taken_msgs, 0)
                if self._max_bytes is not None:
                    self._pending_bytes = max(self._pending_bytes - taken_bytes, 0)

    def _status(self, msg: Msg) -> None:
        kind, error = classify(msg, self._group)
        if kind == HEARTBEAT:
            return
        if kind == DONE or isinstance(error, ServerShutdownError):
            n, b = pending_of(msg)
            with self._lock:
                self._pending_msgs = max(self._pending_msgs - n, 0)
                if self._max_bytes is not None:
                    self._pending_bytes = max(self._pending_bytes - b, 0)
            if error is not None:
                self._warn(error)
            elif self._max_bytes is not None and b >= self._max_bytes:
                if "maxbytes" in msg.description.lower():
                    self._too_big(msg)
            return
        if kind == TERMINAL:
            self._fail(error)  # type: ignore[arg-type]
            return
        if kind == NO_RESPONDERS:
            if self._exists is not None and self._exists() is False:
                self._fail(ConsumerDeletedError("the consumer no longer exists"))
                return
            self._reset_pending(RETRY_WAIT)
            self._warn(
                NoRespondersError(
                    f"no responders for the pull request on {self._next_subject!r}; pulling again",
                    self._next_subject,
                )
            )
            return
        # warnings
        if isinstance(error, PinIdMismatchError):
            # ADR-42: forget the pin and keep pulling without it (a candidate
            # for the next pin). A pin won since that request was sent stays.
            self._priority.pin.clear(self._sent_pin)  # type: ignore[union-attr]
            self._reset_pending()
        elif isinstance(error, LeadershipChangedError):
            self._reset_pending()
        elif self._resized(error):  # a stale config: pull again at once, within the limits
            self._reset_pending()
        else:  # the request was refused: do not hammer the server
            self._reset_pending(RETRY_WAIT)
        self._warn(error)  # type: ignore[arg-type]

    def _too_big(self, msg: Msg) -> None:
        """A request of the whole ``max_bytes`` got nothing: the next message is larger.

        Every request would be refused the same way ("409 Message Size Exceeds
        MaxBytes"), so say so and pull again only after a pause, not in a hot loop
        (the message may be acked or removed by someone else meanwhile).
        """
        with self._lock:
            self._retry_at = monotonic() + RETRY_WAIT
        self._warn(PullStatusError(409, msg.description))

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._close_sub(drain=False)

    # -- ending -------------------------------------------------------------------

    def _close_sub(self, drain: bool) -> None:
        self._stopped = True
        self._client.remove_status_listener(self._listener)
        self._client.remove_refusal_listener(self._refusal)
        sub = self._sub
        if not sub.is_active or self._client.is_closed:
            return
        try:
            if drain:
                sub.drain()
            else:
                sub.unsubscribe()
        except (ConnectionClosedError, TimeoutError):
            pass  # the subscription has ended locally all the same

    def stop(self) -> None:
        """Stop pulling and discard what is buffered; iteration ends. Safe from any thread.

        Raises:
            ForkedClientError: called in a process forked after the iterator was made.
        """
        self._sub.check_usable()
        self._discard = True
        self._close_sub(drain=False)
        self._buf.clear()

    def drain(self) -> None:
        """Stop pulling; what was already received is still delivered, then iteration ends.

        Raises:
            ForkedClientError: called in a process forked after the iterator was made.
        """
        self._sub.check_usable()
        self._close_sub(drain=True)

    def check_usable(self) -> None:
        """Raise when this process may not use the iterator.

        Raises:
            ForkedClientError: this is a child process forked after the iterator was made.
        """
        self._sub.check_usable()

    @property
    def closed(self) -> bool:
        """True once stopped, drained, or ended by an error."""
        return self._stopped


def consumer_exists(check: Callable[[], object]) -> Callable[[], bool | None]:
    """Wrap an info call: False when the consumer is gone, None when unknown.

    A consumer whose stream was deleted went with it: the info call's
    ``StreamNotFoundError`` counts as gone.
    """

    def exists() -> bool | None:
        try:
            check()
        except (ConsumerNotFoundError, StreamNotFoundError):
            return False
        except NatsError:
            return None
        return True

    return exists
