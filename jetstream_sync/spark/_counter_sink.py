"""The ``jetstream-counter`` sink: each row adds its value to the counter on its subject.

A row ``subject, value`` becomes what :meth:`Counter.add` publishes (ADR-49):
an empty message with ``Nats-Incr: +N`` (or ``-N``) to a stream with
``allow_msg_counter``, which adds it to the subject's total. The rows go
through the acknowledged batch publisher of the ``jetstream`` sink
(``jetstream/arrow_publish.py``): every increment is acknowledged, a refused
one fails the task naming its row.

An increment is not idempotent: sent twice, it counts twice. With ``dedupe``
on (the default) each row carries the message id the ``jetstream`` sink
derives (write or query id, micro-batch, partition, row index, a hash of the
subject), so a retried task or a re-run micro-batch is dropped by the stream
within its duplicate window; with ``dedupe=false`` the rows carry no
``Nats-Msg-Id``, and a retried task adds its rows again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
)
from pyspark.sql.types import (
    ByteType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from ..errors import (
    CountersNotEnabledError,
    RowPublishError,
    StreamWrongExpectedError,
)
from ..jetstream.arrow_publish import ArrowPublisher
from ._common import connection, context, refuse_overwrite
from ._options import COUNTER_STREAM_WRITE, COUNTER_WRITE, Options
from ._subjects import captures, is_literal
from ._write import WriteCommit, check_duplicate_window, sink_stream_config

if TYPE_CHECKING:
    from pyspark.sql.datasource import WriterCommitMessage

log = logging.getLogger("jetstream_sync.spark")

INCR = "Nats-Incr"
_INTEGERS = (ByteType, ShortType, IntegerType, LongType)
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"


def check_counter_schema(
    schema: StructType, value_column: str, default_subject: str | None
) -> None:
    """Check the columns of a DataFrame written as counter increments, before anything is sent.

    Raises:
        ValueError: no value column, a value column that is not an integer
            (``TINYINT`` to ``BIGINT``, or ``DECIMAL`` with scale 0), an unknown
            column, a ``subject`` column that is not a string, or no subject.
    """
    fields = {f.name: f.dataType for f in schema.fields}
    if value_column not in fields:
        raise ValueError(
            f"the jetstream-counter sink needs the column {value_column!r} (option valueColumn); "
            f"the columns are {', '.join(fields)}"
        )
    kind = fields[value_column]
    integral = isinstance(kind, _INTEGERS) or (isinstance(kind, DecimalType) and kind.scale == 0)
    if not integral:
        raise ValueError(
            f"column {value_column!r} must be an integer (tinyint to bigint, or decimal with "
            f"scale 0) to count, not {kind.simpleString()}: cast it, e.g. col.cast('long')"
        )
    unknown = sorted(set(fields) - {value_column, "subject"})
    if unknown:
        raise ValueError(
            f"the jetstream-counter sink takes the columns {value_column} and subject; "
            f"unknown: {', '.join(unknown)}"
        )
    if "subject" in fields and not isinstance(fields["subject"], StringType):
        raise ValueError(
            f"column 'subject' must be a string, not {fields['subject'].simpleString()}"
        )
    if "subject" not in fields and not default_subject:
        raise ValueError(
            "give the jetstream-counter sink a 'subject' column or the 'subject' option"
        )
    if default_subject and not is_literal(default_subject):
        raise ValueError(f"option 'subject': {default_subject!r} is not a subject to publish to")


def check_counter_stream(ctx: Any, stream: str | None) -> list[str]:
    """Check, on the driver, that ``stream`` exists and counts.

    Returns:
        The stream's subjects (rows may only add to counters it captures).

    Raises:
        ValueError: no stream to check (neither the ``stream`` nor the ``subject`` option).
        StreamNotFoundError: no such stream.
        CountersNotEnabledError: the stream's ``allow_msg_counter`` is off.
    """
    if not stream:
        raise ValueError(
            "the jetstream-counter sink needs the 'stream' option (or a 'subject' option the "
            "stream captures), so the stream can be checked before any task runs"
        )
    config = sink_stream_config(ctx, stream, "jetstream-counter")
    if not config.allow_msg_counter:
        raise CountersNotEnabledError(
            400,
            10168,
            f"stream {stream!r} is not a counter stream (allow_msg_counter is off): "
            "the jetstream-counter sink adds to counters (nats-server 2.12+)",
        )
    return list(config.subjects or ())


def foreign_subjects(subjects: pa.Array, own: list[str]) -> list[str]:
    """The valid subjects of a column that no subject filter of ``own`` matches."""
    return [
        s for s in pc.unique(subjects).to_pylist()
        if s is not None and is_literal(s) and not captures(own, s)
    ]  # fmt: skip


def increments(values: pa.Array) -> pa.Array:
    """The ``Nats-Incr`` values of an integer or decimal column: ``+N`` or ``-N``."""
    text = pc.cast(values, pa.string())
    signed = pc.binary_join_element_wise(pa.scalar("+"), text, "")
    return pc.if_else(pc.less(values, 0), text, signed)


def increment_batch(batch: pa.RecordBatch, value_column: str) -> pa.RecordBatch:
    """The rows of ``batch`` (no null value) as the ``jetstream`` sink's columns.

    ``data`` empty, ``subject`` as given, ``headers`` holding ``Nats-Incr``.
    """
    n = batch.num_rows
    names = batch.schema.names
    keys = pa.array([INCR] * n, pa.string())
    items = increments(batch.column(names.index(value_column)))
    headers = pa.MapArray.from_arrays(pa.array(range(n + 1), pa.int32()), keys, items)
    columns: dict[str, pa.Array] = {"data": pa.array([b""] * n, pa.large_binary())}
    if "subject" in names:
        columns["subject"] = batch.column(names.index("subject"))
    columns["headers"] = headers
    return pa.RecordBatch.from_pydict(columns)


class _CounterWriter:
    """What the batch and the streaming counter writers share: options, checks, the task loop.

    Args:
        opts: ``servers``, ``stream``, ``subject``, ``valueColumn``, ``dedupe``...
        schema: the DataFrame's schema (checked now, with the stream).
    """

    #: Fault tests only, never an option: the first attempt of every task fails after
    #: storing this many rows (set by a subclass in the tests).
    fail_after: int | None = None

    def __init__(self, opts: Options, schema: StructType) -> None:
        self.conn = connection(opts)
        self.subject = opts.get("subject")
        self.value_column = opts.get("valueColumn") or "value"
        self.dedupe = opts.boolean("dedupe", True)
        check_counter_schema(schema, self.value_column, self.subject)
        self.write_id = uuid.uuid4().hex[:12]
        ctx = context(self.conn)
        stream = opts.get("stream")
        if not stream and self.subject:
            stream = ctx.stream_name_by_subject(self.subject)
        self.own_subjects = check_counter_stream(ctx, stream)
        if self.subject and foreign_subjects(pa.array([self.subject]), self.own_subjects):
            raise StreamWrongExpectedError(
                400, 10060, "option 'subject' is not one of the counter stream's subjects",
                stream=stream, subject=self.subject,
            )  # fmt: skip
        if self.dedupe:
            check_duplicate_window(ctx, str(stream))

    def _first_bad_row(self, batch: pa.RecordBatch) -> tuple[int, str]:
        """The first row not to send (a null value, a subject of another stream), or -1."""
        names = batch.schema.names
        values = batch.column(names.index(self.value_column))
        bad = [-1, -1]
        if values.null_count:
            bad[0] = pc.index(pc.is_null(values), True).as_py()
        if "subject" in names:
            subjects = batch.column(names.index("subject"))
            foreign = foreign_subjects(subjects, self.own_subjects)
            if foreign:
                bad[1] = pc.index(pc.is_in(subjects, value_set=pa.array(foreign)), True).as_py()
        found = [i for i in bad if i >= 0]
        if not found:
            return -1, ""
        stop = min(found)
        if stop == bad[0]:
            return stop, f"its {self.value_column!r} is null (no increment to add)"
        subject = batch.column(names.index("subject"))[stop].as_py()
        return stop, f"its subject {subject!r} is not one of the counter stream's subjects"

    def _add_all(self, batches: Iterator[pa.RecordBatch], id_prefix: str) -> WriteCommit:
        """Send every row of the task as an increment; wait for every ack.

        Raises:
            RowPublishError: a null value, a bad subject, or an increment the
                stream refused (the first found); the task fails and Spark retries it.
        """
        ctx = context(self.conn)
        task = TaskContext.get()
        partition = task.partitionId() if task else 0
        fail_at = self.fail_after if task is None or task.attemptNumber() == 0 else None
        publisher = ArrowPublisher(
            ctx.client, f"{id_prefix}:{partition}:" if self.dedupe else None, self.subject,
            where=f" of partition {partition}", max_rows=fail_at,
        )  # fmt: skip
        try:
            for batch in batches:
                stop, why = self._first_bad_row(batch)
                good = batch.slice(0, stop) if stop >= 0 else batch
                publisher.publish(increment_batch(good, self.value_column))
                if stop >= 0:
                    publisher.wait_all()
                    raise RowPublishError(
                        f"row {publisher.sent} of partition {partition} was not sent: {why}"
                    )
            publisher.wait_all()
        finally:
            publisher.close()
        return WriteCommit(
            partition=partition, rows=publisher.sent, duplicates=publisher.duplicates
        )


class CounterWriter(_CounterWriter, DataSourceArrowWriter):
    """The batch writer (``df.write.format("jetstream-counter")``)."""

    def __init__(self, opts: Options, schema: StructType) -> None:
        super().__init__(opts, schema)
        self.write_id = opts.get("writeId") or self.write_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        """Add the task's rows; ids ``<writeId>:<partition>:<index>:<hash>``."""
        return self._add_all(iterator, self.write_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log how many increments were stored."""
        _log(messages, f"counter write {self.write_id}")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Add nothing more; say how many increments the successful tasks stored."""
        _log(messages, f"counter write {self.write_id} failed", failed=True)


class CounterStreamWriter(_CounterWriter, DataSourceStreamArrowWriter):
    """The streaming writer (``writeStream.format("jetstream-counter")``).

    Message ids use the query's id and the micro-batch id, so a micro-batch
    re-run after a restart is not counted twice (with ``dedupe``, within the
    stream's duplicate window).
    """

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        """Add the task's rows; ids ``<queryId>:<batchId>:<partition>:<index>:<hash>``."""
        task = TaskContext.get()
        query = (task.getLocalProperty(_QUERY_ID) if task else None) or self.write_id
        batch = (task.getLocalProperty(_BATCH_ID) if task else None) or "0"
        return self._add_all(iterator, f"{query}:{batch}")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log how many increments the micro-batch stored."""
        _log(messages, f"counter micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Add nothing more; say how many increments the successful tasks stored."""
        _log(messages, f"counter micro-batch {batchId} failed", failed=True)


class JetStreamCounterDataSource(DataSource):
    """``format("jetstream-counter")``: rows added to the counters of a stream (a sink only).

    See ``docs/spark/writing.md`` ("Counters sink") for the options.
    """

    #: unused by this sink (set by ``register`` like the stream source's).
    default_partitions = 2
    pushdown = False

    @classmethod
    def name(cls) -> str:
        """The format name: ``jetstream-counter``."""
        return "jetstream-counter"

    def writer(self, schema: StructType, overwrite: bool) -> CounterWriter:
        """A batch writer (checks the columns and the stream now).

        Raises:
            ValueError: ``mode("overwrite")``: rows add to the counters, never reset them.
        """
        refuse_overwrite(overwrite, "the counters' totals")
        return CounterWriter(Options(self.options, COUNTER_WRITE), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> CounterStreamWriter:
        """A streaming writer, deduplicated per micro-batch."""
        return CounterStreamWriter(Options(self.options, COUNTER_STREAM_WRITE), schema)


def _log(messages: list[WriterCommitMessage | None], what: str, failed: bool = False) -> None:
    done = [m for m in messages if isinstance(m, WriteCommit)]
    rows, duplicates = sum(m.rows for m in done), sum(m.duplicates for m in done)
    if failed:
        log.warning(
            "%s: %d increments of %d successful tasks are stored (run it again with the same "
            "writeId to complete it without counting them twice)",
            what,
            rows,
            len(done),
        )
    else:
        log.info("%s: %d increments stored (%d were already there)", what, rows, duplicates)
