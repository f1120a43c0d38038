"""Reading one task's stream-sequence range: :meth:`Stream.read_arrow` plus the Spark filters.

The columnar read itself (batched direct get, or an ephemeral consumer with
several pull requests in flight where the stream does not allow direct get)
is :meth:`Stream.read_arrow`'s; this
module adds only what Spark pushes down beyond a sequence range and a
subject filter: subject prefixes and a start time (:mod:`._columns`).
Nothing is acknowledged and nothing durable is left on the server, so a
failed task simply reads its range again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._client import jetstream
from ._columns import keep

if TYPE_CHECKING:
    import pyarrow as pa


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
        direct: whether the stream allowed direct get when the read was planned
            (:meth:`Stream.read_arrow` looks again when the task runs).
    """

    stream: str
    start: int
    end: int
    subject: str | None = None
    prefixes: tuple[str, ...] = ()
    min_time: datetime | None = None
    direct: bool = True


def read_range(rng: ReadRange, conn: dict[str, Any], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the messages of ``rng`` as record batches of ``schema`` (the read schema).

    Args:
        rng: the range and its filters.
        conn: ``servers`` and the other arguments of :func:`jetstream_sync.spark.client`.
        schema: the Arrow schema Spark expects (that of :meth:`Stream.read_arrow`).
    """
    if rng.start > rng.end:
        return
    opts = dict(conn)
    stream = jetstream(opts.pop("servers"), **opts).stream_no_info(rng.stream)
    for batch in stream.read_arrow(rng.start, rng.end, rng.subject):
        kept = keep(batch, rng.prefixes, rng.min_time)
        if kept.num_columns != len(schema):  # includeHeaders=false
            kept = kept.select(schema.names)
        if kept.num_rows:
            yield kept if kept.schema.equals(schema) else kept.cast(schema)
