"""What the server reports about streams and consumers (and, re-exported, the rest).

Build these with ``from_api`` from the server's JSON; ``to_api`` gives the
JSON back (useful for caching or shipping, e.g. to Spark executors). Field
names are the wire keys. Durations are float seconds; timestamps are UTC
:class:`~jetstream_sync._timefmt.NanoDatetime`\\ s, which are
``datetime``\\ s that keep the server's nanoseconds. Go's zero time (the
server's "never") reads as ``None``. Wire keys this client does not know are
kept in ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

import attrs

from .._timefmt import GO_ZERO_TIME
from ..errors import APIError, api_error
from ._codec import (
    DUR,
    ENUM,
    OBJ,
    OBJS,
    SEQ,
    TIME,
    Wire,
    extra_field,
    info_field,
)
from .consumer_config import ConsumerConfig
from .enums import MigrationStatusType, RetentionPolicy
from .replies import (
    AccountInfo,
    AccountLimits,
    AccountTier,
    APIStats,
    ArrowPubAck,
    PubAck,
    RawStreamMsg,
    format_header_block,
    parse_header_block,
)
from .stream_config import ExternalStream, Placement, StreamConfig, SubjectTransform

__all__ = [
    "APIErrorInfo",
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AccountTier",
    "ArrowPubAck",
    "ClusterInfo",
    "ConsumerInfo",
    "DesiredClusterInfo",
    "DesiredClusterOrigin",
    "DesiredClusterStatus",
    "LostStreamData",
    "PeerInfo",
    "PriorityGroupState",
    "PubAck",
    "RawStreamMsg",
    "SequenceInfo",
    "StreamAlternate",
    "StreamInfo",
    "StreamSourceInfo",
    "StreamState",
    "format_header_block",
    "parse_header_block",
]

_ENVELOPE = frozenset({"type", "error", "total", "offset", "limit", "did_create"})
field = info_field


def _time(wire: str, lazy: bool = False) -> Any:
    """A timestamp the server always sends; Go's zero time is ``None``."""
    return field(wire, TIME, none_wire=GO_ZERO_TIME, lazy=lazy)


@attrs.frozen(kw_only=True, repr=False)
class APIErrorInfo(Wire):
    """An API error reported inside an info (e.g. a failing stream source).

    Attributes:
        code: the HTTP-like status code.
        err_code: the JetStream error code.
        description: the server's text.
        extra: wire keys this client does not know.
    """

    code: int = field("code", default=0)
    err_code: int = field("err_code", default=0)
    description: str = field("description", default="")
    extra: Mapping[str, Any] = extra_field()

    def to_error(self) -> APIError:
        """The matching :class:`~jetstream_sync.errors.APIError` subclass instance."""
        return api_error(self.code, self.err_code, self.description)


