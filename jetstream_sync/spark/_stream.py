"""The ``jetstream`` micro-batch stream reader: offsets are stream sequences.

An offset is ``{"stream": name, "seq": the next sequence to read, "created":
the stream's creation time}``. A micro-batch reads ``start.seq .. end.seq - 1``
split into sequence ranges like a batch read, so a restarted query resumes
from its checkpointed offsets with no loss and no duplicates, and a failed
micro-batch is simply read again. Nothing is acknowledged, ever: ``commit``
has nothing to do (it runs a batch late, and not at all for a lone
``availableNow`` batch).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ._common import connection, context, stream_position
from ._fetch import ReadRange
from ._kafka import EARLIEST, LATEST, parse_duration, parse_millis, parse_offset
from ._loss import PlannedPartition, planned_partitions, read_checked
from ._options import Options
from ._plan import StreamPosition, data_loss, first_seq_at, split
from ._retry import Retries
from ._subjects import check_filter

if TYPE_CHECKING:
    from pyspark.sql.datasource import InputPartition

# Kafka's default maxTriggerDelay.
_KAFKA_MAX_TRIGGER_DELAY = "15m"
# How often an idle query asks the server for news (option pollInterval). Spark asks the
# source every 10 ms while no data arrives (its default trigger): a stream info each time
# kept a Python process, the JVM and the server at about a quarter of a core per idle query.
_DEFAULT_POLL_INTERVAL = "100ms"


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads new messages of one stream micro-batch by micro-batch.

    Args:
        opts: the data source options (``startingOffsets``,
            ``startingTimestamp``, ``maxMessagesPerTrigger`` or
            ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` and
            ``maxTriggerDelay``, ``pollInterval``, ``failOnDataLoss``, ``subject``,
            ``fetchOffset.numRetries`` and ``fetchOffset.retryIntervalMs``...).
        schema: the read schema.
        default_partitions: partitions per micro-batch without ``numPartitions``.
    """

    def __init__(self, opts: Options, schema: StructType, default_partitions: int) -> None:
        self.conn = connection(opts)
        self.stream = opts.required("stream")
        subject = opts.get("subject")
        self.subject = check_filter(subject, "subject") if subject else None
        self.starting = parse_offset(
            opts.get("startingOffsets") or LATEST, "startingOffsets", self.stream
        )
        timestamp = opts.get("startingTimestamp")
        self.starting_time = parse_millis(timestamp, "startingTimestamp") if timestamp else None
        if opts.has("maxMessagesPerTrigger") and opts.has("maxOffsetsPerTrigger"):
            raise ValueError(
                "give maxMessagesPerTrigger or its alias maxOffsetsPerTrigger, not both"
            )
        self.max_per_trigger = opts.integer("maxMessagesPerTrigger", None, minimum=1)
        if self.max_per_trigger is None:
            self.max_per_trigger = opts.integer("maxOffsetsPerTrigger", None, minimum=1)
        self.min_per_trigger = opts.integer("minOffsetsPerTrigger", None, minimum=1)
        delay = opts.get("maxTriggerDelay")
        if delay and self.min_per_trigger is None:
            raise ValueError("option 'maxTriggerDelay' needs minOffsetsPerTrigger")
        self.max_delay = parse_duration(delay or _KAFKA_MAX_TRIGGER_DELAY, "maxTriggerDelay")
        self.last_batch = time.monotonic()  # when a micro-batch was last planned
        poll = opts.get("pollInterval") or _DEFAULT_POLL_INTERVAL
        self.poll_interval = parse_duration(poll, "pollInterval")
        self.retries = Retries.of(opts)
        self.found_nothing_at: float | None = None  # when the last look found nothing new
        self.looked: tuple[float, StreamPosition] | None = None  # when, and what, it saw
        self.fail_on_data_loss = opts.boolean("failOnDataLoss", True)
        self.partition_count = opts.integer("numPartitions", default_partitions, minimum=1)
        self.schema = schema
        self.target: int | None = None  # availableNow: the end fixed when the query started

    def _position(self) -> StreamPosition:
        what = f"stream {self.stream!r}: asking for its first and last sequence"
        return self.retries.call(what, lambda: stream_position(self.conn, self.stream))

    def _offset(self, seq: int, pos: StreamPosition) -> dict[str, Any]:
        return {"stream": self.stream, "seq": int(seq), "created": pos.created}

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: ``startingOffsets`` against the stream as it is now.

        ``startingTimestamp``, when given, is used instead (as Kafka does).

        Raises:
            ValueError: ``startingTimestamp`` on a stream without direct get.
        """
        pos = self._position()
        if self.starting_time is not None:
            if not pos.direct:
                raise ValueError(
                    f"option 'startingTimestamp' on a streaming read needs stream "
                    f"{self.stream!r} to allow direct get (allow_direct), to find the sequence"
                )
            what = f"stream {self.stream!r}: looking for the first message at startingTimestamp"
            when = self.starting_time
            found = self.retries.call(
                what, lambda: first_seq_at(context(self.conn), self.stream, when)
            )
            seq = pos.last + 1 if found is None else found
        elif self.starting == EARLIEST:
            seq = max(pos.first, 1)
        elif self.starting == LATEST:
            seq = pos.last + 1
        else:
            seq = max(int(self.starting), 1)  # no sequence 0: it reads from 1, as a batch read
        return self._offset(seq, pos)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxMessagesPerTrigger`` sequences per micro-batch, or everything available."""
        if self.max_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an ``availableNow`` run: the stream's last sequence now."""
        self.target = self._position().last + 1

    def reportLatestOffset(self) -> dict[str, Any]:
        """The offset after the stream's last message (for the query's progress).

        Spark asks for it right after each ``latestOffset``: what that look saw, if it was
        less than ``pollInterval`` ago, is the answer, without asking the server again.
        """
        if self.looked is not None and time.monotonic() - self.looked[0] < self.poll_interval:
            pos = self.looked[1]
        else:
            pos = self._position()
        return self._offset(pos.last + 1, pos)

    def _lost(self, what: str) -> None:
        data_loss(what, self.fail_on_data_loss)

    def _first_unread(self, start: dict[str, Any], pos: StreamPosition) -> int:
        """The first sequence to read from ``start``, after checking for lost data."""
        if start.get("created") != pos.created:
            self._lost(
                f"stream {self.stream!r} was deleted and created again (created "
                f"{start.get('created')} in the checkpoint, {pos.created} now): the offsets "
                "in the checkpoint no longer mean anything"
            )
            return max(pos.first, 1)
        seq = int(start["seq"])
        if pos.first and seq < pos.first:
            self._lost(
                f"stream {self.stream!r}: messages {seq}..{pos.first - 1} were removed "
                "(limits, purge or deletes) before this query read them"
            )
            return pos.first
        return seq

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: what is available, capped by ``limit``.

        Raises:
            DataLossError: the stream was recreated, or unread messages were
                removed, and ``failOnDataLoss`` is true.
        """
        self._pace()
        pos = self._position()
        self.looked = (time.monotonic(), pos)
        first = self._first_unread(start, pos)
        end = pos.last + 1
        if self.target is not None:
            end = min(end, max(self.target, first))
        if isinstance(limit, ReadMaxRows):
            end = min(end, first + limit.max_rows)
        if self._waits_for_more(end - first) or (
            end <= first and start.get("created") == pos.created
        ):
            self.found_nothing_at = time.monotonic()
            return start
        self.found_nothing_at = None
        self.last_batch = time.monotonic()
        return self._offset(max(end, first), pos)

    def _pace(self) -> None:
        """After a look that found nothing, wait out ``pollInterval`` before the next one.

        Spark asks again 10 ms after an empty answer; waiting here makes an idle query
        ask the server once per interval. An ``availableNow`` run never waits.
        """
        if self.found_nothing_at is None or self.target is not None:
            return
        rest = self.found_nothing_at + self.poll_interval - time.monotonic()
        if rest > 0:
            time.sleep(rest)

    def _waits_for_more(self, available: int) -> bool:
        """``minOffsetsPerTrigger``: skip this trigger while fewer are available.

        Until ``maxTriggerDelay`` has passed since the last micro-batch; an
        ``availableNow`` run never waits (it reads up to its end).
        """
        if self.min_per_trigger is None or self.target is not None or available <= 0:
            return False
        waited = time.monotonic() - self.last_batch
        return available < self.min_per_trigger and waited < self.max_delay

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[PlannedPartition]:
        """The micro-batch's sequences ``start.seq .. end.seq - 1`` split into ranges.

        Raises:
            DataLossError: messages of the micro-batch are gone (or the stream
                was recreated) and ``failOnDataLoss`` is true.
        """
        if start == end:
            return []
        pos = self._position()
        if pos.created != end.get("created"):
            self._lost(f"stream {self.stream!r} was deleted and created again since {end}")
            return []
        if start.get("created") != end.get("created"):
            first = max(pos.first, 1)  # recreated before this batch; accepted by latestOffset
        else:
            first = self._first_unread(start, pos)
        last = int(end["seq"]) - 1
        if first > last:
            return []
        whole = ReadRange(self.stream, first, last, subject=self.subject, direct=pos.direct)
        return planned_partitions(split(whole, self.partition_count), pos.created)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Every stored message of the partition's range, as Arrow record batches.

        Raises:
            DataLossError: messages of the range were removed before they were
                read, or the stream was recreated, and ``failOnDataLoss`` is true.
        """
        schema = to_arrow_schema(self.schema, timezone="UTC")
        return read_checked(partition.value, self.conn, schema, self.fail_on_data_loss)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: reads hold no server state, so nothing is acknowledged."""
