"""A stream's messages as Arrow record batches: the columnar read behind :meth:`Stream.read_arrow`.

Two ways to read a sequence range, picked by :func:`read_arrow` from the
stream's info:

- batched direct gets (server 2.11+, stream ``allow_direct``) through the
  client's one :class:`~._direct_batch.DirectBatchRoute`, some 8,192
  replies decoded at a time by :func:`._arrow_decode.decode_replies`. One
  request is always in flight while the previous one is decoded.
- otherwise (the streams ``create_stream``, nats.go and nats.py make by
  default) an ephemeral ``AckNone`` consumer starting at the range, deleted
  at the end. ``IN_FLIGHT`` no-wait pull requests are kept outstanding on
  one inbox, each for what the range can still hold (the last message's
  pending count says how much that is), and the delivered messages are
  decoded a record batch at a time by :func:`._arrow_decode.decode_msgs`.

A direct read that nobody answers (no replica subscribed to the stream's
direct gets yet: a replicated stream just made, or followers catching up
after an election) reads the rest of its range through such a consumer,
which the stream leader serves.

Every request also asks for at most about ``max_payload`` bytes: otherwise
the server answers 4,096 large messages at once, past its ``max_pending``
(64 MiB by default), and cuts the client off as a slow consumer. The server's
``max_payload`` is never above its ``max_pending``.

Nothing is acknowledged and nothing durable is left on the server. Sequences
with no message (deleted, expired) are gaps, never errors. A consumer read
that stops while messages are pending (the link or the consumer was lost)
fails with :class:`JetStreamError`; the caller reads the range again.

What another client wrote is read back (see :mod:`._arrow_decode`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .. import _protocol
from .._deadline import Deadline, check_timeout
from .._seam import ack_tokens
from .._subjects import filter_subject
from ..errors import JetStreamError, NatsError, NoRespondersError, TimeoutError
from ..msg import Msg, first_status
from . import _api
from . import _checks as ck
from ._arrow_decode import decode_msgs, decode_replies, import_pyarrow, last_seq
from ._direct_batch import PendingBatch, batch_status, direct_batch_route
from ._pull import DONE, HEARTBEAT, classify, request_body
from .enums import AckPolicy, DeliverPolicy

if TYPE_CHECKING:
    import pyarrow as pa

    from .._reply import Reply
    from .context import JetStreamContext
    from .stream import Stream

__all__ = ["READ_BATCH", "ROWS_PER_BATCH", "read_arrow"]

#: Messages asked for per batched direct get (or consumer pull) by default.
READ_BATCH = 4096
#: Rows per record batch, about: a batch ends with the request that fills it.
ROWS_PER_BATCH = 8192
#: Pull requests a consumer read keeps outstanding. What it has asked for beyond the
#: record batch it is filling stays under two requests: a task paused on a batch holds
#: little, and what a purge removes meanwhile is loss, not rows read ahead of it.
IN_FLIGHT = 2
# What a pull's max_bytes counts beyond the message (its subject and the ack reply subject),
# so that a message of max_payload bytes still fits in one request.
_PULL_OVERHEAD = 64 * 1024
# A consumer left behind by a reader that died is removed after this many seconds.
_INACTIVE_THRESHOLD = 30.0
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
    batch = READ_BATCH if batch is None else ck.sequence(batch, "batch", maximum=ck.MAX_INT64)
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
            return route.send(
                self.stream, seq, want, self.subject, Deadline(self.timeout),
                max_bytes=self.ctx.client.max_payload,
            )  # fmt: skip

        pending: PendingBatch | None = ask(start)
        asked = start  # the first sequence the pending request asked for
        messages: list[Reply] = []
        try:
            while pending is not None:
                replies = pending.replies()
                end_block = replies[-1][2]
                try:
                    status = batch_status(self.stream, end_block, pending.deadline)
                except NoRespondersError:  # nobody answered: no replies came with it
                    pending = None
                    if messages:
                        yield decode_replies(messages, self.stream.name, end)
                    yield from self.consumer(asked, end)
                    return
                pending = None
                if len(replies) > 1:
                    last = last_seq(replies[-2], self.stream.name)
                    if status == 204 and last < end and _more(end_block):
                        asked = last + 1
                        pending = ask(asked)
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
        """The range through an ephemeral consumer, about ``ROWS_PER_BATCH`` rows a record batch."""
        client = self.ctx.client
        consumer = self.stream.create_consumer(
            ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start,
            filter_subject=self.subject,
            inactive_threshold=_INACTIVE_THRESHOLD,
            mem_storage=True,
            num_replicas=1,
            timeout=self.timeout,
        )
        with consumer:
            inbox = client.new_inbox()
            # Checked: refused at the subscription limit, next_msgs raises, not times out.
            sub = client.subscribe(inbox, checked=True)
            # The server writes its max_request_batch into the new consumer's max_batch.
            batch = consumer._limits().cap_batch(self.batch)
            pulls = _Pulls(self, consumer.name, inbox, start, end, batch)
            msgs: list[Msg] = []
            try:
                while not pulls.done:
                    want = ROWS_PER_BATCH - len(msgs)
                    got = sub.next_msgs(want, deadline=Deadline(self.timeout))
                    msgs += pulls.receive(got)
                    if len(msgs) >= ROWS_PER_BATCH or (pulls.done and msgs):
                        record_batch = decode_msgs(msgs, self.stream.name, end)
                        msgs = []
                        if record_batch.num_rows:
                            yield record_batch
            except TimeoutError:
                # A message said more were pending: the link or the consumer was lost.
                raise JetStreamError(
                    f"the read of {self.stream.name!r} {start}..{end} stopped at sequence "
                    f"{pulls.last_seq} with {pulls.pending} messages pending"
                ) from None
            finally:
                try:
                    sub.unsubscribe()
                except NatsError:  # the client is closed or gone: the server forgets it anyway
                    pass


class _Pulls:
    """The no-wait pull requests of one consumer read, and how far they got.

    Each :meth:`receive` takes what arrived on the inbox and keeps
    ``IN_FLIGHT`` requests of at most ``batch`` messages outstanding for what
    the range can still hold;
    :attr:`done` says the range is read to its end.
    """

    def __init__(
        self, read: _Read, consumer: str, inbox: str, start: int, end: int, batch: int
    ) -> None:
        self._read = read
        self._batch = batch
        self._subject = read.stream._api.subject(
            _api.CONSUMER_NEXT, stream=read.stream.name, consumer=consumer
        )
        self._inbox = inbox
        self._end = end
        self._asked: deque[list[int]] = deque()  # [asked, still owed] per request in flight
        self._room = end - start + 1  # what the range can hold beyond what is asked
        self.last_seq = start - 1  # of the last message read
        self.pending: int | None = None  # after the last message read (None: none read yet)
        self.delivered = 0  # the consumer's delivery sequence of the last message read
        self._start = start
        self.done = False
        self._ask()

    def _ask(self) -> None:
        read = self._read
        max_bytes = read.ctx.client.max_payload + _PULL_OVERHEAD
        while len(self._asked) < IN_FLIGHT and self._room > 0:
            want = min(self._batch, self._room)
            read.ctx.client.publish(
                self._subject, request_body(want, None, max_bytes, no_wait=True),
                reply=self._inbox, timeout=read.timeout,
            )  # fmt: skip
            self._asked.append([want, want])
            self._room -= want

    def _count(self, delivered: int) -> None:
        """Count delivered messages against the requests in order."""
        asked = self._asked
        while delivered and asked:
            take = min(delivered, asked[0][1])
            asked[0][1] -= take
            delivered -= take
            if not asked[0][1]:
                asked.popleft()

    def receive(self, got: list[Msg]) -> list[Msg]:
        """Take what arrived, ask for more; return the messages (statuses left out).

        Raises:
            JetStreamError: a request ended empty while messages were pending.
            NatsError: a status the read cannot go on after (the consumer was deleted...).
        """
        users: list[Msg] = []
        i, n = 0, len(got)
        while i < n:
            j = first_status(got, i)
            if j > i:
                part = got[i:j] if i or j < n else got
                self._count(len(part))
                users += part
            if j == n:
                break
            i = j + 1
            kind, error = classify(got[j])
            if kind == HEARTBEAT or not self._asked:
                continue
            if kind != DONE:
                raise error  # type: ignore[misc]
            if _completed(got[j]):
                continue  # its last message already closed the request in the count
            asked, owed = self._asked.popleft()
            if asked == owed and not users:  # it ended with nothing
                if self.pending is None:
                    self.done = True  # the range holds nothing
                    return users
                if self.pending:
                    raise JetStreamError(
                        f"the read of {self._read.stream.name!r} stopped at sequence "
                        f"{self.last_seq} with {self.pending} messages pending"
                    )
        if users:
            self._check_delivered(users)
            tokens = ack_tokens(users[-1].reply)
            self.last_seq, self.pending = int(tokens[5]), int(tokens[8])
        if self.last_seq >= self._end or self.pending == 0:
            self.done = True
            return users
        if self.pending is not None:
            owed = sum(request[1] for request in self._asked)
            self._room = min(self.pending, self._end - self.last_seq) - owed
        self._ask()
        if not self._asked:  # every request ended short and the range holds no more
            self.done = True
        return users

    def _check_delivered(self, users: list[Msg]) -> None:
        """Check that ``users`` follow the last message read with no delivery missing.

        The consumer numbers what it delivers 1, 2, 3... (no redelivery: it acks
        nothing), so a hole is a message lost on the way: dropped by the server
        past the connection's max_pending, or by the client past its pending limits.

        Raises:
            JetStreamError: a delivery is missing.
        """
        first = int(ack_tokens(users[0].reply)[6])
        last = int(ack_tokens(users[-1].reply)[6])
        if first == self.delivered + 1 and last - first + 1 == len(users):
            self.delivered = last
            return
        missing = self.delivered + 1
        for msg in users:
            if int(ack_tokens(msg.reply)[6]) != missing:
                break
            missing += 1
        raise JetStreamError(
            f"the read of {self._read.stream.name!r} {self._start}..{self._end} "
            f"lost a message on the way: consumer delivery {missing} never arrived (dropped "
            "as a slow consumer's, by the server or the client); read the range again"
        )


def _completed(status: Msg) -> bool:
    """Whether a status says a request got all the messages it asked for.

    A pull with ``max_bytes`` gets one after its last message.
    """
    return status.status == 409 and "batch completed" in status.description.lower()


def _more(status_block: bytes | None) -> bool:
    """Whether the stream holds more matching messages after a batch (its 204 says how many)."""
    for key, value in _protocol.parse_headers(status_block or b"")[2]:
        if key == "Nats-Num-Pending":
            return value != "0"
    return True  # no count: ask again (a 404 ends the read)
