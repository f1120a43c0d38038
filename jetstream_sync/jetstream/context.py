"""``JetStreamContext``: publishing, stream management and account info."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .. import _defaults as D
from .._deadline import Deadline, check_timeout
from .._dispatch import refuse_in_inline_callback
from .._nuid import NUID
from .._subjects import filter_subject, publish_subject
from ..errors import NoRespondersError, StreamNameInUseError, StreamNotFoundError, TimeoutError
from ..headers import Headers
from ..msg import Msg
from . import _api, compat, push
from ._ack_mux import AsyncPublisher
from ._codec import merge_config
from ._names import check_stream_name
from ._rooms import ROOMS
from .compat import PullSubscription
from .consumer import Consumer, PauseResponse
from .consumer_config import ConsumerConfig, OrderedConsumerConfig
from .consumer_manager import ConsumerManager
from .counter import Counter, open_counter
from .fast_batch import FastBatch
from .info import AccountInfo, ConsumerInfo, PubAck, StreamInfo
from .ordered import OrderedConsumer
from .publish import (
    EXPECTED_LAST_SEQ,
    EXPECTED_LAST_SUBJECT_SEQ,
    MSG_ID,
    RETRY_WAIT,
    PubAckFuture,
    no_stream_error,
    parse_pub_ack,
    publish_headers,
    request_pub_ack,
)
from .push import JetStreamSubscription
from .replies import ArrowPubAck
from .schedule import SCHEDULE, ScheduleInfo, cancel_schedule, list_schedules, schedule_headers
from .schedule import check_api_level as check_schedule_level
from .stream import Stream
from .stream_config import StreamConfig

if TYPE_CHECKING:
    import pyarrow as pa

    from ..client import Client

    # Names for the type checker only: Key-Value and Object Store attach themselves
    # to the context at run time (_rooms.py), so this module never imports them.
    from ..kv import KeyValue, KeyValueConfig, KeyValueStatus
    from ..object_store import ObjectStore, ObjectStoreConfig, ObjectStoreStatus

HeadersIn = Mapping[str, str | Sequence[str]]
BatchMessage = tuple[str, bytes | str] | tuple[str, bytes | str, HeadersIn | None]

MAX_ATOMIC_BATCH = 1000
_BATCH_ID = "Nats-Batch-Id"
_BATCH_SEQ = "Nats-Batch-Sequence"
_BATCH_COMMIT = "Nats-Batch-Commit"
_BATCH_HEADERS = {_BATCH_ID.lower(), _BATCH_SEQ.lower(), _BATCH_COMMIT.lower()}
_EXPECTED_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"


def _batch_item(seq: int, item: object) -> tuple[str, bytes | str, Headers]:
    """The subject, data and headers of ``publish_batch``'s message ``seq`` (1-based).

    Raises:
        TypeError: the item is not ``(subject, data)`` or ``(subject, data, headers)``.
        ValueError: its headers set one of the batch's own ``Nats-Batch-*`` headers
            (the server would read the caller's: a ``Nats-Batch-Commit`` would commit
            the messages before it alone), or ``Nats-Expected-Last-Sequence`` on a
            message after the first.
    """
    if not isinstance(item, tuple | list) or len(item) not in (2, 3):
        raise TypeError(
            f"publish_batch message {seq}: expected (subject, data) or "
            f"(subject, data, headers), got {item!r:.80}"
        )
    headers = publish_headers(item[2] if len(item) == 3 else None) or Headers()
    for key in headers:
        if key.lower() in _BATCH_HEADERS:
            raise ValueError(
                f"publish_batch message {seq}: header {key!r} is set by publish_batch itself"
            )
    if seq > 1 and EXPECTED_LAST_SEQ in headers:
        # The server refuses it with a WrongLastSequenceError, as if the stream had moved.
        raise ValueError(
            f"publish_batch message {seq}: only the first message of an atomic batch may "
            f"carry {EXPECTED_LAST_SEQ}"
        )
    return item[0], item[1], headers


def _check_subject_expectation(
    seq: int, subject: str, headers: Headers, written: Mapping[str, int]
) -> None:
    """Refuse a per-subject sequence check of a subject an earlier message writes.

    The stream checks ``Nats-Expected-Last-Subject-Sequence`` against what it held
    before the batch, so it refuses the whole batch when an earlier message of the
    batch writes the subject checked (``subject``, or the one
    ``Nats-Expected-Last-Subject-Sequence-Subject`` names).

    Raises:
        ValueError: that subject was written by an earlier message of the batch.
    """
    if EXPECTED_LAST_SUBJECT_SEQ not in headers:
        return
    checked = headers.get(_EXPECTED_SUBJECT) or subject
    if checked in written:
        raise ValueError(
            f"publish_batch message {seq}: {EXPECTED_LAST_SUBJECT_SEQ} checks {checked!r}, "
            f"which is written by message {written[checked]} of the same batch"
        )


def stream_api_level(config: StreamConfig) -> int:
    """The JetStream API level a stream config needs (0 when any server will do)."""
    level = 0
    if config.allow_msg_ttl or config.subject_delete_marker_ttl:
        level = 1
    if config.allow_atomic or config.allow_msg_counter or config.allow_msg_schedules:
        level = 2
    if config.persist_mode is not None and config.persist_mode != "default":
        level = 2
    if config.allow_batched:
        level = 4
    return level


class JetStreamContext:
    """The entry point to JetStream, made with :meth:`Client.jetstream`.

    Args:
        client: the connection.
        prefix: a custom API prefix (e.g. for an imported JetStream).
        domain: a JetStream domain (``$JS.<domain>.API``); not with ``prefix``.
        timeout: the default timeout of every call, in seconds.
        max_ack_inflight: the most async publishes waiting for their ack.
        backpressure_on_inflight: block when the window is full (else raise
            :class:`TooManyPendingAcksError`).
        ack_timeout: seconds before an async publish without ack fails with
            :class:`TimeoutError`.
    """

    def __init__(
        self,
        client: Client,
        prefix: str | None = None,
        domain: str | None = None,
        timeout: float = D.JS_TIMEOUT,
        max_ack_inflight: int = D.MAX_ACK_INFLIGHT,
        backpressure_on_inflight: bool = True,
        ack_timeout: float = D.ACK_TIMEOUT,
    ) -> None:
        if max_ack_inflight < 1:
            raise ValueError("max_ack_inflight must be at least 1")
        self.client = client
        self.timeout = check_timeout("timeout", timeout)
        self._api = _api.JsApi(client, _api.api_prefix(prefix, domain))
        self._consumers = ConsumerManager(client, self._api)  # shared by this context's streams
        self._async = AsyncPublisher(
            client,
            max_ack_inflight,
            backpressure_on_inflight,
            check_timeout("ack_timeout", ack_timeout),
        )

    def _deadline(self, timeout: float | None) -> Deadline:
        return Deadline(check_timeout("timeout", timeout, self.timeout))

    @property
    def api_prefix(self) -> str:
        """The subject prefix of this context's API calls.

        ``$JS.API``, ``$JS.<domain>.API`` with a domain, or the custom ``prefix``.
        """
        return self._api.prefix

    # ---------------------------------------------------------------- publishing

    def publish(
        self,
        subject: str,
        data: bytes | str = b"",
        *,
        headers: HeadersIn | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ttl: float | str | None = None,
        timeout: float | None = None,
        retry_attempts: int = D.PUBLISH_RETRY_ATTEMPTS,
    ) -> PubAck:
        """Publish to a stream and block until it is stored (or refused).

        Args:
            subject: a subject some stream captures.
            data: the payload (``str`` is UTF-8 encoded).
            headers: extra headers.
            msg_id: the id the stream de-duplicates on (``Nats-Msg-Id``).
            expected_stream: fail unless this stream stores the message.
            expected_last_seq: fail unless the stream's last sequence is this.
            expected_last_subject_seq: fail unless the last sequence on this
                subject is this (0: no message on the subject yet).
            expected_last_msg_id: fail unless the last message id is this.
            ttl: a per-message TTL in seconds, or ``"never"`` (stream needs
                ``allow_msg_ttl``; server 2.11+).
            timeout: seconds for the whole call, retries included.
            retry_attempts: retries after no-responders (JetStream not ready),
                250 ms apart, within the timeout.

        Returns:
            The PubAck: stream, sequence, whether it was a duplicate.

        Raises:
            NoRespondersError: no stream captures ``subject`` (after the retries);
                the error names the subject.
            WrongLastSequenceError, WrongLastMsgIdError, StreamWrongExpectedError:
                an expectation failed.
            TimeoutError: no PubAck in time; the message may still have been stored.
            ConnectionLostError: the connection dropped before the PubAck came
                (raised at once); the message may or may not be stored.
            BadSubjectError, BadHeaderError, MaxPayloadError, ValueError: bad
                input, raised before anything is sent.
            ReconnectBufferFullError: disconnected, and the client's
                ``reconnect_buf_size`` is used up; nothing was sent.
        """
        deadline = self._deadline(timeout)
        hdrs = publish_headers(headers, (
            msg_id, expected_stream, expected_last_seq,
            expected_last_subject_seq, expected_last_msg_id, ttl,
        ))  # fmt: skip
        attempt = 0
        while True:
            left = deadline.remaining()
            if left <= 0:
                raise TimeoutError(f"no PubAck for {subject!r} in time")
            try:
                return request_pub_ack(self.client, subject, data, hdrs, left)
            except NoRespondersError:
                attempt += 1
                if attempt > retry_attempts or deadline.remaining() <= RETRY_WAIT:
                    raise no_stream_error(subject) from None
            time.sleep(RETRY_WAIT)  # back-off before retrying: JetStream may be starting

    def publish_async(
        self,
        subject: str,
        data: bytes | str = b"",
        *,
        headers: HeadersIn | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ttl: float | str | None = None,
        timeout: float | None = None,
    ) -> PubAckFuture:
        """Publish without waiting for the ack; return a future of the ``PubAck``.

        At most ``max_ack_inflight`` acks are pending at once across every
        thread; when the window is full this blocks (up to ``timeout``) or,
        with ``backpressure_on_inflight=False``, raises
        :class:`TooManyPendingAcksError`. The future fails with
        :class:`TimeoutError` when no ack comes within ``ack_timeout``, and
        with :class:`ConnectionLostError` when the connection drops before it.

        ``timeout`` (default: the context's ``timeout``) bounds everything
        this call may wait for: room in the ack window, then room in the
        client's write buffer (over 32 MiB buffered for a server that does not
        read). It never blocks longer.

        Raises:
            BadSubjectError, BadHeaderError, MaxPayloadError, ValueError: bad input.
            TooManyPendingAcksError: the window is full and backpressure is off.
            TimeoutError: no room in the window or the write buffer within
                ``timeout``; nothing was sent and no future is pending.
            ReconnectBufferFullError: disconnected, and the client's
                ``reconnect_buf_size`` is used up; nothing was sent and no
                future is pending.
            PermissionViolationError: the server refused (by permission) the
                subscription of the acks' inbox: no ack could come; nothing was
                sent. The futures pending then fail with it at once, and so does
                a future whose publish the server refused.
        """
        hdrs = publish_headers(headers, (
            msg_id, expected_stream, expected_last_seq,
            expected_last_subject_seq, expected_last_msg_id, ttl,
        ))  # fmt: skip
        if timeout is not None:
            timeout = check_timeout("timeout", timeout)
        return self._async.publish(subject, data, hdrs, timeout or self.timeout)

    def publish_async_pending(self) -> int:
        """How many async publishes are not done yet (waiting for their ack, or being settled)."""
        return self._async.pending()

    def publish_async_completed(self, timeout: float | None = None) -> None:
        """Block until every async publish of this context is done (its ack came, or it failed).

        A future counts until it is done and its done-callbacks have returned, as
        :meth:`publish_async_pending` counts it.

        Raises:
            TimeoutError: acks were still pending after ``timeout``.
            InlineCallbackError: called from an inline callback with acks pending,
                or from a ``PubAckFuture`` done-callback.
            ForkedClientError: acks are pending in a process forked after they
                were published (they go to the parent).
        """
        self._async.wait_completed(check_timeout("timeout", timeout, self.timeout))

    def publish_batch(
        self, messages: Sequence[BatchMessage], timeout: float | None = None
    ) -> PubAck:
        """Publish up to 1000 messages as one atomic batch: all are stored or none.

        Each item is ``(subject, data)`` or ``(subject, data, headers)``. The
        stream needs ``allow_atomic`` (server 2.12+). Every message is checked
        before the first one is sent. The first message of a batch of several is
        sent as a request and the rest only once the stream has accepted it, so a
        refusal of the first (too many open batches, too large, no stream) raises
        its own error and sends nothing more.

        A message may carry ``Nats-Msg-Id`` (server 2.12.1+): a batch holding
        an id the stream already stored is refused whole.

        Returns:
            The PubAck of the commit: the last message's sequence; ``batch_id``
            and ``batch_size`` say which batch and how many messages.

        Raises:
            ValueError: no messages, more than 1000, two messages with the
                same ``Nats-Msg-Id``, a ``Nats-Batch-*`` header,
                ``Nats-Expected-Last-Sequence`` after the first message, or
                ``Nats-Expected-Last-Subject-Sequence`` checking a subject an
                earlier message writes (nothing is sent).
            TypeError: an item of another shape (nothing is sent).
            AtomicPublishDisabledError: the stream has no ``allow_atomic``.
            NoRespondersError: no stream captures the first message's subject.
            RequiredApiLevelError: the server stored the first message as a plain
                publish (older than 2.12); nothing after it was sent.
            AtomicPublishDuplicateMsgIdError: a message id was already stored.
            AtomicPublishUnsupportedHeaderError, AtomicPublishIncompleteBatchError,
            AtomicPublishTooLargeBatchError, AtomicPublishTooManyInflightError,
            APIError: the server refused the batch otherwise.
            TimeoutError: no answer to the first message or no commit PubAck
                within ``timeout``, or no room in the
                write buffer for a message of the batch in time (the batch is
                then never committed).
        """
        if not messages:
            raise ValueError("publish_batch needs at least one message")
        if len(messages) > MAX_ATOMIC_BATCH:
            raise ValueError(f"an atomic batch holds at most {MAX_ATOMIC_BATCH} messages")
        # The commit waits for its PubAck: refused before the first message goes out.
        refuse_in_inline_callback("publish_batch()")
        deadline = self._deadline(timeout)
        batch_id = NUID.next()
        last = len(messages)
        prepared = []
        msg_ids: dict[str, int] = {}
        written: dict[str, int] = {}
        for seq, item in enumerate(messages, start=1):
            subject, data, headers = _batch_item(seq, item)
            _check_subject_expectation(seq, subject, headers, written)
            written.setdefault(subject, seq)
            msg_id = headers.get(MSG_ID)
            if msg_id is not None and msg_ids.setdefault(msg_id, seq) != seq:
                # The server refuses the whole batch for this (10201): say so before sending.
                raise ValueError(
                    f"messages {msg_ids[msg_id]} and {seq} share Nats-Msg-Id {msg_id!r}"
                )
            pairs = [*headers.pairs(), (_BATCH_ID, batch_id), (_BATCH_SEQ, str(seq))]
            if seq == last:
                pairs.append((_BATCH_COMMIT, "1"))
            headers = Headers.from_pairs(pairs)
            self.client.validate_publish(subject, data, headers=headers)
            prepared.append((subject, data, headers))
        if len(prepared) > 1:
            self._start_batch(*prepared[0], deadline)
        for subject, data, headers in prepared[1:-1]:
            # A batch cut short by the deadline is never committed: the server drops it.
            left = max(deadline.remaining(), 0.001)
            self.client.publish(subject, data, headers=headers, timeout=left)
        subject, data, headers = prepared[-1]
        left = deadline.remaining()
        if left <= 0:
            raise TimeoutError("publish_batch timed out")
        reply = self.client.request(subject, data, timeout=left, headers=headers)
        return parse_pub_ack(reply, subject)

    def _start_batch(
        self, subject: str, data: bytes | str, headers: Headers, deadline: Deadline
    ) -> None:
        """Send an atomic batch's first message as a request, as ADR-50 starts a batch.

        The stream answers with an empty reply once it holds the batch open, or with the
        error that refused it (too many open batches, the message too large, no
        ``allow_atomic``): raised here, before the rest of the batch goes out only to be
        refused as incomplete at the commit.
        """
        left = deadline.remaining()
        if left <= 0:
            raise TimeoutError("publish_batch timed out")
        reply = self.client.request(subject, data, timeout=left, headers=headers)
        if reply.data or reply.status is not None:
            ack = parse_pub_ack(reply, subject)  # raises the stream's error
            raise _api.RequiredApiLevelError(
                412,
                10185,
                f"atomic batches need nats-server 2.12 or newer: the server stored message 1 "
                f"of the batch as a plain publish, at sequence {ack.seq} of stream "
                f"{ack.stream!r}; nothing after it was sent",
            )

    def publish_arrow(
        self,
        table: pa.Table | pa.RecordBatch,
        subject: str | None = None,
        *,
        msg_id_prefix: str | None = None,
        dedupe: bool = True,
        timeout: float | None = None,
    ) -> ArrowPubAck:
        """Publish every row of a pyarrow Table or RecordBatch, each acknowledged (needs pyarrow).

        The columns are the Spark sink's (the mirror of :meth:`Stream.read_arrow`):
        ``data`` (binary or string, required), ``subject`` (string; a null or
        empty one takes ``subject=``), ``headers`` (a map of string to string
        or to a list of strings) and ``msgId`` (string). Rows are encoded a
        chunk at a time and sent without waiting, at most 16,384 waiting for
        their PubAck; the call returns once every row is acknowledged.

        Each message carries a ``Nats-Msg-Id``: its ``msgId``, or
        ``<msg_id_prefix><row>:<12 hex digits of its data's hash>``. Without
        ``msg_id_prefix`` a fresh one is made per call; give your own to make a
        retry of the same table idempotent: the stream stores each row once
        (within its duplicate window) and counts the rest as duplicates. With
        ``dedupe=False`` a row without a ``msgId`` gets no id (a row with
        neither id nor headers goes as a plain ``PUB``): the server does less
        per row, and publishing the table again stores it again.

        Args:
            table: the rows.
            subject: the subject of rows without one (required without a
                ``subject`` column).
            msg_id_prefix: what derived message ids start with.
            dedupe: derive an id for every row without a ``msgId`` (the default).
            timeout: seconds without any PubAck before the oldest waiting row
                fails, and the longest wait for room in the write buffer
                (default: the context's timeout).

        Returns:
            The stream, the rows acknowledged and how many were duplicates.

        Raises:
            ImportError: pyarrow is not installed.
            TypeError, ValueError, BadSubjectError: not a Table or RecordBatch, an
                unknown or missing column, a column of another type, a bad
                ``subject=``; raised before anything is sent.
            RowPublishError: a row could not be sent (null data, a bad subject or
                header, too large, a subject too long for the server's
                ``max_control_line``: the rows before it are acknowledged first
                and it is not sent) or was not stored (refused by the stream, no
                stream for its subject, no PubAck in time, the connection lost, the
                acks' inbox refused). ``row`` and ``subject`` name it; rows after it
                may have been sent.
            PermissionViolationError: the server refused the acks' inbox by
                permission on this connection (at an earlier call); nothing was sent.
        """
        from .arrow_publish import publish_arrow

        wait = check_timeout("timeout", timeout, self.timeout)
        return publish_arrow(self, table, subject, msg_id_prefix, wait, dedupe=dedupe)

    # ---------------------------------------------------------------- account

    def account_info(self, timeout: float | None = None) -> AccountInfo:
        """Usage and limits of this account's JetStream, including the API level.

        Raises:
            JetStreamNotEnabledError: JetStream is off for this account or server.
        """
        reply = self._api.request_json(_api.ACCOUNT_INFO, None, self._deadline(timeout))
        return AccountInfo.from_api(reply)

    # ---------------------------------------------------------------- streams

    def _stream_call(
        self,
        template: str,
        config: StreamConfig | None,
        fields: dict[str, Any],
        timeout: float | None,
    ) -> Stream:
        cfg = merge_config(StreamConfig, config, fields)
        check_stream_name(cfg.name or "")
        reply = self._api.request_json(
            template, cfg.to_api(), self._deadline(timeout), stream_api_level(cfg), stream=cfg.name
        )
        info = StreamInfo.from_api(reply)
        return Stream(self, info.config.name, info)

    def create_stream(
        self, config: StreamConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Stream:
        """Create a stream from a :class:`StreamConfig` and/or its fields.

        Creating a stream that exists with the same config succeeds.

        Raises:
            StreamNameInUseError: a stream of that name exists with another config.
            ValueError, TypeError: a bad config, raised before sending.
            RequiredApiLevelError: the config needs a newer server.
        """
        return self._stream_call(_api.STREAM_CREATE, config, fields, timeout)

    def update_stream(
        self, config: StreamConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Stream:
        """Change an existing stream's config.

        The config sent replaces the stream's whole config: a field left out
        goes back to the server's default (``subjects`` to the stream's name).
        To change some fields, start from the current config:
        ``update_stream(stream.info().config, max_msgs=10)``.

        Raises:
            StreamNotFoundError: the stream does not exist.
            APIError: the server refused the change (e.g. a field that cannot change).
        """
        return self._stream_call(_api.STREAM_UPDATE, config, fields, timeout)

    def create_or_update_stream(
        self, config: StreamConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Stream:
        """Update the stream, or create it when it does not exist.

        Another client may create the stream between the two: its config is
        then updated to this one, as if it had been there first.
        """
        cfg = merge_config(StreamConfig, config, fields)
        deadline = self._deadline(timeout)
        try:
            return self.update_stream(cfg, timeout=deadline.remaining() or 0.001)
        except StreamNotFoundError:
            pass
        try:
            return self.create_stream(cfg, timeout=deadline.remaining() or 0.001)
        except StreamNameInUseError:  # created by another client since the update
            return self.update_stream(cfg, timeout=deadline.remaining() or 0.001)

    def stream(self, name: str, timeout: float | None = None) -> Stream:
        """A handle on an existing stream, with its info fetched.

        Raises:
            StreamNotFoundError: no such stream.
        """
        stream = Stream(self, check_stream_name(name))
        stream.info(timeout=timeout)
        return stream

    def stream_no_info(self, name: str) -> Stream:
        """A handle on a stream, without asking the server anything."""
        return Stream(self, check_stream_name(name))

    def delete_stream(self, name: str, timeout: float | None = None) -> bool:
        """Delete a stream and every message in it.

        Raises:
            StreamNotFoundError: no such stream.
        """
        reply = self._api.request_json(
            _api.STREAM_DELETE, None, self._deadline(timeout), stream=check_stream_name(name)
        )
        return bool(reply.get("success"))

    def stream_names(
        self, subject: str | None = None, timeout: float | None = None
    ) -> Iterator[str]:
        """The names of every stream (or of those capturing ``subject``), paged lazily.

        Raises:
            BadSubjectError: ``subject`` is not a filter subject (checked at the call).
        """
        if subject is not None:
            filter_subject(subject)
        return self._api.pages(_api.STREAM_NAMES, "streams", subject, timeout, self.timeout)

    def streams(
        self, subject: str | None = None, timeout: float | None = None
    ) -> Iterator[StreamInfo]:
        """The info of every stream (or of those capturing ``subject``), paged lazily.

        Raises:
            BadSubjectError: ``subject`` is not a filter subject (checked at the call).
        """
        if subject is not None:
            filter_subject(subject)
        return (
            StreamInfo.from_api(item)
            for item in self._api.pages(_api.STREAM_LIST, "streams", subject, timeout, self.timeout)
        )

    def stream_name_by_subject(self, subject: str, timeout: float | None = None) -> str:
        """The name of the first stream whose subjects overlap ``subject``.

        ``subject`` may hold wildcards (``orders.>``): the server lists every
        stream with a subject that overlaps it.

        Raises:
            StreamNotFoundError: no stream captures it.
            BadSubjectError: ``subject`` is not a filter subject; nothing was sent.
        """
        reply = self._api.request_json(
            _api.STREAM_NAMES, {"subject": filter_subject(subject)}, self._deadline(timeout)
        )
        names = reply.get("streams") or []
        if not names:
            raise StreamNotFoundError(404, 10059, "no stream captures the subject", subject=subject)
        return str(names[0])

    # ---------------------------------------------------------------- consumers

    def create_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> Consumer:
        """Create a consumer on ``stream``; see :meth:`Stream.create_consumer`."""
        return self._consumers.create(stream, config, fields, timeout, self.timeout)

    def update_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> Consumer:
        """Update a consumer on ``stream``; see :meth:`Stream.update_consumer`."""
        return self._consumers.update(stream, config, fields, timeout, self.timeout)

    def create_or_update_consumer(
        self,
        stream: str,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> Consumer:
        """Create or update a consumer on ``stream``."""
        return self._consumers.create_or_update(stream, config, fields, timeout, self.timeout)

    def consumer(self, stream: str, name: str, timeout: float | None = None) -> Consumer:
        """A handle on consumer ``name`` of ``stream``, info fetched.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._consumers.consumer(stream, name, timeout, self.timeout)

    def consumer_no_info(self, stream: str, name: str) -> Consumer:
        """A handle on consumer ``name`` of ``stream``, without asking the server anything.

        For a worker allowed only to pull (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``
        and ``$JS.ACK.<stream>.>``), not to read the consumer's info. Its
        ``cached_info`` is None until :meth:`Consumer.info` is called, so the
        server, not the handle, checks each pull against the consumer's
        limits and priority groups; a consumer that does not exist shows at the
        first pull (``NoRespondersError`` from ``fetch``).

        Raises:
            ValueError: a bad stream or consumer name, before anything is sent.
        """
        return self._consumers.consumer_no_info(stream, name, self.timeout)

    def consumer_info(self, stream: str, name: str, timeout: float | None = None) -> ConsumerInfo:
        """The info of consumer ``name`` of ``stream``.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._consumers.info(stream, name, timeout, self.timeout)

    def delete_consumer(self, stream: str, name: str, timeout: float | None = None) -> bool:
        """Delete consumer ``name`` of ``stream``.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._consumers.delete(stream, name, timeout, self.timeout)

    def consumer_names(self, stream: str, timeout: float | None = None) -> Iterator[str]:
        """The consumer names of ``stream``, paged lazily."""
        return self._consumers.names(stream, timeout, self.timeout)

    def consumers(self, stream: str, timeout: float | None = None) -> Iterator[ConsumerInfo]:
        """The consumer infos of ``stream``, paged lazily."""
        return self._consumers.infos(stream, timeout, self.timeout)

    def ordered_consumer(
        self,
        stream: str,
        config: OrderedConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> OrderedConsumer:
        """An ordered consumer on ``stream`` (nothing is created until the first pull).

        Args:
            timeout: the default timeout of its calls, each creation of its
                server-side consumer included (``None``: the context's).

        Raises:
            ValueError, TypeError: ``stream`` is not a stream name (checked before
                anything is sent), or a bad config or timeout.
        """
        default = check_timeout("timeout", timeout, self.timeout)
        return self._consumers.ordered(stream, config, fields, default)

    def pause_consumer(
        self, stream: str, name: str, until: datetime, timeout: float | None = None
    ) -> PauseResponse:
        """Pause a consumer until ``until`` (server 2.11+)."""
        return self._consumers.pause(stream, name, until, timeout, self.timeout)

    def resume_consumer(
        self, stream: str, name: str, timeout: float | None = None
    ) -> PauseResponse:
        """Resume a paused consumer."""
        return self._consumers.pause(stream, name, None, timeout, self.timeout)

    def unpin_consumer(
        self, stream: str, name: str, group: str, timeout: float | None = None
    ) -> None:
        """Unpin the pinned client of a priority group."""
        self._consumers.unpin(stream, name, group, timeout, self.timeout)

    # ---------------------------------------------------------------- nats.py's subscribe

    def pull_subscribe(
        self,
        subject: str,
        durable: str | None = None,
        stream: str | None = None,
        config: ConsumerConfig | None = None,
        *,
        timeout: float | None = None,
    ) -> PullSubscription:
        """nats.py's ``pull_subscribe``: a pull consumer on ``subject`` (:func:`pull_subscribe`)."""
        return compat.pull_subscribe(self, subject, durable, stream, config, timeout)

    def pull_subscribe_bind(
        self, stream: str, consumer: str, *, timeout: float | None = None
    ) -> PullSubscription:
        """nats.py's ``pull_subscribe_bind``: bind to an existing pull consumer.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return compat.pull_subscribe_bind(self, stream, consumer, timeout)

    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        cb: Callable[[Msg], object] | None = None,
        durable: str | None = None,
        stream: str | None = None,
        config: ConsumerConfig | None = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        idle_heartbeat: float | None = None,
        flow_control: bool = False,
        *,
        deliver_policy: Any = None,
        headers_only: bool | None = None,
        inactive_threshold: float | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
        timeout: float | None = None,
    ) -> JetStreamSubscription:
        """nats.py's push ``subscribe`` (see :func:`jetstream_sync.jetstream.push.subscribe`)."""
        return push.subscribe(
            self, subject, queue, cb, durable, stream, config, manual_ack, ordered_consumer,
            idle_heartbeat, flow_control, deliver_policy, timeout, headers_only=headers_only,
            inactive_threshold=inactive_threshold, pending_msgs_limit=pending_msgs_limit,
            pending_bytes_limit=pending_bytes_limit,
        )  # fmt: skip

    def subscribe_bind(
        self,
        stream: str,
        consumer: str,
        cb: Callable[[Msg], object] | None = None,
        manual_ack: bool = False,
        *,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
        timeout: float | None = None,
    ) -> JetStreamSubscription:
        """nats.py's ``subscribe_bind``: attach to an existing push consumer.

        ``pending_msgs_limit`` and ``pending_bytes_limit`` are the
        subscription's, as in :meth:`Client.subscribe`.

        Raises:
            ConsumerNotFoundError: no such consumer.
            ValueError: it is a pull consumer, or a limit is not a positive integer.
        """
        return push.subscribe_bind(
            self, stream, consumer, cb, manual_ack, timeout, pending_msgs_limit, pending_bytes_limit
        )

    # ---------------------------------------------------------------- Key-Value (kv/)

    def create_key_value(
        self, config: KeyValueConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> KeyValue:
        """Create a bucket from a :class:`KeyValueConfig` and/or its fields.

        Creating a bucket that exists with the same settings succeeds.

        Returns:
            A handle on the bucket.

        Raises:
            InvalidBucketNameError, ValueError, TypeError: a bad config, before sending.
            StreamNameInUseError: the bucket exists with other settings.
            RequiredApiLevelError: ``limit_marker_ttl`` on a server older than 2.11.
        """
        return ROOMS.key_value.create_key_value(self, config, fields, timeout)

    def update_key_value(
        self, config: KeyValueConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> KeyValue:
        """Change an existing bucket's settings.

        The config sent replaces the bucket's whole config, as nats.go's
        ``UpdateKeyValue`` does: a field left out goes back to its default
        (``ttl``, ``description``, ``max_value_size``...). To change some
        fields, start from the current ones:
        ``update_key_value(kv.info(), history=10)``.

        Raises:
            BucketNotFoundError: no such bucket.
            APIError: the server refused the change.
        """
        return ROOMS.key_value.update_key_value(self, config, fields, timeout)

    def create_or_update_key_value(
        self, config: KeyValueConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> KeyValue:
        """Update the bucket, or create it when it does not exist."""
        return ROOMS.key_value.create_or_update_key_value(self, config, fields, timeout)

    def key_value(self, bucket: str, timeout: float | None = None) -> KeyValue:
        """A handle on an existing bucket (its stream's info is fetched once).

        Raises:
            InvalidBucketNameError: a bad name, before sending.
            BucketNotFoundError: no such bucket (also a ``StreamNotFoundError``).
            KeyValueError: the stream is not a bucket (no per-key history).
        """
        return ROOMS.key_value.key_value(self, bucket, timeout)

    def delete_key_value(self, bucket: str, timeout: float | None = None) -> bool:
        """Delete a bucket and everything in it.

        Raises:
            BucketNotFoundError: no such bucket.
            KeyValueError: the stream ``KV_<bucket>`` is not a bucket; nothing was deleted.
        """
        return ROOMS.key_value.delete_key_value(self, bucket, timeout)

    def key_value_store_names(self, timeout: float | None = None) -> Iterator[str]:
        """The names of every bucket, paged lazily."""
        return ROOMS.key_value.key_value_store_names(self, timeout)

    def key_values(self, timeout: float | None = None) -> Iterator[KeyValueStatus]:
        """The status of every bucket, paged lazily."""
        return ROOMS.key_value.key_values(self, timeout)

    # ---------------------------------------------------------------- Object Store (object_store/)

    def create_object_store(
        self, config: ObjectStoreConfig | str | None = None, *, timeout: float | None = None,
        **fields: Any,
    ) -> ObjectStore:  # fmt: skip
        """Create a bucket from an :class:`ObjectStoreConfig` and/or its fields.

        Creating a bucket that exists with the same config succeeds. As in
        nats.py, ``config`` may be the bucket's name: ``create_object_store("b")``
        is ``create_object_store(bucket="b")`` (so for the update calls).

        Raises:
            ObjectStoreExistsError: the bucket exists with another config.
            InvalidObjectStoreNameError, ValueError, TypeError: a bad config,
                raised before sending.
        """
        return ROOMS.object_store.create_object_store(self, config, fields, timeout)

    def update_object_store(
        self, config: ObjectStoreConfig | str | None = None, *, timeout: float | None = None,
        **fields: Any,
    ) -> ObjectStore:  # fmt: skip
        """Change an existing bucket's config.

        The config sent replaces the bucket's whole config: a field left out
        goes back to its default. To change some fields, start from the
        current ones: ``update_object_store(obs.status().config, ttl=60.0)``.

        Raises:
            ObjectStoreNotFoundError: no such bucket.
            APIError: the server refused the change (e.g. storage type).
        """
        return ROOMS.object_store.update_object_store(self, config, fields, timeout)

    def create_or_update_object_store(
        self, config: ObjectStoreConfig | str | None = None, *, timeout: float | None = None,
        **fields: Any,
    ) -> ObjectStore:  # fmt: skip
        """Update the bucket, or create it when it does not exist."""
        return ROOMS.object_store.create_or_update_object_store(self, config, fields, timeout)

    def object_store(self, bucket: str, timeout: float | None = None) -> ObjectStore:
        """A handle on an existing bucket (its stream info fetched once).

        Raises:
            ObjectStoreNotFoundError: no such bucket.
            InvalidObjectStoreNameError: ``bucket`` is not a valid name.
        """
        return ROOMS.object_store.object_store(self, bucket, timeout)

    def delete_object_store(self, bucket: str, timeout: float | None = None) -> bool:
        """Delete a bucket and every object in it.

        Raises:
            ObjectStoreNotFoundError: no such bucket.
            ObjectStoreError: the stream ``OBJ_<bucket>`` is not an Object Store bucket;
                nothing was deleted.
        """
        return ROOMS.object_store.delete_object_store(self, bucket, timeout)

    def object_store_names(self, timeout: float | None = None) -> Iterator[str]:
        """The names of every Object Store bucket, paged lazily."""
        return ROOMS.object_store.object_store_names(self, timeout)

    def object_stores(self, timeout: float | None = None) -> Iterator[ObjectStoreStatus]:
        """The status of every Object Store bucket, paged lazily."""
        return ROOMS.object_store.object_stores(self, timeout)

    # ---------------------------------------------------------------- counters and schedules

    def counter(self, stream: str, timeout: float | None = None) -> Counter:
        """The counters of ``stream`` (ADR-49; see :class:`Counter`).

        Raises:
            StreamNotFoundError: no such stream.
            CountersNotEnabledError: the stream's ``allow_msg_counter`` is off.
        """
        return open_counter(self, stream, timeout)

    def schedule(
        self,
        subject: str,
        target: str,
        data: bytes | str = b"",
        *,
        at: datetime | None = None,
        every: float | timedelta | None = None,
        cron: str | None = None,
        time_zone: str | None = None,
        ttl: float | None = None,
        source: str | None = None,
        rollup: bool = False,
        headers: HeadersIn | None = None,
        timeout: float | None = None,
    ) -> PubAck:
        """Store a schedule on ``subject``: the stream publishes ``data`` to ``target`` later.

        A subject holds one schedule: storing another replaces it. Give exactly one of
        ``at``, ``every`` and ``cron``. Everything is checked before anything is sent.

        Args:
            subject: the schedule's own subject (in a stream with ``allow_msg_schedules``).
            target: where the stream publishes; a subject of the same stream.
            data: the body to publish.
            at: once, at this timezone-aware time (nats-server 2.12+).
            every: repeatedly, every this many seconds (>= 1; 2.14+).
            cron: a 6-field cron spec, seconds first, ``@hourly``..., or an
                ``@every``/``@at`` pattern as text (2.14+); checked by the
                server's rules (docs/schedules.md).
            time_zone: the IANA zone a ``cron`` runs in (default UTC; 2.14+).
            ttl: seconds the produced messages live (stream needs ``allow_msg_ttl``).
            source: publish the last message on this subject of the same stream
                instead of ``data`` (sampling; ``data`` when it holds none; 2.14+).
            rollup: each produced message replaces the target's earlier ones (2.14+).
            headers: extra headers, copied onto produced messages (a ``Nats-Rollup``
                other than ``sub`` is refused).
            timeout: seconds to wait for the PubAck.

        Raises:
            ValueError, TypeError, BadSubjectError: bad input; nothing was sent.
            RequiredApiLevelError: the server is too old for this kind of schedule.
            SchedulesNotEnabledError, ScheduleTargetInvalidError, ...: the server refused.
        """
        hdrs, level = schedule_headers(
            subject, target, at=at, every=every, cron=cron, time_zone=time_zone, ttl=ttl,
            source=source, rollup=rollup, headers=headers,
        )  # fmt: skip
        check_schedule_level(self.client.server_info, level, hdrs[SCHEDULE])
        return self.publish(subject, data, headers=hdrs, timeout=timeout)

    def cancel_schedule(self, subject: str, timeout: float | None = None) -> bool:
        """Remove the schedule on ``subject``; True if one was there.

        Only a message that carries a schedule is deleted, by its sequence: the
        subject's last message must be one (the server keeps no other message on a
        schedule's subject), and a message stored after the check stays.

        Returns:
            True when a schedule was removed; False when the subject holds no message.

        Raises:
            NotAScheduleError: the subject's last message is not a schedule (a mistyped
                subject, a schedule already fired); nothing was removed.
            StreamNotFoundError: no stream captures ``subject``.
            BadSubjectError: ``subject`` is not a publish subject; nothing was sent.
        """
        publish_subject(subject)
        stream = self.stream_no_info(self.stream_name_by_subject(subject, timeout))
        return cancel_schedule(stream, subject, timeout)

    def schedules(
        self, stream: str, filter: str = ">", timeout: float | None = None
    ) -> list[ScheduleInfo]:
        """The schedules stored in ``stream`` on subjects matching ``filter``, by subject."""
        return list_schedules(self.stream_no_info(stream), filter_subject(filter), timeout)

    def fast_batch(
        self, *, flow: int | None = None, on_gap: str = "fail", timeout: float | None = None
    ) -> FastBatch:
        """Start a fast-ingest batch (ADR-50; stream ``allow_batched``, server 2.14+).

        Args:
            flow: the most messages per server ack this client allows (1-65535,
                default 500); the server may ask for acks more often.
            on_gap: ``"fail"`` ends the batch at the first lost or refused
                message; ``"continue"`` goes on and lists them on the batch.
            timeout: seconds each ``add()``/``commit()`` may wait (default: the
                context's ``timeout``).

        Returns:
            A :class:`FastBatch`: use it in a ``with`` block; nothing is sent yet.

        Raises:
            ValueError: a bad ``flow``, ``on_gap`` or ``timeout``.
        """
        return FastBatch(self.client, flow, on_gap, check_timeout("timeout", timeout, self.timeout))
