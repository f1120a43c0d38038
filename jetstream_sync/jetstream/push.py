"""Push consumers: ``ctx.subscribe`` and ``ctx.subscribe_bind`` (nats.py's names).

A push consumer sends its messages to a deliver subject; this module
subscribes to it and handles the server's control messages there
(``server/consumer.go``):

- ``100 FlowControl Request`` with a reply subject: answered with an empty
  message once every message before it was handed to the application (so
  the server's window tracks what the application really took);
- ``100 Idle Heartbeat``: proof of life; when it carries
  ``Nats-Consumer-Stalled`` the flow-control reply is sent again to that
  subject, unblocking a stalled consumer.

A consumer with ``idle_heartbeat`` that goes silent for two intervals (it
was deleted, or its stream) is reported as :class:`NoHeartbeatError`
(``_heartbeats.py``): ``next_msg()`` and iteration raise it, a callback
subscription hands it to ``error_cb``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from time import monotonic
from typing import TYPE_CHECKING, Any

from .. import _defaults as D
from .._deadline import Deadline, check_callback, check_count, check_timeout
from .._subjects import filter_subject
from ..errors import (
    ConnectionClosedError,
    ConsumerExistsError,
    ConsumerNameExistsError,
    ConsumerNotFoundError,
    JetStreamError,
    MaxSubscriptionsExceededError,
    NatsError,
    NoHeartbeatError,
    PermissionViolationError,
    ReconnectBufferFullError,
    TimeoutError,
)
from ..msg import Msg
from ._codec import merge_config
from ._heartbeats import HeartbeatClock, HeartbeatWatch
from .consumer_config import ConsumerConfig, OrderedConsumerConfig
from .enums import DeliverPolicy
from .info import ConsumerInfo

if TYPE_CHECKING:
    from ..subscription import Subscription
    from .context import JetStreamContext
    from .ordered import OrderedConsumer

__all__ = ["JetStreamSubscription", "subscribe", "subscribe_bind"]

STALLED = "Nats-Consumer-Stalled"


class JetStreamSubscription:
    """A subscription to a push consumer's deliver subject (nats.py's ``JetStreamSubscription``).

    Take messages with :meth:`next_msg` or by iterating, unless it was made
    with ``cb=``: the callback then runs on the subscription's own thread,
    in order, and (unless ``manual_ack``) each message is acked after the
    callback returns. That ack waits for room in the write buffer up to the
    context's ``timeout`` at most; one that cannot be sent in time (a frozen
    server) goes to the client's ``error_cb`` as a ``WriteBufferTimeoutError``
    and the server redelivers the message after ``ack_wait``. Flow control
    and heartbeats are handled for you.

    When the consumer has ``idle_heartbeat`` and two heartbeats in a row do
    not come while the client is connected (the consumer or its stream was
    deleted), :meth:`next_msg` and iteration raise :class:`NoHeartbeatError`,
    and a callback subscription reports it to the client's ``error_cb``;
    again every two intervals while the silence lasts. The subscription
    stays: it delivers again if the consumer comes back. Not in a queue
    group, whose members each get only some of the heartbeats.
    """

    def __init__(
        self,
        ctx: JetStreamContext,
        stream: str,
        consumer: str,
        owned: bool,
    ) -> None:
        self._ctx = ctx
        self._client = ctx.client
        self.stream = stream
        self.consumer = consumer
        self._owned = owned
        self._sub: Subscription | None = None
        self._cb: Callable[[Msg], object] | None = None
        self._auto_ack = False
        # How long a callback's thread waits for room to answer flow control: past one
        # heartbeat, the consumer's next heartbeat asks again anyway.
        self._answer_wait = D.PUSH_IDLE_HEARTBEAT
        self._clock: HeartbeatClock | None = None  # iterating with heartbeats
        self._watch: HeartbeatWatch | None = None  # a callback with heartbeats

    def _start(
        self,
        deliver_subject: str,
        queue: str | None,
        cb: Callable[[Msg], object] | None,
        auto_ack: bool,
        heartbeat: float | None,
        limits: Mapping[str, int],
    ) -> None:
        self._cb = cb
        self._auto_ack = auto_ack
        self._answer_wait = heartbeat or D.PUSH_IDLE_HEARTBEAT
        handler = self._handle if cb is not None else None
        sub = self._sub = self._client.subscribe(
            deliver_subject,
            queue=queue,
            cb=handler,
            pending_msgs_limit=limits.get("pending_msgs_limit"),
            pending_bytes_limit=limits.get("pending_bytes_limit"),
            checked=True,  # refused at the subscription limit: next_msg raises, not waits
        )
        if not heartbeat or queue:
            # The server sends each heartbeat to one member of a queue group: a member's
            # silence says nothing (nats.go refuses heartbeats on queue subscriptions).
            return
        if cb is None:
            self._clock = HeartbeatClock(self._client, sub, heartbeat)
        else:
            self._watch = self._client.shared_resource("push-heartbeats", HeartbeatWatch)
            self._watch.watch(self, sub, heartbeat, self._report_missed)

    def _missed(self) -> NoHeartbeatError:
        return NoHeartbeatError(
            f"push consumer {self.stream}/{self.consumer}: two idle heartbeats missed "
            "(the consumer or its stream was deleted?)"
        )

    def _report_missed(self) -> None:
        """The heartbeat watch thread: this callback subscription went silent."""
        self._sub.report_error(self._missed())  # type: ignore[union-attr]

    # -- control messages ---------------------------------------------------------

    def _control(self, msg: Msg, deadline: Deadline | None = None) -> None:
        """Answer flow control; re-answer a stall a heartbeat reports.

        The answer waits for room in the write buffer until ``deadline`` at most. One
        that cannot go out (no room in time, the link lost) is dropped: while the
        consumer waits for it, its heartbeats carry the subject again (``STALLED``).
        """
        if msg.status != 100:
            return
        reply = msg.reply or msg.headers.get(STALLED)
        if not reply:
            return
        timeout = None if deadline is None else max(deadline.remaining(), 0.001)
        try:
            self._client.publish(reply, b"", timeout=timeout)
        except (ConnectionClosedError, ReconnectBufferFullError, TimeoutError):
            pass

    def _handle(self, msg: Msg) -> None:
        """Callback mode (the subscription's thread): control, user callback, auto ack."""
        if msg.is_status:
            self._control(msg, Deadline(self._answer_wait))
            return
        self._cb(msg)  # type: ignore[misc]
        if self._auto_ack and not msg.is_acked and msg.reply:
            # Bounded: unsubscribe() and close() wait for this call. An ack that finds
            # no room in time raises to error_cb; the server redelivers after ack_wait.
            msg.ack(timeout=self._ctx.timeout)

    # -- taking messages ----------------------------------------------------------

    def next_msg(self, timeout: float | None = D.NEXT_MSG_TIMEOUT) -> Msg:
        """Block for the next message from the consumer (control messages are handled).

        Raises:
            TimeoutError: nothing arrived within ``timeout``.
            NoHeartbeatError: the consumer has ``idle_heartbeat`` and sent
                nothing for two intervals (it or its stream was deleted);
                the subscription stays, and a later call may get messages.
            MaxSubscriptionsExceededError: the server refused the subscription at
                the connection's subscription limit (once what came is taken).
            PermissionViolationError: the server refused the subscription to the
                deliver subject by permission (once what came is taken).
            NatsError: the subscription has a callback, or has ended.
        """
        deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        sub = self._sub
        clock = self._clock
        while True:
            left = None if deadline is None else deadline.remaining()
            if left is not None and left <= 0:
                raise TimeoutError("no message within the timeout")
            wait, checking = left, False
            if clock is not None:
                now = monotonic()
                if clock.due <= now and clock.missed(now):
                    raise self._missed()
                if left is None or clock.due - now < left:
                    wait, checking = max(clock.due - now, 0.001), True
            try:
                msg = sub.next_msg(wait)  # type: ignore[union-attr]
            except TimeoutError:
                if checking:  # the clock is due, not the caller's deadline
                    continue
                raise
            if msg.is_status:
                self._control(msg, deadline)
                continue
            return msg

    def __iter__(self) -> Iterator[Msg]:
        """Yield messages until the subscription ends (unsubscribed, drained, client closed).

        Raises:
            NatsError: the subscription has a callback.
            MaxSubscriptionsExceededError, PermissionViolationError: as for :meth:`next_msg`.
            ForkedClientError, InlineCallbackError: as iterating a
                :class:`Subscription`.
        """
        while True:
            try:
                yield self.next_msg(None)
            except (MaxSubscriptionsExceededError, PermissionViolationError):  # refused
                raise
            except NatsError:
                if self._ended():
                    return
                raise

    def _ended(self) -> bool:
        """Whether a ``NatsError`` from :meth:`next_msg` means the subscription is over."""
        return self._sub is None or not self._sub.is_active

    @property
    def pending_msgs(self) -> int:
        """Messages received and not yet taken."""
        return self._sub.pending_msgs  # type: ignore[union-attr]

    @property
    def delivered(self) -> int:
        """Messages (control messages included) received so far."""
        return self._sub.delivered  # type: ignore[union-attr]

    def consumer_info(self, timeout: float | None = None) -> ConsumerInfo:
        """The consumer's current info.

        Raises:
            ConsumerNotFoundError: the consumer is gone.
        """
        return self._ctx.consumer_info(self.stream, self.consumer, timeout)

    def _delete_owned(self) -> None:
        if self._owned and not self._client.is_closed:
            try:
                self._ctx.delete_consumer(self.stream, self.consumer)
            except NatsError:
                pass

    def _unwatch(self) -> None:
        if self._watch is not None:
            self._watch.unwatch(self)

    def unsubscribe(self) -> None:
        """Stop receiving; an ephemeral consumer this subscription created is deleted."""
        self._unwatch()
        sub = self._sub
        if sub is not None and sub.is_active and not self._client.is_closed:
            sub.unsubscribe()
        self._delete_owned()

    def drain(self, timeout: float | None = None) -> None:
        """Stop new messages, let the pending ones be handled, then delete an owned consumer.

        Raises:
            TimeoutError: the callback did not finish in time.
        """
        self._unwatch()
        sub = self._sub
        if sub is not None and sub.is_active:
            sub.drain(timeout)
        self._delete_owned()

    def __enter__(self) -> JetStreamSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unsubscribe()

    def __repr__(self) -> str:
        return f"<JetStreamSubscription {self.stream}/{self.consumer}>"


class OrderedPushSubscription(JetStreamSubscription):
    """``subscribe(..., ordered_consumer=True)``: in-order delivery, exactly once.

    Built on the ordered (pull) consumer: the same guarantees, recreated on
    gaps, deletion, missed heartbeats and reconnects.
    """

    def __init__(
        self,
        ctx: JetStreamContext,
        stream: str,
        ordered: OrderedConsumer,
        cb: Callable[[Msg], object] | None,
    ) -> None:
        super().__init__(ctx, stream, "", owned=False)
        self._ordered = ordered
        self._it = ordered.messages()
        self._consume = None
        if cb is not None:
            from .consumer import ConsumeContext

            self._consume = ConsumeContext(self._it, cb, None)

    @property
    def consumer(self) -> str:
        """The current server-side consumer's name."""
        return self._ordered.name or ""

    @consumer.setter
    def consumer(self, value: str) -> None:
        pass

    def next_msg(self, timeout: float | None = D.NEXT_MSG_TIMEOUT) -> Msg:
        """Block for the next message in order.

        Raises:
            TimeoutError: nothing arrived within ``timeout``.
        """
        if self._consume is not None:
            raise NatsError("next_msg() is not available on a subscription with a callback")
        return self._it.next(timeout)

    def _ended(self) -> bool:
        # Without a callback every error of the ordered iterator ends it;
        # with one, next_msg() is refused and iterating says so.
        return self._consume is None

    @property
    def pending_msgs(self) -> int:
        """Always 0 here (messages are pulled as they are taken)."""
        return 0

    @property
    def delivered(self) -> int:
        """The last consumer sequence of the current link."""
        return self._ordered._consumer_seq

    def consumer_info(self, timeout: float | None = None) -> ConsumerInfo:
        """The current server-side consumer's info."""
        return self._ordered.info(timeout)

    def unsubscribe(self) -> None:
        """Stop and delete the server-side consumer."""
        if self._consume is not None:
            self._consume.stop()
        else:
            self._it.stop()
        self._ordered.close()

    def drain(self, timeout: float | None = None) -> None:
        """Deliver what was received, then stop."""
        if self._consume is not None:
            self._consume.drain(timeout)
        else:
            self._it.drain()
        self._ordered.close()


def subscribe(
    ctx: JetStreamContext,
    subject: str,
    queue: str | None,
    cb: Callable[[Msg], object] | None,
    durable: str | None,
    stream: str | None,
    config: ConsumerConfig | None,
    manual_ack: bool,
    ordered_consumer: bool,
    idle_heartbeat: float | None,
    flow_control: bool,
    deliver_policy: DeliverPolicy | None,
    timeout: float | None,
    *,
    headers_only: bool | None = None,
    inactive_threshold: float | None = None,
    pending_msgs_limit: int | None = None,
    pending_bytes_limit: int | None = None,
) -> JetStreamSubscription:
    """Subscribe to ``subject`` through a push consumer, as nats.py's ``js.subscribe`` does.

    The stream is looked up by subject unless given. With ``durable`` (or
    a ``queue``, whose name then serves as the durable name) an existing
    consumer is reused (when another subscriber creates it first, that one
    is joined); otherwise one is created, delivering to
    ``config.deliver_subject`` when given, else to a fresh inbox. Without
    ``durable`` or ``queue`` the consumer is ephemeral and deleted by
    :meth:`JetStreamSubscription.unsubscribe`.

    Args:
        cb: run for each message on the subscription's own thread; acked
            after it returns unless ``manual_ack``.
        ordered_consumer: deliver every message in order exactly once
            (ack none; the consumer is recreated when needed); of
            ``config`` it takes the filter, where to start, the replay
            policy and ``headers_only``.
        idle_heartbeat: seconds between the server's heartbeats.
        flow_control: let the server pace delivery to what is taken.
        headers_only: deliver only the headers (the size in ``Nats-Msg-Size``).
        inactive_threshold: seconds after which the server deletes the
            consumer once nothing listens (ephemeral consumers).
        pending_msgs_limit: messages the subscription holds before it is a
            slow consumer (as the client's ``subscribe``).
        pending_bytes_limit: payload bytes it holds before it is one.

    Raises:
        StreamNotFoundError: no stream captures ``subject``.
        BadSubjectError: ``subject`` is not a filter subject; nothing was sent.
        ValueError: the existing durable is a pull consumer, filters on
            other subjects, or options clash (pending limits with
            ``ordered_consumer``, whose messages wait in its own buffer).
        JetStreamError: the durable (without a queue group) already has a
            subscriber.
        TypeError: ``cb`` is not callable or is an ``async def``; nothing was sent.
    """
    filter_subject(subject)
    if cb is not None:
        check_callback("cb", cb)
    limits = _pending_limits(pending_msgs_limit, pending_bytes_limit)
    config_fields = {
        name: value
        for name, value in (("headers_only", headers_only),
                            ("inactive_threshold", inactive_threshold))
        if value is not None
    }  # fmt: skip
    if config_fields:
        config = merge_config(ConsumerConfig, config, config_fields)
    if ordered_consumer:
        if queue or durable:
            raise ValueError("an ordered consumer cannot have a queue group or a durable name")
        if limits:
            raise ValueError("an ordered consumer takes no pending limits (it buffers its own)")
    if stream is None:
        stream = ctx.stream_name_by_subject(subject, timeout=timeout)
    if ordered_consumer:
        ordered = ctx.ordered_consumer(stream, _ordered_config(subject, config, deliver_policy))
        return OrderedPushSubscription(ctx, stream, ordered, cb)
    durable = durable or (config.durable_name if config is not None else None) or queue
    if durable:
        try:
            info = ctx.consumer_info(stream, durable, timeout)
        except ConsumerNotFoundError:
            info = None
        if info is not None:
            check_filter(info, subject, config)
            return _bind(ctx, stream, info, queue, cb, manual_ack, True, limits)
    chosen = config.deliver_subject if config is not None else None
    fields: dict[str, Any] = {"deliver_subject": chosen or ctx.client.new_inbox()}
    if durable:
        fields["durable_name"] = durable
    if queue:
        fields["deliver_group"] = queue
    if config is None or not (config.filter_subject or config.filter_subjects):
        fields["filter_subject"] = subject
    if idle_heartbeat is not None:
        fields["idle_heartbeat"] = idle_heartbeat
    if flow_control:
        fields["flow_control"] = True
        if idle_heartbeat is None and (config is None or not config.idle_heartbeat):
            fields["idle_heartbeat"] = D.PUSH_IDLE_HEARTBEAT
    if deliver_policy is not None:
        fields["deliver_policy"] = deliver_policy
    cfg = merge_config(ConsumerConfig, config, fields)
    try:
        cons = ctx.create_consumer(stream, cfg, timeout=timeout)
    except (ConsumerExistsError, ConsumerNameExistsError):
        if not durable:
            raise
        # Another subscriber made the durable since we looked (queue members
        # starting at once): join it, as nats.go does.
        info = ctx.consumer_info(stream, durable, timeout)
        check_filter(info, subject, config)
        return _bind(ctx, stream, info, queue, cb, manual_ack, True, limits)
    js_sub = JetStreamSubscription(ctx, stream, cons.name, owned=not durable)
    try:
        # The group may come from config= rather than queue=: listen in it, or
        # the server delivers nothing.
        group = cfg.deliver_group or None
        deliver: str = cfg.deliver_subject  # type: ignore[assignment]
        js_sub._start(deliver, group, cb, not manual_ack, cfg.idle_heartbeat, limits)
    except BaseException:
        js_sub._delete_owned()
        raise
    return js_sub


#: The ConsumerConfig fields an ordered consumer takes over from ``config=``.
_ORDERED_FIELDS = ("deliver_policy", "opt_start_seq", "opt_start_time", "replay_policy",
                   "headers_only")  # fmt: skip


def _ordered_config(
    subject: str, config: ConsumerConfig | None, deliver_policy: DeliverPolicy | None
) -> OrderedConsumerConfig:
    """The ordered consumer ``subscribe(..., ordered_consumer=True)`` asks for.

    Where to start, the replay speed and ``headers_only`` come from
    ``config`` (as nats.py reads them); the rest of an ordered consumer's
    settings are its own.
    """
    fields: dict[str, Any] = {}
    if config is not None:
        if config.durable_name or config.deliver_group:
            raise ValueError("an ordered consumer cannot have a queue group or a durable name")
        fields = {name: getattr(config, name) for name in _ORDERED_FIELDS}
        if config.filter_subjects:
            fields["filter_subjects"] = tuple(config.filter_subjects)
        elif config.filter_subject:
            fields["filter_subjects"] = (config.filter_subject,)
    fields.setdefault("filter_subjects", (subject,))
    if deliver_policy is not None:
        fields["deliver_policy"] = deliver_policy
    return OrderedConsumerConfig(**fields)


def _filters(cfg: ConsumerConfig | None) -> tuple[str, ...]:
    if cfg is None:
        return ()
    return tuple(cfg.filter_subjects or ()) or ((cfg.filter_subject,) if cfg.filter_subject else ())


def check_filter(info: ConsumerInfo, subject: str, config: ConsumerConfig | None) -> None:
    """Refuse a durable that filters on other subjects than a subscription asks for.

    Raises:
        ValueError: its filters are not ``config``'s (when it has some) or ``subject``.
    """
    have = _filters(info.config)
    want = _filters(config) or (subject,)
    if have and set(have) != set(want):
        raise ValueError(f"consumer {info.name!r} filters on {', '.join(have)}, not {subject!r}")


def _bind(
    ctx: JetStreamContext,
    stream: str,
    info: ConsumerInfo,
    queue: str | None,
    cb: Callable[[Msg], object] | None,
    manual_ack: bool,
    exclusive: bool,
    limits: Mapping[str, int],
) -> JetStreamSubscription:
    cfg = info.config
    if cfg is None or not cfg.deliver_subject:
        raise ValueError(f"consumer {info.name!r} is a pull consumer; use pull_subscribe_bind")
    group = cfg.deliver_group or None
    if group != (queue or None) and (queue or group):
        raise ValueError(f"consumer {info.name!r} delivers to queue group {group!r}, not {queue!r}")
    if exclusive and group is None and info.push_bound:
        # A second subscriber would get every message a second time.
        raise JetStreamError(f"consumer {info.name!r} is already bound to a subscription")
    js_sub = JetStreamSubscription(ctx, stream, info.name, owned=False)
    js_sub._start(cfg.deliver_subject, group, cb, not manual_ack, cfg.idle_heartbeat, limits)
    return js_sub


def subscribe_bind(
    ctx: JetStreamContext,
    stream: str,
    consumer: str,
    cb: Callable[[Msg], object] | None,
    manual_ack: bool,
    timeout: float | None,
    pending_msgs_limit: int | None = None,
    pending_bytes_limit: int | None = None,
) -> JetStreamSubscription:
    """Attach to an existing push consumer (it is never deleted by unsubscribing).

    Raises:
        ConsumerNotFoundError: no such consumer.
        ValueError: it is a pull consumer, or a pending limit is not a
            positive integer.
        TypeError: ``cb`` is not callable or is an ``async def``; nothing was sent.
    """
    if cb is not None:
        check_callback("cb", cb)
    limits = _pending_limits(pending_msgs_limit, pending_bytes_limit)
    info = ctx.consumer_info(stream, consumer, timeout)
    return _bind(ctx, stream, info, None if info.config is None else info.config.deliver_group,
                 cb, manual_ack, False, limits)  # fmt: skip


def _pending_limits(msgs: int | None, size: int | None) -> dict[str, int]:
    """The subscription's pending limits that were given, checked (``subscribe``'s keywords)."""
    given = (("pending_msgs_limit", msgs), ("pending_bytes_limit", size))
    return {name: check_count(name, value, 1) for name, value in given if value is not None}
