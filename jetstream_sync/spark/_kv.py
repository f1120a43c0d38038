"""The ``jetstream-kv`` data source: a Key-Value bucket's values, changes, and writes into it.

A batch read returns one row per key: ``bucket, key, value, revision,
created, operation`` (deleted keys are left out unless ``includeDeletes``
is true); with ``includeHistory`` one row per stored revision. A streaming
read is the bucket's change feed (:mod:`._kv_feed`). A batch write puts
each ``key, value`` row (binary or string); a null value deletes the key.
How a pipeline publishes its results for services to read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ._common import connection, context, refuse_overwrite
from ._kv_feed import KVFeedReader
from ._options import KV_FEED, KV_READ, KV_WRITE, Options
from ._subjects import check_filter
from ._write import WriteCommit

if TYPE_CHECKING:
    from pyspark.sql.datasource import WriterCommitMessage

log = logging.getLogger("jetstream_sync.spark")

KV_SCHEMA = StructType(
    [
        StructField("bucket", StringType()),
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("revision", LongType()),
        StructField("created", TimestampType()),
        StructField("operation", StringType()),
    ]
)


class JetStreamKVDataSource(DataSource):
    """``format("jetstream-kv")``: read a bucket's current values, or write key/value rows."""

    #: partitions of a change-feed micro-batch without ``numPartitions`` (set by ``register``).
    default_partitions = 2
    pushdown = False

    @classmethod
    def name(cls) -> str:
        """The format name: ``jetstream-kv``."""
        return "jetstream-kv"

    def schema(self) -> StructType:
        """The read schema: bucket, key, value, revision, created, operation."""
        return KV_SCHEMA

    def reader(self, schema: StructType) -> KVReader:
        """A reader of the bucket's current values, or its history (one partition)."""
        return KVReader(Options(self.options, KV_READ), schema)

    def streamReader(self, schema: StructType) -> KVFeedReader:
        """The bucket's change feed (checks the options and the bucket now)."""
        opts = Options(self.options, KV_FEED)
        return KVFeedReader(opts, schema, self.default_partitions)

    def writer(self, schema: StructType, overwrite: bool) -> KVWriter:
        """A writer of ``key, value`` rows (checks the columns now).

        Raises:
            ValueError: ``mode("overwrite")``: the bucket's other keys are never deleted.
        """
        refuse_overwrite(overwrite, "the keys of the bucket the rows do not name")
        return KVWriter(Options(self.options, KV_WRITE), schema)


class KVReader(DataSourceReader):
    """Reads the latest entry of every key matching ``keys`` (default ``>``), or every revision.

    Args:
        opts: ``servers``, ``bucket``, ``keys`` (a key filter),
            ``includeHistory`` (every stored revision, oldest first, not only
            the latest), ``includeDeletes`` (also the delete and purge
            markers; by default only with ``includeHistory``).
        schema: the read schema.

    Raises:
        BadSubjectError: ``keys`` is not a key filter.
        BucketNotFoundError: no such bucket (checked now, before any task runs).
    """

    def __init__(self, opts: Options, schema: StructType) -> None:
        self.conn = connection(opts)
        self.bucket = opts.required("bucket")
        self.keys = check_filter(opts.get("keys") or ">", "keys")
        context(self.conn).key_value(self.bucket)  # a bad name, or no such bucket
        self.include_history = opts.boolean("includeHistory", False)
        self.include_deletes = opts.boolean("includeDeletes", self.include_history)
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        """One partition: the bucket's watch delivers every key in one ordered pass."""
        return [InputPartition(self.bucket)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The current entries (or every stored revision) as one Arrow record batch."""
        kv = context(self.conn).key_value(self.bucket)
        with kv.watch(
            self.keys,
            include_history=self.include_history,
            ignore_deletes=not self.include_deletes,
        ) as watcher:
            entries = watcher.initial()
        schema = to_arrow_schema(self.schema, timezone="UTC")
        types = [f.type for f in schema]
        arrays = [
            pa.array([e.bucket for e in entries], type=types[0]),
            pa.array([_shown(e.key) for e in entries], type=types[1]),
            pa.array([e.value for e in entries], type=types[2]),
            pa.array([e.revision for e in entries], type=types[3]),
            pa.array([e.created_ns // 1000 for e in entries], type=types[4]),
            pa.array([str(e.operation) for e in entries], type=types[5]),
        ]
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _shown(key: str) -> str:
    """``key`` as every Spark reader shows text: each byte that is not UTF-8 as U+FFFD.

    A key another client wrote in such bytes reaches Python with surrogate
    escapes, which Arrow cannot encode; the stream read and the change feed
    show these bytes as U+FFFD, and so does this read.
    """
    if key.isascii():
        return key
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def check_kv_schema(schema: StructType) -> None:
    """Check the columns of a DataFrame written to a bucket.

    Raises:
        ValueError: not exactly ``key`` (string) and ``value`` (binary or string).
    """
    fields = {f.name: f.dataType for f in schema.fields}
    if set(fields) != {"key", "value"}:
        raise ValueError(
            f"the jetstream-kv sink takes the columns key and value, got {', '.join(fields)}"
        )
    if not isinstance(fields["key"], StringType):
        raise ValueError(f"column 'key' must be a string, not {fields['key'].simpleString()}")
    if not isinstance(fields["value"], BinaryType | StringType):
        raise ValueError(
            f"column 'value' must be binary or string, not {fields['value'].simpleString()}"
        )


class KVWriter(DataSourceArrowWriter):
    """Puts each row's value under its key; a null value deletes the key.

    Args:
        opts: ``servers``, ``bucket``.
        schema: the DataFrame's schema (checked now; the bucket must exist).
    """

    def __init__(self, opts: Options, schema: StructType) -> None:
        check_kv_schema(schema)
        self.conn = connection(opts)
        self.bucket = opts.required("bucket")
        context(self.conn).key_value(self.bucket)  # BucketNotFoundError before any task

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        """Put (or delete) every row of the task, each acknowledged by the bucket."""
        from pyspark import TaskContext

        kv = context(self.conn).key_value(self.bucket)
        task = TaskContext.get()
        partition = task.partitionId() if task else 0
        rows = 0
        for batch in iterator:
            keys = batch.column(batch.schema.names.index("key")).to_pylist()
            values = batch.column(batch.schema.names.index("value")).to_pylist()
            for key, value in zip(keys, values, strict=True):
                try:
                    if value is None:
                        kv.delete(key)
                    else:
                        kv.put(key, value)
                except Exception as error:
                    error.add_note(
                        f"writing row {rows + 1} of partition {partition} (key {key!r}) "
                        f"to bucket {self.bucket!r}; the {rows} rows before it were written"
                    )
                    raise
                rows += 1
        return WriteCommit(partition=partition, rows=rows, duplicates=0)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log how many keys were written."""
        rows = sum(m.rows for m in messages if isinstance(m, WriteCommit))
        log.info("bucket %r: %d keys written", self.bucket, rows)
