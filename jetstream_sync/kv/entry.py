"""``KeyValueEntry`` and ``KeyValueOp``: one revision of a key, and how it is decoded."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime

import attrs

from ..jetstream._ack import ack_tokens
from ..jetstream._timefmt import datetime_from_ns
from ..jetstream.replies import RawStreamMsg
from ..msg import Msg

__all__ = ["KeyValueEntry", "KeyValueOp"]

OPERATION = "KV-Operation"
MARKER_REASON = "Nats-Marker-Reason"


class KeyValueOp(enum.StrEnum):
    """What a revision of a key is.

    Attributes:
        PUT: a value.
        DEL: a delete marker (history is kept).
        PURGE: a purge marker (older revisions were removed).
    """

    PUT = "PUT"
    DEL = "DEL"
    PURGE = "PURGE"


# ADR-48: the server's limit markers count as purges (MaxAge, Purge) or deletes (Remove).
_MARKERS = {"MaxAge": KeyValueOp.PURGE, "Purge": KeyValueOp.PURGE, "Remove": KeyValueOp.DEL}
_OPS = {"DEL": KeyValueOp.DEL, "PURGE": KeyValueOp.PURGE}


def operation_of(headers: Mapping[str, str] | None) -> KeyValueOp:
    """The operation a stored message's headers say (PUT when they say nothing)."""
    if not headers:
        return KeyValueOp.PUT
    op = headers.get(OPERATION)
    if op:
        return _OPS.get(op, KeyValueOp.PUT)
    reason = headers.get(MARKER_REASON)
    if reason:
        return _MARKERS.get(reason, KeyValueOp.PUT)
    return KeyValueOp.PUT


@attrs.frozen(kw_only=True, slots=True)
class KeyValueEntry:
    """One revision of a key.

    Attributes:
        bucket: the bucket it was read from.
        key: the key.
        value: the value (``b""`` for a marker, or in a ``meta_only`` watch).
        revision: its stream sequence: unique and increasing within the bucket.
        created_ns: when it was stored, in nanoseconds since the Unix epoch
            (``created`` is the same as a ``datetime``).
        delta: how many newer revisions of the watched keys follow it when it
            was delivered (0 for the latest); 0 from ``get``.
        operation: PUT, DEL or PURGE.
    """

    bucket: str
    key: str
    value: bytes
    revision: int
    created_ns: int
    delta: int = 0
    operation: KeyValueOp = KeyValueOp.PUT

    @property
    def created(self) -> datetime:
        """When it was stored (UTC, a ``NanoDatetime`` that keeps the nanoseconds)."""
        return datetime_from_ns(self.created_ns)


def entry_from_stored(bucket: str, key: str, msg: RawStreamMsg) -> KeyValueEntry:
    """The entry of a message read by a (direct) get."""
    return KeyValueEntry(
        bucket=bucket,
        key=key,
        value=msg.data,
        revision=msg.seq,
        created_ns=msg.time_ns,  # type: ignore[arg-type]
        operation=operation_of(msg.headers),
    )


def entry_from_delivered(bucket: str, prefix_len: int, msg: Msg) -> KeyValueEntry:
    """The entry of a message a consumer delivered (metadata from its ack subject)."""
    tokens = msg.reply.split(".")
    if len(tokens) == 9:  # the v1 ack subject; ack_tokens handles both layouts
        seq, ns, pending = tokens[5], tokens[7], tokens[8]
    else:
        _, _, _, _, _, seq, _, ns, pending = ack_tokens(msg.reply)
    return KeyValueEntry(
        bucket=bucket,
        key=msg.subject[prefix_len:],
        value=msg.data,
        revision=int(seq),
        created_ns=int(ns),
        delta=int(pending),
        operation=operation_of(msg.headers),
    )

