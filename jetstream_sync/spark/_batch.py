"""Publishing a write task's rows a record batch at a time, every row acknowledged.

Per chunk of rows (up to :data:`CHUNK_ROWS` of an Arrow record batch) the
protocol core encodes every HPUB frame in one call
(``_protocol.encode_batch_hpub``: subject checks, the ``Nats-Msg-Id``
derived in C, a reply subject per row on one inbox) and the client queues
the whole blob in one write (:meth:`Client.publish_frames`). The PubAcks come
back on a reply route of the client (:meth:`Client.add_reply_route`) as
``(token, payload, headers)`` tuples, a list per buffer the reader parsed,
straight into the task's queue: no future and no JSON per row. The token of
row ``i`` of the task is ``base + i``; a row counts as stored once its
success ack arrived. At most :data:`WINDOW_ROWS` rows wait for their ack.

Routes are made once per client and reused by the tasks that run one after
the other in a Python worker (:class:`AckRoutes`): a route's tokens keep
growing, so a late ack of an earlier task is recognised and ignored.

Every row is either acknowledged or the task fails with
:class:`RowPublishError` naming it: a rejected row (its error ack), a row
whose ack did not come within :data:`ACK_WAIT` seconds, or rows still waiting
when the connection was lost (their acks went to the old connection; a
retried task publishes them again under the same message ids, which the
stream deduplicates).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .. import _protocol
from ..errors import ConnectionLostError, NatsError, RowPublishError, TimeoutError
from ..jetstream.publish import parse_pub_ack
from ..msg import Msg

if TYPE_CHECKING:
    from ..client import Client

CHUNK_ROWS = 4096  # rows encoded and written in one piece
WINDOW_ROWS = 16384  # rows at most waiting for their ack
ACK_WAIT = 60.0  # seconds without any ack before the oldest waiting row fails the task
WRITE_TIMEOUT = 60.0  # seconds to wait for room in the client's write buffer
_RESOURCE_KEY = "jetstream_sync.spark.ack_routes"
_LOST = "connection lost"  # what the status listener puts in every route's queue


class _Route:
    """One reply inbox of the client and the queue its acks arrive in."""

    def __init__(self, prefix: str, acks: queue.SimpleQueue[Any]) -> None:
        self.prefix = prefix
        self.acks = acks
        self.next_token = 1  # tokens below this belong to earlier tasks


class AckRoutes:
    """The client's reply routes for batch acks: one per task writing at once, reused.

    Made by :meth:`Client.shared_resource`; it starts no thread. When the
    connection drops, every route's queue gets a marker, so a task waiting for
    acks learns at once that they will not come.

    Args:
        client: the connection.
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._free: list[_Route] = []
        self._all: list[_Route] = []
        client.add_status_listener(self._on_status)

    def take(self) -> _Route:
        """A route no other task uses, its queue emptied of what earlier tasks left."""
        with self._lock:
            route = self._free.pop() if self._free else None
        if route is None:
            acks: queue.SimpleQueue[Any] = queue.SimpleQueue()
            route = _Route(self._client.add_reply_route(acks.put), acks)
            with self._lock:
                self._all.append(route)
        while not route.acks.empty():
            route.acks.get_nowait()
        return route

    def give_back(self, route: _Route) -> None:
        """Let the next task use ``route``."""
        with self._lock:
            self._free.append(route)

    def _on_status(self, status: str) -> None:
        if status == "disconnected":
            with self._lock:
                routes = list(self._all)
            for route in routes:
                route.acks.put(_LOST)

    def close(self) -> None:
        """Stop listening to the client (called by :meth:`Client.close`)."""
        self._client.remove_status_listener(self._on_status)


def _column(array: pa.Array) -> _protocol.BatchColumn:
    """A binary or string Arrow array as the protocol core's column (64-bit offsets)."""
    if array.type != pa.large_binary():
        array = array.cast(pa.large_binary())
    valid, offsets, data = array.buffers()
    return _protocol.BatchColumn(data, offsets, valid if array.null_count else None, array.offset)


