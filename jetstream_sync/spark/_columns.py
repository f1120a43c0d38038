"""The message replies of batched direct gets as one Arrow record batch of the read schema.

The header blocks of some 8,192 messages are decoded in one call
(:func:`jetstream_sync._protocol.decode_direct_batch`: sequences, times and
subjects come back as buffers) and handed to Arrow as they are
(``pa.Array.from_buffers``); the payloads become the ``data`` column in one
``pa.array`` call. Nothing is made per message except for the rare message
that carries headers of its own, whose header map is built in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from .. import _protocol
from .._protocol._direct_batch import DIRECT_BATCH_MSG_HEADERS
from ..errors import ProtocolError
from ..headers import Headers
from ..jetstream._timefmt import datetime_to_ns

if TYPE_CHECKING:
    from .._connection import Reply
    from ._fetch import ReadRange

# Nanoseconds per unit of an Arrow timestamp type.
_UNIT_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1000, "ns": 1}
# The headers a direct-get reply adds to the stored message's own.
_DIRECT_GET_HEADERS = frozenset(
    ("Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
     "Nats-Last-Sequence", "Nats-UpTo-Sequence")
)  # fmt: skip


def decode(replies: Sequence[Reply], rng: ReadRange, schema: pa.Schema) -> pa.RecordBatch:
    """Turn the message replies of batched direct gets into one record batch.

    Args:
        replies: ``(token, payload, header block)`` per message, in sequence
            order (the batches' closing status replies left out).
        rng: the range read (its stream names the ``stream`` column; its end,
            start time and subject prefixes filter the rows).
        schema: the read schema, in Arrow types.

    Raises:
        ProtocolError: a reply is not a direct-get message.
    """
    _, payloads, blocks = zip(*replies, strict=True)
    n = len(blocks)
    types = schema.types
    cols = _protocol.decode_direct_batch(_join(blocks), n, _UNIT_NS[types[3].unit])
    if cols.messages != n:
        raise ProtocolError("a status reply among a batched direct get's messages")
    arrays = [
        pa.repeat(pa.scalar(rng.stream, types[0]), n),
        pa.Array.from_buffers(
            types[1], n, [None, pa.py_buffer(cols.subject_offsets), pa.py_buffer(cols.subjects)]
        ),
        pa.Array.from_buffers(types[2], n, [None, pa.py_buffer(cols.seqs)]),
        pa.Array.from_buffers(types[3], n, [None, pa.py_buffer(cols.times)]),
        pa.array(payloads, type=types[4]),
        _headers(blocks, cols.kinds, n, types[5]) if cols.own_headers else pa.nulls(n, types[5]),
    ]
    arrays[1].validate(full=True)  # a subject that is not UTF-8 fails here, not in Spark
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    mask = _mask(batch, rng, cols.seqs[n - 1])
    return batch if mask is None else batch.filter(mask)


def last_seq(reply: Reply) -> int:
    """The stream sequence of one direct-get message reply.

    Raises:
        ProtocolError: the reply is not a direct-get message.
    """
    cols = _protocol.decode_direct_batch(_join([reply[2]]), 1, 1_000_000_000)
    if not cols.messages:
        raise ProtocolError("a status reply among a batched direct get's messages")
    return int(cols.seqs[0])


def _join(blocks: Sequence[bytes | None]) -> bytes:
    try:
        return b"".join(blocks)  # type: ignore[arg-type]  # None is caught below
    except TypeError:
        raise ProtocolError("a batched direct get reply without a header block") from None


def _headers(blocks: Sequence[bytes], kinds: memoryview, n: int, type_: pa.DataType) -> pa.Array:
    """The ``headers`` column: a map for each message with headers of its own, else null."""
    maps: list[list[tuple[str, list[str]]] | None] = [None] * n
    for i in range(n):
        if kinds[i] == DIRECT_BATCH_MSG_HEADERS:
            pairs = _protocol.parse_headers(blocks[i])[2]
            stored = Headers.from_pairs((k, v) for k, v in pairs if k not in _DIRECT_GET_HEADERS)
            maps[i] = [(key, stored.get_all(key)) for key in stored] or None
    return pa.array(maps, type=type_)


def _mask(batch: pa.RecordBatch, rng: ReadRange, last_seq: int) -> pa.Array | None:
    """Which rows the range keeps, or None for all of them (the usual case)."""
    mask = None
    if last_seq > rng.end:
        mask = pc.less_equal(batch.column(2), rng.end)
    if rng.min_time is not None:
        ts = batch.column(3)
        bound = _floor_time(rng.min_time, ts.type.unit)
        after = pc.greater_equal(ts, pa.scalar(bound, type=ts.type))
        mask = after if mask is None else pc.and_(mask, after)
    for prefix in rng.prefixes:
        starts = pc.starts_with(batch.column(1), pattern=prefix)
        mask = starts if mask is None else pc.and_(mask, starts)
    return mask


def _floor_time(value: datetime, unit: str) -> int:
    """``value`` in the timestamp unit since the epoch, rounded down (as the column is)."""
    return datetime_to_ns(value) // _UNIT_NS[unit]
