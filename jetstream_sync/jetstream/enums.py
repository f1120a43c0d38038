"""JetStream enumerations; each member's value is its string on the wire.

The members are ``str``\\ s (``enum.StrEnum``), so ``RetentionPolicy.LIMITS ==
"limits"`` and either form is accepted wherever a config takes one. Values
are the ones nats-server 2.15 marshals (``server/store.go``,
``server/stream.go``, ``server/consumer.go``, ``server/filestore.go``).
"""

from __future__ import annotations

import enum

__all__ = [
    "AckPolicy",
    "DeliverPolicy",
    "DiscardPolicy",
    "MigrationStatusType",
    "PersistMode",
    "PriorityPolicy",
    "ReplayPolicy",
    "RetentionPolicy",
    "StorageType",
    "StoreCompression",
]


class RetentionPolicy(enum.StrEnum):
    """When a stream may remove a message.

    Attributes:
        LIMITS: only when a limit (age, count, size) says so (the default).
        INTEREST: once every consumer with interest has acknowledged it.
        WORK_QUEUE: once any consumer has acknowledged it.
    """

    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class StorageType(enum.StrEnum):
    """Where a stream keeps its messages.

    Attributes:
        FILE: on disk (the default).
        MEMORY: in memory.
    """

    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(enum.StrEnum):
    """What a full stream does with a new message.

    Attributes:
        OLD: remove the oldest messages to make room (the default).
        NEW: refuse the new message.
    """

    OLD = "old"
    NEW = "new"


class StoreCompression(enum.StrEnum):
    """On-disk compression of a stream's message blocks.

    Attributes:
        NONE: no compression (the default).
        S2: S2 compression.
    """

    NONE = "none"
    S2 = "s2"


class PersistMode(enum.StrEnum):
    """How a stream flushes writes (server 2.12+; R1 file streams only for ASYNC).

    Attributes:
        DEFAULT: flush before acknowledging the publish (the default).
        ASYNC: flush in the background; the ack may come before the write
            is on disk, so a hard kill can lose acknowledged messages.
    """

    DEFAULT = "default"
    ASYNC = "async"


class DeliverPolicy(enum.StrEnum):
    """Where a consumer starts in the stream.

    Attributes:
        ALL: the first message (the default).
        LAST: the last message.
        NEW: messages stored after the consumer is created.
        BY_START_SEQUENCE: ``opt_start_seq``.
        BY_START_TIME: the first message at or after ``opt_start_time``.
        LAST_PER_SUBJECT: the last message of every subject filtered.
    """

    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(enum.StrEnum):
    """How a consumer's messages are acknowledged.

    Attributes:
        NONE: no acks; a message counts as handled once delivered.
        ALL: acking a message also acks every earlier one.
        EXPLICIT: every message is acked on its own (the usual choice).
        FLOW_CONTROL: acks follow flow-control replies (server 2.14+, push
            consumers with flow control, as used for stream sourcing).
    """

    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    FLOW_CONTROL = "flow_control"


class ReplayPolicy(enum.StrEnum):
    """The pace at which stored messages are delivered.

    Attributes:
        INSTANT: as fast as possible (the default).
        ORIGINAL: at the pace they were stored.
    """

    INSTANT = "instant"
    ORIGINAL = "original"


class PriorityPolicy(enum.StrEnum):
    """How a pull consumer chooses among waiting requests of its priority groups.

    Attributes:
        NONE: no priority groups (the default).
        OVERFLOW: requests get messages only past ``min_pending`` /
            ``min_ack_pending`` thresholds.
        PINNED_CLIENT: one client is pinned and gets every message until it
            stops pulling for ``priority_timeout``.
        PRIORITIZED: requests with the lowest ``priority`` are served first.
    """

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


class MigrationStatusType(enum.StrEnum):
    """What a stream or consumer moving to its desired placement waits for (2.15+).

    Attributes:
        META: the meta leader must record or advance the desired state.
        MEMBERSHIP: a membership change must commit.
        SNAPSHOT: a snapshot must be installed.
        CATCHUP: peers must catch up.
        QUORUM: more peers must come online.
        BLOCKED: another asset must move first.
        UNAVAILABLE: nothing to do (shutting down, or the assignment is gone).
    """

    META = "meta"
    MEMBERSHIP = "membership"
    SNAPSHOT = "snapshot"
    CATCHUP = "catchup"
    QUORUM = "quorum"
    BLOCKED = "blocked"
    UNAVAILABLE = "unavailable"
