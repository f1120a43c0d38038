"""Columnar publishing: the rows of Arrow record batches as JetStream messages, every one
acknowledged (:meth:`JetStreamContext.publish_arrow`, and the Spark writer).

Per chunk of rows (up to :data:`CHUNK_ROWS` of a record batch) the protocol core
encodes every HPUB frame in one call (``_protocol.encode_batch_hpub``: subject
checks, the ``Nats-Msg-Id`` derived in C, a reply subject per row on one inbox) and
the client queues the whole blob in one write (:meth:`Client.publish_frames`). The
PubAcks come back on the client's reply route for columnar publishes (one
:class:`~jetstream_sync._routes.ReplyRoute`, shared by every publisher of the
client) straight into the publisher's queue, a piece per buffer the reader parsed:
no future and no JSON per row. A buffer of nothing but acks is decoded in one C
call (``_protocol.puback_batch``: each ack's token, and whether it is a plain
success) and split per publisher; acks that came with other messages come as
``(token, payload, headers)`` tuples. Each publisher holds a range of
:data:`ROW_TOKENS` tokens on the route; the token of its row ``i`` is the range's
first plus ``i``, and a row counts as stored once its success ack arrived, so an
in-order run of plain acks is settled with one slice assignment. At most
:data:`WINDOW_ROWS` rows wait for their ack. Once the publisher is done its range is
released, so a late ack is dropped.

Every row is either acknowledged or :class:`RowPublishError` names it: a row that
cannot be sent (the rows before it are sent and acknowledged first, none after it
is sent), a rejected row (its error ack), a row whose ack did not come
within the ack wait, or rows still waiting when the connection was lost (their
acks went to the old connection; publishing them again under the same message ids
lets the stream drop what was stored).

Needs pyarrow (imported with this module, which the context imports only when
``publish_arrow`` is called).
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .. import _protocol
from .._nuid import NUID
from .._routes import ReplyRoute
from ..errors import (
    ConnectionLostError,
    MaxSubscriptionsExceededError,
    NatsError,
    PermissionViolationError,
    RowPublishError,
    TimeoutError,
)
from ..msg import Msg
from ._arrow_columns import ADDED_HEADERS, RowColumns, record_batches
from .publish import parse_pub_ack
from .replies import ArrowPubAck

if TYPE_CHECKING:
    import pyarrow as pa

    from .._reply import Reply
    from ..client import Client
    from .context import JetStreamContext

__all__ = [
    "ACK_WAIT", "ADDED_HEADERS", "CHUNK_ROWS", "ROW_TOKENS", "WINDOW_ROWS", "ArrowPublisher",
    "publish_arrow",
]  # fmt: skip

CHUNK_ROWS = 4096  # rows encoded and written in one piece
WINDOW_ROWS = 16384  # rows at most waiting for their ack
ACK_WAIT = 60.0  # seconds without any ack before the oldest waiting row fails (the default)
ROW_TOKENS = 1 << 32  # the reply tokens of one publisher: the most rows it publishes
_RESOURCE_KEY = "jetstream_sync.arrow_publish.route"
_ACK_NEW, _ACK_OTHER = _protocol.ACK_NEW, _protocol.ACK_OTHER


class _AckGroup:
    """One publisher's acks of a buffer of nothing but acks (decoded by the protocol core)."""

    __slots__ = ("others", "stream", "tokens")

    def __init__(self) -> None:
        self.tokens: list[int] = []  # the plain successes
        self.stream: str | None = None  # the stream the first of them names
        self.others: list[Reply] = []  # the rest (errors, duplicates...) as reply tuples