def _header_column(
    array: pa.Array, added: Mapping[str, str]
) -> tuple[_protocol.BatchColumn, int, str]:
    """The ``headers`` map column as ``key NUL value NUL ...`` rows, or a bad row and why.

    Args:
        array: the column.
        added: headers every row gets too, unless the row has one of the same name.

    Returns:
        ``(column, -1, "")``, or ``(column, row, reason)`` for the first row
        whose headers cannot be sent (a null value, a NUL byte).
    """
    rows: list[bytes | None] = []
    for index, pairs in enumerate(array.to_pylist()):
        if pairs is None and not added:
            rows.append(None)
            continue
        pairs = list(pairs or ())
        named = {key for key, _ in pairs}
        pairs += [(key, value) for key, value in added.items() if key not in named]
        flat: list[str] = []
        for key, value in pairs:
            values = [value] if isinstance(value, str) else value
            if values is None or any(v is None for v in values):
                return _column(pa.array(rows, pa.large_binary())), index, f"header {key!r} is null"
            for v in values:
                flat += (key, v)
        text = "\0".join(flat)
        if text.count("\0") != max(len(flat) - 1, 0):
            return _column(pa.array(rows, pa.large_binary())), index, "a header holds a NUL byte"
        rows.append((text + "\0").encode("utf-8", "surrogateescape") if flat else b"")
    return _column(pa.array(rows, pa.large_binary())), -1, ""


class _Chunk:
    """Rows ``first..first+count-1`` of the task: what naming one of them needs."""

    __slots__ = ("batch_row", "count", "first", "subjects")

    def __init__(self, first: int, count: int, batch_row: int, subjects: pa.Array | None) -> None:
        self.first = first
        self.count = count
        self.batch_row = batch_row  # the batch row of the task's row `first`
        self.subjects = subjects


