"""The ``jetstream-kv`` streaming read: a Key-Value bucket's change feed.

The feed is the ``jetstream`` stream reader run on the bucket's stream
(``KV_<bucket>``), filtered to the watched keys, with each message turned
into a row of the Key-Value schema (``bucket, key, value, revision, created,
operation``; the revision is the stream sequence). Offsets, checkpoints,
read limits, ``Trigger.AvailableNow`` and the split into partitions are that
reader's, so a restarted query resumes from its checkpoint with nothing
lost or repeated.

What differs is data loss. A bucket removes revisions by its own rules: a
purge removes the key's earlier revisions (its marker stays), ``history``
keeps the last revisions of each key, ``ttl`` expires them,
``purge_deletes`` removes markers. Revisions removed before the feed read
them are compacted away, as in a compacted Kafka topic: they are not data
loss, not even a warning, and the feed reads on from what is stored.
Revisions already read stay read. A bucket deleted, or deleted and created
again, is data loss (``failOnDataLoss``), as for a stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from ..errors import StreamNotFoundError
from ..kv.entry import operation_of
from ._common import READ_SCHEMA, connection, context, stream_position
from ._fetch import read_range
from ._kafka import parse_offset
from ._options import KV_FEED, STREAM_READ, Options
from ._plan import StreamPosition, data_loss
from ._stream import JetStreamStreamReader
from ._subjects import check_filter

if TYPE_CHECKING:
    from pyspark.sql.datasource import InputPartition
    from pyspark.sql.types import StructType

    from ..jetstream.context import JetStreamContext
    from ._loss import PlannedRange

#: The options the feed hands on to the stream reader as they are.
_SHARED = tuple(o for o in KV_FEED.options if STREAM_READ.takes(o) and o != "startingOffsets")


def stream_read_options(opts: Options, bucket: str, subject: str) -> Options:
    """The ``jetstream`` streaming-read options of a feed: its bucket's stream and keys.

    Args:
        opts: the feed's options (role :data:`KV_FEED`).
        bucket: the bucket's name.
        subject: the subject filter of the watched keys.

    Raises:
        ValueError: ``startingOffsets`` is not ``earliest``, ``latest``, a
            revision, or JSON ``{"BUCKET": revision}``.
    """
    values = {name: opts.get(name) for name in _SHARED if opts.has(name)}
    starting = parse_offset(opts.get("startingOffsets") or "latest", "startingOffsets", bucket)
    values.update(stream=f"KV_{bucket}", subject=subject, startingOffsets=str(starting))
    return Options(values, STREAM_READ)


def subjects_bucket(js: JetStreamContext, bucket: str) -> str:
    """The bucket whose key subjects ``bucket``'s stream stores.

    A bucket's own, except for a mirror: it stores its origin's messages under
    the origin's subjects (``$KV.<origin>.<key>``).
    """
    mirror = js.stream_no_info(f"KV_{bucket}").info().config.mirror
    return bucket if mirror is None else mirror.name.removeprefix("KV_")


class KVFeedReader(JetStreamStreamReader):
    """Reads the changes of a bucket micro-batch by micro-batch.

    Args:
        opts: ``servers``, ``bucket`` (required), ``keys`` (a key filter,
            default ``>``), ``startingOffsets`` (``earliest``, ``latest``, a
            revision), ``maxOffsetsPerTrigger`` (or ``maxMessagesPerTrigger``),
            ``numPartitions``, ``failOnDataLoss``.
        schema: the read schema (:data:`~._kv.KV_SCHEMA`).
        default_partitions: partitions per micro-batch without ``numPartitions``.

    Raises:
        BucketNotFoundError: the bucket does not exist (when the query starts).
        ValueError: a bucket name that is not one (``InvalidBucketNameError``),
            or ``keys`` that is not a key filter (``BadSubjectError``).
    """

    def __init__(self, opts: Options, schema: StructType, default_partitions: int) -> None:
        self.bucket = opts.required("bucket")
        js = context(connection(opts))
        js.key_value(self.bucket)  # a bad name, or no such bucket
        keys = check_filter(opts.get("keys") or ">", "keys")
        self.prefix = f"$KV.{subjects_bucket(js, self.bucket)}."
        super().__init__(
            stream_read_options(opts, self.bucket, self.prefix + keys), schema, default_partitions
        )
        self.stream_schema = to_arrow_schema(READ_SCHEMA, timezone="UTC")

    def _first_unread(self, start: dict[str, Any], pos: StreamPosition) -> int:
        """The first revision to read from ``start``: revisions removed since are compacted.

        Raises:
            DataLossError: the bucket was deleted and created again, and
                ``failOnDataLoss`` is true.
        """
        if start.get("created") == pos.created and int(start["seq"]) < pos.first:
            return pos.first
        return super()._first_unread(start, pos)

    def _same_bucket(self, created: str) -> bool:
        """Whether the bucket is the one the micro-batch was planned on (else data loss)."""
        try:
            now = stream_position(self.conn, self.stream).created
        except StreamNotFoundError:
            data_loss(
                f"bucket {self.bucket!r} was deleted while the feed read it", self.fail_on_data_loss
            )
            return False
        if now != created:
            data_loss(
                f"bucket {self.bucket!r} was deleted and created again while the feed read it",
                self.fail_on_data_loss,
            )
            return False
        return True

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The stored revisions of the partition's range, as Key-Value rows.

        Raises:
            DataLossError: the bucket was deleted, or deleted and created
                again, and ``failOnDataLoss`` is true.
        """
        planned: PlannedRange = partition.value
        if not self._same_bucket(planned.created):
            return
        schema = to_arrow_schema(self.schema, timezone="UTC")
        for batch in read_range(planned.rng, self.conn, self.stream_schema):
            yield kv_rows(batch, self.bucket, len(self.prefix), schema)
        self._same_bucket(planned.created)


def kv_rows(
    batch: pa.RecordBatch, bucket: str, prefix_len: int, schema: pa.Schema
) -> pa.RecordBatch:
    """A record batch of the stream read schema as Key-Value rows of ``schema``.

    Args:
        batch: messages of the bucket's stream (the ``jetstream`` read schema).
        bucket: the bucket's name.
        prefix_len: the length of the subjects' prefix before the key.
        schema: the Key-Value read schema in Arrow.
    """
    columns = {
        "bucket": pa.array([bucket] * batch.num_rows, pa.string()),
        "key": pc.utf8_slice_codeunits(batch.column("subject"), prefix_len),
        "value": batch.column("data"),
        "revision": batch.column("seq"),
        "created": batch.column("timestamp"),
        "operation": _operations(batch.column("headers")),
    }
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


def _operations(headers: pa.Array) -> pa.Array:
    """``PUT``, ``DEL`` or ``PURGE`` per message, from its headers (none: ``PUT``)."""
    ops = ["PUT"] * len(headers)
    for i in pc.indices_nonzero(pc.is_valid(headers)).to_pylist():
        first = {name: values[0] for name, values in headers[i].as_py() if values}
        ops[i] = str(operation_of(first))
    return pa.array(ops, pa.string())
