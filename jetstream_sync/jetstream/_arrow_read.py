"""A stream's messages as Arrow record batches: the columnar read behind :meth:`Stream.read_arrow`.

Two ways to read a sequence range, picked by :func:`read_arrow` from the
stream's info:

- batched direct gets (server 2.11+, stream ``allow_direct``) through the
  client's one :class:`~._direct_batch.DirectBatchRoute`. The header blocks
  of some 8,192 replies are decoded in one call
  (:func:`jetstream_sync._protocol.decode_direct_batch`: sequences, times and
  subjects come back as buffers) and handed to Arrow as they are; the
  payloads become the ``data`` column in one ``pa.array`` call. One request
  is always in flight while the previous one is decoded.
- otherwise an ordered consumer bounded to the range, deleted at the end.

Nothing is acknowledged and nothing durable is left on the server. Sequences
with no message (deleted, expired) are gaps, never errors.

What another client wrote is read back: a subject, header key or header
value that is not valid UTF-8 shows each invalid byte as U+FFFD. An error
about what the server sent names the stream and the sequence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .. import _protocol
from .._deadline import Deadline, check_timeout
from .._protocol._direct_batch import DIRECT_BATCH_MSG_HEADERS
from .._subjects import filter_subject
from ..errors import JetStreamError, ProtocolError
from ..headers import Headers
from . import _checks as ck
from ._direct_batch import PendingBatch, batch_status, direct_batch_route
from .enums import DeliverPolicy

if TYPE_CHECKING:
    import pyarrow as pa

    from .._connection import Reply
    from ..msg import Msg
    from .context import JetStreamContext
    from .stream import Stream

__all__ = ["READ_BATCH", "ROWS_PER_BATCH", "import_pyarrow", "read_arrow", "read_schema"]

#: Messages asked for per batched direct get (or consumer pull) by default.
READ_BATCH = 4096
#: Rows per record batch, about: a batch ends with the request that fills it.
ROWS_PER_BATCH = 8192
_BATCHED_GET_LEVEL = 1  # the server's api_lvl from which batched direct get exists (2.11)
_TIME_UNIT_NS = 1000  # the timestamp column is in microseconds
# The headers a direct-get reply adds to the stored message's own.
_DIRECT_GET_HEADERS = frozenset(
    ("Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
     "Nats-Last-Sequence", "Nats-UpTo-Sequence")
)  # fmt: skip
_SEQUENCE_HEADER = re.compile(rb"\r\nNats-Sequence:[ \t]*([0-9]+)")


def import_pyarrow() -> Any:
    """The ``pyarrow`` module, imported now.

    Raises:
        ImportError: pyarrow is not installed (the message names the extra to install).
    """
    try:
        import pyarrow
        import pyarrow.compute  # noqa: F401  # pyarrow.compute is not loaded by pyarrow itself
    except ImportError as exc:
        raise ImportError(
            "Stream.read_arrow needs the 'pyarrow' package, which is not installed: "
            "pip install 'jetstream_sync[spark]'"
        ) from exc
    return pyarrow


def read_schema() -> pa.Schema:
    """The Arrow schema of the batches: the Spark data source's read schema.

    ``stream`` string, ``subject`` string, ``seq`` int64, ``timestamp``
    timestamp[us, UTC], ``data`` binary, ``headers`` map<string, list<string>>
    (null for a message without headers of its own).
    """
    pa = import_pyarrow()
    return pa.schema(
        [
            pa.field("stream", pa.string()),
            pa.field("subject", pa.string()),
            pa.field("seq", pa.int64()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("data", pa.binary()),
            pa.field("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
        ]
    )


def read_arrow(
    stream: Stream,
    ctx: JetStreamContext,
    start_seq: int | None,
    end_seq: int | None,
    subject: str | None,
    batch: int,
    timeout: float | None,
) -> Iterator[pa.RecordBatch]:
    """Check the arguments, fix the range and pick the read path; see :meth:`Stream.read_arrow`.

    Asks for the stream's info once, now; the batches are read as they are iterated.
    """
    if start_seq is not None:
        start_seq = ck.sequence(start_seq, "start_seq")
    if end_seq is not None:
        end_seq = ck.sequence(end_seq, "end_seq", minimum=0)
    batch = ck.sequence(batch, "batch")
    if subject is not None:
        subject = filter_subject(subject)
    per_request = check_timeout("timeout", timeout, ctx.timeout)
    pa = import_pyarrow()
    info = stream.info(timeout=per_request)
    state, config = info.state, info.config
    first = max(state.first_seq, 1) if state else 1
    last = state.last_seq if state else 0
    start = first if start_seq is None else max(start_seq, first)
    end = last if end_seq is None else min(end_seq, last)
    direct = bool(config and config.allow_direct) and (
        int(ctx.client.server_info.get("api_lvl", 0)) >= _BATCHED_GET_LEVEL
    )
    read = _Read(pa, stream, ctx, subject, batch, per_request)
    if start > end:
        return iter(())
    return read.direct(start, end) if direct else read.consumer(start, end)


class _Read:
    """One read's fixed parts: the stream, filter, request size, per-request timeout, schema."""

    def __init__(
        self,
        pa: Any,
        stream: Stream,
        ctx: JetStreamContext,
        subject: str | None,
        batch: int,
        timeout: float,
    ) -> None:
        self.pa = pa
        self.stream = stream
        self.ctx = ctx
        self.subject = subject
        self.batch = batch
        self.timeout = timeout
        self.schema = read_schema()

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
                    last = self._last_seq(replies[-2])
                    if status == 204 and last < end and _more(end_block):
                        pending = ask(last + 1)
                    replies.pop()
                    messages += replies
                if len(messages) >= ROWS_PER_BATCH or (pending is None and messages):
                    record_batch = self._decode(messages, end)
                    messages = []
                    if record_batch.num_rows:
                        yield record_batch
        finally:  # a read stopped early: the request in flight is dropped
            if pending is not None:
                pending.close()

    def _decode(self, replies: Sequence[Reply], end: int) -> pa.RecordBatch:
        """Message replies of batched direct gets as one record batch (rows after ``end`` cut)."""
        pa = self.pa
        _, payloads, blocks = zip(*replies, strict=True)
        n = len(blocks)
        types = self.schema.types
        try:
            cols = _protocol.decode_direct_batch(_join(blocks), n, _TIME_UNIT_NS)
        except ProtocolError as exc:
            raise self._error(blocks, exc) from exc
        if cols.messages != n:
            raise ProtocolError(
                f"stream {self.stream.name!r}: a status reply among a batched direct get's "
                f"messages, after sequence {max(cols.seqs.tolist())}"
            )
        offsets, subjects = pa.py_buffer(cols.subject_offsets), pa.py_buffer(cols.subjects)
        arrays = [
            pa.repeat(pa.scalar(self.stream.name, types[0]), n),
            _subject_column(pa, n, offsets, subjects),
            pa.Array.from_buffers(types[2], n, [None, pa.py_buffer(cols.seqs)]),
            pa.Array.from_buffers(types[3], n, [None, pa.py_buffer(cols.times)]),
            pa.array(payloads, type=types[4]),
            (
                self._headers(blocks, cols.kinds, cols.seqs, n)
                if cols.own_headers
                else pa.nulls(n, types[5])
            ),
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        if cols.seqs[n - 1] > end:
            batch = batch.filter(pa.compute.less_equal(batch.column(2), end))
        return batch

    def _headers(
        self, blocks: Sequence[bytes], kinds: memoryview, seqs: memoryview, n: int
    ) -> pa.Array:
        """The ``headers`` column: a map for each message with headers of its own, else null."""
        maps: list[list[tuple[str, list[str]]] | None] = [None] * n
        for i in range(n):
            if kinds[i] == DIRECT_BATCH_MSG_HEADERS:
                try:
                    pairs = _protocol.parse_headers(blocks[i])[2]
                except ProtocolError as exc:
                    raise ProtocolError(
                        f"stream {self.stream.name!r}, sequence {seqs[i]}: {exc}"
                    ) from exc
                own = Headers.from_pairs((k, v) for k, v in pairs if k not in _DIRECT_GET_HEADERS)
                maps[i] = _header_entries(own)
        return self.pa.array(maps, type=self.schema.types[5])

    def _last_seq(self, reply: Reply) -> int:
        """The stream sequence of one direct-get message reply."""
        try:
            cols = _protocol.decode_direct_batch(_join([reply[2]]), 1, _TIME_UNIT_NS)
        except ProtocolError as exc:
            raise self._error([reply[2]], exc) from exc
        if not cols.messages:
            raise ProtocolError(
                f"stream {self.stream.name!r}: a status reply among a batched direct get's messages"
            )
        return int(cols.seqs[0])

    def _error(self, blocks: Sequence[bytes | None], exc: ProtocolError) -> ProtocolError:
        """``exc`` (about a batch of header blocks) naming the stream and the message's sequence."""
        after = None
        for block in blocks:
            try:
                cols = _protocol.decode_direct_batch(_join([block]), 1, _TIME_UNIT_NS)
            except ProtocolError:
                found = _SEQUENCE_HEADER.search(block or b"")
                if found is not None:
                    where = f"sequence {int(found.group(1))}"
                elif after is not None:
                    where = f"the message after sequence {after}"
                else:
                    where = "the first message of a batched direct get"
                return ProtocolError(f"stream {self.stream.name!r}, {where}: {exc}")
            after = int(cols.seqs[0]) or after
        return ProtocolError(f"stream {self.stream.name!r}: {exc}")

    def consumer(self, start: int, end: int) -> Iterator[pa.RecordBatch]:
        """The range through an ordered consumer, about ``ROWS_PER_BATCH`` rows per record batch."""
        cols = _Columns()
        for msg, seq, meta in self._consumer_msgs(start, end):
            cols.add(msg.subject, seq, meta.timestamp, msg.data, msg.headers)
            if len(cols) >= ROWS_PER_BATCH:
                yield cols.batch(self.pa, self.stream.name, self.schema)
        if len(cols):
            yield cols.batch(self.pa, self.stream.name, self.schema)

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


class _Columns:
    """The column lists of the rows an ordered consumer read so far."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.subjects: list[str] = []
        self.seqs: list[int] = []
        self.times: list[Any] = []
        self.datas: list[bytes] = []
        self.headers: list[list[tuple[str, list[str]]] | None] = []

    def add(self, subject: str, seq: int, time: Any, data: bytes, hdrs: Headers) -> None:
        self.subjects.append(_text(subject))
        self.seqs.append(seq)
        self.times.append(time)
        self.datas.append(data)
        self.headers.append(_header_entries(hdrs) if len(hdrs) else None)

    def __len__(self) -> int:
        return len(self.seqs)

    def batch(self, pa: Any, stream: str, schema: pa.Schema) -> pa.RecordBatch:
        n = len(self.seqs)
        types = schema.types
        arrays = [
            pa.repeat(pa.scalar(stream, types[0]), n),
            pa.array(self.subjects, type=types[1]),
            pa.array(self.seqs, type=types[2]),
            pa.array(self.times, type=types[3]),
            pa.array(self.datas, type=types[4]),
            pa.array(self.headers, type=types[5]),
        ]
        self.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _text(value: str) -> str:
    """``value`` with each byte that was not UTF-8 (kept as a surrogate escape) as U+FFFD."""
    if value.isascii():
        return value
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _header_entries(hdrs: Headers) -> list[tuple[str, list[str]]] | None:
    """Headers as the entries of a ``MAP<STRING, ARRAY<STRING>>`` (None when there are none)."""
    entries = [(_text(key), [_text(v) for v in hdrs.get_all(key)]) for key in hdrs]
    return entries or None


def _subject_column(pa: Any, n: int, offsets: pa.Buffer, subjects: pa.Buffer) -> pa.Array:
    """The ``subject`` column from the decoder's buffers; invalid UTF-8 bytes become U+FFFD."""
    column = pa.Array.from_buffers(pa.string(), n, [None, offsets, subjects])
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:  # another client's bytes: the rare slow path
        raw = pa.Array.from_buffers(pa.binary(), n, [None, offsets, subjects])
        column = pa.array([s.decode("utf-8", "replace") for s in raw.to_pylist()], pa.string())
    return column


def _join(blocks: Sequence[bytes | None]) -> bytes:
    try:
        return b"".join(blocks)  # type: ignore[arg-type]  # None is caught below
    except TypeError:
        raise ProtocolError("a batched direct get reply without a header block") from None


def _more(status_block: bytes | None) -> bool:
    """Whether the stream holds more matching messages after a batch (its 204 says how many)."""
    for key, value in _protocol.parse_headers(status_block or b"")[2]:
        if key == "Nats-Num-Pending":
            return value != "0"
    return True  # no count: ask again (a 404 ends the read)
