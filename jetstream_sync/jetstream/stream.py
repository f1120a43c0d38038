"""The ``Stream`` handle: info, purge, message get/delete, batched direct get."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import _defaults as D
from .._deadline import Deadline, check_timeout
from .._subjects import filter_subject, filter_subjects, is_publish_subject
from .._timefmt import format_rfc3339, parse_rfc3339
from ..errors import (
    APIError,
    DirectGetNotAllowedError,
    JetStreamNotEnabledError,
    MaxPayloadError,
    MessageNotFoundError,
    StreamMsgDeleteFailedError,
    TooManyResultsError,
    api_error,
)
from ..headers import Headers
from ..msg import Msg
from . import _api
from . import _checks as ck
from ._arrow_read import READ_BATCH
from ._arrow_read import read_arrow as _read_arrow
from ._direct_batch import batch_status, direct_batch_route
from .consumer import Consumer, PauseResponse
from .consumer_config import ConsumerConfig, OrderedConsumerConfig
from .info import ConsumerInfo, RawStreamMsg, StreamInfo
from .ordered import OrderedConsumer

if TYPE_CHECKING:
    import pyarrow as pa

    from .context import JetStreamContext

# Headers a direct-get reply adds to the stored message's own.
_STREAM = "Nats-Stream"
_SEQUENCE = "Nats-Sequence"
_TIMESTAMP = "Nats-Time-Stamp"
_SUBJECT = "Nats-Subject"
_DIRECT_GET_HEADERS = frozenset(
    (_STREAM, _SEQUENCE, _TIMESTAMP, _SUBJECT, "Nats-Num-Pending", "Nats-Last-Sequence",
     "Nats-UpTo-Sequence")
)  # fmt: skip
_PENDING = "Nats-Num-Pending"
_UP_TO = "Nats-UpTo-Sequence"
# nats-server answers "413 Too Many Results" to a multi_last matching more subjects.
_MULTI_LAST_MAX = 1024


def _seq_of(msg: RawStreamMsg) -> int:
    return msg.seq


def _multi_last(subjects: list[str], as_of: dict[str, Any]) -> dict[str, Any]:
    """A batched "last message per subject" request, as of ``as_of`` (``up_to_seq`` or
    ``up_to_time``, or nothing: now)."""
    return {"multi_last": subjects, **as_of}


def _chunks(subjects: list[str], count: int, size: int) -> Iterator[list[str]]:
    """``subjects`` in runs of at most ``count`` whose JSON stays under ``size`` bytes."""
    run: list[str] = []
    used = 0
    for subject in subjects:
        cost = len(subject.encode()) + 4  # quotes, comma, space
        if run and (len(run) >= count or used + cost > size):
            yield run
            run, used = [], 0
        run.append(subject)
        used += cost
    if run:
        yield run


def _raw_from_direct(msg: Msg, **about: Any) -> RawStreamMsg:
    """A message from a direct-get reply (payload as is, metadata in headers).

    Args:
        msg: the reply.
        **about: what was asked for (``stream``, ``seq`` or ``subject``), named
            by the error of a status reply.
    """
    status = msg.status
    if status is not None:
        if status == 404:
            raise MessageNotFoundError(404, 10037, msg.description or "no message found", **about)
        description = msg.description or f"direct get failed with status {status}"
        raise api_error(status, 0, description, **about)
    h = msg.headers
    stored = Headers.from_pairs((k, v) for k, v in h.pairs() if k not in _DIRECT_GET_HEADERS)
    return RawStreamMsg(
        subject=h[_SUBJECT],
        seq=int(h[_SEQUENCE]),
        data=msg.data,
        headers=stored if len(stored) else None,
        time=parse_rfc3339(h[_TIMESTAMP]),
        stream=h.get(_STREAM),
    )


class Stream:
    """A handle on one stream. Made by :meth:`JetStreamContext.stream` and friends.

    Attributes:
        name: the stream's name.
    """

    def __init__(self, ctx: JetStreamContext, name: str, info: StreamInfo | None = None) -> None:
        self._ctx = ctx
        self._api = ctx._api
        self._consumers = ctx._consumers  # the context's consumer calls, given this name
        self.name: str = name
        self._info = info

    @property
    def cached_info(self) -> StreamInfo | None:
        """The info from the last :meth:`info` call (or from creation); no request."""
        return self._info

    def _deadline(self, timeout: float | None) -> Deadline:
        return Deadline(check_timeout("timeout", timeout, self._ctx.timeout))

    def info(
        self,
        subjects_filter: str | None = None,
        deleted_details: bool = False,
        timeout: float | None = None,
    ) -> StreamInfo:
        """Fetch the stream's current info.

        A request the stream drops while it elects a leader is sent again
        every 2 s within ``timeout``.

        Args:
            subjects_filter: also return per-subject message counts for the
                subjects matching this filter (all pages are fetched).
            deleted_details: also return the sequences of deleted messages.
            timeout: seconds for the whole call, across pages.

        Raises:
            BadSubjectError: ``subjects_filter`` is not a filter subject (``""``
                included); nothing was sent.
            StreamNotFoundError: the stream does not exist.
        """
        if subjects_filter is not None:
            filter_subject(subjects_filter, "subjects_filter")
        deadline = self._deadline(timeout)
        subjects: dict[str, int] = {}
        offset = 0
        while True:
            body: dict[str, Any] = {}
            if subjects_filter:
                body["subjects_filter"] = subjects_filter
            if deleted_details:
                body["deleted_details"] = True
            if offset:
                body["offset"] = offset
            reply = self._api.request_json(
                _api.STREAM_INFO, body or None, deadline, read_only=True, stream=self.name
            )
            page = reply.get("state", {}).get("subjects") or {}
            subjects.update(page)
            total = int(reply.get("total", 0))
            if not subjects_filter or not page or len(subjects) >= total:
                break
            offset = len(subjects)
        if subjects_filter:
            reply.setdefault("state", {})["subjects"] = subjects
        self._info = StreamInfo.from_api(reply)
        return self._info

    def purge(
        self,
        subject: str | None = None,
        seq: int | None = None,
        keep: int | None = None,
        timeout: float | None = None,
    ) -> int:
        """Remove messages; return how many were removed.

        Args:
            subject: only messages on this subject (wildcards allowed); ``None``:
                every subject.
            seq: only messages below this sequence (not with ``keep``). Without a
                subject (or with ``>``), a ``seq`` past the last message also makes
                it the stream's next sequence (the server compacts up to it).
            keep: keep this many of the newest messages (not with ``seq``).

        Raises:
            ValueError: both ``seq`` and ``keep`` were given.
            BadSubjectError: ``subject`` is not a filter subject (``""`` included:
                it never means the whole stream); nothing was sent.
            StreamPurgeFailedError: the server did not purge (``deny_purge``).
        """
        if seq is not None and keep is not None:
            raise ValueError("purge takes seq or keep, not both")
        body: dict[str, Any] = {}
        if subject is not None:  # "" is a bad subject, never "the whole stream"
            body["filter"] = filter_subject(subject)
        if seq is not None:
            body["seq"] = ck.sequence(seq, "seq")
        if keep is not None:
            body["keep"] = ck.sequence(keep, "keep", 0)
        reply = self._api.request_json(
            _api.STREAM_PURGE, body or None, self._deadline(timeout), stream=self.name
        )
        return int(reply.get("purged", 0))

    def get_msg(self, seq: int, timeout: float | None = None) -> RawStreamMsg:
        """The stored message at ``seq`` (through the stream leader).

        Raises:
            MessageNotFoundError: no message at that sequence.
        """
        seq = ck.sequence(seq, "seq")
        return self._get({"seq": seq}, {"seq": seq}, timeout)

    def get_last_msg_for_subject(self, subject: str, timeout: float | None = None) -> RawStreamMsg:
        """The newest stored message on ``subject`` (through the stream leader).

        ``subject`` may hold wildcards: ``orders.*.created`` or ``orders.>``
        gives the newest message on any subject it matches.

        Raises:
            MessageNotFoundError: no message on that subject.
            BadSubjectError: ``subject`` is not a filter subject; nothing was sent.
        """
        body = {"last_by_subj": filter_subject(subject)}
        return self._get(body, {"subject": subject}, timeout)

    def _get(
        self, body: dict[str, Any], about: dict[str, Any], timeout: float | None
    ) -> RawStreamMsg:
        reply = self._api.request_json(
            _api.STREAM_MSG_GET, body, self._deadline(timeout), about=about, stream=self.name
        )
        return RawStreamMsg.from_api(reply["message"])

    def direct_get(self, seq: int, timeout: float | None = None) -> RawStreamMsg:
        """The message at ``seq``, answered by any replica (stream ``allow_direct``).

        When no replica answers (none subscribed yet: a new replicated stream,
        or an election), the stream leader is asked instead, as by :meth:`get_msg`.

        Raises:
            MessageNotFoundError: no message at that sequence.
            DirectGetNotAllowedError: the stream was created without ``allow_direct``.
            StreamNotFoundError: there is no such stream.
        """
        seq = ck.sequence(seq, "seq")
        body = {"seq": seq}
        return self._direct(_api.DIRECT_GET, body, body, timeout, {"seq": seq})

    def direct_get_last_for_subject(
        self, subject: str, timeout: float | None = None
    ) -> RawStreamMsg:
        """The newest message on ``subject``, answered by any replica (stream ``allow_direct``).

        When no replica answers, the stream leader is asked instead (see :meth:`direct_get`).

        ``subject`` may hold wildcards: ``orders.*.created`` or ``orders.>``
        gives the newest message on any subject it matches.

        Raises:
            MessageNotFoundError: no message on that subject.
            BadSubjectError: ``subject`` is not a filter subject; nothing was sent.
            DirectGetNotAllowedError: the stream was created without ``allow_direct``.
            StreamNotFoundError: there is no such stream.
        """
        about = {"subject": subject}
        leader_body = {"last_by_subj": subject}
        return self._direct(
            _api.DIRECT_GET_LAST, None, leader_body, timeout, about, subject=subject
        )

    def _direct(
        self,
        template: str,
        body: dict[str, Any] | None,
        leader_body: dict[str, Any],
        timeout: float | None,
        about: dict[str, Any],
        **parts: str,
    ) -> RawStreamMsg:
        """A direct get; the stream leader's get (``leader_body``) when nobody answers it.

        Nobody answers a direct get while no replica is subscribed to them: a
        new replicated stream whose leader's subscription has not reached this
        server yet, or followers still catching up after an election.
        """
        deadline = self._deadline(timeout)
        subject = self._api.subject(template, stream=self.name, **parts)
        payload = b"" if body is None else json.dumps(body).encode()
        try:
            # Any replica may answer, and one that stalls holds what it got: ask again.
            reply = self._api.request_again_while_dropped(subject, payload, deadline)
        except JetStreamNotEnabledError:  # nobody answered the direct get
            self._check_allows_direct(deadline)
            return self._get(leader_body, about, max(deadline.remaining(), 0.001))
        return _raw_from_direct(reply, stream=self.name, **about)

    def _check_allows_direct(self, deadline: Deadline) -> None:
        """Raise ``DirectGetNotAllowedError`` unless the stream allows direct gets
        (one STREAM.INFO; ``StreamNotFoundError`` when there is no such stream)."""
        info = self.info(timeout=max(deadline.remaining(), 0.001))
        if not info.config.allow_direct:
            raise DirectGetNotAllowedError(
                f"stream {self.name!r} does not allow direct get "
                "(create or update it with allow_direct=True, or use get_msg)"
            )

    def get_msgs(
        self,
        start_seq: int | None = None,
        batch: int = D.GET_MSGS_BATCH,
        subject: str | None = None,
        max_bytes: int | None = None,
        start_time: datetime | None = None,
        timeout: float | None = None,
    ) -> list[RawStreamMsg]:
        """Up to ``batch`` messages from ``start_seq`` (or ``start_time``), in one batched
        direct get (server 2.11+, stream ``allow_direct``).

        Args:
            start_seq: the first sequence to look at (default 1 unless ``start_time``).
            batch: the most messages to return.
            subject: only messages on this subject (wildcards allowed; ``None``:
                every subject).
            max_bytes: stop once this many bytes were returned (0 or None: no limit).
            start_time: start at the first message stored at or after this time.

        Returns:
            The messages in sequence order; an empty list when none match.

        Raises:
            ValueError, TypeError: a bad ``batch``, ``start_seq`` or ``max_bytes``
                (not an int, or negative); nothing was sent.
            BadSubjectError: ``subject`` is not a filter subject (``""`` included,
                as for :meth:`purge`); nothing was sent.
            DirectGetNotAllowedError: the stream was created without ``allow_direct``.
            StreamNotFoundError: there is no such stream.
            RequiredApiLevelError: the server is older than 2.11.
            TimeoutError: the batch did not end within ``timeout``.
            ConnectionLostError: the connection dropped while the call waited
                (raised at once, not at the timeout); call it again.
            ConnectionClosedError: the client closed while the call waited.
            MaxSubscriptionsExceededError, PermissionViolationError: the server
                refused the client's inbox for batched gets (at the connection's
                subscription limit, or by permission), raised at once.
        """
        body: dict[str, Any] = {"batch": ck.sequence(batch, "batch", maximum=ck.MAX_INT64)}
        if start_time is not None:
            body["start_time"] = format_rfc3339(start_time, "start_time")
        else:
            body["seq"] = 1 if start_seq is None else ck.sequence(start_seq, "start_seq")
        if subject is not None:
            body["next_by_subj"] = filter_subject(subject)
        limit = 0 if max_bytes is None else ck.sequence(max_bytes, "max_bytes", 0, ck.MAX_INT64)
        if limit:
            body["max_bytes"] = limit
            return self._batched_all(body, self._deadline(timeout), body["batch"], paged=False)
        return self._batched_all(body, self._deadline(timeout), body["batch"])

    def get_last_msgs_for(
        self,
        subjects: Iterable[str],
        up_to_seq: int | None = None,
        timeout: float | None = None,
        *,
        up_to_time: datetime | None = None,
    ) -> list[RawStreamMsg]:
        """The newest message of each subject in ``subjects`` (wildcards allowed), as of
        ``up_to_seq`` or ``up_to_time`` when given — a consistent snapshot (server 2.11+).

        Any number of subjects may match or be given: the server answers at most
        1,024 per request, and a request holds at most ``max_payload`` bytes, so
        past either the client lists them (``info`` with a subjects filter) and
        asks for them 1,024 at a time (fewer when long), every request pinned to
        the same ``up_to_seq`` (the stream's last sequence when not given).

        Args:
            subjects: the subjects, literal or with wildcards.
            up_to_seq: only messages at or below this sequence.
            timeout: seconds for the whole call, across requests.
            up_to_time: only messages stored before this (timezone-aware) time.

        Returns:
            The messages in sequence order; an empty list when none match.

        Raises:
            ValueError: ``subjects`` is empty, both ``up_to_seq`` and ``up_to_time``
                were given, or ``up_to_time`` is naive; nothing was sent.
            BadSubjectError: one of them is not a filter subject.
            RequiredApiLevelError: the server is older than 2.11.
            TimeoutError: the requests got no complete answer in ``timeout``.
            ConnectionLostError: the connection dropped while a request waited
                (raised at once, not at the timeout); call it again.
        """
        filters = filter_subjects(subjects)
        if not filters:
            raise ValueError("subjects must name at least one subject")
        if up_to_seq is not None and up_to_time is not None:
            raise ValueError("get_last_msgs_for takes up_to_seq or up_to_time, not both")
        as_of: dict[str, Any] = {}
        if up_to_seq is not None:
            as_of["up_to_seq"] = ck.sequence(up_to_seq, "up_to_seq")
        if up_to_time is not None:
            as_of["up_to_time"] = format_rfc3339(up_to_time, "up_to_time")
        deadline = self._deadline(timeout)
        try:
            return self._batched_all(_multi_last(filters, as_of), deadline)
        except (TooManyResultsError, MaxPayloadError):
            pass  # more than the server's 1,024 subjects match, or than one request holds
        return self._last_msgs_in_chunks(filters, as_of, deadline)

    def _last_msgs_in_chunks(
        self, filters: list[str], as_of: dict[str, Any], deadline: Deadline
    ) -> list[RawStreamMsg]:
        """The newest message of every subject ``filters`` match, at most 1,024 per request.

        Wildcard filters are expanded to the subjects they match (``info`` with a
        subjects filter, paged); every request is pinned to one ``up_to_seq`` (or
        the same ``up_to_time``), so what is written meanwhile does not mix in.
        """
        subjects = {f for f in filters if is_publish_subject(f)}
        wildcards = [f for f in filters if f not in subjects]
        if not as_of:  # pin every request to one snapshot, taken before listing
            last = self.info(timeout=max(deadline.remaining(), 0.001)).state.last_seq
            as_of = {"up_to_seq": last}
        for f in wildcards:
            info = self.info(subjects_filter=f, timeout=max(deadline.remaining(), 0.001))
            subjects.update(info.state.subjects or {})
        out: list[RawStreamMsg] = []
        limit = self._api.client.max_payload // 2
        for chunk in _chunks(sorted(subjects), _MULTI_LAST_MAX, limit):
            out += self._batched_all(_multi_last(chunk, as_of), deadline)
        out.sort(key=_seq_of)
        return out

    def _batched_all(
        self,
        body: dict[str, Any],
        deadline: Deadline,
        wanted: int | None = None,
        paged: bool = True,
    ) -> list[RawStreamMsg]:
        """Batched direct gets from ``body`` until the server has nothing more pending.

        Each request asks for pages of at most ``max_payload`` bytes: without a
        ``max_bytes`` the server answers with up to its ``max_pending`` bytes (64 MiB)
        at once, the limit past which it cuts a client that falls behind off as a
        slow consumer, and ``max_pending`` is never below ``max_payload``. The
        end-of-batch status says how many are pending, and the next request starts
        after the last sequence received. ``wanted`` caps the messages of a ``batch``
        request; ``paged=False`` (the caller's own ``max_bytes``): one request is all.
        """
        if paged:
            body = {**body, "max_bytes": self._api.client.max_payload}
        out: list[RawStreamMsg] = []
        while True:
            got, pending, up_to = self._batched_direct(body, deadline)
            out += got
            if not got or not pending or not paged:
                return out
            if wanted is not None:
                if len(out) >= wanted:
                    return out
                body = {**body, "batch": wanted - len(out)}
            body = {k: v for k, v in body.items() if k != "start_time"}
            body["seq"] = got[-1].seq + 1
            if "multi_last" in body and up_to:
                # Later pages answer as of the first page's snapshot, or a subject
                # written meanwhile would come back twice.
                body.pop("up_to_time", None)  # the server takes one of the two
                body["up_to_seq"] = up_to

    def _batched_direct(
        self, body: dict[str, Any], deadline: Deadline
    ) -> tuple[list[RawStreamMsg], int, int]:
        """Send one batched direct get; collect replies until the ``204 EOB`` status.

        Returns:
            The messages, how many more the server says are pending, and the
            sequence a ``multi_last`` answered as of (0 when the status has none).
        """
        # Through the client's one reply route for batched direct gets: no SUB per
        # request, and a dropped connection fails the call at once.
        pending = direct_batch_route(self._api.client).send_body(self, body, deadline)
        *found, (_, _, block) = pending.replies()  # the last one is the status ending it
        out = [
            _raw_from_direct(Msg("", "", payload, headers), stream=self.name)
            for _, payload, headers in found
        ]
        if batch_status(self, block, deadline) == 404:
            return out, 0, 0
        status = Msg("", "", b"", block).headers
        return out, int(status.get(_PENDING) or 0), int(status.get(_UP_TO) or 0)

    def delete_msg(self, seq: int, erase: bool = False, timeout: float | None = None) -> bool:
        """Delete the message at ``seq``.

        Args:
            erase: overwrite its bytes on disk too (slower); by default the
                message is only marked deleted.

        Raises:
            MessageNotFoundError: no message at that sequence (deleted, or
                outside the stream's first..last; the file store's answer to the
                latter is checked with one STREAM.INFO).
            StreamMsgDeleteFailedError: the server did not delete it (``deny_delete``).
        """
        body = {"seq": ck.sequence(seq, "seq")}
        if not erase:
            body["no_erase"] = True
        deadline = self._deadline(timeout)
        try:
            reply = self._api.request_json(
                _api.STREAM_MSG_DELETE, body, deadline, about={"seq": body["seq"]}, stream=self.name
            )
        except StreamMsgDeleteFailedError as exc:
            raise self._delete_failed(exc, body["seq"], deadline) from None
        return bool(reply.get("success"))

    def _delete_failed(
        self, refusal: StreamMsgDeleteFailedError, seq: int, deadline: Deadline
    ) -> APIError:
        """What a "message delete failed" reply (10057) means, asked of the server.

        The file store answers a sequence below the stream's first or past its
        last with 10057, as it answers any failure (``deny_delete`` included), so
        one STREAM.INFO tells a missing message (:class:`MessageNotFoundError`)
        from a refusal (returned as it came).
        """
        info = self.info(timeout=max(deadline.remaining(), 0.001))
        state = info.state
        if info.config.deny_delete or (state.messages and state.first_seq <= seq <= state.last_seq):
            return refusal
        return MessageNotFoundError(
            refusal.code, refusal.err_code, refusal.description, stream=self.name, seq=seq
        )

    def __repr__(self) -> str:
        return f"<Stream {self.name!r}>"

    def read_arrow(
        self,
        start_seq: int | None = None,
        end_seq: int | None = None,
        subject: str | None = None,
        batch: int | None = READ_BATCH,
        *,
        timeout: float | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The stream's messages ``start_seq..end_seq`` as Arrow record batches (needs pyarrow).

        The columns are those of the Spark data source: ``stream``, ``subject``,
        ``seq``, ``timestamp`` (µs, UTC), ``data`` (binary) and ``headers`` (a
        map of lists, null for a message without headers). A subject or header
        that another client wrote in bytes that are not UTF-8 shows each such
        byte as U+FFFD. Streams with ``allow_direct`` are read by batched
        direct gets (server 2.11+), others by an ephemeral consumer deleted
        at the end; nothing is acknowledged. Sequences with no message (deleted,
        expired, purged) are skipped. Record batches hold about 8,192 rows.

        Asks for the stream's info when called (the range is fixed then); the
        messages are read as the batches are iterated, one request ahead.
        Blocks in each request up to ``timeout``.

        Args:
            start_seq: the first sequence (default: the stream's first).
            end_seq: the last sequence, inclusive (default: the stream's last now).
            subject: only messages on this subject (``*`` and ``>`` allowed).
            batch: messages asked for per request (None: 4,096); a consumer read
                asks for at most the server's ``max_request_batch``.
            timeout: seconds each request may take (default: the context's timeout).

        Returns:
            An iterator of ``pyarrow.RecordBatch``; none when nothing matches.

        Raises:
            ImportError: pyarrow is not installed.
            ValueError, TypeError: a bad argument, before anything is sent.
            StreamNotFoundError: there is no such stream.
            TimeoutError: a request got no complete answer in ``timeout``.
            JetStreamError: the read stopped (the link or the consumer was lost).
            MaxSubscriptionsExceededError, PermissionViolationError: the server
                refused the read's inbox (at the connection's subscription limit,
                or by permission for batched direct gets), raised at once.
            ProtocolError: the server sent a reply that is not a message
                (the error names the stream and the sequence).
        """
        return _read_arrow(self, self._ctx, start_seq, end_seq, subject, batch, timeout)

    # ---------------------------------------------------------------- consumers

    def create_consumer(
        self, config: ConsumerConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Consumer:
        """Create a consumer on this stream from a :class:`ConsumerConfig` and/or its fields.

        Without ``name`` or ``durable_name`` the consumer is ephemeral, with a
        generated name. Creating one that exists with the same config succeeds.

        Raises:
            ConsumerExistsError: it exists with another config.
            StreamNotFoundError: the stream does not exist.
            ValueError, TypeError: a bad config, raised before sending.
            TimeoutError: no answer within ``timeout``.
        """
        return self._consumers.create(self.name, config, fields, timeout, self._ctx.timeout)

    def update_consumer(
        self, config: ConsumerConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Consumer:
        """Change an existing consumer's config.

        The config sent replaces the consumer's whole config: a field left out
        (its filter included) goes back to the server's default. To change some
        fields, start from the current config:
        ``update_consumer(consumer.info().config, ack_wait=60)``.

        Raises:
            ConsumerDoesNotExistError: there is no consumer of that name.
            ConsumerCreateError: a field that cannot change was changed.
        """
        return self._consumers.update(self.name, config, fields, timeout, self._ctx.timeout)

    def create_or_update_consumer(
        self, config: ConsumerConfig | None = None, *, timeout: float | None = None, **fields: Any
    ) -> Consumer:
        """Create the consumer, or update it when it exists.

        Raises:
            APIError: the server refused the config.
        """
        return self._consumers.create_or_update(
            self.name, config, fields, timeout, self._ctx.timeout
        )

    def consumer(self, name: str, timeout: float | None = None) -> Consumer:
        """A handle on an existing consumer, with its info fetched.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._consumers.consumer(self.name, name, timeout, self._ctx.timeout)

    def consumer_no_info(self, name: str) -> Consumer:
        """A handle on consumer ``name``, without asking the server anything: for a worker
        allowed only to pull. See :meth:`JetStreamContext.consumer_no_info`.

        Raises:
            ValueError: a bad consumer name, before anything is sent.
        """
        return self._consumers.consumer_no_info(self.name, name, self._ctx.timeout)

    def consumer_info(self, name: str, timeout: float | None = None) -> ConsumerInfo:
        """The info of consumer ``name``.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._consumers.info(self.name, name, timeout, self._ctx.timeout)

    def delete_consumer(self, name: str, timeout: float | None = None) -> bool:
        """Delete a consumer.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return self._consumers.delete(self.name, name, timeout, self._ctx.timeout)

    def consumer_names(self, timeout: float | None = None) -> Iterator[str]:
        """The names of this stream's consumers, paged lazily (``timeout`` spans all pages)."""
        return self._consumers.names(self.name, timeout, self._ctx.timeout)

    def consumers(self, timeout: float | None = None) -> Iterator[ConsumerInfo]:
        """The info of every consumer of this stream, paged lazily."""
        return self._consumers.infos(self.name, timeout, self._ctx.timeout)

    def ordered_consumer(
        self,
        config: OrderedConsumerConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> OrderedConsumer:
        """An ordered consumer on this stream (nothing is created until the first pull).

        Args:
            timeout: the default timeout of its calls, each creation of its
                server-side consumer included (``None``: the context's).

        Raises:
            ValueError, TypeError: a bad config or timeout.
        """
        default = check_timeout("timeout", timeout, self._ctx.timeout)
        return self._consumers.ordered(self.name, config, fields, default)

    def pause_consumer(
        self, name: str, until: datetime, timeout: float | None = None
    ) -> PauseResponse:
        """Pause consumer ``name`` until ``until`` (server 2.11+)."""
        return self._consumers.pause(self.name, name, until, timeout, self._ctx.timeout)

    def resume_consumer(self, name: str, timeout: float | None = None) -> PauseResponse:
        """Resume a paused consumer."""
        return self._consumers.pause(self.name, name, None, timeout, self._ctx.timeout)

    def unpin_consumer(self, name: str, group: str, timeout: float | None = None) -> None:
        """Unpin the pinned client of ``group`` on consumer ``name`` (server 2.11+)."""
        self._consumers.unpin(self.name, name, group, timeout, self._ctx.timeout)
