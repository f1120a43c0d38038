"""The ordered consumer: every stream message in order, exactly once, recreating as needed.

nats.go's recipe (``jetstream/ordered.go``): a chain of ephemeral pull
consumers named ``<prefix>_<serial>`` (ack none, memory storage, R1). Each
delivered message is checked: its consumer sequence must be the previous
one plus one, and it must come from the current link. On a gap, missed
heartbeats, ``409 Consumer Deleted``, no responders or a reconnect, the
link is replaced by a new one starting at the last delivered stream
sequence plus one; messages from an old link are dropped. No responders
before a link delivered anything is first retried a few times (see
:meth:`OrderedConsumer._fresh_pause`).

Before anything is delivered, a new link starts where the first one did
(the stream sequence the server placed it at), not at its deliver policy
again: a "new", "last" or "last per subject" policy re-applied after
writes landed would skip them. Every link after the first so delivers all
the stream holds from its start, whatever the deliver policy selected: for
"last per subject", superseded revisions and markers too (repeated history,
never a lost update). :attr:`OrderedConsumer.resumed` tells when that began,
so a reader that needs the policy's selection (a watch's initial values)
can make it itself.

A replaced link is deleted on the server when the next one is made (and on
:meth:`OrderedConsumer.close`), so however many resets happen, one link
exists at a time and none after ``close()``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs

from .. import _defaults as D
from .._ack_subject import ack_tokens
from .._deadline import Deadline, check_timeout
from .._log import logger
from .._nuid import NUID
from .._signals import Flag
from ..errors import (
    APIError,
    ConnectionClosedError,
    ConnectionLostError,
    ConsumerDeletedError,
    ConsumerExistsError,
    ConsumerNameExistsError,
    ConsumerNotFoundError,
    ForkedClientError,
    IteratorClosedError,
    MaximumConsumersLimitError,
    NatsError,
    NoHeartbeatError,
    NoRespondersError,
    OrderedConsumerInUseError,
    OrderedConsumerResetError,
    PullStatusError,
    ReconnectBufferFullError,
    ServerShutdownError,
    StaleConnectionError,
    TimeoutError,
)
from ..msg import Msg
from . import _api
from ._pull import check_heartbeat, fetch
from ._pull_stream import RETRY_WAIT, BaseMessageIterator, MessageIterator, check_limits
from .consumer import ConsumeContext, Consumer, _check_batch, check_handlers
from .consumer_admin import CREATE, create_consumer
from .consumer_config import OrderedConsumerConfig
from .info import ConsumerInfo

# "consumer inactive threshold exceeds system limit" (the stream's consumer_limits).
_THRESHOLD_OVER_LIMIT = 10153

if TYPE_CHECKING:
    from ..client import Client
    from ._api import JsApi

log = logger("jetstream")

__all__ = ["OrderedConsumer", "OrderedMessageIterator"]

_MAX_BACKOFF = 10.0

# The pauses before each pull again of a new link whose pulls met no responders.
_FRESH_PAUSES = (0.01, 0.05, 0.2)

# What a later attempt can get past: the server or the link being away for a
# while, a consumer name already taken (the next attempt uses a new one).
_HEALS = (
    TimeoutError,
    NoRespondersError,
    ConnectionLostError,
    StaleConnectionError,
    ReconnectBufferFullError,
    ConsumerNotFoundError,
    ConsumerExistsError,
    ConsumerNameExistsError,
    PullStatusError,  # leadership change, server shutdown, ...
)


# What ends a fetch on the current link and is healed by a new one: the consumer
# deleted, its server gone (no responders, shut down mid-request, no heartbeats).
_LINK_LOST = (ConsumerDeletedError, NoRespondersError, NoHeartbeatError, ServerShutdownError)


def _can_heal(exc: NatsError) -> bool:
    """Whether retrying a failed link creation may succeed.

    Bad input (``ValueError``), a config the server refuses (a 4xx API
    error), a missing stream, missing permissions and a closed or forked
    client cannot; a timeout, no responders, a lost connection and a server
    error (5xx: e.g. JetStream temporarily unavailable, no leader) can.
    """
    if isinstance(exc, _HEALS):
        return True
    return isinstance(exc, APIError) and exc.code >= 500


class OrderedConsumer:
    """Delivers a stream's messages (or a filtered part) in order, exactly once.

    Made by ``stream.ordered_consumer()`` or ``ctx.ordered_consumer(stream)``.
    Same pull surface as :class:`Consumer` (``fetch``, ``next``,
    ``messages``, ``consume``); one of them at a time. Threads calling
    ``fetch``/``next`` at once take turns (each message goes to one of
    them, once). Used as a context manager, it deletes its current
    server-side consumer on exit.

    Attributes:
        stream_name: the stream it reads.
    """

    def __init__(
        self,
        client: Client,
        api: JsApi,
        stream_name: str,
        config: OrderedConsumerConfig,
        timeout: float = D.JS_TIMEOUT,
    ) -> None:
        self._client = client
        self._api = api
        self.stream_name = stream_name
        self._config = config
        self._timeout = timeout
        self._prefix = config.name_prefix or NUID.next()
        self._serial = 0
        # Where the next link starts (the last stream sequence handed out plus
        # one); None: at the config's deliver policy.
        self._resume_seq: int | None = None
        self._consumer_seq = 0  # the last consumer sequence of the current link
        self._current: Consumer | None = None
        self._linked = False  # a link was made once: later attempts are resets
        self._resumed = False  # a link started at _resume_seq, not at the deliver policy
        self._retired: deque[str] = deque()  # replaced links still to delete on the server
        self._lock = threading.Lock()
        # One fetch at a time: each checks its messages against the one before.
        self._fetching = threading.Lock()
        self._iterator: OrderedMessageIterator | None = None  # the last messages() made
        self._closed = False
        self._abort = Flag()  # cuts a reset's back-off short

    # -- the chain ----------------------------------------------------------------

    @property
    def name(self) -> str | None:
        """The current link's consumer name (``None`` before the first pull, and after an
        iterator's ``stop()`` until the next pull)."""
        return self._current.name if self._current is not None else None

    @property
    def resumed(self) -> bool:
        """True once a link was made at a resume sequence instead of the deliver policy.

        From then on, every message the stream holds after the last one delivered
        comes, whatever the policy would select ("last per subject" selects one
        revision per subject; a resumed link delivers them all). It never turns
        back to False. Set before the new link's first message is handed out, on
        the thread that pulls.
        """
        return self._resumed

    @property
    def cached_info(self) -> ConsumerInfo | None:
        """The current link's info as created (no request)."""
        return self._current.cached_info if self._current is not None else None

    def info(self, timeout: float | None = None) -> ConsumerInfo:
        """Fetch the current link's info.

        Raises:
            ConsumerNotFoundError: no link exists right now.
        """
        deadline = self._deadline(timeout)  # one deadline for a new link and the request
        current = self._current or self._reset(deadline)
        return current.info(timeout=max(deadline.remaining(), 0.001))

    def _deadline(self, timeout: float | None) -> Deadline:
        """The deadline of a call taking ``timeout`` (see :meth:`_own_call`)."""
        deadline = Deadline(check_timeout("timeout", timeout, self._timeout))
        self._own_call()
        return deadline

    def _own_call(self) -> None:
        """A direct call starts: a stop() of an earlier iterator no longer cuts a reset's
        back-off short (only close() does)."""
        if not self._closed:
            self._abort.clear()

    def _check_free(self, call: str) -> None:
        """Refuse ``call`` while an iterator of this consumer runs (it would take the
        same messages).

        Raises:
            OrderedConsumerInUseError: an iterator made by :meth:`messages` or
                :meth:`consume` is not stopped yet.
        """
        iterator = self._iterator
        if iterator is not None and not iterator.closed:
            raise OrderedConsumerInUseError(
                f"{call} on an ordered consumer of {self.stream_name!r} whose messages() "
                "or consume() still runs: stop() it first"
            )

    def _retire_current(self) -> None:
        """Take the current link out of use; the next reset (or close) deletes it."""
        current, self._current = self._current, None
        if current is not None:
            self._retired.append(current.name)

    def _drop_links(self, deadline: Deadline) -> None:
        """Delete the current and the retired links without waiting for answers (best effort).

        Each delete request waits for room in the write buffer until ``deadline`` at most.
        """
        self._retire_current()
        while self._retired:
            try:
                name = self._retired.popleft()
            except IndexError:  # taken by another thread's close() just now
                return
            if self._client.is_closed:
                continue
            subject = self._api.subject(
                _api.CONSUMER_DELETE, stream=self.stream_name, consumer=name
            )
            try:
                self._client.publish(subject, b"", timeout=max(deadline.remaining(), 0.001))
            except NatsError:
                pass

    def _reset(self, deadline: Deadline | None) -> Consumer:
        """Replace the current link; retries what can heal, with back-off, until ``deadline``.

        ``None`` (a caller that waits without a timeout): each attempt gets the
        context's timeout and attempts go on until one succeeds (or
        ``max_reset_attempts``). Errors that cannot heal by waiting (bad
        input, a config the server refuses, a missing stream, a closed
        client) are raised at once; see :func:`_can_heal`. A stream holding as
        many consumers as it may refuses the first link at once, but a later
        one is retried: another consumer may stop.

        Raises:
            TimeoutError: no link could be made before the deadline.
            OrderedConsumerResetError: ``max_reset_attempts`` failed in a row.
            StreamNotFoundError: the stream is gone.
            MaximumConsumersLimitError: the stream is full (the first link only).
            APIError: the server refused the link's config.
        """
        if not self._lock.acquire(timeout=-1 if deadline is None else deadline.remaining()):
            raise TimeoutError("timed out waiting for another thread recreating the consumer")
        try:
            return self._reset_locked(deadline)
        finally:
            self._lock.release()

    def _reset_locked(self, deadline: Deadline | None) -> Consumer:
        self._drop_links(deadline or Deadline(self._timeout))
        attempts = 0
        wait = RETRY_WAIT
        while True:
            if self._closed:
                raise IteratorClosedError("the ordered consumer was closed")
            self._serial += 1
            name = f"{self._prefix}_{self._serial}"
            cfg = self._config.consumer_config(name, self._resume_seq)
            left = self._timeout if deadline is None else deadline.remaining()
            attempt = Deadline(max(min(left, self._timeout), 0.001))
            try:
                cons = create_consumer(
                    self._client, self._api, self.stream_name, cfg, CREATE, attempt, self._timeout
                )
            except APIError as exc:
                if exc.err_code == _THRESHOLD_OVER_LIMIT and self._fit_inactive_threshold(attempt):
                    continue  # retried at once with the stream's limit
                # A full stream refuses a new consumer at once; a running one waits for room.
                full = isinstance(exc, MaximumConsumersLimitError)
                if not (_can_heal(exc) or (full and self._linked)):
                    raise
                error: NatsError = exc
            except NatsError as exc:
                if not _can_heal(exc):
                    raise
                error = exc
            else:
                self._current = cons
                self._linked = True
                if self._resume_seq is not None:
                    self._resumed = True
                self._consumer_seq = 0
                if self._resume_seq is None:
                    self._resume_seq = self._first_link_start(cons.cached_info)
                return cons
            attempts += 1
            limit = self._config.max_reset_attempts
            if limit is not None and attempts >= limit:
                raise OrderedConsumerResetError(
                    f"could not recreate the ordered consumer: {error}"
                ) from error
            if deadline is not None and deadline.remaining() <= wait:
                raise TimeoutError(f"could not recreate the ordered consumer: {error}") from error
            log.debug("ordered consumer reset failed, retrying: %s", error)
            if self._abort.wait(wait):  # back-off, prompt on stop/close
                raise IteratorClosedError("the ordered consumer was stopped") from None
            if self._client.is_closed:
                raise ConnectionClosedError("the client was closed") from None
            wait = min(wait * 2, _MAX_BACKOFF)

    def _fresh_pause(
        self, exc: BaseException, tries: int, deadline: Deadline | None = None
    ) -> float | None:
        """The pause before pulling the current link again after ``exc``; None: replace it.

        On a cluster, the first pull of a new consumer may meet no responders: the
        server the client talks to has not heard of the consumer's leader yet, for a
        moment. So a link that delivered nothing yet is pulled again after a short
        pause, ``len(_FRESH_PAUSES)`` times at most and within ``deadline``, before it
        is replaced.
        """
        if not isinstance(exc, NoRespondersError) or self._consumer_seq:
            return None
        if tries >= len(_FRESH_PAUSES) or self._closed:
            return None
        pause = _FRESH_PAUSES[tries]
        if deadline is not None and deadline.remaining() <= pause:
            return None
        return pause

    def _first_link_start(self, info: ConsumerInfo | None) -> int | None:
        """Where a later link starts while nothing is delivered (see the module doc).

        The server reports a new consumer as having delivered up to the
        stream sequence before its start.
        """
        if info is None or info.delivered is None:
            return None
        return max(info.delivered.stream_seq + 1, 1)

    def _fit_inactive_threshold(self, deadline: Deadline) -> bool:
        """Lower the links' inactive_threshold to the stream's consumer limit.

        Returns False when the stream sets no such limit (nothing to fit).
        """
        reply = self._api.request_json(
            _api.STREAM_INFO, None, deadline, read_only=True, stream=self.stream_name
        )
        limit = (reply.get("config", {}).get("consumer_limits") or {}).get("inactive_threshold")
        if not limit:
            return False
        self._config = attrs.evolve(self._config, inactive_threshold=limit / 1e9)
        return True

    def _accept(self, msg: Msg, current: Consumer) -> bool | None:
        """True: in order (cursor advanced); None: from an old link (drop); False: a gap."""
        tokens = msg.reply.split(".")
        n = len(tokens)
        if n == 9:
            consumer, sseq, cseq = tokens[3], tokens[5], tokens[6]
        elif n >= 11:
            consumer, sseq, cseq = tokens[5], tokens[7], tokens[8]
        else:
            return None
        if consumer != current.name:
            return None
        c = int(cseq)
        if c != self._consumer_seq + 1:
            return False
        self._consumer_seq = c
        self._resume_seq = int(sseq) + 1
        return True

    def _in_order(self, got: list[Msg], current: Consumer) -> list[Msg]:
        """The fetched messages in order; a gap drops the link and the rest of ``got``."""
        out = []
        for msg in got:
            ok = self._accept(msg, current)
            if ok:
                out.append(msg)
            elif ok is False:
                log.warning("ordered consumer on %s reset: sequence gap", self.stream_name)
                self._retire_current()
                break
        return out

    # -- pulling ------------------------------------------------------------------

    def fetch(
        self,
        batch: int = D.FETCH_BATCH,
        timeout: float = D.FETCH_TIMEOUT,
        heartbeat: float | None = None,
    ) -> list[Msg]:
        """Up to ``batch`` next messages in order; ``[]`` when none came within ``timeout``.

        At most the server's ``max_request_batch`` (the link's ``max_batch``) at once.

        A gap or a lost server-side consumer recreates it; the messages in
        order so far are returned (possibly fewer than available). Calls from
        several threads take turns, each within its ``timeout``.

        Raises:
            ValueError: bad arguments.
            OrderedConsumerInUseError: an iterator of this consumer still runs.
        """
        _check_batch(batch)
        timeout = check_timeout("timeout", timeout)
        check_heartbeat(heartbeat, timeout)
        self._check_free("fetch()")
        deadline = Deadline(timeout)
        self._own_call()
        if not self._fetching.acquire(timeout=max(deadline.remaining(), 0)):
            return []  # another thread's fetch went on for the whole timeout
        try:
            return self._fetch(batch, deadline, heartbeat)
        finally:
            self._fetching.release()

    def _fetch(self, batch: int, deadline: Deadline, heartbeat: float | None) -> list[Msg]:
        tries = 0  # pulls again of a new link that met no responders
        while True:
            current = self._current or self._reset(deadline)
            left = deadline.remaining()
            if left <= 0:
                return []
            try:
                got = fetch(
                    self._client, current._next_subject, current._limits().cap_batch(batch),
                    left, heartbeat=heartbeat,
                )  # fmt: skip
            except _LINK_LOST as exc:
                pause = self._fresh_pause(exc, tries, deadline)
                if pause is not None:
                    tries += 1
                    self._abort.wait(pause)  # close() cuts it short; _reset() then raises
                    continue
                tries = 0
                log.warning("ordered consumer on %s reset: %s", self.stream_name, exc)
                self._retire_current()
                continue
            out = self._in_order(got, current)
            if out or self._current is not None:
                return out
            # a gap before any message in order: the new link gets the time left

    def fetch_no_wait(self, batch: int = D.FETCH_BATCH, timeout: float | None = None) -> list[Msg]:
        """The next messages available now, in order, up to ``batch`` (as :meth:`fetch`)."""
        _check_batch(batch)
        self._check_free("fetch_no_wait()")
        deadline = self._deadline(timeout)
        if not self._fetching.acquire(timeout=max(deadline.remaining(), 0)):
            return []
        try:
            current = self._current or self._reset(deadline)
            try:
                got = fetch(
                    self._client, current._next_subject, current._limits().cap_batch(batch),
                    max(deadline.remaining(), 0.001), no_wait=True,
                )  # fmt: skip
            except _LINK_LOST:
                self._retire_current()
                return []
            return self._in_order(got, current)
        finally:
            self._fetching.release()

    def next(self, timeout: float = D.FETCH_TIMEOUT) -> Msg:
        """The next message in order.

        Raises:
            TimeoutError: none within ``timeout``.
            OrderedConsumerInUseError: an iterator of this consumer still runs.
        """
        msgs = self.fetch(1, timeout)
        if not msgs:
            raise TimeoutError(f"no message within {timeout} s")
        return msgs[0]

    def messages(
        self,
        max_messages: int = D.MESSAGES_MAX,
        max_bytes: int | None = None,
        expires: float = D.MESSAGES_EXPIRES,
        heartbeat: float | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
    ) -> OrderedMessageIterator:
        """An iterator over the messages in order (see :meth:`Consumer.messages`).

        Missed heartbeats, deletion of the server-side consumer, no
        responders and reconnects recreate the link; iteration goes on.

        One runs at a time: until it is stopped, ``fetch()``, ``next()`` and
        another ``messages()`` or ``consume()`` raise.

        Raises:
            ValueError: bad limits (checked before a link is made).
            OrderedConsumerInUseError: an earlier iterator still runs.
        """
        check_limits(max_messages, max_bytes, expires, heartbeat)
        self._check_free("messages()")
        opts = dict(
            max_messages=max_messages, max_bytes=max_bytes, expires=expires,
            heartbeat=heartbeat, threshold_messages=threshold_messages,
            threshold_bytes=threshold_bytes,
        )  # fmt: skip
        self._iterator = OrderedMessageIterator(self, opts)
        return self._iterator

    def consume(
        self,
        callback: Callable[[Msg], object],
        *,
        error_handler: Callable[[BaseException], object] | None = None,
        **options: Any,
    ) -> ConsumeContext:
        """Call ``callback(msg)`` for each message in order, on a thread of its own.

        Options as :meth:`messages`; see :meth:`Consumer.consume`.

        Raises:
            TypeError: ``callback`` or ``error_handler`` is not callable or is
                an ``async def``; nothing was sent.
            OrderedConsumerInUseError: an earlier iterator still runs.
        """
        check_handlers(callback, error_handler)
        return ConsumeContext(self.messages(**options), callback, error_handler)

    def close(self) -> None:
        """Delete the current server-side consumer (without waiting)."""
        self._closed = True
        self._abort.set()
        self._drop_links(Deadline(self._timeout))

    def __enter__(self) -> OrderedConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<OrderedConsumer {self.stream_name}/{self._prefix}_{self._serial}>"