@attrs.frozen(kw_only=True, repr=False)
class PeerInfo(Wire):
    """One replica of a stream or consumer.

    Attributes:
        name: the server's name.
        current: whether it is caught up.
        offline: whether it has not been seen recently.
        active: seconds since it was last heard from.
        lag: operations it is behind.
        peer: its Raft peer id.
        pending: part of the assignment but not of the Raft group yet.
        extra: wire keys this client does not know.
    """

    name: str = field("name", default="")
    current: bool = field("current", default=False)
    offline: bool = field("offline", default=False, omit_zero=True)
    active: float = field("active", DUR, default=0.0)
    lag: int = field("lag", default=0, omit_zero=True)
    peer: str = field("peer", default="")
    pending: bool = field("pending", default=False, omit_zero=True)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class DesiredClusterOrigin(Wire):
    """What a stream or consumer had before the change in progress (2.15+).

    Attributes:
        replicas: the replica count before.
        placement: the placement before.
        retention: the retention that stays in force until the change ends.
        extra: wire keys this client does not know.
    """

    replicas: int = field("replicas", default=0)
    placement: Placement | None = field("placement", OBJ, cls=Placement)
    retention: RetentionPolicy | None = field("retention", ENUM, cls=RetentionPolicy)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class DesiredClusterStatus(Wire):
    """What a move to the desired placement is doing or waiting on (2.15+).

    Attributes:
        description: a short status line.
        type: what has to change for the move to advance.
        err: the lasting failure behind it, if any.
        extra: wire keys this client does not know.
    """

    description: str = field("description", default="")
    type: MigrationStatusType | None = field("type", ENUM, cls=MigrationStatusType)
    err: str | None = field("err")
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class DesiredClusterInfo(Wire):
    """The placement a stream or consumer is moving to (2.15+).

    Attributes:
        name: the target cluster.
        replicas: the target replicas.
        origin: what it had before.
        status: what the move is doing.
        extra: wire keys this client does not know.
    """

    name: str | None = field("name")
    replicas: tuple[PeerInfo, ...] | None = field("replicas", OBJS, cls=PeerInfo)
    origin: DesiredClusterOrigin | None = field("origin", OBJ, cls=DesiredClusterOrigin)
    status: DesiredClusterStatus | None = field("status", OBJ, cls=DesiredClusterStatus)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class ClusterInfo(Wire):
    """The servers behind a stream or consumer.

    Attributes:
        name: the cluster's name (absent when not clustered).
        raft_group: the Raft group's name.
        leader: the leader server's name.
        leader_since: when it became leader.
        system_account: whether the system account carries the traffic.
        traffic_account: the account that carries the replication traffic.
        replicas: the other replicas (the leader is not listed).
        desired: the placement it is moving to (2.15+).
        extra: wire keys this client does not know.
    """

    name: str | None = field("name")
    raft_group: str | None = field("raft_group")
    leader: str | None = field("leader")
    leader_since: datetime | None = field("leader_since", TIME)
    system_account: bool = field("system_account", default=False, omit_zero=True)
    traffic_account: str | None = field("traffic_account")
    replicas: tuple[PeerInfo, ...] | None = field("replicas", OBJS, cls=PeerInfo)
    desired: DesiredClusterInfo | None = field("desired", OBJ, cls=DesiredClusterInfo)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class StreamSourceInfo(Wire):
    """The state of a mirror's or source's link to its origin.

    Attributes:
        name: the origin stream.
        external: where the origin lives, when external.
        lag: messages the link is behind.
        active: seconds since the origin was last heard from (``None``: never).
        error: why the link is failing, if it is.
        filter_subject: the subject filter.
        subject_transforms: the filters with transforms.
        extra: wire keys this client does not know.
    """

    name: str = field("name", default="")
    external: ExternalStream | None = field("external", OBJ, cls=ExternalStream)
    lag: int = field("lag", default=0)
    active: float | None = field("active", DUR, none_wire=-1)
    error: APIErrorInfo | None = field("error", OBJ, cls=APIErrorInfo)
    filter_subject: str | None = field("filter_subject")
    subject_transforms: tuple[SubjectTransform, ...] | None = field(
        "subject_transforms", OBJS, cls=SubjectTransform
    )
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class StreamAlternate(Wire):
    """A mirror (or the stream itself) that can answer reads, nearest first.

    Attributes:
        name: the stream's name.
        domain: its JetStream domain.
        cluster: its cluster.
        extra: wire keys this client does not know.
    """

    name: str = field("name", default="")
    domain: str | None = field("domain")
    cluster: str = field("cluster", default="")
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class LostStreamData(Wire):
    """Messages the server found damaged and lost.

    Attributes:
        msgs: the lost sequences.
        bytes: the bytes lost.
        extra: wire keys this client does not know.
    """

    msgs: tuple[int, ...] | None = field("msgs", SEQ)
    bytes: int = field("bytes", default=0)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False, slots=False)
class StreamState(Wire):
    """What a stream holds.

    Attributes:
        messages: messages stored.
        bytes: bytes stored.
        first_seq: the first sequence stored.
        first_ts: when it was stored (``None`` when the stream is empty).
        last_seq: the last sequence stored.
        last_ts: when it was stored (``None`` when the stream is empty).
        num_subjects: distinct subjects stored.
        subjects: subject -> message count, when asked for with
            ``subjects_filter`` (else ``None``).
        num_deleted: deleted messages between first and last.
        deleted: their sequences, when asked for with ``deleted_details``.
        lost: messages lost to damage, if any.
        consumer_count: consumers.
        extra: wire keys this client does not know.
    """

    messages: int = field("messages", default=0)
    bytes: int = field("bytes", default=0)
    first_seq: int = field("first_seq", default=0)
    first_ts: datetime | None = _time("first_ts", lazy=True)
    last_seq: int = field("last_seq", default=0)
    last_ts: datetime | None = _time("last_ts", lazy=True)
    num_subjects: int = field("num_subjects", default=0, omit_zero=True)
    subjects: Mapping[str, int] | None = field("subjects", "map", lazy=True)
    num_deleted: int = field("num_deleted", default=0, omit_zero=True)
    deleted: tuple[int, ...] | None = field("deleted", SEQ, lazy=True)
    lost: LostStreamData | None = field("lost", OBJ, cls=LostStreamData, lazy=True)
    consumer_count: int = field("consumer_count", default=0)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False, slots=False)
