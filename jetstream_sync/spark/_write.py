"""The ``jetstream`` writers: every row published with a JetStream ack, exactly once by default.

Each task publishes its rows a record batch at a time (frames encoded in
C, one write per chunk, a bounded window of rows waiting for their ack: see
``jetstream/arrow_publish.py``) and waits for every PubAck; a rejected row fails the task
naming the row. Without a ``msgId`` column each row's
``Nats-Msg-Id`` is derived from (the write's id fixed on the driver, the
micro-batch id of a stream, the partition, the row's index in the
partition, a short hash of its content): a retried task or a re-run
micro-batch publishes the same ids again and the stream drops the copies
(within its duplicate window). With ``dedupe=false`` rows without a
``msgId`` get no id: at least once, and less work for the server per row.

The ``mode`` option picks how a task sends its rows: ``async`` (the
default: every row acknowledged, see ``jetstream/arrow_publish.py``) or ``fast`` (fast-ingest
batches of ``fastBatchRows`` rows, one PubAck each, the same message ids:
see ``_fast_write.py``). ``mode=fast`` checks on the driver that the stream
allows fast batches.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from ..errors import (
    BatchPublishDisabledError,
    RowPublishError,
    StreamNotFoundError,
    StreamWrongExpectedError,
)
from ..jetstream.arrow_publish import ArrowPublisher
from ._common import connection, context
from ._fast_write import DEFAULT_BATCH_ROWS, FastPublisher
from ._options import Options
from ._subjects import captures, is_literal

if TYPE_CHECKING:
    from pyspark.sql.datasource import WriterCommitMessage

__all__ = ["JetStreamStreamWriter", "JetStreamWriter", "RowPublishError", "WriteCommit"]

log = logging.getLogger("jetstream_sync.spark")

MIN_DUPLICATE_WINDOW = 600.0  # seconds: shorter windows may not cover a task retry
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"
_COLUMNS = ("data", "subject", "headers", "msgId")
MODES = ("async", "fast")

_windows_checked: set[str] = set()


@dataclass
class WriteCommit(WriterCommitMessage):
    """What one task wrote.

    Attributes:
        partition: the task's partition id.
        rows: rows stored (new or deduplicated).
        duplicates: rows the stream recognised as already stored.
    """

    partition: int
    rows: int
    duplicates: int


def check_write_schema(schema: StructType, default_subject: str | None) -> None:
    """Check the columns of a DataFrame to write before anything is sent.

    Raises:
        ValueError: a missing ``data`` column, an unknown column, a column of
            the wrong type, or no subject (neither column nor option).
    """
    fields = {f.name: f.dataType for f in schema.fields}
    unknown = sorted(set(fields) - set(_COLUMNS))
    if unknown:
        raise ValueError(
            f"the jetstream sink takes the columns {', '.join(_COLUMNS)}; "
            f"unknown: {', '.join(unknown)}"
        )
    if "data" not in fields:
        raise ValueError("the jetstream sink needs a 'data' column (binary or string)")
    if not isinstance(fields["data"], BinaryType | StringType):
        raise ValueError(
            f"column 'data' must be binary or string, not {fields['data'].simpleString()}"
        )
    for name in ("subject", "msgId"):
        if name in fields and not isinstance(fields[name], StringType):
            raise ValueError(f"column {name!r} must be a string, not {fields[name].simpleString()}")
    if "headers" in fields:
        kind = fields["headers"]
        ok = (
            isinstance(kind, MapType)
            and isinstance(kind.keyType, StringType)
            and (
                isinstance(kind.valueType, StringType)
                or (
                    isinstance(kind.valueType, ArrayType)
                    and isinstance(kind.valueType.elementType, StringType)
                )
            )
        )
        if not ok:
            raise ValueError(
                "column 'headers' must be a map of string to string or to array of string, "
                f"not {kind.simpleString()}"
            )
    if "subject" not in fields and not default_subject:
        raise ValueError("give the jetstream sink a 'subject' column or the 'subject' option")
    if default_subject and not is_literal(default_subject):
        raise ValueError(f"option 'subject': {default_subject!r} is not a subject to publish to")


def check_duplicate_window(ctx: Any, stream: str) -> None:
    """Warn (once per process and stream) when the stream's duplicate window is under 10 min."""
    if stream in _windows_checked:
        return
    _windows_checked.add(stream)
    config = ctx.stream(stream).cached_info.config
    window = config.duplicate_window if config is not None else None
    if window is not None and window < MIN_DUPLICATE_WINDOW:
        log.warning(
            "stream %r keeps message ids for %.0f s only: a task retried or a micro-batch "
            "re-run later than that is not deduplicated (raise duplicate_window to 10 min or more)",
            stream,
            window,
        )


