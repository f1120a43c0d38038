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
        created: when it was stored (UTC).
        delta: how many newer revisions of the watched keys follow it when it
            was delivered (0 for the latest); 0 from ``get``.
        operation: PUT, DEL or PURGE.
    """

    bucket: str
    key: str
    value: bytes
    revision: int
    created: datetime
    delta: int = 0
    operation: KeyValueOp = KeyValueOp.PUT


def entry_from_stored(bucket: str, key: str, msg: RawStreamMsg) -> KeyValueEntry:
    """The entry of a message read by a (direct) get."""
    return KeyValueEntry(
        bucket=bucket,
        key=key,
        value=msg.data,
        revision=msg.seq,
        created=msg.time,  # type: ignore[arg-type]
        operation=operation_of(msg.headers),
    )


def entry_from_delivered(bucket: str, prefix_len: int, msg: Msg) -> KeyValueEntry:
    """The entry of a message a consumer delivered (metadata from its ack subject)."""
    tokens = ack_tokens(msg.reply)
    return KeyValueEntry(
        bucket=bucket,
        key=msg.subject[prefix_len:],
        value=msg.data,
        revision=int(tokens[5]),
        created=datetime_from_ns(int(tokens[7])),
        delta=int(tokens[8]),
        operation=operation_of(msg.headers),
    )