class BatchPublisher:
    """One task's publishing: chunks out, acks in, a bounded window between.

    Args:
        client: the connection.
        partition: the task's partition (named in errors).
        id_prefix: what derived message ids start with (``<write>:<partition>:``).
        default_subject: the subject of rows without one, or None.
        max_rows: publish at most this many rows, then fail the task (tests of retries).
        added_headers: headers every message gets (the trace context of the task's
            span, when OpenTelemetry instruments the writer), unless its row has one of
            the same name.
    """

    def __init__(
        self,
        client: Client,
        partition: int,
        id_prefix: str,
        default_subject: str | None,
        max_rows: int | None = None,
        added_headers: Mapping[str, str] | None = None,
    ) -> None:
        self._client = client
        self._added_headers = dict(added_headers or {})
        self._partition = partition
        self._id_prefix = id_prefix.encode()
        self._default = default_subject
        self._default_b = (default_subject or "").encode()
        self._max_rows = max_rows
        self._routes: AckRoutes = client.shared_resource(_RESOURCE_KEY, AckRoutes)
        self._route = self._routes.take()
        self._base = self._route.next_token
        self._reply = self._route.prefix.encode()
        self._acked = bytearray()  # per task row: 1 once its success ack came
        self._chunks: deque[_Chunk] = deque()  # chunks with a row still waiting
        self.sent = 0
        self.waiting = 0
        self.duplicates = 0
        self.stream: str | None = None

    def publish(self, batch: pa.RecordBatch) -> None:
        """Send every row of ``batch`` (waiting for acks while the window is full).

        Raises:
            RowPublishError: a row cannot be sent (a bad subject, header or
                size: the rows already sent are acknowledged first; neither it
                nor any row after it is sent) or was rejected.
        """
        names = batch.schema.names
        payloads = _column(batch.column(names.index("data")))
        subjects_arr = batch.column(names.index("subject")) if "subject" in names else None
        subjects = _column(subjects_arr) if subjects_arr is not None else None
        msg_ids = _column(batch.column(names.index("msgId"))) if "msgId" in names else None
        headers = None
        bad_header, why = -1, ""
        if "headers" in names:
            column = batch.column(names.index("headers"))
            headers, bad_header, why = _header_column(column, self._added_headers)
        elif self._added_headers:
            block = "".join(f"{k}\0{v}\0" for k, v in self._added_headers.items()).encode()
            headers = _column(pa.array([block] * batch.num_rows, pa.large_binary()))
        n = batch.num_rows
        pos = 0
        while pos < n:
            if self._max_rows is not None and self.sent >= self._max_rows:
                self.wait_all()
                raise RuntimeError(f"max_rows: failing after {self.sent} stored rows")
            end = min(n, pos + CHUNK_ROWS)
            if self._max_rows is not None:
                end = min(end, pos + self._max_rows - self.sent)
            if 0 <= bad_header < end:  # send the rows before it, then fail on it
                end = bad_header
                if end == pos:
                    self.wait_all()  # an earlier row's failure comes first
                    raise RowPublishError(self._bad_row(self.sent, subjects_arr, pos, why))
            self._wait(WINDOW_ROWS - (end - pos))
            frames, bad, code = _protocol.encode_batch_hpub(
                payloads, subjects, msg_ids, headers, start=pos, end=end,
                default_subject=self._default_b, id_prefix=self._id_prefix,
                first_index=self.sent, reply_prefix=self._reply,
                first_token=self._base + self.sent, max_payload=self._client.max_payload,
            )  # fmt: skip
            if code:
                self.wait_all()
                why = _protocol.BATCH_ERRORS[code]
                raise RowPublishError(self._bad_row(self.sent + bad - pos, subjects_arr, bad, why))
            count = end - pos
            self._chunks.append(_Chunk(self.sent, count, pos, subjects_arr))
            self._acked += bytes(count)
            try:
                self._client.publish_frames(frames, count, timeout=WRITE_TIMEOUT)
            except NatsError as exc:  # no room in time, reconnect buffer full, closed
                raise RowPublishError(self._row_error(self.sent, exc)) from exc
            self.sent += count
            self.waiting += count
            pos = end
            self._take_ready()

    def _bad_row(self, index: int, subjects: pa.Array | None, row: int, why: str) -> str:
        """The error text for the task's row ``index`` (row ``row`` of its batch)."""
        subject = subjects[row].as_py() if subjects is not None else None
        return (
            f"row {index} of partition {self._partition} "
            f"(subject {(subject or self._default)!r}) was not sent: {why}"
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
        """Hand the route to the next task (its later acks are recognised as stale)."""
        self._route.next_token = self._base + self.sent
        self._routes.give_back(self._route)

    # -- acks --------------------------------------------------------------------

    def _take_ready(self) -> None:
        """Settle the acks that already arrived, without waiting."""
        acks = self._route.acks
        while not acks.empty():
            self._settle(acks.get_nowait())

    def _wait(self, most: int) -> None:
        """Settle acks until at most ``most`` rows wait (``most`` may be below 0: then 0)."""
        acks = self._route.acks
        most = max(most, 0)
        due = time.monotonic() + ACK_WAIT
        while self.waiting > most:
            try:
                item = acks.get(timeout=max(due - time.monotonic(), 0.0))
            except queue.Empty:
                index = self._acked.find(0)
                raise RowPublishError(
                    self._row_error(index, TimeoutError(f"no PubAck within {ACK_WAIT:.0f} s"))
                ) from None
            if self._settle(item):
                due = time.monotonic() + ACK_WAIT

    def _settle(self, item: list[tuple[str, bytes, bytes | None]] | str) -> bool:
        """Count the acks of one received buffer; True when one was for a waiting row."""
        if isinstance(item, str):  # _LOST
            if self.waiting:
                index = self._acked.find(0)
                raise RowPublishError(
                    self._row_error(
                        index,
                        ConnectionLostError(
                            f"connection lost while {self.waiting} rows waited for their PubAck"
                        ),
                    )
                )
            return False
        acked = self._acked
        base, sent = self._base, self.sent
        unknown = self.stream is None
        settled = 0
        for token, data, headers in item:
            index = int(token) - base
            if index < 0 or index >= sent or acked[index]:
                continue  # an earlier task's, or not ours
            if unknown or headers is not None or b'"error"' in data or b'"duplicate"' in data:
                self._full_ack(index, token, data, headers)  # else a plain success: no JSON
                unknown = False
            acked[index] = 1
            settled += 1
        if settled:
            self.waiting -= settled
            chunks = self._chunks
            while chunks and acked.find(0, chunks[0].first, chunks[0].first + chunks[0].count) < 0:
                chunks.popleft()
        return settled > 0

    def _full_ack(self, index: int, token: str, data: bytes, headers: bytes | None) -> None:
        """Parse an ack that is not a plain success: count a duplicate, raise an error."""
        try:
            ack = parse_pub_ack(Msg(self._route.prefix + token, "", data, headers))
        except Exception as exc:
            raise RowPublishError(self._row_error(index, exc)) from exc
        self.duplicates += ack.duplicate
        self.stream = ack.stream

    def _row_error(self, index: int, exc: BaseException) -> str:
        """The error text for the task's row ``index``, with its subject."""
        subject = self._default
        for chunk in self._chunks:
            if chunk.first <= index < chunk.first + chunk.count and chunk.subjects is not None:
                subject = chunk.subjects[chunk.batch_row + index - chunk.first].as_py() or subject
        return (
            f"row {index} of partition {self._partition} (subject {subject!r}) was not stored: "
            f"{type(exc).__name__}: {exc}"
        )
