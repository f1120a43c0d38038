"""The ``jetstream`` PySpark data source: batch and streaming reads and writes of a stream.

Imported only by :func:`jetstream_sync.spark.register` (it imports pyspark).
Readers, writers and partitions hold options and plain values only, so
Spark can pickle them to executors; connections come from the per-process
cache of :func:`jetstream_sync.spark.client`.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from ._common import read_schema, refuse_overwrite
from ._options import BATCH_READ, BATCH_WRITE, STREAM_READ, STREAM_WRITE, Options
from ._read import JetStreamPushdownReader, JetStreamReader
from ._stream import JetStreamStreamReader
from ._write import JetStreamStreamWriter, JetStreamWriter


class JetStreamDataSource(DataSource):
    """``spark.read.format("jetstream")``: a JetStream stream as a table and as a sink.

    See ``docs/spark.md`` ("Options") for the options.
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
        """The read schema: stream, subject, seq, timestamp, data, headers.

        ``includeHeaders=false`` leaves out ``headers``.
        """
        return read_schema(self.options)

    def reader(self, schema: StructType) -> JetStreamReader:
        """A batch reader (checks the options now, before anything runs)."""
        cls = JetStreamPushdownReader if self.pushdown else JetStreamReader
        return cls(Options(self.options, BATCH_READ), schema, self.default_partitions)

    def streamReader(self, schema: StructType) -> JetStreamStreamReader:
        """A micro-batch stream reader (checks the options now)."""
        opts = Options(self.options, STREAM_READ)
        return JetStreamStreamReader(opts, schema, self.default_partitions)

    def writer(self, schema: StructType, overwrite: bool) -> JetStreamWriter:
        """A batch writer: publishes every row with an ack (see ``docs/spark/writing.md``).

        Raises:
            ValueError: ``mode("overwrite")``: a stream's messages are never replaced.
        """
        refuse_overwrite(overwrite, "the messages the streams hold")
        return JetStreamWriter(Options(self.options, BATCH_WRITE), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> JetStreamStreamWriter:
        """A streaming writer: like the batch writer, deduplicated per micro-batch."""
        return JetStreamStreamWriter(Options(self.options, STREAM_WRITE), schema)
