"""The ``jetstream`` PySpark data source: batch and streaming reads and writes of a stream.

Imported only by :func:`jetstream_sync.spark.register` (it imports pyspark).
Readers, writers and partitions hold options and plain values only, so
Spark can pickle them to executors; connections come from the per-process
cache of :func:`jetstream_sync.spark.client`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ._client import jetstream
from ._fetch import ReadRange, read_range
from ._options import Options
from ._pause import pause_after
from ._plan import Bounds, StreamPosition, bounds_from_options, plan_range, push_filter, split

READ_SCHEMA = StructType(
    [
        StructField("stream", StringType()),
        StructField("subject", StringType()),
        StructField("seq", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("data", BinaryType()),
        StructField("headers", MapType(StringType(), ArrayType(StringType()))),
    ]
)


class RangePartition(InputPartition):
    """One task's share of a read: a :class:`ReadRange` (plain values only)."""

    def __init__(self, rng: ReadRange) -> None:
        super().__init__(rng)


def connection(opts: Options) -> dict[str, Any]:
    """``servers`` and the ``client()`` keyword arguments the options give (plain values)."""
    return {"servers": opts.servers(), **opts.connect_kwargs()}


def _context(conn: dict[str, Any]):
    args = dict(conn)
    return jetstream(args.pop("servers"), **args)


def stream_position(conn: dict[str, Any], stream: str) -> StreamPosition:
    """The stream's first and last sequence, creation time and direct-get support, now."""
    return StreamPosition.of(_context(conn).stream(stream).cached_info)


class JetStreamDataSource(DataSource):
    """``spark.read.format("jetstream")``: a JetStream stream as a table and as a sink.

    See ``docs/spark.md`` for the options.
    """

    #: partitions of a read without ``numPartitions`` (set by ``register``).
    default_partitions = 2
    #: whether reads push filters down (set by ``register``).
    pushdown = False

    @classmethod
    def name(cls) -> str:
        """The format name: ``jetstream``."""
        return "jetstream"

    def schema(self) -> StructType:
        """The read schema: stream, subject, seq, timestamp, data, headers."""
        return READ_SCHEMA

    def reader(self, schema: StructType) -> JetStreamReader:
        """A batch reader (checks the options now, before anything runs)."""
        cls = JetStreamPushdownReader if self.pushdown else JetStreamReader
        return cls(Options(self.options), schema, self.default_partitions)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A micro-batch stream reader."""
        from ._stream import JetStreamStreamReader

        return JetStreamStreamReader(Options(self.options), schema, self.default_partitions)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """A batch writer: publishes every row with an ack (see ``docs/spark.md``)."""
        from ._write import JetStreamWriter

        return JetStreamWriter(Options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        """A streaming writer: like the batch writer, deduplicated per micro-batch."""
        from ._write import JetStreamStreamWriter

        return JetStreamStreamWriter(Options(self.options), schema)


class JetStreamReader(DataSourceReader):
    """A batch read of one stream: partitions are sequence ranges.

    Args:
        opts: the data source options.
        schema: the read schema.
        default_partitions: partitions when ``numPartitions`` is not given.
    """

    def __init__(self, opts: Options, schema: StructType, default_partitions: int) -> None:
        self.conn = connection(opts)
        self.stream = opts.required("stream")
        self.bounds: Bounds = bounds_from_options(opts)
        self.partition_count = opts.integer("numPartitions", default_partitions, minimum=1)
        self.fail_on_data_loss = opts.boolean("failOnDataLoss", True)
        self.schema = schema
        self.pause_dir = opts.get("testPauseDir")  # fault tests only: see _pause.py
        self.pause_after = opts.integer("testPauseAfterBatches", 1, minimum=1)

    def partitions(self) -> list[RangePartition]:
        """The stream's range as of now, split into ``numPartitions`` sequence ranges."""
        pos = stream_position(self.conn, self.stream)
        whole = plan_range(
            _context(self.conn), self.stream, self.bounds, self.fail_on_data_loss, pos
        )
        if whole is None:
            return [RangePartition(ReadRange(self.stream, 1, 0))]
        return [RangePartition(r) for r in split(whole, self.partition_count)]

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        """Every stored message of the partition's range, as Arrow record batches."""
        batches = read_range(
            partition.value, self.conn, to_arrow_schema(self.schema, timezone="UTC")
        )
        if self.pause_dir is None:
            return batches
        return pause_after(batches, self.pause_dir, self.pause_after)


class JetStreamPushdownReader(JetStreamReader):
    """A batch reader that also takes ``where`` clauses JetStream can apply exactly.

    Attributes:
        pushed: the filters it took over (their ``repr``).
    """

    def __init__(self, opts: Options, schema: StructType, default_partitions: int) -> None:
        super().__init__(opts, schema, default_partitions)
        self.pushed: list[str] = []

    def pushFilters(self, filters: list) -> Iterator:
        """Take the filters JetStream applies exactly (seq, subject, timestamp); yield the rest."""
        for f in filters:
            column = f.attribute[0] if len(f.attribute) == 1 else None
            value = getattr(f, "value", None)
            if column is not None and push_filter(self.bounds, type(f).__name__, column, value):
                self.pushed.append(repr(f))
            else:
                yield f
