"""Consumer configuration: :class:`ConsumerConfig` and :class:`OrderedConsumerConfig`.

Every field the 2.15 server accepts (``server/consumer.go``
``ConsumerConfig``) is here. Fields left ``None`` are omitted on the wire,
so the server's defaults apply. Durations are float seconds; timestamps are
aware ``datetime``\\ s (UTC). Wire keys this client does not know are kept
in ``extra`` and sent back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

import attrs

from . import _checks as ck
from ._codec import (
    DUR,
    DURS,
    ENUM,
    MAP,
    SEQ,
    TIME,
    Wire,
    default_if_zero,
    extra_field,
    field,
    strip_nats,
    unlimited,
)
from .enums import AckPolicy, DeliverPolicy, PriorityPolicy, ReplayPolicy

__all__ = ["ConsumerConfig", "OrderedConsumerConfig"]

_count = ck.int_range(0, ck.MAX_INT64)
_limit = ck.int_range(-1, ck.MAX_INT64)
_uint64 = ck.int_range(0, ck.MAX_UINT64)
_replicas = ck.int_range(0, ck.MAX_REPLICAS)


@attrs.frozen(kw_only=True, repr=False, slots=False)
class ConsumerConfig(Wire):
    """A consumer's configuration (create, update, and as the server reports it).

    A consumer with a ``durable_name`` is durable; one without is removed
    once inactive for ``inactive_threshold``. It is pull-based unless it has
    a ``deliver_subject``. Equality ignores the server's ``_nats.*``
    metadata keys. ``None`` means "not set": omitted on the wire.

    Attributes:
        name: the consumer's name (server-chosen when omitted).
        durable_name: the durable name (legacy; equal to ``name`` if both).
        description: free text (at most 4 KiB).
        deliver_policy: where delivery starts (default ALL).
        opt_start_seq: the first stream sequence, with BY_START_SEQUENCE.
        opt_start_time: the first time, with BY_START_TIME.
        ack_policy: how messages are acknowledged. Defaults to EXPLICIT, as
            in nats.go and nats.py; ``None`` omits it and the server then
            uses NONE.
        ack_wait: seconds before an unacknowledged message is redelivered
            (server default 30).
        max_deliver: the most deliveries of one message (-1 unlimited).
        backoff: seconds between redeliveries, one per attempt (overrides
            ``ack_wait``).
        filter_subject: deliver only this subject (not with ``filter_subjects``).
        filter_subjects: deliver only these subjects.
        replay_policy: INSTANT (default) or ORIGINAL pace.
        rate_limit_bps: push only: bits per second at most.
        sample_freq: percentage of acks sampled for advisories ("50%").
        max_waiting: pull only: the most waiting pull requests (default 512).
        max_ack_pending: the most unacknowledged messages (-1 unlimited).
        flow_control: push only: flow control (needs ``idle_heartbeat``).
        idle_heartbeat: push only: seconds of idleness between heartbeats.
        headers_only: deliver headers only, with ``Nats-Msg-Size``.
        max_batch: pull only: the largest batch a request may ask for.
        max_expires: pull only: seconds, the longest request expiry.
        max_bytes: pull only: the largest ``max_bytes`` a request may ask for.
        deliver_subject: push only: where messages are sent.
        deliver_group: push only: the queue group that receives them.
        inactive_threshold: seconds of inactivity after which the server
            removes the consumer.
        num_replicas: replicas (0 inherits the stream's).
        mem_storage: keep the consumer's state in memory.
        direct: an internal, unreplicated consumer (push, ephemeral only).
        sourcing: internal: a consumer made for stream sourcing (2.14+).
        metadata: user key/values; the server adds ``_nats.*`` keys.
        pause_until: no delivery until this time (2.11+).
        priority_groups: pull only: the priority group names (2.11+).
        priority_policy: how requests in the groups are chosen (2.11+).
        priority_timeout: seconds a pinned client keeps its pin without
            pulling (PINNED_CLIENT; server default 120).
        extra: wire keys this client does not know, sent back as they are;
            set it to send a field this client does not know yet.
    """

    name: str | None = field("name", typ=str, check=ck.asset_name)
    durable_name: str | None = field("durable_name", typ=str, check=ck.asset_name)
    description: str | None = field("description", typ=str, check=ck.description)
    deliver_policy: DeliverPolicy | None = field("deliver_policy", ENUM, cls=DeliverPolicy)
    opt_start_seq: int | None = field("opt_start_seq", typ=int, check=_uint64)
    opt_start_time: datetime | None = field("opt_start_time", TIME)
    ack_policy: AckPolicy | None = field(
        "ack_policy", ENUM, cls=AckPolicy, default=AckPolicy.EXPLICIT
    )
    ack_wait: float | None = field("ack_wait", DUR, check=ck.non_negative)
    max_deliver: int | None = field("max_deliver", typ=int, check=_limit)
    backoff: Sequence[float] | None = field("backoff", DURS, check=ck.each(ck.non_negative))
    filter_subject: str | None = field("filter_subject", typ=str, check=ck.subject)
    filter_subjects: Sequence[str] | None = field("filter_subjects", SEQ, str, check=ck.subjects)
    replay_policy: ReplayPolicy | None = field("replay_policy", ENUM, cls=ReplayPolicy)
    rate_limit_bps: int | None = field("rate_limit_bps", typ=int, check=_uint64)
    sample_freq: str | None = field("sample_freq", typ=str, check=ck.sample_freq)
    max_waiting: int | None = field("max_waiting", typ=int, check=_count)
    max_ack_pending: int | None = field("max_ack_pending", typ=int, check=_limit)
    flow_control: bool | None = field("flow_control", typ=bool)
    idle_heartbeat: float | None = field("idle_heartbeat", DUR, check=ck.non_negative)
    headers_only: bool | None = field("headers_only", typ=bool)
    max_batch: int | None = field("max_batch", typ=int, check=_count)
    max_expires: float | None = field("max_expires", DUR, check=ck.non_negative)
    max_bytes: int | None = field("max_bytes", typ=int, check=_count)
    deliver_subject: str | None = field("deliver_subject", typ=str, check=ck.literal_subject)
    deliver_group: str | None = field("deliver_group", typ=str, check=ck.not_empty)
    inactive_threshold: float | None = field("inactive_threshold", DUR, check=ck.non_negative)
    num_replicas: int | None = field("num_replicas", typ=int, check=_replicas)
    mem_storage: bool | None = field("mem_storage", typ=bool)
    direct: bool | None = field("direct", typ=bool)
    sourcing: bool | None = field("sourcing", typ=bool)
    metadata: Mapping[str, str] | None = field(
        "metadata", MAP, str, check=ck.metadata, eq=strip_nats
    )
    pause_until: datetime | None = field("pause_until", TIME)
    priority_groups: Sequence[str] | None = field("priority_groups", SEQ, str, check=ck.group_names)
    priority_policy: PriorityPolicy | None = field("priority_policy", ENUM, cls=PriorityPolicy)
    priority_timeout: float | None = field("priority_timeout", DUR, check=ck.non_negative)
    extra: Mapping[str, Any] = extra_field()

    _MATCH_NORMALIZE: ClassVar[dict[str, Any]] = {
        "max_deliver": unlimited,
        "ack_wait": default_if_zero,
        "max_waiting": default_if_zero,
        "max_ack_pending": default_if_zero,
        "inactive_threshold": default_if_zero,
        "priority_timeout": default_if_zero,
    }

    def _match_skip(self) -> frozenset[str]:
        return frozenset({"ack_wait"}) if self.backoff else frozenset()

    @property
    def is_push(self) -> bool:
        """Whether the consumer delivers to a subject (has ``deliver_subject``)."""
        return bool(self.deliver_subject)

    def __attrs_post_init__(self) -> None:
        if ck.checking():
            _check_start(self)
            _check_consumer(self)


def _check_start(c: Any) -> None:
    """The start position rules shared with :class:`OrderedConsumerConfig`."""
    policy = c.deliver_policy or DeliverPolicy.ALL
    filtered = bool(getattr(c, "filter_subject", None) or c.filter_subjects)
    if c.opt_start_seq and policy is not DeliverPolicy.BY_START_SEQUENCE:
        ck.fail("opt_start_seq", "needs deliver_policy=DeliverPolicy.BY_START_SEQUENCE")
    if c.opt_start_time is not None and policy is not DeliverPolicy.BY_START_TIME:
        ck.fail("opt_start_time", "needs deliver_policy=DeliverPolicy.BY_START_TIME")
    if policy is DeliverPolicy.BY_START_SEQUENCE and not c.opt_start_seq:
        ck.fail("deliver_policy", "BY_START_SEQUENCE needs opt_start_seq >= 1")
    if policy is DeliverPolicy.BY_START_TIME and c.opt_start_time is None:
        ck.fail("deliver_policy", "BY_START_TIME needs opt_start_time")
    if policy is DeliverPolicy.LAST_PER_SUBJECT and not filtered and hasattr(c, "filter_subject"):
        ck.fail("deliver_policy", "LAST_PER_SUBJECT needs filter_subject or filter_subjects")
    if c.filter_subjects is not None and any(not s for s in c.filter_subjects):
        ck.fail("filter_subjects", "must not contain an empty subject")


def _check_consumer(c: ConsumerConfig) -> None:
    if c.name and c.durable_name and c.name != c.durable_name:
        ck.fail("durable_name", f"{c.durable_name!r} differs from name {c.name!r}")
    if c.filter_subject and c.filter_subjects:
        ck.fail("filter_subjects", "cannot be combined with filter_subject")
    if c.backoff and c.max_deliver not in (None, 0, -1) and len(c.backoff) > c.max_deliver:
        ck.fail("backoff", "must not have more entries than max_deliver")
    if c.flow_control and not c.idle_heartbeat:
        ck.fail("flow_control", "needs idle_heartbeat")
    if c.is_push:
        if c.max_waiting:
            ck.fail("max_waiting", "is for pull consumers (deliver_subject is set)")
        if c.idle_heartbeat and c.idle_heartbeat < 0.1:
            ck.fail("idle_heartbeat", "must be at least 0.1 s")
        if c.priority_policy not in (None, PriorityPolicy.NONE) or c.priority_groups:
            ck.fail("priority_policy", "is for pull consumers (deliver_subject is set)")
    else:
        for name in ("rate_limit_bps", "idle_heartbeat", "flow_control"):
            if getattr(c, name):
                ck.fail(name, "is for push consumers (set deliver_subject)")
        if c.max_expires and c.max_expires < 0.001:
            ck.fail("max_expires", "must be 0 or at least 0.001 s")
        if c.ack_policy is AckPolicy.FLOW_CONTROL:
            ck.fail("ack_policy", "FLOW_CONTROL is for push consumers (set deliver_subject)")
    if c.direct and not c.is_push:
        ck.fail("direct", "needs deliver_subject")
    if c.priority_policy in (None, PriorityPolicy.NONE):
        if c.priority_groups:
            ck.fail("priority_groups", "needs a priority_policy")
        if c.priority_timeout:
            ck.fail("priority_timeout", "needs priority_policy=PriorityPolicy.PINNED_CLIENT")
    elif not c.priority_groups:
        ck.fail("priority_policy", "needs priority_groups")


@attrs.frozen(kw_only=True, repr=False)
class OrderedConsumerConfig(Wire):
    """The options of an ordered consumer (client-side; never sent as is).

    An ordered consumer is a chain of ephemeral, memory-stored, R1,
    ack-none consumers; :meth:`consumer_config` builds each link.
    Follows nats.go's ``jetstream.OrderedConsumerConfig`` (and, unlike it,
    passes ``replay_policy`` on). ``to_api`` / ``from_api`` give a JSON form
    for storing the options, not anything the server accepts.

    Attributes:
        filter_subjects: deliver only these subjects.
        deliver_policy: where delivery starts (default ALL).
        opt_start_seq: the first stream sequence, with BY_START_SEQUENCE.
        opt_start_time: the first time, with BY_START_TIME.
        replay_policy: INSTANT (default) or ORIGINAL pace.
        inactive_threshold: seconds before the server removes an idle
            link (default 300).
        headers_only: deliver headers only.
        max_reset_attempts: the most recreations in a row before giving up
            (``None``: unlimited).
        metadata: user key/values put on every link.
        name_prefix: the links' name prefix (default: a unique id); the
            links are named ``<prefix>_<n>``.
        extra: unknown keys of the stored JSON form.
    """

    filter_subjects: Sequence[str] | None = field("filter_subjects", SEQ, str, check=ck.subjects)
    deliver_policy: DeliverPolicy | None = field("deliver_policy", ENUM, cls=DeliverPolicy)
    opt_start_seq: int | None = field("opt_start_seq", typ=int, check=_uint64)
    opt_start_time: datetime | None = field("opt_start_time", TIME)
    replay_policy: ReplayPolicy | None = field("replay_policy", ENUM, cls=ReplayPolicy)
    inactive_threshold: float | None = field("inactive_threshold", DUR, check=ck.non_negative)
    headers_only: bool | None = field("headers_only", typ=bool)
    max_reset_attempts: int | None = field("max_reset_attempts", typ=int, check=ck.int_range(1))
    metadata: Mapping[str, str] | None = field(
        "metadata", MAP, str, check=ck.metadata, eq=strip_nats
    )
    name_prefix: str | None = field("name_prefix", typ=str, check=ck.asset_name)
    extra: Mapping[str, Any] = extra_field()

    #: A link's ``inactive_threshold`` when none is given (nats.go's default).
    DEFAULT_INACTIVE_THRESHOLD: ClassVar[float] = 300.0

    def __attrs_post_init__(self) -> None:
        if ck.checking():
            _check_start(self)

    def consumer_config(self, name: str, next_seq: int | None = None) -> ConsumerConfig:
        """The config of one link of the chain.

        Args:
            name: the link's consumer name.
            next_seq: the stream sequence to resume at (the last one
                delivered plus one); ``None`` for the first link, which
                starts where ``deliver_policy`` says.

        Raises:
            ValueError: ``name`` or ``next_seq`` is not valid.
        """
        filters = self.filter_subjects or ()
        base: dict[str, Any] = {
            "name": name,
            "ack_policy": AckPolicy.NONE,
            "inactive_threshold": self.inactive_threshold or self.DEFAULT_INACTIVE_THRESHOLD,
            "num_replicas": 1,
            "mem_storage": True,
            "headers_only": self.headers_only or None,
            "replay_policy": self.replay_policy,
            "metadata": self.metadata,
            "filter_subject": filters[0] if len(filters) == 1 else None,
            "filter_subjects": filters if len(filters) > 1 else None,
        }
        if next_seq is not None:
            base.update(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=next_seq)
            return ConsumerConfig(**base)
        policy = self.deliver_policy or DeliverPolicy.ALL
        base["deliver_policy"] = policy
        if policy is DeliverPolicy.BY_START_SEQUENCE:
            base["opt_start_seq"] = self.opt_start_seq
        elif policy is DeliverPolicy.BY_START_TIME:
            base["opt_start_time"] = self.opt_start_time
        elif policy is DeliverPolicy.LAST_PER_SUBJECT and not filters:
            base["filter_subjects"] = None
            base["filter_subject"] = ">"
        return ConsumerConfig(**base)