def sink_stream_config(ctx: Any, stream: str, sink: str) -> Any:
    """The config of the stream the ``sink`` sink's ``stream`` option names (its cached info).

    Raises:
        StreamNotFoundError: no such stream (the message names the sink).
    """
    try:
        return ctx.stream(stream).cached_info.config
    except StreamNotFoundError:
        raise StreamNotFoundError(
            404, 10059, f"the {sink} sink's stream {stream!r} does not exist"
        ) from None


def check_stream_captures(ctx: Any, stream: str, subject: str | None) -> None:
    """Check, on the driver, that the ``stream`` option names a stream capturing ``subject``.

    Raises:
        StreamNotFoundError: no such stream.
        StreamWrongExpectedError: the ``subject`` option is not one of its subjects (its
            rows would be stored in another stream, or in none).
    """
    config = sink_stream_config(ctx, stream, "jetstream")
    if subject and not captures(config.subjects or (), subject):
        raise StreamWrongExpectedError(
            400, 10060, f"option 'subject' is not one of the subjects of stream {stream!r} "
            "(the 'stream' option)", stream=stream, subject=subject,
        )  # fmt: skip


def write_mode(opts: Options) -> str:
    """The ``mode`` option: ``async`` (default) or ``fast``.

    Raises:
        ValueError: any other value.
    """
    mode = (opts.get("mode") or "async").strip().lower()
    if mode not in MODES:
        raise ValueError(f"option 'mode' must be 'async' or 'fast', got {opts.get('mode')!r}")
    return mode


def check_fast_stream(ctx: Any, stream: str | None) -> None:
    """Check, on the driver, that ``mode=fast`` can write to ``stream``.

    Raises:
        ValueError: no stream to check (neither the ``stream`` nor the ``subject`` option).
        BatchPublishDisabledError: the stream's ``allow_batched`` is off (or
            the server is older than 2.14, whose streams have no such option).
    """
    if not stream:
        raise ValueError(
            "mode=fast writes into one stream: give the 'stream' option (or a 'subject' "
            "option the stream captures), so the stream can be checked before any task runs"
        )
    config = ctx.stream(stream).cached_info.config
    if not config.allow_batched:
        raise BatchPublishDisabledError(
            400,
            10205,
            f"mode=fast needs fast-ingest batches: stream {stream!r} has allow_batched off "
            "(create or update it with allow_batched=True, nats-server 2.14+), "
            "or write with mode=async",
        )


