"""What one read task is given, and how it tells a gap from data loss while it reads.

A **gap** is a sequence of the planned range with no message because that
message alone was deleted or expired: it is not there, never an error.
**Loss** is a sequence of the planned range that the stream no longer holds
because its first sequence moved past it before the task read it (a purge,
or limits removing the oldest messages), or a stream deleted, or deleted and
created again, since the read was planned. ``docs/spark/reading.md`` ("Gaps
and data loss") says the same for users.

A task reads its range in sequence order and watches the ``seq`` column:
where sequences are missing (before its first row, between two rows, after
its last) it asks the stream for its state once. The stream's first sequence
past the first missing one is loss; otherwise the missing ones are gaps. It
also asks once before reading and once after, which is how a recreated
stream (another creation time) is seen. On loss it raises
:class:`~._plan.DataLossError`, or with ``failOnDataLoss=false`` logs a
WARNING and goes on with what remains.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from ..errors import NatsError, StreamNotFoundError
from ._common import stream_position
from ._fetch import ReadRange, read_range
from ._plan import data_loss


@dataclass(frozen=True)
class PlannedRange:
    """What one task reads: a range, and the stream's creation time when it was planned."""

    rng: ReadRange
    created: str


class PlannedPartition(InputPartition):
    """One task's share of a read: a :class:`PlannedRange` (plain values only)."""

    def __init__(self, planned: PlannedRange) -> None:
        super().__init__(planned)


def planned_partitions(ranges: list[ReadRange], created: str) -> list[PlannedPartition]:
    """One partition per range, each remembering the stream's creation time ``created``."""
    return [PlannedPartition(PlannedRange(rng, created)) for rng in ranges]


class _LossCheck:
    """The data-loss check of one task's read of ``planned``."""

    def __init__(self, planned: PlannedRange, conn: dict[str, Any], fail: bool) -> None:
        self.rng = planned.rng
        self.created = planned.created
        self.conn = conn
        self.fail = fail
        self.next = self.rng.start  # the lowest sequence of the range not received yet
        self.reported = 0  # loss is reported once: sequences below this one were

    def check(self, missing: int) -> int | None:
        """Ask the stream about ``missing``, the first sequence not received.

        Returns:
            Where to read on after a loss (past the range when nothing of it
            is left), or None when the stream is as planned and ``missing``
            is not lost.

        Raises:
            DataLossError: a loss, and ``failOnDataLoss`` is true.
        """
        rng = self.rng
        planned = f"of its planned range {rng.start}..{rng.end}"
        if missing <= rng.end:
            left = f"sequences {missing}..{rng.end} {planned} were still to read"
        else:
            left = f"nothing {planned} was left to read"
        try:
            pos = stream_position(self.conn, rng.stream)
        except StreamNotFoundError:
            data_loss(f"stream {rng.stream!r} was deleted while {left}", self.fail)
            return rng.end + 1
        if pos.created != self.created:
            data_loss(
                f"stream {rng.stream!r} was deleted and created again since the read was planned "
                f"(created {self.created}, now {pos.created}): {left}",
                self.fail,
            )
            return rng.end + 1
        if missing <= rng.end and missing < pos.first and missing >= self.reported:
            upto = min(pos.first - 1, rng.end)
            self.reported = upto + 1
            data_loss(
                f"stream {rng.stream!r}: sequences {missing}..{upto} of the range "
                f"{rng.start}..{rng.end} were removed before they were read (the stream's "
                f"first sequence is now {pos.first}: a purge, or limits)",
                self.fail,
            )
            return pos.first
        return None

    def saw(self, batch: pa.RecordBatch) -> None:
        """Check the sequences of one batch read: a missing one is a gap or a loss."""
        rows = batch.num_rows
        if not rows:
            return
        seqs = batch.column(batch.schema.get_field_index("seq"))
        first, last = seqs[0].as_py(), seqs[rows - 1].as_py()
        if first != self.next:
            self.check(self.next)
        elif last - first + 1 != rows:  # sequences ascend: some are missing in between
            steps = pc.subtract(seqs[1:], seqs[: rows - 1])
            hole = pc.index(pc.greater(steps, 1), True).as_py()
            self.check(seqs[hole].as_py() + 1)
        self.next = last + 1


def read_checked(
    planned: PlannedRange, conn: dict[str, Any], schema: pa.Schema, fail: bool
) -> Iterator[pa.RecordBatch]:
    """Yield the record batches of ``planned``'s range, checking it for data loss.

    Args:
        planned: the task's range and the stream's creation time at planning.
        conn: ``servers`` and the other arguments of :func:`jetstream_sync.spark.client`.
        schema: the Arrow schema of the batches (the read schema).
        fail: ``failOnDataLoss``: raise on loss (else warn and read on).

    Raises:
        DataLossError: a loss, and ``fail`` is true.
    """
    rng = planned.rng
    if rng.start > rng.end:
        return
    check = _LossCheck(planned, conn, fail)
    start = check.check(rng.start) or rng.start
    while start <= rng.end:
        batches = read_range(replace(rng, start=start), conn, schema)
        while True:
            try:
                batch = next(batches, None)
            except NatsError:
                # e.g. a consumer told more were pending, then the purge took them:
                # loss explains it, or the error stands (Spark retries the task)
                resume = check.check(check.next)
                if resume is None:
                    raise
                start = check.next = resume
                break
            if batch is None:
                start = check.next = check.check(check.next) or rng.end + 1
                break
            check.saw(batch)
            yield batch
