"""Reading one stream-sequence range into Arrow record batches.

A range is read with batched direct gets (server 2.11+, stream
``allow_direct``) or, where direct get is not allowed, with an ephemeral
ordered consumer bounded to the range and deleted at the end. Nothing is
acknowledged and nothing durable is left on the server, so a failed task
simply reads its range again. Sequences with no message (deleted, expired)
are gaps, never errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import _protocol
from .._deadline import Deadline
from ..errors import JetStreamError
from ..jetstream._direct_batch import PendingBatch, batch_status, direct_batch_route
from ..jetstream.enums import DeliverPolicy
from ._client import jetstream

if TYPE_CHECKING:
    import pyarrow as pa

    from .._connection import Reply
    from ..headers import Headers
    from ..jetstream.context import JetStreamContext

# Messages asked for per batched direct get, and rows per Arrow batch (about: a batch ends
# with the direct get that fills it).
GET_BATCH = 4096
ROWS_PER_BATCH = 8192


@dataclass(frozen=True)
class ReadRange:
    """What one task reads: a stream's sequences ``start..end`` (inclusive), filtered.

    Attributes:
        stream: the stream's name.
        start: the first sequence.
        end: the last sequence.
        subject: the server-side subject filter (None: every subject).
        prefixes: subjects must also start with each of these (checked here).
        min_time: only messages stored at or after this time (checked here too).
        direct: read with batched direct get (else an ordered consumer).
    """

    stream: str
    start: int
    end: int
    subject: str | None = None
    prefixes: tuple[str, ...] = ()
    min_time: datetime | None = None
    direct: bool = True


class _Columns:
    """The column lists of the rows read so far."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.clear()

    def clear(self) -> None:
        self.subjects: list[str] = []
        self.seqs: list[int] = []
        self.times: list[datetime] = []
        self.datas: list[bytes] = []
        self.headers: list[list[tuple[str, list[str]]] | None] = []

    def add(
        self, subject: str, seq: int, time: datetime, data: bytes, hdrs: Headers | None
    ) -> None:
        self.subjects.append(subject)
        self.seqs.append(seq)
        self.times.append(time)
        self.datas.append(data)
        self.headers.append(_header_map(hdrs))

    def __len__(self) -> int:
        return len(self.seqs)

    def batch(self, schema: pa.Schema) -> pa.RecordBatch:
        import pyarrow as pa

        n = len(self.seqs)
        types = [field.type for field in schema]
        arrays = [
            pa.array([self.stream] * n, type=types[0]),
            pa.array(self.subjects, type=types[1]),
            pa.array(self.seqs, type=types[2]),
            pa.array(self.times, type=types[3]),
            pa.array(self.datas, type=types[4]),
            pa.array(self.headers, type=types[5]),
        ]
        self.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _header_map(hdrs: Headers | None) -> list[tuple[str, list[str]]] | None:
    """Headers as the entries of a ``MAP<STRING, ARRAY<STRING>>`` (None when there are none)."""
    if not hdrs:
        return None
    return [(key, hdrs.get_all(key)) for key in hdrs]


def _wanted(rng: ReadRange, subject: str, time: datetime) -> bool:
    if rng.min_time is not None and time < rng.min_time:
        return False
    return all(subject.startswith(p) for p in rng.prefixes)


def read_range(rng: ReadRange, conn: dict[str, Any], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the messages of ``rng`` as record batches of ``schema`` (the read schema).

    Args:
        rng: the range and its filters.
        conn: ``servers`` and the other arguments of :func:`jetstream_sync.spark.client`.
        schema: the Arrow schema of the batches.
    """
    if rng.start > rng.end:
        return
    opts = dict(conn)
    ctx = jetstream(opts.pop("servers"), **opts)
    if rng.direct:
        yield from _direct_batches(ctx, rng, schema)
        return
    cols = _Columns(rng.stream)
    for subject, seq, time, data, hdrs in _consumer_rows(ctx, rng):
        if _wanted(rng, subject, time):
            cols.add(subject, seq, time, data, hdrs)
            if len(cols) >= ROWS_PER_BATCH:
                yield cols.batch(schema)
    if len(cols):
        yield cols.batch(schema)


def _direct_batches(
    ctx: JetStreamContext, rng: ReadRange, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The range by batched direct gets of ``GET_BATCH``, ``ROWS_PER_BATCH`` rows per record batch.

    One request is always in flight: the next is sent as soon as the current
    one has arrived, so the server reads it while this process decodes and
    Spark takes the rows.
    """
    from ._columns import decode, last_seq

    stream = ctx.stream_no_info(rng.stream)
    route = direct_batch_route(ctx.client)

    def ask(seq: int) -> PendingBatch:
        want = min(GET_BATCH, rng.end - seq + 1)
        return route.send(stream, seq, want, rng.subject, Deadline(ctx.timeout))

    pending: PendingBatch | None = ask(rng.start)
    messages: list[Reply] = []
    try:
        while pending is not None:
            replies = pending.replies()
            end_block = replies[-1][2]
            status = batch_status(stream, end_block, pending.deadline)
            pending = None
            if len(replies) > 1:
                last = last_seq(replies[-2])
                if status == 204 and last < rng.end and _more(end_block):
                    pending = ask(last + 1)
                replies.pop()
                messages += replies
            if len(messages) >= ROWS_PER_BATCH or (pending is None and messages):
                batch = decode(messages, rng, schema)
                messages = []
                if batch.num_rows:
                    yield batch
    finally:  # a read stopped early (a limit, a failure): the request in flight is dropped
        if pending is not None:
            pending.close()


def _more(status_block: bytes | None) -> bool:
    """Whether the stream holds more matching messages after a batch (its 204 says how many)."""
    for key, value in _protocol.parse_headers(status_block or b"")[2]:
        if key == "Nats-Num-Pending":
            return value != "0"
    return True  # no count: ask again (a 404 ends the read)


def _consumer_rows(ctx: JetStreamContext, rng: ReadRange) -> Iterator[tuple[Any, ...]]:
    """The range's messages through an ordered consumer, deleted when done."""
    filters = (rng.subject,) if rng.subject else None
    consumer = ctx.ordered_consumer(
        rng.stream,
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=rng.start,
        filter_subjects=filters,
    )
    last = None  # the metadata of the last message read
    with consumer:
        while True:
            msgs = consumer.fetch_no_wait(min(GET_BATCH, rng.end - rng.start + 1))
            if not msgs:
                if last is None:
                    return
                # A message said more were pending: the link or the consumer was lost
                # (a fetch times out empty). Fail the task; Spark reads the range again.
                raise JetStreamError(
                    f"the read of {rng.stream!r} {rng.start}..{rng.end} stopped at sequence "
                    f"{last.sequence.stream} with {last.num_pending} messages pending"
                )
            for msg in msgs:
                last = meta = msg.metadata
                seq = meta.sequence.stream
                if seq > rng.end:
                    return
                hdrs = msg.headers
                yield msg.subject, seq, meta.timestamp, msg.data, hdrs if len(hdrs) else None
                if meta.num_pending == 0:
                    return
