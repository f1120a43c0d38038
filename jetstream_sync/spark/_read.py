"""The ``jetstream`` batch reader: partitions are stream-sequence ranges."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from ._common import connection, context, stream_position
from ._fetch import ReadRange
from ._loss import PlannedPartition, planned_partitions, read_checked
from ._options import Options
from ._plan import Bounds, bounds_from_options, plan_range, push_filter, split


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

    def partitions(self) -> list[PlannedPartition]:
        """The stream's range as of now, split into ``numPartitions`` sequence ranges.

        Raises:
            DataLossError: ``startSeq`` is below the stream's first sequence
                and ``failOnDataLoss`` is true.
        """
        pos = stream_position(self.conn, self.stream)
        whole = plan_range(
            context(self.conn), self.stream, self.bounds, self.fail_on_data_loss, pos
        )
        if whole is None:
            return planned_partitions([ReadRange(self.stream, 1, 0)], pos.created)
        return planned_partitions(split(whole, self.partition_count), pos.created)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Every stored message of the partition's range, as Arrow record batches.

        Raises:
            DataLossError: messages of the range were removed before they were
                read, or the stream was recreated, and ``failOnDataLoss`` is true.
        """
        schema = to_arrow_schema(self.schema, timezone="UTC")
        return read_checked(partition.value, self.conn, schema, self.fail_on_data_loss)


class JetStreamPushdownReader(JetStreamReader):
    """A batch reader that also takes ``where`` clauses JetStream can apply exactly.

    Attributes:
        pushed: the filters it took over (their ``repr``).
    """

    def __init__(self, opts: Options, schema: StructType, default_partitions: int) -> None:
        super().__init__(opts, schema, default_partitions)
        self.pushed: list[str] = []

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        """Take the filters JetStream applies exactly (seq, subject, timestamp); yield the rest."""
        for f in filters:
            column = f.attribute[0] if len(f.attribute) == 1 else None
            value = getattr(f, "value", None)
            if column is not None and push_filter(self.bounds, type(f).__name__, column, value):
                self.pushed.append(repr(f))
            else:
                yield f