class _AckRoute:
    """The reply route every columnar publisher of a client shares (a shared resource, closed
    with the client), with the C decode of the buffers that hold nothing but its acks."""

    def __init__(self, client: Client) -> None:
        self.route: ReplyRoute[ArrowPublisher] = ReplyRoute(
            client, self._on_buffer, permissions=True
        )
        self._prefix_len = 0

    def _on_buffer(self, buffer: memoryview, end: int, sid: int) -> None:
        """The reading thread: decode a buffer of acks, hand each publisher its own."""
        if not self._prefix_len:
            self._prefix_len = len(self.route.prefix.encode())
        batch = _protocol.puback_batch(buffer, 0, end, sid, self._prefix_len)
        streams, others = iter(batch.streams), iter(batch.others)
        stream: str | None = None
        other: tuple[bytes, bytes | None] = (b"", None)
        groups: dict[ArrowPublisher, _AckGroup] = {}
        group = _AckGroup()
        low = high = 0  # the token range of the publisher `group` belongs to
        slot_of = self.route.lasting_slot
        for token, kind in zip(batch.tokens, batch.kinds, strict=True):
            if kind == _ACK_NEW:
                stream = next(streams)[0]
            elif kind == _ACK_OTHER:
                other = next(others)
            if not low <= token < high:
                sink, low, high = slot_of(token)
                if sink is None:  # a released range's late ack, or not a token
                    continue
                found = groups.get(sink)
                group = groups[sink] = _AckGroup() if found is None else found
            if kind == _ACK_OTHER:
                group.others.append((str(token), *other))
            else:
                group.tokens.append(token)
                if group.stream is None:
                    group.stream = stream
        for sink, own in groups.items():
            sink.deliver_group(own)

    def close(self) -> None:
        """Fail every publisher still waiting for acks (the client closes)."""
        self.route.close()


class _Chunk:
    """Rows ``first..first+count-1`` of the publisher: what naming one of them needs."""

    __slots__ = ("batch_row", "columns", "count", "first")

    def __init__(self, first: int, count: int, batch_row: int, columns: RowColumns) -> None:
        self.first = first
        self.count = count
        self.batch_row = batch_row  # the batch row of the publisher's row `first`
        self.columns = columns