class _Writer:
    """What the batch and the streaming writer share: options, checks, the task loop."""

    #: Fault tests only, never an option: the first attempt of every task fails after
    #: storing this many rows (set by a subclass in ``tests/fixtures/spark_faults.py``).
    fail_after: int | None = None
    #: Headers every message of the acknowledged mode gets, unless its row has one of the
    #: same name: the OpenTelemetry instrumentation puts its span's trace context here
    #: for the duration of a task's write (``mode=fast`` carries it through FastBatch).
    added_headers: Mapping[str, str] | None = None

    def __init__(self, opts: Options, schema: StructType) -> None:
        self.conn = connection(opts)
        self.subject = opts.get("subject")
        check_write_schema(schema, self.subject)
        # a batch write's id unless writeId names one; a streaming write's ids use its
        # query id, and this only where a task has none
        self.write_id = uuid.uuid4().hex[:12]
        self.mode = write_mode(opts)
        self.fast_batch_rows = opts.integer("fastBatchRows", DEFAULT_BATCH_ROWS, minimum=1)
        self.dedupe = opts.boolean("dedupe", True)
        stream = opts.get("stream")
        ctx = context(self.conn)
        if stream:
            check_stream_captures(ctx, stream, self.subject)
        elif self.subject:
            stream = ctx.stream_name_by_subject(self.subject)
        if stream and self.dedupe:
            check_duplicate_window(ctx, stream)
        if self.mode == "fast":
            check_fast_stream(ctx, stream)

    def _publish_all(self, batches: Iterator[pa.RecordBatch], id_prefix: str) -> WriteCommit:
        """Publish every row of the task batch by batch; wait for every ack.

        Raises:
            RowPublishError: a row could not be sent or was not stored (the
                first one found); the task fails and Spark retries it.
        """
        ctx = context(self.conn)
        task = TaskContext.get()
        partition = task.partitionId() if task else 0
        fail_at = self.fail_after if task is None or task.attemptNumber() == 0 else None
        prefix = f"{id_prefix}:{partition}:" if self.dedupe else None
        publisher: ArrowPublisher | FastPublisher
        if self.mode == "fast":
            publisher = FastPublisher(
                ctx, partition, prefix, self.subject, self.fast_batch_rows, fail_at,
                added_headers=self.added_headers,
            )  # fmt: skip
        else:
            publisher = ArrowPublisher(
                ctx.client, prefix, self.subject, where=f" of partition {partition}",
                max_rows=fail_at, added_headers=self.added_headers,
            )  # fmt: skip
        publisher.publish_all(batches)
        if publisher.stream is not None and self.dedupe:
            check_duplicate_window(ctx, publisher.stream)
        return WriteCommit(
            partition=partition, rows=publisher.sent, duplicates=publisher.duplicates
        )


class JetStreamWriter(_Writer, DataSourceArrowWriter):
    """The batch writer (``df.write.format("jetstream")``).

    Args:
        opts: the data source options (``servers``, ``subject``, ``stream``, ``writeId``...).
        schema: the DataFrame's schema (checked now).
    """

    def __init__(self, opts: Options, schema: StructType) -> None:
        super().__init__(opts, schema)
        self.write_id = opts.get("writeId") or self.write_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        """Publish the task's rows; ids ``<writeId>:<partition>:<index>:<hash>``."""
        return self._publish_all(iterator, self.write_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log what was written (every row is already stored)."""
        _log_done(messages, f"write {self.write_id}")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Publish nothing more; say how many rows the successful tasks stored."""
        _log_aborted(messages, f"write {self.write_id}")


class JetStreamStreamWriter(_Writer, DataSourceStreamArrowWriter):
    """The streaming writer (``writeStream.format("jetstream")``).

    Message ids use the query's id (kept in its checkpoint) and the
    micro-batch id, so a micro-batch re-run after a restart publishes the
    same ids again.
    """

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        """Publish the task's rows; ids ``<queryId>:<batchId>:<partition>:<index>:<hash>``."""
        ctx = TaskContext.get()
        query = (ctx.getLocalProperty(_QUERY_ID) if ctx else None) or self.write_id
        batch = (ctx.getLocalProperty(_BATCH_ID) if ctx else None) or "0"
        return self._publish_all(iterator, f"{query}:{batch}")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log what the micro-batch wrote (every row is already stored)."""
        _log_done(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Publish nothing more; say how many rows the successful tasks stored."""
        _log_aborted(messages, f"micro-batch {batchId}")


def _log_done(messages: list[WriterCommitMessage | None], what: str) -> None:
    done = [m for m in messages if isinstance(m, WriteCommit)]
    log.info(
        "%s: %d rows stored (%d were already there)",
        what,
        sum(m.rows for m in done),
        sum(m.duplicates for m in done),
    )


def _log_aborted(messages: list[WriterCommitMessage | None], what: str) -> None:
    done = [m for m in messages if isinstance(m, WriteCommit)]
    log.warning(
        "%s failed: %d rows of %d successful tasks are stored; nothing more is published "
        "(run it again with the same writeId, or msgId column, to complete it without duplicates)",
        what,
        sum(m.rows for m in done),
        len(done),
    )
