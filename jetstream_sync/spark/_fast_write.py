"""``mode=fast`` of the ``jetstream`` writers: a task's rows as fast-ingest batches (ADR-50).

Each task sends its rows through :meth:`JetStreamContext.fast_batch`, at most
``fastBatchRows`` rows per batch, a record batch at a time with
:meth:`FastBatch.add_arrow` (frames encoded in C, as many rows per write as
the stream lets the batch run ahead): the stream acknowledges every few
hundred messages instead of each one, and each batch ends with one PubAck.
Every row carries the ``Nats-Msg-Id`` the acknowledged writer gives it (the
``msgId`` column, or the same derived id: write id, partition, row index and
the BLAKE2b hash of its subject and data), so a retried task is deduplicated
as in ``mode=async``: nats-server applies the stream's duplicate window to
fast batch messages too and skips a duplicate without ending the batch
(``processJetStreamFastBatchMsg`` in ``server/stream.go``).

A batch is sent with ``on_gap="fail"``: the stream stores its messages in
order and stops the batch at the first one it lost or refused, and the task
then fails naming that row. A fast batch is not atomic, so what was stored
before the failure stays; the retried task sends it again under the same ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NoReturn

import pyarrow as pa

from ..errors import FastBatchError, NatsError, RowPublishError

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext
    from ..jetstream.fast_batch import FastBatch

DEFAULT_BATCH_ROWS = 10_000  # rows per fast batch unless fastBatchRows says otherwise
FLOW = 4096  # the most messages per stream ack we ask for; the stream may ack more often
WAIT = 60.0  # seconds an add_arrow() or commit() may wait for the stream (as ACK_WAIT)


class FastPublisher:
    """One task's rows as fast-ingest batches; same counters as the ``ArrowPublisher``.

    Args:
        ctx: the JetStream context of the task's connection.
        partition: the task's partition (named in errors).
        id_prefix: what derived message ids start with (``<write>:<partition>:``), or
            None to derive none (``dedupe=false``).
        default_subject: the subject of rows without one, or None.
        batch_rows: the most rows per fast batch.
        max_rows: store this many rows, then fail the task (tests of retries).
        added_headers: headers every message gets (the trace context of a Spark
            task's span), unless its row has one of the same name.
    """

    def __init__(
        self,
        ctx: JetStreamContext,
        partition: int,
        id_prefix: str | None,
        default_subject: str | None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        max_rows: int | None = None,
        added_headers: Mapping[str, str] | None = None,
    ) -> None:
        self._ctx = ctx
        self._partition = partition
        self._id_prefix = id_prefix
        self._default = default_subject or None
        self._batch_rows = batch_rows
        self._max_rows = max_rows
        self._added_headers = dict(added_headers or {})
        self._batch: FastBatch | None = None
        self._first = 0  # the task row of the open batch's first message
        # The open batch's record batch slices, as (task row of its first row, slice),
        # to name the row a batch sequence stands for.
        self._slices: list[tuple[int, pa.RecordBatch]] = []
        self.sent = 0  # rows added to a batch (stored once their batch is committed)
        self.duplicates = 0  # a fast batch does not say which rows were duplicates
        self.stream: str | None = None

    def publish_all(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Send every row of every record batch, then commit the last fast batch.

        Raises:
            RowPublishError: a row could not be sent (the rows before it are
                committed first) or was not stored; the text names the row.
        """
        from ..jetstream.arrow_publish import ADDED_HEADERS

        token = ADDED_HEADERS.set(self._added_headers or None)
        try:
            for batch in batches:
                self.publish(batch)
            self._commit()
        finally:
            ADDED_HEADERS.reset(token)
            if self._batch is not None:
                self._batch.abandon()

    def publish(self, batch: pa.RecordBatch) -> None:
        """Add every row of ``batch``, committing each fast batch when it is full.

        Raises:
            RowPublishError: as :meth:`publish_all`.
        """
        pos = 0
        while pos < batch.num_rows:
            if self._max_rows is not None and self.sent >= self._max_rows:
                self._commit()
                raise RuntimeError(f"max_rows: failing after {self.sent} stored rows")
            if self._batch is None:
                self._batch = self._ctx.fast_batch(flow=FLOW, on_gap="fail", timeout=WAIT)
                self._first = self.sent
                self._slices = []
            count = min(batch.num_rows - pos, self._batch_rows - (self.sent - self._first))
            if self._max_rows is not None:
                count = min(count, self._max_rows - self.sent)
            piece = batch.slice(pos, count)
            self._slices.append((self.sent, piece))
            self._add(piece)
            pos += count
            if self.sent - self._first >= self._batch_rows:
                self._commit()

    def _add(self, piece: pa.RecordBatch) -> None:
        """Add one slice to the open batch; count what went in."""
        batch = self._batch
        assert batch is not None
        before = batch.added
        try:
            batch.add_arrow(
                piece, self._default, msg_id_prefix=self._id_prefix, first_index=self.sent,
                dedupe=self._id_prefix is not None,
            )  # fmt: skip
        except RowPublishError as exc:  # a row that cannot be sent: not sent
            self.sent += exc.row or 0
            self._refuse(exc)
        except FastBatchError as exc:
            self.sent += batch.added - before
            raise RowPublishError(self._lost(exc)) from exc
        except NatsError as exc:
            self.sent += batch.added - before
            raise RowPublishError(self._stopped(exc)) from exc
        self.sent += piece.num_rows

    def _commit(self) -> None:
        """Commit the open batch (if any) and wait for its PubAck."""
        batch, self._batch = self._batch, None
        if batch is None:
            return
        if batch.added == 0:  # its first row was refused: nothing to commit
            batch.abandon()
            return
        try:
            ack = batch.commit()
        except FastBatchError as exc:
            raise RowPublishError(self._lost(exc)) from exc
        except NatsError as exc:
            raise RowPublishError(self._stopped(exc)) from exc
        finally:
            batch.abandon()
        self.stream = ack.stream

    def _refuse(self, exc: RowPublishError) -> NoReturn:
        """Commit what was added, then fail the task on the row that could not be sent."""
        row = self.sent
        self._commit()
        why = str(exc).partition(" was not sent: ")[2] or str(exc)
        raise RowPublishError(
            f"row {row} of partition {self._partition} "
            f"(subject {(exc.subject or self._default)!r}) was not sent: {why}",
            row=row,
            subject=exc.subject,
        ) from None

    def _lost(self, exc: FastBatchError) -> str:
        """The error text for the row the fast batch stopped at."""
        index = self._first + max(exc.sequence, 1) - 1
        return self._not_stored(index, self._subject_of(index), exc)

    def _subject_of(self, index: int) -> str | None:
        """The subject of the open batch's task row ``index``."""
        for first, piece in reversed(self._slices):
            if first <= index < first + piece.num_rows:
                names = piece.schema.names
                if "subject" in names:
                    subject = piece.column(names.index("subject"))[index - first].as_py()
                    return subject or self._default
                break
        return self._default

    def _stopped(self, exc: BaseException) -> str:
        """The error text for a batch that stopped without naming its message.

        A message the stream refuses before batching it (too large, say), a
        timeout or a lost connection: the rows before the one in error are
        stored, the others may not be.
        """
        return (
            f"the fast batch of rows {self._first}..{self.sent - 1} of partition "
            f"{self._partition} stopped: {type(exc).__name__}: {exc}"
        )

    def _not_stored(self, index: int, subject: str | None, exc: BaseException) -> str:
        return (
            f"row {index} of partition {self._partition} (subject {subject!r}) was not stored: "
            f"{type(exc).__name__}: {exc}"
        )