class ArrowPublisher:
    """Rows of record batches out, their acks in, a bounded window between.

    Row ``i`` (counted over every batch given to this publisher) gets the
    ``Nats-Msg-Id`` of its ``msgId`` column, or when that is null or absent
    ``<id_prefix><i>:`` and 12 hex digits of the BLAKE2b of its data keyed
    by its subject. The same rows published again under the same prefix get
    the same ids, so the stream stores them once (within its duplicate window).
    Without a prefix such a row gets no id.

    Args:
        client: the connection.
        id_prefix: what derived message ids start with, or None to derive none.
        default_subject: the subject of rows without one (null or empty), or None.
        where: what follows ``row <i>`` in error texts (the Spark writer's
            `` of partition <p>``).
        max_rows: publish at most this many rows, then fail (tests of retries).
        added_headers: headers every message gets (the trace context of a Spark
            task's span), unless its row has one of the same name.
        ack_wait: seconds without any ack before the oldest waiting row fails;
            also the longest wait for room in the client's write buffer.
    """

    def __init__(
        self,
        client: Client,
        id_prefix: str | None,
        default_subject: str | None,
        *,
        where: str = "",
        max_rows: int | None = None,
        added_headers: Mapping[str, str] | None = None,
        ack_wait: float = ACK_WAIT,
    ) -> None:
        self._client = client
        self._added_headers = dict(added_headers or {})
        self._where = where
        self._id_prefix = None if id_prefix is None else id_prefix.encode()
        self._default = default_subject
        self._default_b = (default_subject or "").encode()
        self._max_rows = max_rows
        self._ack_wait = ack_wait
        self._route = client.shared_resource(_RESOURCE_KEY, _AckRoute).route
        # Each received buffer's acks, or the error that says no more will come.
        self._acks: queue.SimpleQueue[list[Reply] | _AckGroup | NatsError | tuple[int, NatsError]]
        self._acks = queue.SimpleQueue()
        self._base = self._route.open(self, ROW_TOKENS)
        self._reply = self._route.prefix.encode()
        self._acked = bytearray()  # per row: 1 once its success ack came
        self._chunks: deque[_Chunk] = deque()  # chunks with a row still waiting
        self.sent = 0
        self.waiting = 0
        self.duplicates = 0
        self.stream: str | None = None

    def publish(self, batch: pa.RecordBatch) -> None:
        """Send every row of ``batch`` (waiting for acks while the window is full).

        Raises:
            RowPublishError: a row cannot be sent (a bad subject, header or
                size: the rows before it are sent and acknowledged first;
                neither it nor any row after it is sent) or was rejected.
        """
        cols = RowColumns(
            batch, self._default, self._added_headers, derives_ids=self._id_prefix is not None
        )
        n = cols.rows
        pos = 0
        while pos < n:
            if self._max_rows is not None and self.sent >= self._max_rows:
                self.wait_all()
                raise RuntimeError(f"max_rows: failing after {self.sent} stored rows")
            end = min(n, pos + CHUNK_ROWS)
            if self.sent + end - pos > ROW_TOKENS:
                raise ValueError(f"one publisher sends at most {ROW_TOKENS} rows")
            if self._max_rows is not None:
                end = min(end, pos + self._max_rows - self.sent)
            if 0 <= cols.bad_header < end:  # send the rows before it, then fail on it
                end = cols.bad_header
                if end == pos:
                    self.wait_all()  # an earlier row's failure comes first
                    raise self._bad_row(self.sent, cols, pos, cols.why)
            self._wait(WINDOW_ROWS - (end - pos))
            frames, bad, code = _protocol.encode_batch_hpub(
                cols.payloads, cols.subjects, cols.msg_ids, cols.headers, start=pos, end=end,
                default_subject=self._default_b, id_prefix=self._id_prefix,
                first_index=self.sent, reply_prefix=self._reply,
                first_token=self._base + self.sent, max_payload=self._client.max_payload,
                line_room=self._client.control_line_room,
            )  # fmt: skip
            if code:  # frames holds the rows before the bad one: they go, then it fails
                if bad > pos:
                    self._send(frames, pos, bad - pos, cols)
                self.wait_all()
                raise self._bad_row(self.sent, cols, bad, _protocol.BATCH_ERRORS[code])
            self._send(frames, pos, end - pos, cols)
            pos = end
            self._take_ready()

    def _send(self, frames: bytes, pos: int, count: int, cols: RowColumns) -> None:
        """Queue the ``count`` encoded rows from batch row ``pos`` in one write."""
        self._chunks.append(_Chunk(self.sent, count, pos, cols))
        self._acked += bytes(count)
        try:
            self._client.publish_frames(frames, count, timeout=self._ack_wait)
        except NatsError as exc:  # no room in time, reconnect buffer full, closed
            raise self._row_error(self.sent, exc) from exc
        self.sent += count
        self.waiting += count

    def _bad_row(self, index: int, cols: RowColumns, row: int, why: str) -> RowPublishError:
        """The error for row ``index``, not sent (row ``row`` of its batch)."""
        subject = cols.subject(row)
        return RowPublishError(
            f"row {index}{self._where} (subject {subject!r}) was not sent: {why}",
            row=index,
            subject=subject,
        )

    def wait_all(self) -> None:
        """Block until every row sent so far is acknowledged.

        Raises:
            RowPublishError: a row was rejected, its ack did not come in time,
                or the connection was lost while rows waited.
        """
        self._wait(0)

    def publish_all(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Publish every batch, wait until every row is acknowledged, then :meth:`close`.

        Raises:
            RowPublishError: as :meth:`publish` and :meth:`wait_all` (closed all the same).
        """
        try:
            for batch in batches:
                self.publish(batch)
            self.wait_all()
        finally:
            self.close()

    def close(self) -> None:
        """Release the publisher's tokens: acks that come later are dropped."""
        self._route.release(self._base)

    # -- acks --------------------------------------------------------------------

    def deliver(self, replies: list[Reply]) -> None:
        """The reading thread: this publisher's acks of one received buffer."""
        self._acks.put(replies)

    def deliver_group(self, group: _AckGroup) -> None:
        """The reading thread: this publisher's acks of a buffer of nothing but acks."""
        self._acks.put(group)

    def fail(self, error: NatsError, below: int | None = None) -> None:
        """The connection dropped, the client closed or the server refused the acks' inbox
        (at its subscription limit or by permission: the reading thread): the acks still
        due will not come."""
        self._acks.put(error)

    def lost(self, token: int, error: NatsError) -> None:
        """The reading thread: the row of ``token`` was dropped unsent (too big for the
        server reconnected to); its ack will not come."""
        self._acks.put((token, error))

    def _take_ready(self) -> None:
        """Settle the acks that already arrived, without waiting."""
        acks = self._acks
        while not acks.empty():
            self._settle(acks.get_nowait())

    def _wait(self, most: int) -> None:
        """Settle acks until at most ``most`` rows wait (``most`` may be below 0: then 0)."""
        acks = self._acks
        most = max(most, 0)
        due = time.monotonic() + self._ack_wait
        while self.waiting > most:
            try:
                item = acks.get(timeout=max(due - time.monotonic(), 0.0))
            except queue.Empty:
                index = self._acked.find(0)
                waited = TimeoutError(f"no PubAck within {self._ack_wait:g} s")
                raise self._row_error(index, waited) from None
            if self._settle(item):
                due = time.monotonic() + self._ack_wait

    def _settle(self, item: list[Reply] | _AckGroup | NatsError | tuple[int, NatsError]) -> bool:
        """Count the acks of one received buffer; True when one was for a waiting row."""
        if isinstance(item, tuple):  # a row dropped unsent: see lost()
            token, error = item
            raise self._row_error(token - self._base, error)
        if isinstance(item, NatsError):  # lost connection, closed client, or refused inbox
            if self.waiting:
                if isinstance(item, (MaxSubscriptionsExceededError, PermissionViolationError)):
                    what = str(item)
                elif isinstance(item, ConnectionLostError):
                    what = "connection lost"
                else:
                    what = "client closed"
                error = type(item)(f"{what} while {self.waiting} rows waited for their PubAck")
                raise self._row_error(self._acked.find(0), error)
            return False
        if isinstance(item, _AckGroup):
            settled = self._settle_plain(item.tokens, item.stream) if item.tokens else 0
            settled += self._settle_replies(item.others) if item.others else 0
        else:
            settled = self._settle_replies(item)
        if settled:
            self.waiting -= settled
            acked, chunks = self._acked, self._chunks
            while chunks and acked.find(0, chunks[0].first, chunks[0].first + chunks[0].count) < 0:
                chunks.popleft()
        return settled > 0

    def _settle_plain(self, tokens: list[int], stream: str | None) -> int:
        """Mark the rows of plain success acks stored; how many were waiting."""
        if self.stream is None:
            self.stream = stream
        acked = self._acked
        base, sent = self._base, self.sent
        first, count = tokens[0] - base, len(tokens)
        if (
            tokens[-1] - tokens[0] == count - 1  # in order, one each: the common case
            and 0 <= first
            and first + count <= sent
            and acked.count(0, first, first + count) == count
        ):
            acked[first : first + count] = b"\x01" * count
            return count
        settled = 0
        for token in tokens:
            index = token - base
            if 0 <= index < sent and not acked[index]:  # else an earlier publisher's
                acked[index] = 1
                settled += 1
        return settled

    def _settle_replies(self, replies: list[Reply]) -> int:
        """Settle acks that came as reply tuples; how many were for waiting rows."""
        acked = self._acked
        base, sent = self._base, self.sent
        unknown = self.stream is None
        settled = 0
        for token, data, headers in replies:
            index = int(token) - base
            if index < 0 or index >= sent or acked[index]:
                continue  # an earlier publisher's, or not ours
            if unknown or headers is not None or b'"error"' in data or b'"duplicate"' in data:
                self._full_ack(index, token, data, headers)  # else a plain success: no JSON
                unknown = False
            acked[index] = 1
            settled += 1
        return settled

    def _full_ack(self, index: int, token: str, data: bytes, headers: bytes | None) -> None:
        """Parse an ack that is not a plain success: count a duplicate, raise an error."""
        try:
            ack = parse_pub_ack(Msg(f"{self._route.prefix}{token}", "", data, headers))
        except Exception as exc:
            raise self._row_error(index, exc) from exc
        self.duplicates += ack.duplicate
        self.stream = ack.stream

    def _row_error(self, index: int, exc: BaseException) -> RowPublishError:
        """The error for row ``index``, sent and not stored, with its subject."""
        subject = self._default
        for chunk in self._chunks:
            if chunk.first <= index < chunk.first + chunk.count:
                subject = chunk.columns.subject(chunk.batch_row + index - chunk.first)
        return RowPublishError(
            f"row {index}{self._where} (subject {subject!r}) was not stored: "
            f"{type(exc).__name__}: {exc}",
            row=index,
            subject=subject,
        )


# -- publish_arrow --------------------------------------------------------------------


def publish_arrow(
    ctx: JetStreamContext,
    table: pa.Table | pa.RecordBatch,
    subject: str | None,
    msg_id_prefix: str | None,
    timeout: float,
    *,
    dedupe: bool = True,
) -> ArrowPubAck:
    """Publish every row of ``table``: :meth:`JetStreamContext.publish_arrow`."""
    batches = record_batches(table, subject, msg_id_prefix, "publish_arrow")
    prefix: str | None = msg_id_prefix
    if not dedupe:
        prefix = None
    elif msg_id_prefix is None:
        prefix = f"{NUID.next()}:"
    publisher = ArrowPublisher(
        ctx.client, prefix, subject, ack_wait=timeout, added_headers=ADDED_HEADERS.get()
    )
    publisher.publish_all(batches)
    return ArrowPubAck(
        stream=publisher.stream, rows=publisher.sent, duplicates=publisher.duplicates
    )