class OrderedMessageIterator(BaseMessageIterator):
    """Messages of an :class:`OrderedConsumer` in order; survives resets.

    A layer over the plain pull iterator (:class:`MessageIterator`), as
    nats.go's ``ordered.go`` over ``pull.go``: the iterator pulls from the
    current link; this layer checks each message's sequence and owns the
    recovery policy. It replaces the link on a sequence gap, a deleted
    consumer, missed heartbeats, no responders (on a link that delivered
    nothing yet, after a few pulls again), and a reconnect (it stops
    the link's iterator to wake it, then starts a new one after the last
    delivered stream sequence). Other warnings go to the consume
    ``error_handler``.

    Iterate it or call :meth:`next`; :meth:`stop` ends it. Threads taking from it
    at once take turns: each message goes to one of them, once.
    """

    def __init__(self, consumer: OrderedConsumer, options: dict[str, Any]) -> None:
        self._oc = consumer
        self._options = options
        # One taker at a time: a message is checked against the one before as it is taken.
        self._taking = threading.Lock()
        self._on_warning: Callable[[BaseException], object] | None = None
        self._inner: MessageIterator | None = None
        self._stopped = False
        self._draining = False
        self._current: Consumer | None = None
        self._reset_reason: str | None = None
        self._batch: deque[Msg] = deque()  # what next_buffered() hands out
        self._listener = self._on_status  # one bound method, so it can be removed
        consumer._abort.clear()
        consumer._client.add_status_listener(self._listener)
        try:
            self._start(Deadline(consumer._timeout))
        except BaseException:
            consumer._client.remove_status_listener(self._listener)
            raise

    def _start(self, deadline: Deadline | None) -> None:
        oc = self._oc
        current = oc._current if oc._current is not None else oc._reset(deadline)
        self._current = current
        self._reset_reason = None
        self._fresh_tries = 0  # pulls again of this link after no responders
        self._inner = MessageIterator(
            oc._client, current._next_subject, on_warning=self._inner_warning,
            limits=current._limits(), **self._options,
        )  # fmt: skip
        if self._stopped:  # stop() came during the reset: this link's pull is unread
            self._inner.stop()
            oc._retire_current()

    # -- the reset policy ---------------------------------------------------------

    def _on_status(self, status: str) -> None:
        """Client status listener (events thread): a reconnect replaces the link."""
        if status == "reconnected" and not self._stopped:
            self._need_reset("reconnected")

    def _inner_warning(self, exc: BaseException) -> None:
        """The link's iterator recovered from something (on the thread in :meth:`next`)."""
        if isinstance(exc, NoHeartbeatError):
            self._need_reset("missed heartbeats")
        elif isinstance(exc, NoRespondersError):
            pause = self._oc._fresh_pause(exc, self._fresh_tries)
            if pause is not None and self._inner is not None:
                self._fresh_tries += 1
                self._inner.pull_after(pause)  # the link may yet answer (see _fresh_pause)
            else:
                self._need_reset("no responders")
        elif self._on_warning is not None:
            self._on_warning(exc)
        else:  # as the plain iterator does without a handler
            log.warning("ordered consumer on %s recovered: %s", self._oc.stream_name, exc)

    def _need_reset(self, reason: str) -> None:
        """Mark the link for replacement and wake the thread waiting on it."""
        self._reset_reason = reason
        inner = self._inner
        if inner is not None:
            inner.stop()

    def _restart(self, reason: str, deadline: Deadline | None) -> None:
        level = logging.DEBUG if reason == "no link" else logging.WARNING
        log.log(level, "ordered consumer on %s reset: %s", self._oc.stream_name, reason)
        inner = self._inner
        if inner is not None:
            inner.stop()
        self._inner = None
        if self._stopped:
            raise IteratorClosedError("the message iterator was stopped")
        self._oc._retire_current()
        self._start(deadline)

    # -- taking messages ----------------------------------------------------------

    def next(self, timeout: float | None = None) -> Msg:
        """Block until the next message in order.

        Raises:
            TimeoutError: none within ``timeout``.
            IteratorClosedError: :meth:`stop` was called.
            ConnectionClosedError: the client was closed.
            ForkedClientError: called in a process forked after the iterator was made.
        """
        deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        with self._turn(deadline):
            return self._take(deadline, resets_bounded=True)

    @contextlib.contextmanager
    def _turn(self, deadline: Deadline | None) -> Iterator[None]:
        """Hold the iterator for one taker until ``deadline``.

        Raises:
            TimeoutError: another thread held it until ``deadline``.
        """
        wait = -1 if deadline is None else max(deadline.remaining(), 0)
        if not self._taking.acquire(timeout=wait):
            raise TimeoutError("no message within the timeout (another thread was taking one)")
        try:
            yield
        finally:
            self._taking.release()

    def _take(self, deadline: Deadline | None, resets_bounded: bool) -> Msg:
        """:meth:`next`; ``resets_bounded=False``: ``deadline`` bounds only the wait for a
        message, and a reset of the consumer meanwhile runs to its end."""
        try:
            return self._next(deadline, deadline if resets_bounded else None)
        except (TimeoutError, ForkedClientError):
            raise
        except BaseException:  # the iteration is over: stop listening
            self._end()
            raise

    def _next(self, deadline: Deadline | None, reset_deadline: Deadline | None) -> Msg:
        while True:
            inner = self._inner
            if inner is None:
                self._restart("no link", reset_deadline)
                continue
            try:
                left = None if deadline is None else max(deadline.remaining(), 1e-6)
                msg = inner.next(left)
            except IteratorClosedError:
                if self._stopped:
                    raise
                self._restart(self._reset_reason or "link ended", reset_deadline)
                continue
            except (ConsumerDeletedError, ConsumerNotFoundError):
                self._restart("consumer deleted", reset_deadline)
                continue
            ok = self._oc._accept(msg, self._current)  # type: ignore[arg-type]
            if ok:
                return msg
            if ok is False and not self._draining:
                self._restart("sequence gap", reset_deadline)

    def next_buffered(self, timeout: float | None = None) -> deque[Msg]:
        """Block like :meth:`next`; return the messages in order that are here now.

        ``timeout`` bounds only the wait for a message (``TimeoutError`` then):
        a reset of the consumer meanwhile runs to its end, as without one.

        The first is :meth:`next`'s; then the current link's buffered ones,
        each checked as :meth:`next` checks it: one from an old link is
        dropped, and a gap ends the batch (left in the buffer, so the next
        call resets). The caller takes them with ``popleft()`` until the deque
        is empty (the consume loop, the watch feed): one hand-over per batch.

        Raises:
            As :meth:`next` (``TimeoutError`` only with a ``timeout``).
        """
        deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        with self._turn(deadline):
            return self._take_buffered(deadline)

    def _take_buffered(self, deadline: Deadline | None) -> deque[Msg]:
        out = self._batch
        out.append(self._take(deadline, resets_bounded=False))
        inner, current = self._inner, self._current
        if inner is None or current is None:
            return out
        buf, accept = inner.buffered(), self._oc._accept
        # Taken before it is checked: another thread's reset may empty the buffer at any
        # point (stop()), and a message checked in order must be one handed out.
        while True:
            try:
                msg = buf.popleft()
            except IndexError:
                return out
            ok = accept(msg, current)
            if ok:
                out.append(msg)
            elif ok is False:
                buf.appendleft(msg)  # the next call finds the gap and resets
                return out

    def _end(self) -> None:
        self._oc._client.remove_status_listener(self._listener)

    def check_usable(self) -> None:
        """Raise when this process may not use the iterator.

        Raises:
            ForkedClientError: this is a child process forked after the iterator was made.
        """
        if self._inner is not None:
            self._inner.check_usable()

    def stop(self) -> None:
        """Stop; discard what is buffered. Safe from any thread.

        Raises:
            ForkedClientError: called in a process forked after the iterator was made.
        """
        self.check_usable()
        self._stopped = True
        self._oc._abort.set()
        self._end()
        if self._inner is not None:
            self._inner.stop()
        self._discard_batch()
        # The link delivered what its pulls asked for, handed out or not: a fetch() or a new
        # iteration on it would meet a gap (after waiting out its pull); they make a new
        # link after the last message handed out instead.
        self._oc._retire_current()

    def _discard_batch(self) -> None:
        """Drop what :meth:`next_buffered` handed out and was not taken yet.

        Those messages count as delivered, so a later iteration starts a new link
        at the first of them: never handed over means not skipped.
        """
        batch = self._batch
        try:
            first = batch[0]
        except IndexError:  # nothing left (or taken just now by the consume loop)
            return
        batch.clear()
        self._oc._resume_seq = int(ack_tokens(first.reply)[5])
        self._oc._retire_current()

    def drain(self) -> None:
        """Stop pulling; deliver what was received, then end.

        Raises:
            ForkedClientError: called in a process forked after the iterator was made.
        """
        self.check_usable()
        self._stopped = True
        self._draining = True
        self._end()
        if self._inner is not None:
            self._inner.drain()

    @property
    def closed(self) -> bool:
        """True once stopped or drained."""
        return self._stopped

    @property
    def links_made(self) -> int:
        """How many links the consumer tried to make so far: it grows with each reset."""
        return self._oc._serial

    @property
    def resumed(self) -> bool:
        """:attr:`OrderedConsumer.resumed`: a message handed out after this turned True
        came from a link started after the last delivered one, not at the deliver policy."""
        return self._oc.resumed
