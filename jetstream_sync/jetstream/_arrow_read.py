"""A stream's messages as Arrow record batches: the columnar read behind :meth:`Stream.read_arrow`.

Two ways to read a sequence range, picked by :func:`read_arrow` from the
stream's info:

- batched direct gets (server 2.11+, stream ``allow_direct``) through the
  client's one :class:`~._direct_batch.DirectBatchRoute`, some 8,192
  replies decoded at a time by :func:`._arrow_decode.decode_replies`. One
  request is always in flight while the previous one is decoded.
- otherwise an ordered consumer bounded to the range, deleted at the end.

Nothing is acknowledged and nothing durable is left on the server. Sequences
with no message (deleted, expired) are gaps, never errors.

What another client wrote is read back (see :mod:`._arrow_decode`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .. import _protocol
from .._deadline import Deadline, check_timeout
from .._subjects import filter_subject
from ..errors import JetStreamError
from . import _checks as ck
from ._arrow_decode import Columns, decode_replies, import_pyarrow, last_seq
from ._direct_batch import PendingBatch, batch_status, direct_batch_route
from .enums import DeliverPolicy

if TYPE_CHECKING:
    import pyarrow as pa

    from .._reply import Reply
    from ..msg import Msg
    from .context import JetStreamContext
    from .stream import Stream

__all__ = ["READ_BATCH", "ROWS_PER_BATCH", "read_arrow"]

#: Messages asked for per batched direct get (or consumer pull) by default.
READ_BATCH = 4096
#: Rows per record batch, about: a batch ends with the request that fills it.
ROWS_PER_BATCH = 8192
_BATCHED_GET_LEVEL = 1  # the server's api_lvl from which batched direct get exists (2.11)


def read_arrow(
    stream: Stream,
    ctx: JetStreamContext,
    start_seq: int | None,
    end_seq: int | None,
    subject: str | None,
    batch: int | None,
    timeout: float | None,
) -> Iterator[pa.RecordBatch]:
    """Check the arguments, fix the range and pick the read path; see :meth:`Stream.read_arrow`.

    Asks for the stream's info once, now; the batches are read as they are iterated.
    """
    if start_seq is not None:
        start_seq = ck.sequence(start_seq, "start_seq")
    if end_seq is not None:
        end_seq = ck.sequence(end_seq, "end_seq", minimum=0)
    batch = READ_BATCH if batch is None else ck.sequence(batch, "batch")
    if subject is not None:
        subject = filter_subject(subject)
    per_request = check_timeout("timeout", timeout, ctx.timeout)
    import_pyarrow()
    info = stream.info(timeout=per_request)
    state, config = info.state, info.config
    first = max(state.first_seq, 1) if state else 1
    last = state.last_seq if state else 0
    start = first if start_seq is None else max(start_seq, first)
    end = last if end_seq is None else min(end_seq, last)
    direct = bool(config and config.allow_direct) and (
        int(ctx.client.server_info.get("api_lvl", 0)) >= _BATCHED_GET_LEVEL
    )
    read = _Read(stream, ctx, subject, batch, per_request)
    if start > end:
        return iter(())
    return read.direct(start, end) if direct else read.consumer(start, end)


class _Read:
    """One read's fixed parts: the stream, filter, request size and per-request timeout."""

    def __init__(
        self,
        stream: Stream,
        ctx: JetStreamContext,
        subject: str | None,
        batch: int,
        timeout: float,
    ) -> None:
        self.stream = stream
        self.ctx = ctx
        self.subject = subject
        self.batch = batch
        self.timeout = timeout

    def direct(self, start: int, end: int) -> Iterator[pa.RecordBatch]:
        """The range by batched direct gets, about ``ROWS_PER_BATCH`` rows per record batch."""
        route = direct_batch_route(self.ctx.client)

        def ask(seq: int) -> PendingBatch:
            want = min(self.batch, end - seq + 1)
            return route.send(self.stream, seq, want, self.subject, Deadline(self.timeout))

        pending: PendingBatch | None = ask(start)
        messages: list[Reply] = []
        try:
            while pending is not None:
                replies = pending.replies()
                end_block = replies[-1][2]
                status = batch_status(self.stream, end_block, pending.deadline)
                pending = None
                if len(replies) > 1:
                    last = last_seq(replies[-2], self.stream.name)
                    if status == 204 and last < end and _more(end_block):
                        pending = ask(last + 1)
                    replies.pop()
                    messages += replies
                if len(messages) >= ROWS_PER_BATCH or (pending is None and messages):
                    record_batch = decode_replies(messages, self.stream.name, end)
                    messages = []
                    if record_batch.num_rows:
                        yield record_batch
        finally:  # a read stopped early: the request in flight is dropped
            if pending is not None:
                pending.close()

    def consumer(self, start: int, end: int) -> Iterator[pa.RecordBatch]:
        """The range through an ordered consumer, about ``ROWS_PER_BATCH`` rows per record batch."""
        cols = Columns()
        for msg, seq, meta in self._consumer_msgs(start, end):
            cols.add(msg.subject, seq, meta.timestamp, msg.data, msg.headers)
            if len(cols) >= ROWS_PER_BATCH:
                yield cols.batch(self.stream.name)
        if len(cols):
            yield cols.batch(self.stream.name)

    def _consumer_msgs(self, start: int, end: int) -> Iterator[tuple[Msg, int, Any]]:
        """The range's messages, sequences and metadata by an ordered consumer, deleted after."""
        consumer = self.stream.ordered_consumer(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start,
            filter_subjects=(self.subject,) if self.subject else None,
        )
        last = None  # the metadata of the last message read
        with consumer:
            while True:
                msgs = consumer.fetch_no_wait(min(self.batch, end - start + 1), self.timeout)
                if not msgs:
                    if last is None:
                        return
                    # A message said more were pending: the link or the consumer was lost
                    # (a fetch times out empty). Fail; the caller reads the range again.
                    raise JetStreamError(
                        f"the read of {self.stream.name!r} {start}..{end} stopped at sequence "
                        f"{last.sequence.stream} with {last.num_pending} messages pending"
                    )
                for msg in msgs:
                    last = meta = msg.metadata
                    seq = meta.sequence.stream
                    if seq > end:
                        return
                    yield msg, seq, meta
                    if meta.num_pending == 0:
                        return


def _more(status_block: bytes | None) -> bool:
    """Whether the stream holds more matching messages after a batch (its 204 says how many)."""
    for key, value in _protocol.parse_headers(status_block or b"")[2]:
        if key == "Nats-Num-Pending":
            return value != "0"
    return True  # no count: ask again (a 404 ends the read)
