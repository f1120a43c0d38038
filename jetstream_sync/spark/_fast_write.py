"""``mode=fast`` of the ``jetstream`` writers: a task's rows as fast-ingest batches (ADR-50).

Each task sends its rows through :meth:`JetStreamContext.fast_batch`, at most
``fastBatchRows`` rows per batch: the stream acknowledges every few hundred
messages instead of each one, and each batch ends with one PubAck. Every row
carries the ``Nats-Msg-Id`` the acknowledged writer gives it (the ``msgId``
column, or the same derived id: write id, partition, row index and the
BLAKE2b hash of its subject and data), so a retried task is deduplicated as
in ``mode=async``: nats-server applies the stream's duplicate window to fast
batch messages too and skips a duplicate without ending the batch
(``processJetStreamFastBatchMsg`` in ``server/stream.go``).

A batch is sent with ``on_gap="fail"``: the stream stores its messages in
order and stops the batch at the first one it lost or refused, and the task
then fails naming that row. A fast batch is not atomic, so what was stored
before the failure stays; the retried task sends it again under the same ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn

import pyarrow as pa

from ..errors import FastBatchError, NatsError, RowPublishError

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext
    from ..jetstream.fast_batch import FastBatch

DEFAULT_BATCH_ROWS = 10_000  # rows per fast batch unless fastBatchRows says otherwise
FLOW = 4096  # the most messages per stream ack we ask for; the stream may ack more often
WAIT = 60.0  # seconds an add() or commit() may wait for the stream (as ACK_WAIT in _batch)
_MSG_ID = "Nats-Msg-Id"


def derived_msg_id(prefix: str, index: int, subject: str, data: bytes) -> str:
    """The ``Nats-Msg-Id`` of a row without one, as ``mode=async`` derives it in C.

    ``<prefix><index>:`` and the 12 hex digits of BLAKE2b over the data, keyed
    by the subject's first 64 bytes: a row keeps its id whichever mode writes it.
    """
    digest = hashlib.blake2b(data, digest_size=6, key=subject.encode()[:64]).hexdigest()
    return f"{prefix}{index}:{digest}"


def _headers(pairs: list[tuple[str, Any]] | None) -> tuple[dict[str, list[str]], str]:
    """A row's ``headers`` map as ``add()`` takes it, or a reason it cannot be sent."""
    out: dict[str, list[str]] = {}
    for key, value in pairs or ():
        values = [value] if isinstance(value, str) else value
        if values is None or any(v is None for v in values):
            return out, f"header {key!r} is null"
        out.setdefault(key, []).extend(values)
    return out, ""


class FastPublisher:
    """One task's rows as fast-ingest batches; same counters as the ``ArrowPublisher``.

    Args:
        ctx: the JetStream context of the task's connection.
        partition: the task's partition (named in errors).
        id_prefix: what derived message ids start with (``<write>:<partition>:``).
        default_subject: the subject of rows without one, or None.
        batch_rows: the most rows per fast batch.
        max_rows: store this many rows, then fail the task (tests of retries).
    """

    def __init__(
        self,
        ctx: JetStreamContext,
        partition: int,
        id_prefix: str,
        default_subject: str | None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        max_rows: int | None = None,
    ) -> None:
        self._ctx = ctx
        self._partition = partition
        self._id_prefix = id_prefix
        self._default = default_subject or None
        self._batch_rows = batch_rows
        self._max_rows = max_rows
        self._batch: FastBatch | None = None
        self._first = 0  # the task row of the open batch's first message
        self._subjects: list[str] = []  # the open batch's subjects, to name a row in errors
        self.sent = 0  # rows added to a batch (stored once their batch is committed)
        self.duplicates = 0  # a fast batch does not say which rows were duplicates
        self.stream: str | None = None

    def publish_all(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Send every row of every record batch, then commit the last fast batch.

        Raises:
            RowPublishError: a row could not be sent (the rows before it are
                committed first) or was not stored; the text names the row.
        """
        try:
            for batch in batches:
                self.publish(batch)
            self._commit()
        finally:
            if self._batch is not None:
                self._batch.abandon()

    def publish(self, batch: pa.RecordBatch) -> None:
        """Add every row of ``batch``, committing each fast batch when it is full.

        Raises:
            RowPublishError: as :meth:`publish_all`.
        """
        names = batch.schema.names
        data = batch.column(names.index("data")).to_pylist()
        n = len(data)
        subjects = self._column(batch, "subject", n)
        msg_ids = self._column(batch, "msgId", n)
        headers = self._column(batch, "headers", n)
        for row in range(n):
            if self._max_rows is not None and self.sent >= self._max_rows:
                self._commit()
                raise RuntimeError(f"max_rows: failing after {self.sent} stored rows")
            subject = subjects[row] or self._default
            payload = data[row]
            if payload is None or not subject:
                self._refuse(subject, "null data" if payload is None else "no subject")
            if isinstance(payload, str):
                payload = payload.encode()
            hdrs, why = _headers(headers[row])
            if why:
                self._refuse(subject, why)
            hdrs[_MSG_ID] = [
                msg_ids[row] or derived_msg_id(self._id_prefix, self.sent, subject, payload)
            ]
            self._add(subject, payload, hdrs)

    @staticmethod
    def _column(batch: pa.RecordBatch, name: str, n: int) -> list[Any]:
        names = batch.schema.names
        return batch.column(names.index(name)).to_pylist() if name in names else [None] * n

    def _add(self, subject: str, payload: bytes, headers: dict[str, list[str]]) -> None:
        if self._batch is None:
            self._batch = self._ctx.fast_batch(flow=FLOW, on_gap="fail", timeout=WAIT)
            self._first = self.sent
            self._subjects = []
        try:
            self._batch.add(subject, payload, headers)
        except ValueError as exc:  # bad input (BadSubjectError, MaxPayloadError...): not sent
            self._refuse(subject, f"{type(exc).__name__}: {exc}")
        except FastBatchError as exc:
            raise RowPublishError(self._lost(exc)) from exc
        except NatsError as exc:
            raise RowPublishError(self._stopped(exc)) from exc
        self._subjects.append(subject)
        self.sent += 1
        if self.sent - self._first >= self._batch_rows:
            self._commit()

    def _commit(self) -> None:
        """Commit the open batch (if any) and wait for its PubAck."""
        batch, self._batch = self._batch, None
        if batch is None:
            return
        if self.sent == self._first:  # its first row was refused: nothing to commit
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

    def _refuse(self, subject: str | None, why: str) -> NoReturn:
        """Commit what was added, then fail the task on the row about to be added."""
        self._commit()
        raise RowPublishError(
            f"row {self.sent} of partition {self._partition} "
            f"(subject {(subject or self._default)!r}) was not sent: {why}"
        )

    def _lost(self, exc: FastBatchError) -> str:
        """The error text for the row the fast batch stopped at."""
        offset = max(exc.sequence, 1) - 1
        subject = self._subjects[offset] if offset < len(self._subjects) else self._default
        return self._not_stored(self._first + offset, subject, exc)

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
