"""The pull ``Consumer`` handle and ``ConsumeContext`` (callback consumption)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs

from .. import _defaults as D
from .._deadline import Deadline, check_callback, check_timeout, seconds_text
from .._process_lock import ProcessLock
from .._signals import INTERRUPTS, hand_to_main, raise_in_main
from .._timefmt import format_rfc3339, ns_to_seconds, parse_rfc3339
from ..errors import (
    APIError,
    ConnectionClosedError,
    IteratorClosedError,
    LeadershipChangedError,
    NatsError,
    NoRespondersError,
    PriorityGroupError,
    PullRequestLimitError,
    TimeoutError,
)
from ..msg import Msg
from . import _api
from ._pull import (
    EXPIRY_MARGIN,
    NO_LIMITS,
    Pin,
    Priority,
    RequestLimits,
    check_heartbeat,
    check_size,
    fetch,
    refused_limit,
)
from ._pull_stream import BYTES_BATCH, RETRY_WAIT, MessageIterator, consumer_exists
from .enums import PriorityPolicy
from .info import ConsumerInfo

if TYPE_CHECKING:
    from ..client import Client
    from ._api import JsApi

__all__ = ["ConsumeContext", "Consumer", "PauseResponse"]

# The UNPIN API's errors about the group (server/errors.json).
_NO_SUCH_GROUP = 10160
_BAD_GROUP_NAME = 10162
# Longest wait for the consumer's config when the cached one refuses a pull's options.
REFRESH_WAIT = 2.0


@attrs.frozen(kw_only=True)
class PauseResponse:
    """The server's answer to a pause or resume.

    Attributes:
        paused: whether the consumer is paused now.
        pause_until: when the pause ends (``None`` when not paused).
        pause_remaining: seconds left in the pause (``None`` when not paused).
    """

    paused: bool
    pause_until: datetime | None = None
    pause_remaining: float | None = None


def check_handlers(
    callback: Callable[[Msg], object], error_handler: Callable[[BaseException], object] | None
) -> None:
    """Refuse a ``consume`` callback the consuming thread could not call, before any pull.

    Raises:
        TypeError: ``callback`` or ``error_handler`` is not callable or is an
            ``async def`` (the message names the parameter).
    """
    check_callback("callback", callback)
    if error_handler is not None:
        check_callback("error_handler", error_handler)


class ConsumeContext:
    """A running :meth:`Consumer.consume`: one thread pulling and calling the callback.

    The callback runs on this context's own thread (``jetstream_sync-consume-N``),
    one message at a time, in order, outside every lock. Errors and warnings
    (missed heartbeats, refused pulls, the consumer's deletion) go to
    ``error_handler`` on that same thread.
    """

    _serial = 0
    _serial_lock = ProcessLock()

    def __init__(
        self,
        source: Any,
        callback: Callable[[Msg], object],
        error_handler: Callable[[BaseException], object] | None,
    ) -> None:
        self._source = source  # a MessageIterator or an ordered iterator
        self._callback = callback
        self._error_handler = error_handler
        # Warnings, too, go to the handler; through _report, so that a handler
        # that raises does not end consumption. Without one, the source logs them.
        source._on_warning = self._report if error_handler is not None else None
        with ConsumeContext._serial_lock.here():
            ConsumeContext._serial += 1
            n = ConsumeContext._serial
        self._thread = threading.Thread(
            target=self._run, name=f"jetstream_sync-consume-{n}", daemon=True
        )
        try:
            self._thread.start()
        except BaseException:  # interrupted (Ctrl-C) while the thread started: it ends, too
            source.stop()
            raise

    def _report(self, exc: BaseException) -> None:
        if self._error_handler is None:
            return
        try:
            self._error_handler(exc)
        except Exception:  # a broken handler must not kill the loop
            pass

    def _run(self) -> None:
        while True:
            try:
                if not self._run_buffer():
                    return
            except INTERRUPTS as exc:  # a signal's (Ctrl-C), on this greenlet (gevent, eventlet)
                raise_in_main(exc)

    def _run_buffer(self) -> bool:
        """Wait for the next buffer of messages and run the callback on them; False: the end."""
        try:
            buf = self._source.next_buffered()
        except (IteratorClosedError, ConnectionClosedError):
            return False
        except NatsError as exc:  # terminal: consumer deleted, refused requests
            self._report(exc)
            return False
        while buf:  # a stop() empties it: what was not taken is discarded
            try:
                msg = buf.popleft()
            except IndexError:  # emptied by a stop() on another thread just now
                break
            try:
                self._callback(msg)
            except INTERRUPTS as exc:  # a signal's under gevent/eventlet, or sys.exit()
                if not hand_to_main(exc):
                    self._report(exc)
            except BaseException as exc:  # the user's bug must not stop consumption
                self._report(exc)
        return True

    def _join(self, timeout: float | None) -> None:
        if self._thread is threading.current_thread():
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("the consume thread did not finish in time")

    def stop(self, timeout: float | None = D.CONSUME_JOIN_TIMEOUT) -> None:
        """Stop at once: discard buffered messages and join the thread.

        Called from the callback, it returns without joining (the thread ends
        after the callback returns).

        Raises:
            TimeoutError: the callback was still running after ``timeout``.
        """
        self._source.stop()
        self._join(timeout)

    def drain(self, timeout: float | None = D.CONSUME_JOIN_TIMEOUT) -> None:
        """Stop pulling, hand every buffered message to the callback, then join.

        Raises:
            TimeoutError: the callback had not finished after ``timeout``.
        """
        self._source.drain()
        self._join(timeout)

    @property
    def closed(self) -> bool:
        """True once the consume thread has ended."""
        return not self._thread.is_alive()

    def __enter__(self) -> ConsumeContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _check_batch(batch: int) -> int:
    return check_size("batch", batch)


class Consumer:
    """A handle on a pull consumer; made by ``create_consumer``, ``consumer`` and friends.

    Safe to share between threads; each :meth:`fetch` uses its own inbox.
    Used as a context manager, a handle from ``create_consumer`` or
    ``create_or_update_consumer`` deletes its consumer on exit when it is
    ephemeral (no ``durable_name``); a handle from ``consumer(name)`` or
    ``update_consumer`` never does: the consumer may be another client's.

    Attributes:
        stream_name: the stream it reads.
        name: the consumer's name.
    """

    def __init__(
        self,
        client: Client,
        api: JsApi,
        stream_name: str,
        name: str,
        info: ConsumerInfo | None = None,
        timeout: float = D.JS_TIMEOUT,
        *,
        made: bool = False,
    ) -> None:
        self._client = client
        self._made = made  # made by this handle's create call: an ephemeral is deleted on exit
        self._api = api
        self.stream_name = stream_name
        self.name = name
        self._info = info
        self._timeout = timeout
        self._next_subject = api.subject(_api.CONSUMER_NEXT, stream=stream_name, consumer=name)
        self._pins: dict[str, Pin] = {}  # per priority group, shared by every pull

    @property
    def cached_info(self) -> ConsumerInfo | None:
        """The info from creation or the last :meth:`info` call; no request."""
        return self._info

    @property
    def is_ephemeral(self) -> bool:
        """True when the consumer has no durable name (the server removes it when idle)."""
        cfg = self._info.config if self._info is not None else None
        return cfg is not None and not cfg.durable_name

    def _limits(self) -> RequestLimits:
        """The consumer's limits on one pull request, as cached (none known: none)."""
        cfg = self._info.config if self._info is not None else None
        if cfg is None:
            return NO_LIMITS
        return RequestLimits(cfg.max_batch or 0, cfg.max_bytes or 0, cfg.max_expires or 0.0)

    def _fresh_limits(self, deadline: Deadline) -> RequestLimits | None:
        """The consumer's limits from a new info request (None: no answer by ``deadline``)."""
        left = deadline.remaining()
        if left <= 0:
            return None
        try:
            self.info(timeout=left)
        except NatsError:
            return None
        return self._limits()

    def _deadline(self, timeout: float | None) -> Deadline:
        return Deadline(check_timeout("timeout", timeout, self._timeout))

    def _group(
        self,
        group: str | None,
        min_pending: int | None,
        min_ack_pending: int | None,
        priority: int | None,
        deadline: Deadline | None = None,
    ) -> Priority | None:
        """The priority-group options of one pull, checked, holding the group's pin.

        Options the cached config refuses are checked once more against the config the
        server has now (an operator may have changed the groups or the policy since),
        within ``deadline`` (at most 2 s without one).
        """
        options = Priority(group, min_pending, min_ack_pending, priority)
        self._check_group_now(options, deadline)
        if group is None:
            return None
        options.pin = self._pins.setdefault(group, options.pin)
        return options

    def _check_group_now(self, options: Priority, deadline: Deadline | None) -> None:
        """:meth:`_check_group`, asking for the config once more before refusing."""
        try:
            self._check_group(options)
        except PriorityGroupError:
            left = deadline.remaining() if deadline is not None else REFRESH_WAIT
            self.info(timeout=max(min(left, REFRESH_WAIT), 0.001))
            self._check_group(options)

    def _check_group(self, options: Priority) -> None:
        """Refuse options the consumer's config (as cached) cannot take, naming the group.

        Raises:
            PriorityGroupError: as the server would answer (ADR-42), before sending.
        """
        cfg = self._info.config if self._info is not None else None
        if cfg is None:
            return  # unknown config: the server's answer decides
        group = options.group
        groups = tuple(cfg.priority_groups or ())
        if not groups:
            if group is not None:
                raise PriorityGroupError(f"consumer {self.name!r} has no priority groups", group)
            return
        if group is None:
            raise PriorityGroupError(
                f"consumer {self.name!r} has priority groups ({', '.join(groups)}): "
                "pull with group="
            )
        if group not in groups:
            raise PriorityGroupError(
                f"consumer {self.name!r} does not declare it (its groups: {', '.join(groups)})",
                group,
            )
        policy = cfg.priority_policy
        if (options.min_pending or options.min_ack_pending) and policy != PriorityPolicy.OVERFLOW:
            raise PriorityGroupError(
                f"min_pending and min_ack_pending need the overflow policy, not {policy}", group
            )
        if options.priority is not None and policy != PriorityPolicy.PRIORITIZED:
            raise PriorityGroupError(f"priority needs the prioritized policy, not {policy}", group)

    # -- pulling ------------------------------------------------------------------

    def fetch(
        self,
        batch: int = D.FETCH_BATCH,
        timeout: float = D.FETCH_TIMEOUT,
        heartbeat: float | None = None,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> list[Msg]:
        """Pull up to ``batch`` messages, blocking until they came or ``timeout`` passed.

        One pull request on a fresh inbox. The server expires the request just
        before ``timeout``; whatever arrived by then is returned. An empty
        list is not an error. Calling this in a tight loop is slower than
        :meth:`messages` (one round trip per call).

        Args:
            batch: the most messages to return.
            timeout: seconds to wait for the batch to fill. On a consumer whose
                ``max_expires`` (as cached) is shorter, each pull request lives
                at most that long, and one that ends empty is sent again for
                the rest of ``timeout``.
            heartbeat: ask the server for idle heartbeats this often
                (at most half the timeout); two missed raise.
            group: the priority group to pull in (needed by, and only by, a
                consumer with ``priority_groups``; server 2.11+). The handle
                keeps the group's pin id (``Nats-Pin-Id``) for all its pulls.
            min_pending: OVERFLOW policy: serve this request only while the
                consumer has at least this many messages pending.
            min_ack_pending: OVERFLOW policy: serve it only while at least
                this many acks are pending (either limit met is enough).
            priority: PRIORITIZED policy (server 2.12+): 0 (served first) to 9.

        A 423 (the handle's pin is no longer valid: unpinned, or another
        client took over after ``priority_timeout``) is not an error: the pin
        is cleared and, if nothing came yet, the pull is sent again without
        it for the rest of ``timeout``, waiting as a candidate for the pin
        (ADR-42); :meth:`pin_id` then returns ``None`` unless it was won.

        Raises:
            ConsumerDeletedError: the consumer was deleted.
            NoHeartbeatError: the heartbeats stopped before any message came.
            PriorityGroupError: priority-group options the consumer cannot take
                (checked before sending against its cached config, else the
                server's 400); also a ``ValueError``.
            PullStatusError: the server refused the request (its subclasses:
                ``PullRequestLimitError`` for max_waiting/max_batch/...,
                ``PullBadRequestError``, ``ConsumerPushBasedError``...).
            NoRespondersError: nothing serves the consumer and the server says
                it does not exist (a 503 while it exists, such as during the
                election of its leader, is pulled again: see below).
            ValueError: ``batch`` or ``timeout`` is not valid.

        A consumer leader election (after a fault or a step-down) is not an
        error either: a pull the old leader dropped (409 Leadership Change)
        or nobody answered (503, no responders, while the consumer exists) is
        sent again every half second for the rest of ``timeout``, and ``[]``
        is returned if nothing came by then.
        """
        size = _check_batch(batch)
        timeout = check_timeout("timeout", timeout)
        check_heartbeat(heartbeat, timeout)
        deadline = Deadline(timeout)
        group_options = self._group(group, min_pending, min_ack_pending, priority, deadline)
        return self._pull(
            max(deadline.remaining(), 0.001),
            lambda left, limits: fetch(
                self._client, self._next_subject, size, left,
                heartbeat=heartbeat, priority=group_options,
            ),
            sized=("expires",),
        )  # fmt: skip

    def _pull(
        self,
        timeout: float,
        pull: Callable[[float, RequestLimits], list[Msg]],
        *,
        no_wait: bool = False,
        sized: tuple[str, ...] = (),
    ) -> list[Msg]:
        """``pull(seconds, the consumer's limits)``, sent again after a 409 Leadership
        Change, or a 503 while the consumer still exists, for the rest of ``timeout``.

        A waiting pull is given at most what the consumer's ``max_expires`` (as
        cached) allows; one that expired with nothing is sent again for the rest of
        ``timeout``. ``sized`` names the limits (``"batch"``, ``"expires"``) the pull
        sizes itself within: when the server refuses it past one of them, the cached
        config was stale; the info is asked for once and, if the limits changed, the
        pull sent again within them.

        Raises:
            NoRespondersError: the 503, when an info request says the consumer
                does not exist.
            PullRequestLimitError: the request broke a limit the caller's own
                ``batch`` or ``max_bytes`` is past.
        """
        limits = self._limits()
        deadline = Deadline(timeout)
        while True:
            left = deadline.remaining()
            if left <= 0:  # the back-off after a dropped pull ended past the deadline
                return []
            ask = left if no_wait else limits.cap_timeout(left)
            try:
                msgs = pull(ask, limits)
                if (
                    msgs
                    or ask >= left
                    or not _expired(deadline, left - ask)
                    or deadline.remaining() <= EXPIRY_MARGIN
                ):
                    return msgs
                continue  # it expired within max_expires, empty: ask again
            except PullRequestLimitError as exc:
                if refused_limit(exc) not in sized:
                    raise
                fresh = self._fresh_limits(deadline)
                if fresh is None or fresh == limits:
                    raise
                limits = fresh  # the cached config was stale
                if deadline.remaining() <= EXPIRY_MARGIN:
                    return []
                continue
            except LeadershipChangedError:
                pass  # the old leader dropped the request: ask the new one
            except NoRespondersError:
                wait = min(2.0, max(deadline.remaining(), 0.1))
                if consumer_exists(functools.partial(self.info, timeout=wait))() is False:
                    raise
            if deadline.remaining() <= RETRY_WAIT:
                return []
            time.sleep(RETRY_WAIT)  # back-off: the election takes a moment

    def fetch_bytes(
        self,
        max_bytes: int,
        timeout: float = D.FETCH_TIMEOUT,
        heartbeat: float | None = None,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> list[Msg]:
        """Pull messages until about ``max_bytes`` (payloads plus headers and subjects).

        Like :meth:`fetch` (with the same priority-group options); the server
        stops before a message that would go past the limit, and the call returns
        as soon as the messages fill ``max_bytes`` exactly.
        It asks for no more messages than the consumer's ``max_batch`` (as cached),
        each request within its ``max_expires`` as :meth:`fetch` does. A handle
        whose cached config is stale (another client lowered those limits since)
        learns them from the server's refusal: it asks for the consumer's info
        once and pulls again within them (so do :meth:`fetch` and :meth:`next`
        for ``max_expires``, and :meth:`messages` for all three).
        """
        check_size("max_bytes", max_bytes)
        timeout = check_timeout("timeout", timeout)
        check_heartbeat(heartbeat, timeout)
        deadline = Deadline(timeout)
        group_options = self._group(group, min_pending, min_ack_pending, priority, deadline)
        return self._pull(
            max(deadline.remaining(), 0.001),
            lambda left, limits: fetch(
                self._client, self._next_subject, limits.cap_batch(BYTES_BATCH), left,
                max_bytes=max_bytes, heartbeat=heartbeat, priority=group_options,
            ),
            sized=("batch", "expires"),
        )  # fmt: skip

    def fetch_no_wait(
        self,
        batch: int = D.FETCH_BATCH,
        timeout: float | None = None,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> list[Msg]:
        """Take up to ``batch`` messages that are available now; do not wait for more.

        Args:
            timeout: seconds to wait for the server's answer (default: the
                context's timeout).
            group, min_pending, min_ack_pending, priority: priority-group
                options, as :meth:`fetch`.
        """
        size = _check_batch(batch)
        deadline = Deadline(check_timeout("timeout", timeout, self._timeout))
        group_options = self._group(group, min_pending, min_ack_pending, priority, deadline)
        return self._pull(
            max(deadline.remaining(), 0.001),
            lambda left, limits: fetch(
                self._client, self._next_subject, size, left,
                no_wait=True, priority=group_options,
            ),
            no_wait=True,
        )  # fmt: skip

    def next(
        self,
        timeout: float = D.FETCH_TIMEOUT,
        heartbeat: float | None = None,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> Msg:
        """Block for one message (priority-group options as :meth:`fetch`).

        Raises:
            TimeoutError: none arrived within ``timeout``.
            ConsumerDeletedError, PullStatusError, NoHeartbeatError: as :meth:`fetch`.
        """
        msgs = self.fetch(
            1, timeout, heartbeat,
            group=group, min_pending=min_pending, min_ack_pending=min_ack_pending,
            priority=priority,
        )  # fmt: skip
        if not msgs:
            raise TimeoutError(
                f"no message from consumer {self.name!r} within {seconds_text(timeout)} s"
            )
        return msgs[0]

    def messages(
        self,
        max_messages: int = D.MESSAGES_MAX,
        max_bytes: int | None = None,
        expires: float = D.MESSAGES_EXPIRES,
        heartbeat: float | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> MessageIterator:
        """An iterator over the consumer's messages, pre-fetching in the background of pulls.

        Keeps up to ``max_messages`` (or ``max_bytes``) requested and pulls
        more when what is pending falls to the threshold (default: half).
        Each request lives ``expires`` seconds; the server sends heartbeats
        every ``heartbeat`` seconds (default: half of ``expires``, at most
        30); after two missed ones, or a reconnect, it pulls again. Use it in
        a ``with`` block or call ``stop()``. A message larger than ``max_bytes``
        makes every pull fail: that is a warning (:class:`PullStatusError`, 409),
        and the next pull waits half a second. Each pull keeps within the
        consumer's ``max_batch``, ``max_bytes`` and ``max_expires`` (as cached).

        The priority-group options are those of :meth:`fetch`; every pull
        carries the group's pin id. A 423 (pin lost) clears the pin and pulls
        again without it; iteration goes on (the loss is logged as a warning).
        With PINNED_CLIENT, keep ``expires`` well under the consumer's
        ``priority_timeout``: only a new pull renews the pin.

        Raises:
            ValueError: bad limits (``expires`` under 1 s, ``heartbeat`` over
                half of ``expires``...).
            PriorityGroupError: priority-group options the consumer cannot take.
        """
        return MessageIterator(
            self._client, self._next_subject,
            max_messages=max_messages, max_bytes=max_bytes, expires=expires,
            heartbeat=heartbeat, threshold_messages=threshold_messages,
            threshold_bytes=threshold_bytes,
            priority=self._group(group, min_pending, min_ack_pending, priority),
            exists=consumer_exists(lambda: self.info(timeout=2.0)),
            limits=self._limits(),
            refresh=lambda: self._fresh_limits(Deadline(2.0)),
        )  # fmt: skip

    def consume(
        self,
        callback: Callable[[Msg], object],
        *,
        error_handler: Callable[[BaseException], object] | None = None,
        max_messages: int = D.MESSAGES_MAX,
        max_bytes: int | None = None,
        expires: float = D.MESSAGES_EXPIRES,
        heartbeat: float | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> ConsumeContext:
        """Call ``callback(msg)`` for every message on a thread of its own, in order.

        Pulls like :meth:`messages`. ``error_handler(exc)`` hears about
        warnings (missed heartbeats, refused pulls), exceptions the callback
        raised, and the terminal error that ended consumption (e.g.
        :class:`ConsumerDeletedError`). Stop with ``stop()`` or ``drain()``.
        A lost pin (423) is a warning: ``error_handler`` hears
        :class:`PinIdMismatchError` while pulling goes on without the pin.

        Raises:
            ValueError, PriorityGroupError: as :meth:`messages`.
            TypeError: ``callback`` or ``error_handler`` is not callable or is
                an ``async def``; nothing was sent.
        """
        check_handlers(callback, error_handler)
        it = self.messages(
            max_messages, max_bytes, expires, heartbeat, threshold_messages, threshold_bytes,
            group=group, min_pending=min_pending, min_ack_pending=min_ack_pending,
            priority=priority,
        )  # fmt: skip
        return ConsumeContext(it, callback, error_handler)

    # -- management ---------------------------------------------------------------

    def info(self, timeout: float | None = None) -> ConsumerInfo:
        """Fetch the consumer's current info (and cache it).

        A request the consumer drops while it elects a leader is sent again
        every 2 s within ``timeout``.

        Raises:
            ConsumerNotFoundError: the consumer does not exist.
        """
        reply = self._api.request_json(
            _api.CONSUMER_INFO, None, self._deadline(timeout), read_only=True,
            stream=self.stream_name, consumer=self.name,
        )  # fmt: skip
        self._info = ConsumerInfo.from_api(reply)
        return self._info

    def pause(self, until: datetime, timeout: float | None = None) -> PauseResponse:
        """Pause delivery until ``until`` (an aware datetime; server 2.11+).

        Raises:
            ConsumerNotFoundError: the consumer does not exist.
        """
        return _pause(self._api, self.stream_name, self.name, until, self._deadline(timeout))

    def resume(self, timeout: float | None = None) -> PauseResponse:
        """Resume a paused consumer now."""
        return _pause(self._api, self.stream_name, self.name, None, self._deadline(timeout))

    def unpin(self, group: str, timeout: float | None = None) -> None:
        """Unpin the client pinned in priority group ``group`` (PINNED_CLIENT; 2.11+).

        The server picks the next pinned client among the waiting pulls; the
        old pin's next pull gets a 423 (handled as :meth:`fetch` says). This
        handle forgets the pin it held in ``group`` (:meth:`pin_id` is then
        ``None``) unless one of its pulls wins a new one meanwhile.

        Raises:
            PriorityGroupError: ``group`` is not a valid name, or the consumer
                does not declare it (checked against the cached config, asked
                for again before refusing, else the server's error).
            ConsumerNotFoundError: the consumer does not exist.
        """
        if not isinstance(group, str):
            raise PriorityGroupError(f"group must be a str, got {group!r}")
        deadline = self._deadline(timeout)
        self._check_group_now(Priority(group), deadline)
        pin = self._pins.get(group)
        held = pin.id if pin is not None else None
        try:
            _unpin(self._api, self.stream_name, self.name, group, deadline)
        except APIError as exc:
            if exc.err_code in (_NO_SUCH_GROUP, _BAD_GROUP_NAME):
                raise PriorityGroupError(exc.description, group, exc.code) from None
            raise
        if pin is not None:
            pin.clear(held)

    def pin_id(self, group: str) -> str | None:
        """The pin id this handle holds in ``group`` (``None``: not pinned)."""
        pin = self._pins.get(group)
        return pin.id if pin is not None else None

    def delete(self, timeout: float | None = None) -> bool:
        """Delete the consumer on the server.

        Raises:
            ConsumerNotFoundError: it does not exist.
        """
        reply = self._api.request_json(
            _api.CONSUMER_DELETE, None, self._deadline(timeout),
            stream=self.stream_name, consumer=self.name,
        )  # fmt: skip
        return bool(reply.get("success"))

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._made and self.is_ephemeral and not self._client.is_closed:
            try:
                self.delete()
            except NatsError:
                pass

    def __repr__(self) -> str:
        return f"<Consumer {self.stream_name}/{self.name}>"


def _expired(deadline: Deadline, after: float) -> bool:
    """Whether a pull given all of ``deadline`` but ``after`` seconds ran until its
    request expired (and did not end earlier, for another reason)."""
    return deadline.remaining() <= after + 2 * EXPIRY_MARGIN


def _pause(
    api: JsApi, stream: str, name: str, until: datetime | None, deadline: Deadline
) -> PauseResponse:
    body = {"pause_until": format_rfc3339(until, "until")} if until is not None else None
    reply = api.request_json(_api.CONSUMER_PAUSE, body, deadline, stream=stream, consumer=name)
    until_s = reply.get("pause_until")
    remaining = reply.get("pause_remaining")
    paused = bool(reply.get("paused"))
    return PauseResponse(
        paused=paused,
        pause_until=parse_rfc3339(until_s) if paused and until_s else None,
        pause_remaining=ns_to_seconds(remaining) if paused and remaining else None,
    )


def _unpin(api: JsApi, stream: str, name: str, group: str, deadline: Deadline) -> None:
    api.request_json(_api.CONSUMER_UNPIN, {"group": group}, deadline, stream=stream, consumer=name)