class StreamInfo(Wire):
    """A stream's configuration and state.

    ``from_api`` takes a stream info response as it comes; its envelope keys
    (``type``, ``total``, ``offset``, ``limit``, ``did_create``) are dropped.

    Attributes:
        config: the stream's configuration.
        created: when the stream was created.
        state: what it holds.
        domain: its JetStream domain.
        cluster: the servers behind it.
        mirror: the mirror link's state, for a mirror.
        sources: the source links' states, in the order the server lists them (no fixed order).
        alternates: mirrors that can answer reads, nearest first.
        ts: when the server gathered this info.
        extra: wire keys this client does not know.
    """

    # Typed as always there: every stream info the server sends has both.
    config: StreamConfig = field("config", OBJ, cls=StreamConfig, lazy=True)
    created: datetime | None = field("created", TIME, lazy=True)
    state: StreamState = field("state", OBJ, cls=StreamState)
    domain: str | None = field("domain")
    cluster: ClusterInfo | None = field("cluster", OBJ, cls=ClusterInfo, lazy=True)
    mirror: StreamSourceInfo | None = field("mirror", OBJ, cls=StreamSourceInfo, lazy=True)
    sources: tuple[StreamSourceInfo, ...] | None = field(
        "sources", OBJS, cls=StreamSourceInfo, lazy=True
    )
    alternates: tuple[StreamAlternate, ...] | None = field(
        "alternates", OBJS, cls=StreamAlternate, lazy=True
    )
    ts: datetime | None = field("ts", TIME, lazy=True)
    extra: Mapping[str, Any] = extra_field()

    _ENVELOPE: ClassVar[frozenset[str]] = _ENVELOPE


@attrs.frozen(kw_only=True, repr=False)
class SequenceInfo(Wire):
    """A consumer position: a consumer sequence and the stream sequence it maps to.

    Attributes:
        consumer_seq: the consumer sequence.
        stream_seq: the stream sequence.
        last_active: when it last moved.
        extra: wire keys this client does not know.
    """

    consumer_seq: int = field("consumer_seq", default=0)
    stream_seq: int = field("stream_seq", default=0)
    last_active: datetime | None = field("last_active", TIME)
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False)
class PriorityGroupState(Wire):
    """The state of one priority group of a pull consumer (2.11+).

    Attributes:
        group: the group's name.
        pinned_client_id: the pin id of the pinned client (PINNED_CLIENT).
        pinned_ts: when it was pinned (``None``: no client is pinned).
        extra: wire keys this client does not know.
    """

    group: str = field("group", default="")
    pinned_client_id: str | None = field("pinned_client_id")
    pinned_ts: datetime | None = _time("pinned_ts")
    extra: Mapping[str, Any] = extra_field()


@attrs.frozen(kw_only=True, repr=False, slots=False)
class ConsumerInfo(Wire):
    """A consumer's configuration and state.

    Attributes:
        stream_name: the stream it reads.
        name: its name.
        created: when it was created.
        config: its configuration.
        delivered: the last position delivered.
        ack_floor: the position below which everything is acknowledged.
        num_ack_pending: messages delivered and not yet acknowledged.
        num_redelivered: messages delivered more than once.
        num_waiting: pull requests waiting.
        num_pending: messages left to deliver.
        cluster: the servers behind it.
        push_bound: a push consumer has a subscriber on its deliver subject.
        paused: delivery is paused (``pause_until`` in the config).
        pause_remaining: seconds until the pause ends, when paused.
        ts: when the server gathered this info.
        priority_groups: the state of each priority group.
        extra: wire keys this client does not know.
    """

    stream_name: str = field("stream_name", default="")
    name: str = field("name", default="")
    created: datetime | None = field("created", TIME, lazy=True)
    config: ConsumerConfig | None = field("config", OBJ, cls=ConsumerConfig, lazy=True)
    delivered: SequenceInfo | None = field("delivered", OBJ, cls=SequenceInfo, lazy=True)
    ack_floor: SequenceInfo | None = field("ack_floor", OBJ, cls=SequenceInfo, lazy=True)
    num_ack_pending: int = field("num_ack_pending", default=0)
    num_redelivered: int = field("num_redelivered", default=0)
    num_waiting: int = field("num_waiting", default=0)
    num_pending: int = field("num_pending", default=0)
    cluster: ClusterInfo | None = field("cluster", OBJ, cls=ClusterInfo, lazy=True)
    push_bound: bool = field("push_bound", default=False, omit_zero=True)
    paused: bool = field("paused", default=False, omit_zero=True)
    pause_remaining: float | None = field("pause_remaining", DUR)
    ts: datetime | None = field("ts", TIME, lazy=True)
    priority_groups: tuple[PriorityGroupState, ...] | None = field(
        "priority_groups", OBJS, cls=PriorityGroupState, lazy=True
    )
    extra: Mapping[str, Any] = extra_field()

    _ENVELOPE: ClassVar[frozenset[str]] = _ENVELOPE
