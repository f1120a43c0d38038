"""Stream configuration: :class:`StreamConfig` and the values inside it.

Every field the 2.15 server accepts (``server/stream.go`` ``StreamConfig``)
is here. Fields left ``None`` are omitted on the wire, so the server's
defaults apply. Durations are float seconds; timestamps are aware
``datetime``\\ s (UTC). Wire keys this client does not know are kept in
``extra`` and sent back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

import attrs

from ..errors import MirrorWithCountersError
from . import _checks as ck
from ._codec import (
    DUR,
    ENUM,
    MAP,
    OBJ,
    OBJS,
    SEQ,
    TIME,
    Wire,
    default_if_zero,
    extra_field,
    field,
    strip_nats,
    unlimited,
)
from .enums import DiscardPolicy, PersistMode, RetentionPolicy, StorageType, StoreCompression

__all__ = [
    "ExternalStream",
    "Placement",
    "Republish",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamConsumerSource",
    "StreamSource",
    "SubjectTransform",
]

REQUIRED = attrs.NOTHING
_uint64 = ck.int_range(0, ck.MAX_UINT64)
_replicas = ck.int_range(0, ck.MAX_REPLICAS)


@attrs.frozen(kw_only=True, repr=False)
class SubjectTransform(Wire):
    """A subject mapping applied to messages (``{{wildcard(1)}}`` etc. in ``dest``).

    Attributes:
        src: the subjects to transform (may use wildcards).
        dest: the subject they become.
        extra: wire keys this client does not know, sent back as they are.
    """

    src: str = field("src", typ=str, default=REQUIRED)
    dest: str = field("dest", typ=str, default=REQUIRED)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class Placement(Wire):
    """Where a stream's replicas may be placed.

    Attributes:
        cluster: the cluster to place it in.
        tags: server tags every replica's server must have.
        preferred: the server to prefer as leader (streams only).
        extra: wire keys this client does not know, sent back as they are.
    """

    cluster: str | None = field("cluster", typ=str)
    tags: Sequence[str] | None = field("tags", SEQ, str)
    preferred: str | None = field("preferred", typ=str)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class ExternalStream(Wire):
    """A stream in another account or JetStream domain.

    Attributes:
        api: the API prefix that reaches it (``$JS.<domain>.API``).
        deliver: the subject prefix the messages are delivered on.
        extra: wire keys this client does not know, sent back as they are.
    """

    api: str = field("api", typ=str, check=ck.literal_subject, default=REQUIRED)
    deliver: str | None = field("deliver", typ=str, check=ck.optional(ck.literal_subject))
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class StreamConsumerSource(Wire):
    """A durable push consumer, made beforehand, that a mirror or source reads (2.14+).

    Needed to source from a work-queue or interest stream reliably.

    Attributes:
        name: the consumer's name.
        deliver_subject: the consumer's deliver subject (a literal subject).
        extra: wire keys this client does not know, sent back as they are.
    """

    name: str = field("name", typ=str, check=ck.asset_name, default=REQUIRED)
    deliver_subject: str = field(
        "deliver_subject", typ=str, check=ck.literal_subject, default=REQUIRED
    )
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class StreamSource(Wire):
    """A stream that a mirror copies or that a stream sources from.

    Attributes:
        name: the origin stream's name.
        opt_start_seq: the first origin sequence to copy.
        opt_start_time: copy messages stored at or after this time.
        filter_subject: copy only these subjects (not with ``subject_transforms``).
        subject_transforms: filters with transforms (src filters, dest maps).
        external: where the origin stream lives when not in this account/domain.
        consumer: a durable consumer to read through (2.14+; not with a
            start position or filter).
        extra: wire keys this client does not know, sent back as they are.
    """

    name: str = field("name", typ=str, check=ck.asset_name, default=REQUIRED)
    opt_start_seq: int | None = field("opt_start_seq", typ=int, check=_uint64)
    opt_start_time: datetime | None = field("opt_start_time", TIME)
    filter_subject: str | None = field("filter_subject", typ=str, check=ck.subject)
    subject_transforms: Sequence[SubjectTransform] | None = field(
        "subject_transforms", OBJS, cls=SubjectTransform
    )
    external: ExternalStream | None = field("external", OBJ, cls=ExternalStream)
    consumer: StreamConsumerSource | None = field("consumer", OBJ, cls=StreamConsumerSource)
    extra: Mapping[str, Any] = extra_field()

    def __attrs_post_init__(self) -> None:
        if not ck.checking():
            return
        if self.filter_subject and self.subject_transforms:
            ck.fail("subject_transforms", "cannot be combined with filter_subject")
        if self.consumer is not None:
            if self.opt_start_seq or self.opt_start_time is not None:
                ck.fail("consumer", "cannot be combined with opt_start_seq or opt_start_time")
            if self.filter_subject:
                ck.fail("consumer", "cannot be combined with filter_subject")


@attrs.frozen(kw_only=True, repr=False)
class Republish(Wire):
    """Republish stored messages to another subject.

    Attributes:
        src: the stored subjects to republish (default: all).
        dest: the subject to republish on (may map wildcards).
        headers_only: republish headers only, not the payload.
        extra: wire keys this client does not know, sent back as they are.
    """

    src: str | None = field("src", typ=str)
    dest: str = field("dest", typ=str, check=ck.not_empty, default=REQUIRED)
    headers_only: bool | None = field("headers_only", typ=bool)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class StreamConsumerLimits(Wire):
    """Defaults and ceilings for the consumers of a stream.

    Attributes:
        inactive_threshold: seconds; the default (and maximum) inactivity
            after which an ephemeral consumer is removed.
        max_ack_pending: the default (and maximum) ``max_ack_pending``.
        extra: wire keys this client does not know, sent back as they are.
    """

    inactive_threshold: float | None = field("inactive_threshold", DUR, check=ck.non_negative)
    max_ack_pending: int | None = field("max_ack_pending", typ=int, check=ck.int_range(0))
    extra: Mapping[str, Any] = extra_field()


_limit = ck.int_range(-1, ck.MAX_INT64)


@attrs.frozen(kw_only=True, repr=False, slots=False)
class StreamConfig(Wire):
    """A stream's configuration (create, update, and as the server reports it).

    Equality ignores the server's ``_nats.*`` metadata keys; use
    :func:`config_matches` to ask whether a server's config honours a
    requested one. ``None`` means "not set": omitted on the wire.

    Attributes:
        name: the stream's name (no whitespace, ``.``, ``*``, ``>``, ``/``, ``\\``).
        description: free text (at most 4 KiB).
        subjects: the subjects stored (default: the stream's name).
        retention: when messages may be removed (default LIMITS).
        max_consumers: the most consumers (-1: as many as the server allows;
            nats-server 2.15 allows 1,000 unless this is set higher).
        max_msgs: the most messages kept (-1 unlimited).
        max_bytes: the most bytes kept (-1 unlimited).
        max_age: seconds a message is kept (0 forever; else at least 0.1).
        max_msgs_per_subject: the most messages kept per subject (-1 unlimited).
        max_msg_size: the largest message accepted, in bytes (-1 unlimited).
        discard: what a full stream does (default OLD).
        storage: FILE (default) or MEMORY.
        num_replicas: replicas, 1 to 5 (0 is the server default, 1).
        no_ack: do not acknowledge publishes.
        duplicate_window: seconds during which ``Nats-Msg-Id`` duplicates
            are dropped (server default 120).
        placement: where replicas may go.
        mirror: the stream this one mirrors (no subjects, no sources).
        sources: the streams this one sources from.
        sealed: no more writes or deletes (an update may only set it).
        deny_delete: refuse deleting single messages.
        deny_purge: refuse purges.
        allow_rollup_hdrs: honour ``Nats-Rollup`` headers.
        allow_direct: answer direct gets (any replica).
        mirror_direct: a mirror answers direct gets for its origin.
        republish: republish stored messages.
        subject_transform: transform subjects on the way in.
        compression: on-disk compression (default NONE).
        first_seq: the first sequence of a new stream.
        metadata: user key/values; the server adds ``_nats.*`` keys.
        discard_new_per_subject: with discard NEW, apply it per subject.
        consumer_limits: defaults and ceilings for consumers.
        allow_msg_ttl: honour ``Nats-TTL`` per-message TTLs (2.11+).
        subject_delete_marker_ttl: seconds a delete marker left when limits
            remove a subject's last message is kept (2.11+; at least 1).
        allow_msg_counter: a counter stream (2.12+; ``Nats-Incr``).
        allow_atomic: accept atomic batch publishes (2.12+).
        allow_msg_schedules: accept scheduled messages (2.12+).
        persist_mode: DEFAULT or ASYNC flushing (2.12+).
        allow_batched: accept fast batch publishes (2.14+).
        extra: wire keys this client does not know, sent back as they are;
            set it to send a field this client does not know yet.
    """

    name: str = field("name", typ=str, check=ck.asset_name, default=REQUIRED)
    description: str | None = field("description", typ=str, check=ck.description)
    subjects: Sequence[str] | None = field("subjects", SEQ, str, check=ck.subjects)
    retention: RetentionPolicy | None = field("retention", ENUM, cls=RetentionPolicy)
    max_consumers: int | None = field("max_consumers", typ=int, check=_limit)
    max_msgs: int | None = field("max_msgs", typ=int, check=_limit)
    max_bytes: int | None = field("max_bytes", typ=int, check=_limit)
    max_age: float | None = field("max_age", DUR, check=ck.min_duration(0.1, "0.1 s"))
    max_msgs_per_subject: int | None = field("max_msgs_per_subject", typ=int, check=_limit)
    max_msg_size: int | None = field("max_msg_size", typ=int, check=ck.int_range(-1, ck.MAX_INT32))
    discard: DiscardPolicy | None = field("discard", ENUM, cls=DiscardPolicy)
    storage: StorageType | None = field("storage", ENUM, cls=StorageType)
    num_replicas: int | None = field("num_replicas", typ=int, check=_replicas)
    no_ack: bool | None = field("no_ack", typ=bool)
    duplicate_window: float | None = field(
        "duplicate_window", DUR, check=ck.min_duration(0.1, "0.1 s")
    )
    placement: Placement | None = field("placement", OBJ, cls=Placement)
    mirror: StreamSource | None = field("mirror", OBJ, cls=StreamSource)
    sources: Sequence[StreamSource] | None = field("sources", OBJS, cls=StreamSource)
    sealed: bool | None = field("sealed", typ=bool)
    deny_delete: bool | None = field("deny_delete", typ=bool)
    deny_purge: bool | None = field("deny_purge", typ=bool)
    allow_rollup_hdrs: bool | None = field("allow_rollup_hdrs", typ=bool)
    allow_direct: bool | None = field("allow_direct", typ=bool)
    mirror_direct: bool | None = field("mirror_direct", typ=bool)
    republish: Republish | None = field("republish", OBJ, cls=Republish)
    subject_transform: SubjectTransform | None = field(
        "subject_transform", OBJ, cls=SubjectTransform
    )
    compression: StoreCompression | None = field("compression", ENUM, cls=StoreCompression)
    first_seq: int | None = field("first_seq", typ=int, check=_uint64)
    metadata: Mapping[str, str] | None = field(
        "metadata", MAP, str, check=ck.metadata, eq=strip_nats
    )
    discard_new_per_subject: bool | None = field("discard_new_per_subject", typ=bool)
    consumer_limits: StreamConsumerLimits | None = field(
        "consumer_limits", OBJ, cls=StreamConsumerLimits
    )
    allow_msg_ttl: bool | None = field("allow_msg_ttl", typ=bool)
    subject_delete_marker_ttl: float | None = field(
        "subject_delete_marker_ttl", DUR, check=ck.min_duration(1.0, "1 s")
    )
    allow_msg_counter: bool | None = field("allow_msg_counter", typ=bool)
    allow_atomic: bool | None = field("allow_atomic", typ=bool)
    allow_msg_schedules: bool | None = field("allow_msg_schedules", typ=bool)
    persist_mode: PersistMode | None = field("persist_mode", ENUM, cls=PersistMode)
    allow_batched: bool | None = field("allow_batched", typ=bool)
    extra: Mapping[str, Any] = extra_field()

    _ENVELOPE: ClassVar[frozenset[str]] = frozenset({"pedantic"})
    _MATCH_NORMALIZE: ClassVar[dict[str, Any]] = {
        "max_consumers": unlimited,
        "max_msgs": unlimited,
        "max_bytes": unlimited,
        "max_msgs_per_subject": unlimited,
        "max_msg_size": unlimited,
        "num_replicas": lambda v: 1 if v == 0 else v,
        "duplicate_window": default_if_zero,
    }

    def _match_skip(self) -> frozenset[str]:
        return frozenset({"mirror_direct"}) if self.mirror is not None else frozenset()

    def __attrs_post_init__(self) -> None:
        if ck.checking():
            _check_stream(self)


def _check_stream(c: StreamConfig) -> None:
    if c.mirror is not None:
        if c.subjects:
            ck.fail("subjects", "a mirror cannot have subjects")
        if c.sources:
            ck.fail("sources", "a mirror cannot have sources")
        if c.first_seq:
            ck.fail("first_seq", "a mirror cannot set first_seq")
        if c.subject_delete_marker_ttl:
            ck.fail("subject_delete_marker_ttl", "a mirror cannot have delete markers")
        if c.allow_msg_counter:  # the class docs/counters.md names, also a ValueError
            raise MirrorWithCountersError(
                400, 10173, "allow_msg_counter: a mirror cannot be a counter stream"
            )
        for name in ("allow_atomic", "allow_batched", "allow_msg_schedules"):
            if getattr(c, name):
                ck.fail(name, "a mirror cannot set it")
    if c.sources and c.allow_msg_schedules:
        ck.fail("allow_msg_schedules", "a stream with sources cannot schedule messages")
    if c.max_age and c.duplicate_window and c.duplicate_window > c.max_age:
        ck.fail("duplicate_window", "must not be longer than max_age")
    if c.deny_purge and c.allow_rollup_hdrs:
        ck.fail("allow_rollup_hdrs", "roll-ups need purges (deny_purge is set)")
    if c.discard_new_per_subject:
        if c.discard is not DiscardPolicy.NEW:
            ck.fail("discard_new_per_subject", "requires discard=DiscardPolicy.NEW")
        if not c.max_msgs_per_subject or c.max_msgs_per_subject <= 0:
            ck.fail("discard_new_per_subject", "requires max_msgs_per_subject > 0")
    if c.allow_msg_counter:
        if c.discard is DiscardPolicy.NEW:
            ck.fail("allow_msg_counter", "a counter stream cannot use discard NEW")
        if c.allow_msg_ttl:
            ck.fail("allow_msg_counter", "a counter stream cannot use message TTLs")
        if c.allow_msg_schedules:
            ck.fail("allow_msg_counter", "a counter stream cannot schedule messages")
        if c.retention not in (None, RetentionPolicy.LIMITS):
            ck.fail("allow_msg_counter", "a counter stream needs LIMITS retention")
    if c.allow_msg_schedules and c.discard is DiscardPolicy.NEW:
        ck.fail("allow_msg_schedules", "message scheduling cannot use discard NEW")
    if c.persist_mode is PersistMode.ASYNC:
        if c.storage is StorageType.MEMORY:
            ck.fail("persist_mode", "ASYNC needs file storage")
        if c.num_replicas and c.num_replicas > 1:
            ck.fail("persist_mode", "ASYNC is not supported on replicated streams")
        if c.allow_atomic:
            ck.fail("persist_mode", "ASYNC is not supported with allow_atomic")
