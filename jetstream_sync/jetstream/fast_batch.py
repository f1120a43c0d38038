"""Fast-ingest batches (ADR-50): publish without waiting per message, paced by the stream.

The batch state travels in each message's reply subject,
``<inbox>.<flow>.<ok|fail>.<batch seq>.<op>.$FI`` (op 0 start, 1 append,
3 commit without a message, 4 ping). The stream answers on that subject
with ``{"type":"ack","seq":n,"msgs":m}`` (stored up to ``n``; ack again
every ``m`` messages), ``{"type":"gap",...}``, ``{"type":"err",...}`` and,
at the end, a PubAck carrying the batch id and count.

The hot path of :meth:`FastBatch.add` formats one PUB frame from the batch's
reply prefix and the message's sequence and appends it to the client's write
buffer; the stream's answers wait in a plain subscription until the batch runs
out of window (every ``msgs`` messages or so), and the publishing thread reads
them then: no lock, no thread hop, no reply parsing per message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .._deadline import Deadline
from .._dispatch import refuse_in_inline_callback
from .._subjects import ApiSubject, publish_subject
from ..errors import (
    APIError,
    FastBatchClosedError,
    FastBatchError,
    FastBatchGapError,
    FastBatchMessageError,
    FastBatchUnsupportedError,
    MaxPayloadError,
    MaxSubscriptionsExceededError,
    NatsError,
    NoRespondersError,
    TimeoutError,
    api_error,
)
from .publish import parse_pub_ack

if TYPE_CHECKING:
    import pyarrow as pa

    from ..client import Client
    from ..msg import Msg
    from ..subscription import Subscription
    from .context import HeadersIn
    from .info import PubAck

DEFAULT_FLOW = 500
MAX_FLOW = 65535
MIN_SERVER = (2, 14)
OUTSTANDING_ACKS = 2  # ADR-50: send the next stretch while the server stores the last
PING_AFTER = 1.0  # seconds without an answer before asking the server to repeat its ack
REPLIES_AT_ONCE = 1024  # answers taken from the subscription in one go
# Every this many messages add() writes what is buffered itself (when the socket is
# idle): the flusher thread waits for the GIL while add() runs in a tight loop.
SEND_EVERY = 100
ARROW_CHUNK_ROWS = 4096  # add_arrow(): the most rows encoded and written in one piece
SUBJECTS_KEPT = 1024  # checked subjects a batch remembers (a batch may fan out widely)

_OP_START, _OP_APPEND, _OP_EOB, _OP_PING = 0, 1, 3, 4
_START_TAIL, _APPEND_TAIL = b".%d.$FI" % _OP_START, b".%d.$FI" % _OP_APPEND
_GAP_WORDS = {"fail": "fail", "continue": "ok"}
_UNKNOWN_BATCH = 10208  # the stream does not know the batch id
_LONGEST_TAIL = f"{2**64 - 1}.{_OP_PING}.$FI"  # the longest "<seq>.<op>.$FI" a reply can end with


def _server_version(info: dict[str, Any]) -> tuple[int, int]:
    parts = str(info.get("version", "0.0")).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0


class FastBatch:
    """A fast-ingest batch into one stream, made by :meth:`JetStreamContext.fast_batch`.

    Use it as a context manager from one thread: :meth:`add` messages, then
    :meth:`commit`. Leaving the ``with`` block without a commit abandons the
    batch: nothing more is sent and the server forgets it after its inactivity
    timeout. A fast batch is not atomic: the stream stores each message as it
    arrives, so an abandoned (or failed) batch keeps what was stored before.

    Attributes:
        batch_id: the batch id the server reports in the PubAck.
        on_gap: ``"fail"`` (the first lost or refused message ends the batch
            with a :class:`FastBatchError`) or ``"continue"``.
        gaps: with ``on_gap="continue"``, each gap the server reported as
            ``(first_lost, next_received)`` batch sequences: messages
            ``first_lost`` to ``next_received - 1`` were not stored.
        errors: with ``on_gap="continue"``, ``(sequence, APIError)`` for each
            message the stream refused.
    """

    def __init__(self, client: Client, flow: int | None, on_gap: str, timeout: float) -> None:
        if flow is None:
            flow = DEFAULT_FLOW
        if isinstance(flow, bool) or not isinstance(flow, int) or not 1 <= flow <= MAX_FLOW:
            raise ValueError(f"flow must be an int from 1 to {MAX_FLOW}, got {flow!r}")
        if on_gap not in _GAP_WORDS:
            raise ValueError(f'on_gap must be "fail" or "continue", got {on_gap!r}')
        self._client = client
        self._timeout = timeout
        self.on_gap = on_gap
        inbox = client.new_inbox()
        self.batch_id = inbox.rsplit(".", 1)[1]
        self._inbox = inbox
        # Replies are this prefix (an inbox the client made, two literals) plus two
        # ints and "$FI": built from checked parts, only the first one is checked.
        self._prefix = f"{inbox}.{flow}.{_GAP_WORDS[on_gap]}."
        self._prefix_b = self._prefix.encode()
        self._subjects: dict[str, bytes] = {}  # subject -> bytes, checked with the longest reply
        self.gaps: list[tuple[int, int]] = []
        self.errors: list[tuple[int, APIError]] = []
        self._sent = 0  # highest batch sequence sent
        self._acked = 0  # highest batch sequence the server says it stored
        self._window = 0  # messages we may run ahead of the ack; 0 until the server's first ack
        # add() sends up to this sequence without reading the stream's answers;
        # 0 (start, commit, closed) sends every add() down the slow path.
        self._free = 0
        self._failure: BaseException | None = None
        self._pub_ack: PubAck | None = None
        self._closed = False
        self._committing = False
        self._subject = ""  # the first message's: the end marker and pings go where it went
        self._sub: Subscription | None = None
        self._reconnects = 0  # the client's reconnects when the first message went out

    def __enter__(self) -> FastBatch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.abandon()

    # ------------------------------------------------------------------ public

    def add(self, subject: str, data: bytes | str = b"", headers: HeadersIn | None = None) -> None:
        """Send one message of the batch; block only while the stream asks us to wait.

        The first message waits for the stream's answer (is fast ingest
        allowed, at what pace); later ones wait only when more than two acks'
        worth of messages are unconfirmed. Bad input is refused before
        anything is sent. The message is in the client's write buffer when
        this returns (sent in the background, as :meth:`Client.publish`).

        Args:
            subject: a subject the stream captures; no wildcards.
            data: the payload (``str`` is UTF-8 encoded).
            headers: extra headers (``Nats-Msg-Id``, ``Nats-Expected-*``...).

        Raises:
            BadSubjectError, BadHeaderError, MaxPayloadError: bad input; nothing sent.
            BatchPublishDisabledError: the stream has no ``allow_batched``
                (first message; nothing is stored).
            FastBatchUnsupportedError: the server is older than 2.14.
            FastBatchGapError, FastBatchMessageError: with ``on_gap="fail"``,
                the batch stopped at the error's ``sequence``.
            FastBatchClosedError: the batch was committed, is committing (a
                commit timed out) or was abandoned.
            NoRespondersError: no stream captures ``subject`` (first message).
            TimeoutError: the stream did not confirm in time; this message was
                not sent and the batch stays open.
            MaxSubscriptionsExceededError: the server refused the batch's inbox
                at the connection's subscription limit (first message, raised as
                soon as that is known); the batch is closed.
        """
        seq = self._sent + 1
        timeout = self._timeout
        if seq > self._free:
            deadline = Deadline(timeout)
            self._check_open()
            if self._committing:
                raise FastBatchClosedError(f"fast batch {self.batch_id} is committing", self._sent)
            if seq == 1:
                self._start(subject, data, headers, deadline)
                return
            self._make_room(seq, deadline)
            timeout = max(deadline.remaining(), 0.001)
        if headers:
            reply = ApiSubject(f"{self._prefix}{seq}.{_OP_APPEND}.$FI")
            self._client.publish(subject, data, reply, headers, timeout=timeout)
        else:
            raw = self._subjects.get(subject) or self._check_subject(subject)
            if type(data) is not bytes:
                data = data.encode() if isinstance(data, str) else bytes(memoryview(data))
            size = len(data)
            if size > self._client.max_payload:
                raise MaxPayloadError(
                    f"payload is {size} bytes; the server accepts {self._client.max_payload}"
                )
            frame = b"PUB %s %s%d.1.$FI %d\r\n%s\r\n" % (raw, self._prefix_b, seq, size, data)
            self._client.publish_frames(frame, 1, timeout=timeout, send_now=not seq % SEND_EVERY)
        self._sent = seq

    @property
    def added(self) -> int:
        """How many messages the batch has sent so far: the batch sequence of the last one."""
        return self._sent

    def add_arrow(
        self,
        table: pa.Table | pa.RecordBatch,
        subject: str | None = None,
        *,
        msg_id_prefix: str | None = None,
        first_index: int = 0,
        dedupe: bool = True,
    ) -> None:
        """Send every row of a pyarrow Table or RecordBatch as messages of the batch (pyarrow).

        The columnar :meth:`add`, with the columns of
        :meth:`JetStreamContext.publish_arrow`: ``data`` (binary or string,
        required), ``subject`` (string; a null or empty one takes
        ``subject=``), ``headers`` (a map of string to string or to a list of
        strings) and ``msgId`` (string). The protocol core encodes as many rows
        as the stream lets the batch run ahead in one call, and they are
        written in one piece; like :meth:`add`, this blocks only while the
        stream asks the batch to wait. The rows are the batch's next messages:
        table row ``r`` is batch sequence ``added + r + 1``, counting
        :attr:`added` as it was before the call.

        Each message carries a ``Nats-Msg-Id``: its ``msgId``, or
        ``<msg_id_prefix><first_index + r>:`` and 12 hex digits of the
        BLAKE2b hash of its data keyed by its subject, the id
        :meth:`JetStreamContext.publish_arrow` derives. The stream drops a
        message whose id it stored within its duplicate window (it does not
        end the batch), so sending the same rows again under the same prefix
        and indexes stores them once. Without ``msg_id_prefix`` the prefix is
        ``<batch_id>:``. With ``dedupe=False`` a row without a ``msgId`` gets
        no id (the server does less per row; sending the rows again stores
        them again).

        Args:
            table: the rows.
            subject: the subject of rows without one (required without a
                ``subject`` column).
            msg_id_prefix: what derived message ids start with.
            first_index: the index in derived ids of the table's first row
                (for a table that continues rows sent earlier under the same
                prefix).
            dedupe: derive an id for every row without a ``msgId`` (the default).

        Raises:
            ImportError: pyarrow is not installed.
            TypeError, ValueError, BadSubjectError: not a Table or RecordBatch,
                an unknown or missing column, a column of another type, a bad
                ``subject=`` or ``first_index``; nothing was sent.
            RowPublishError: a row cannot be sent (null data, a bad subject or
                header, too large, a subject too long for the server's
                ``max_control_line``); ``row`` is its row in ``table``. The rows
                before it were added to the batch, it and the rows after it
                were not, and the batch stays open.
            BatchPublishDisabledError, FastBatchUnsupportedError,
            FastBatchGapError, FastBatchMessageError, FastBatchClosedError,
            NoRespondersError, TimeoutError: as for :meth:`add`; the rows up to
                :attr:`added` were sent.
        """
        from .. import _protocol
        from ..errors import RowPublishError
        from ._arrow_columns import ADDED_HEADERS, RowColumns, record_batches

        batches = record_batches(table, subject, msg_id_prefix, "FastBatch.add_arrow")
        if isinstance(first_index, bool) or not isinstance(first_index, int) or first_index < 0:
            raise ValueError(f"first_index must be an int >= 0, got {first_index!r}")
        prefix = (f"{self.batch_id}:" if msg_id_prefix is None else msg_id_prefix).encode()
        id_prefix = prefix if dedupe else None
        default = (subject or "").encode()
        added = ADDED_HEADERS.get()
        done = 0  # rows of the table sent
        for batch in batches:
            cols = RowColumns(batch, subject, added, derives_ids=dedupe)
            pos = 0
            while pos < cols.rows:
                deadline = Deadline(self._timeout)
                end = min(cols.rows, pos + self._room(deadline), pos + ARROW_CHUNK_ROWS)
                why = ""
                if 0 <= cols.bad_header < end:  # send the rows before it, then fail on it
                    end, why = cols.bad_header, cols.why
                seq = self._sent + 1
                frames, bad, code = _protocol.encode_batch_hpub(
                    cols.payloads, cols.subjects, cols.msg_ids, cols.headers, start=pos, end=end,
                    default_subject=default, id_prefix=id_prefix, first_index=first_index + done,
                    reply_prefix=self._prefix_b, first_token=seq,
                    reply_suffix=_START_TAIL if seq == 1 else _APPEND_TAIL,
                    max_payload=self._client.max_payload,
                    line_room=self._client.control_line_room,
                )  # fmt: skip
                if code:
                    end, why = bad, _protocol.BATCH_ERRORS[code]
                if end > pos:
                    self._send_encoded(frames, end - pos, cols.subject(pos) or "", deadline)
                    done += end - pos
                    pos = end
                if why:
                    bad_subject = cols.subject(pos)
                    raise RowPublishError(
                        f"fast batch {self.batch_id}: row {done} (subject {bad_subject!r}) "
                        f"was not sent: {why}",
                        row=done,
                        subject=bad_subject,
                    )

    def commit(self) -> PubAck:
        """End the batch and block until the stream confirms it.

        Returns:
            The PubAck: ``seq`` is the stream sequence of the last stored
            message, ``batch_id`` this batch, ``batch_size`` how many batch
            messages the stream received (gaps included with ``"continue"``).

        Raises:
            ValueError: no message was added.
            FastBatchGapError, FastBatchMessageError: with ``on_gap="fail"``,
                the batch stopped at the error's ``sequence``.
            FastBatchClosedError: the batch was already committed or abandoned.
            TimeoutError: no PubAck in time; the end of the batch was sent:
                call ``commit()`` again to keep waiting for the PubAck, or
                abandon the batch (``add()`` now raises FastBatchClosedError).
        """
        deadline = Deadline(self._timeout)
        self._check_open()
        if self._sent == 0:
            raise ValueError("a fast batch needs at least one message before commit")
        if not self._committing:  # a commit that timed out has sent its end marker already
            eob = ApiSubject(f"{self._prefix}{self._sent + 1}.{_OP_EOB}.$FI")
            self._client.publish(self._subject, b"", eob, timeout=max(deadline.remaining(), 0.001))
            self._committing = True
            self._free = 0
        self._await(lambda: self._pub_ack is not None, deadline, self._sent + 1)
        pub_ack = self._pub_ack
        assert pub_ack is not None
        self._finish()
        return pub_ack

    def abandon(self) -> None:
        """Stop the batch without a commit (what leaving the ``with`` block does).

        Sends nothing; what the stream already stored stays stored. Safe to
        call more than once.
        """
        self._finish()

    # ---------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._closed:
            raise FastBatchClosedError(f"fast batch {self.batch_id} is closed", self._sent)

    def _check_subject(self, subject: str) -> bytes:
        """Check a subject new to this batch with the longest reply a message can carry."""
        self._client.validate_publish(subject, b"", ApiSubject(self._prefix + _LONGEST_TAIL))
        raw = publish_subject(subject)
        if len(self._subjects) >= SUBJECTS_KEPT:
            self._subjects.clear()
        self._subjects[subject] = raw
        return raw

    def _start(
        self, subject: str, data: bytes | str, headers: HeadersIn | None, deadline: Deadline
    ) -> None:
        self._check_can_start()
        reply = f"{self._prefix}1.{_OP_START}.$FI"
        self._client.validate_publish(subject, data, reply, headers)
        self._open(subject)
        self._client.publish(
            subject, data, reply, headers, timeout=max(deadline.remaining(), 0.001)
        )
        self._started(deadline)

    def _room(self, deadline: Deadline) -> int:
        """How many messages may go out now: 1 before the first, else what the window allows.

        Reads the stream's answers and waits for room as :meth:`add` does.
        """
        self._check_open()
        if self._committing:
            raise FastBatchClosedError(f"fast batch {self.batch_id} is committing", self._sent)
        if self._sent == 0:
            self._check_can_start()
            return 1
        self._make_room(self._sent + 1, deadline)
        return self._free - self._sent

    def _send_encoded(self, frames: bytes, count: int, subject: str, deadline: Deadline) -> None:
        """Write ``count`` messages the protocol core encoded (the first alone, then waits)."""
        timeout = max(deadline.remaining(), 0.001)
        if self._sent == 0:
            self._open(subject)
            self._client.publish_frames(frames, 1, timeout=timeout)
            self._started(deadline)
            return
        self._client.publish_frames(frames, count, timeout=timeout, send_now=True)
        self._sent += count

    def _check_can_start(self) -> None:
        """Before the first message: refuse a server too old, or an inline callback.

        The first message waits for the stream's answer, which an inline callback (on
        the thread reading the connection) could never read: refused before it is sent.
        """
        refuse_in_inline_callback("a fast batch's first message")
        version = _server_version(self._client.server_info)
        if version < MIN_SERVER:
            raise FastBatchUnsupportedError(
                "fast-ingest batches need nats-server 2.14 or later; "
                f"the server is {version[0]}.{version[1]}"
            )

    def _open(self, subject: str) -> None:
        """Before the first message goes out: listen for the stream's answers."""
        if self._sub is None:  # else an earlier first message timed out before it was sent
            # Checked: refused at the subscription limit, the wait for the answers raises.
            self._sub = self._client.subscribe(f"{self._inbox}.>", checked=True)
        self._subject = subject
        self._reconnects = self._client.stats.reconnects

    def _started(self, deadline: Deadline) -> None:
        """The first message is out: wait for the stream to say at what pace to go on."""
        self._sent = 1
        self._await(lambda: self._window > 0, deadline, 1)

    def _make_room(self, seq: int, deadline: Deadline) -> None:
        """Read the answers that came meanwhile; wait while ``seq`` is past the window."""
        sub = self._sub
        assert sub is not None
        if sub.pending_msgs:
            self._take(sub.next_msgs(REPLIES_AT_ONCE, deadline=deadline))
        if seq > self._free:
            self._await(lambda: seq <= self._free, deadline, seq)

    def _await(self, ready: Callable[[], bool], deadline: Deadline, seq: int) -> None:
        """Read the stream's answers until ``ready()``; ping when they stop coming.

        Raises:
            TimeoutError: not ready by ``deadline``.
            FastBatchError, APIError...: what the stream answered ends the batch.
            MaxSubscriptionsExceededError: the server refused the batch's inbox at
                the connection's subscription limit; the batch is closed.
        """
        sub = self._sub
        assert sub is not None
        quiet = Deadline(PING_AFTER)  # when to ask the server to repeat its last ack
        while not ready():
            left = deadline.remaining()
            if left <= 0:
                raise TimeoutError(
                    f"fast batch {self.batch_id}: the stream did not confirm in time "
                    f"(message {seq}; stored up to {self._acked})"
                )
            try:
                replies = sub.next_msgs(
                    REPLIES_AT_ONCE, deadline=Deadline(min(left, quiet.remaining() or left))
                )
            except TimeoutError:
                if quiet.expired() and self._window > 0 and not deadline.expired():
                    self._ping(deadline.remaining())
                    quiet = Deadline(PING_AFTER)
                continue
            except MaxSubscriptionsExceededError:  # the inbox was refused: no answer comes
                self._finish()
                raise
            if not replies:
                self._finish()
                raise FastBatchError(
                    f"fast batch {self.batch_id}: its reply subscription ended", self._sent
                )
            quiet = Deadline(PING_AFTER)
            self._take(replies)

    def _ping(self, left: float) -> None:
        """Ask the server to repeat its last ack (ADR-50: a lost ack must not stall us)."""
        ping = ApiSubject(f"{self._prefix}{self._sent}.{_OP_PING}.$FI")
        self._client.publish(self._subject, b"", ping, timeout=max(left, 0.001))

    def _finish(self) -> None:
        self._closed = True
        self._free = 0
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                sub.unsubscribe()
            except NatsError:
                pass  # the client is closed or lost: the server dropped the interest already

    def _take(self, replies: list[Msg]) -> None:
        """Apply the stream's answers in order; raise what ends the batch."""
        for msg in replies:
            if self._pub_ack is not None:
                break  # the batch is over: a late ping's "unknown batch" changes nothing
            try:
                update = self._read_reply(msg)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                update = FastBatchError(f"fast batch {self.batch_id}: unreadable reply ({exc})")
            if isinstance(update, BaseException):
                if self._failure is None:
                    self._failure = update
            elif update is not None:
                self._pub_ack = update
        if not self._committing:
            self._free = self._acked + self._window
        if self._failure is not None:
            self._finish()
            raise self._failure

    def _refused(self, seq: int, error: APIError) -> FastBatchError | None:
        """Message ``seq`` was refused: listed with ``"continue"``, else the batch ends."""
        if self._forgot(error):
            return self._forgotten(seq)
        if self.on_gap == "continue":
            self.errors.append((seq, error))
            return None
        return FastBatchMessageError(
            f"fast batch {self.batch_id}: message {seq} was refused: {error}", seq, error
        )

    def _forgot(self, error: APIError) -> bool:
        """Whether ``error`` says the stream no longer knows the batch since a reconnect."""
        return (
            error.err_code == _UNKNOWN_BATCH and self._client.stats.reconnects != self._reconnects
        )

    def _forgotten(self, seq: int) -> FastBatchGapError:
        """The stream no longer knows the batch after a reconnect: it ends, in any mode.

        A restarted stream forgets its batches, and what the old connection had not
        delivered is lost, so only what the stream acknowledged is known to be stored.
        """
        first = self._acked + 1
        return FastBatchGapError(
            f"fast batch {self.batch_id}: the connection was lost and the stream no longer "
            f"knows the batch (unknown batch at sequence {seq}); it confirmed messages "
            f"up to {self._acked}; messages {first} to {seq - 1} may not have been stored",
            seq, first,
        )  # fmt: skip

    def _read_reply(self, msg: Msg) -> PubAck | BaseException | None:
        if msg.status == 503:
            # The reply subject names the message: <prefix><seq>.<op>.$FI
            _, seq_text, op, _ = msg.subject.rsplit(".", 3)
            seq = int(seq_text)
            if seq == 1 or int(op) in (_OP_EOB, _OP_PING):
                return NoRespondersError(f"no stream is listening on {self._subject!r}")
            if self.on_gap == "continue":
                return None  # no stream took it: the stream reports the gap at the next message
            return FastBatchGapError(
                f"fast batch {self.batch_id}: no stream took message {seq}; "
                f"the batch stopped there",
                seq, seq,
            )  # fmt: skip
        body = json.loads(msg.data)
        kind = body.get("type")
        if kind == "ack":
            self._acked = max(self._acked, int(body["seq"]))
            self._window = OUTSTANDING_ACKS * max(int(body["msgs"]), 1)
            return None
        if kind == "gap":
            first, seq = int(body["last_seq"]), int(body["seq"])
            if self.on_gap == "continue":
                self.gaps.append((first, seq))
                return None
            return FastBatchGapError(
                f"fast batch {self.batch_id}: messages {first} to {seq - 1} were lost; "
                f"the batch stopped at message {seq}",
                seq, first,
            )  # fmt: skip
        if kind == "err":
            seq, raw = int(body["seq"]), body.get("error") or {}
            error = api_error(
                int(raw.get("code", 0)), int(raw.get("err_code", 0)), raw.get("description", "")
            )
            return self._refused(seq, error)
        try:
            pub_ack = parse_pub_ack(msg)
        except APIError as exc:
            # An error PubAck on a later message's own reply subject refuses that message
            # only (over max_msg_size: 10054; captured by a stream that does not know the
            # batch: 10208); the stream goes on storing. On message 1, the end marker or a
            # ping it is about the whole batch.
            _, seq_text, op, _ = msg.subject.rsplit(".", 3)
            if int(op) == _OP_APPEND:
                return self._refused(int(seq_text), exc)
            if self._forgot(exc):
                return self._forgotten(int(seq_text))
            return exc
        if pub_ack.batch_id is None:
            return FastBatchUnsupportedError(
                "the server stored message 1 as a plain message (stream sequence "
                f"{pub_ack.seq}): it does not know fast-ingest batches (2.14+)"
            )
        return pub_ack
