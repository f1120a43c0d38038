"""``KeyValue``: one bucket's reads and writes (ADR-8, ADR-48), on the public JetStream API."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from time import monotonic
from typing import TYPE_CHECKING

from .._seam import check_at_most_max, check_control_line, check_timeout, seconds_text
from ..errors import (
    BucketNotFoundError,
    InvalidKeyError,
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    MessageNotFoundError,
    NoRespondersError,
    StreamNotFoundError,
    TimeoutError,
    WrongLastSequenceError,
    api_error,
)
from ..jetstream._seam import ASK_AGAIN_AFTER
from ..jetstream._seam import checks as ck
from ..jetstream.info import StreamInfo
from ..jetstream.publish import pub_ack_seq
from ._keys import (
    check_filter,
    check_key,
    check_stored_key,
    distinct_filters,
    is_new_key,
    is_utf8,
    key_bytes,
    subjects_prefix,
)
from .config import KeyValueConfig, KeyValueStatus
from .entry import OPERATION, KeyValueEntry, KeyValueOp, entry_from_direct, entry_from_stored
from .watch import HEARTBEAT as WATCH_HEARTBEAT
from .watch import KeyWatcher

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext

__all__ = ["KeyValue"]

_ROLLUP = "Nats-Rollup"
_DEFAULT_API_PREFIX = "$JS.API"
#: How many keys' subjects a handle keeps (see ``KeyValue._subjects``).
KEY_CACHE = 4096
#: ``purge_deletes`` keeps markers younger than this by default (as nats.go).
PURGE_DELETES_OLDER_THAN = 30 * 60.0
# A watch's consumer name (``<NUID>_<serial>``) at most, in the subject of its create request.
_LINK_NAME = 22 + 1 + 10
# A reply inbox's request counter at most (``<inbox>.<counter>``).
_REPLY_COUNTER = 1 + 20


def _wrong_last(
    exc: WrongLastSequenceError,
    cls: type[KeyWrongLastSequenceError] = KeyWrongLastSequenceError,
) -> KeyWrongLastSequenceError:
    return cls(exc.code, exc.err_code, exc.description)


def _marker_age(older_than: float | timedelta | None) -> float:
    """``purge_deletes``'s ``older_than`` in seconds; ``None`` or 0: the default.

    Raises:
        TypeError: not a number (a bool included).
        ValueError: NaN, infinite, or more than ``MAX_SECONDS`` either way.
    """
    if isinstance(older_than, timedelta):
        older_than = older_than.total_seconds()
    if older_than is None:
        return PURGE_DELETES_OLDER_THAN
    if isinstance(older_than, bool) or not isinstance(older_than, (int, float)):  # noqa: UP038
        raise TypeError(f"older_than must be a number of seconds, not {type(older_than).__name__}")
    if math.isnan(older_than) or math.isinf(older_than):
        raise ValueError(f"older_than must be a finite number of seconds, got {older_than!r}")
    check_at_most_max("older_than", abs(older_than))
    return float(older_than) or PURGE_DELETES_OLDER_THAN


class KeyValue:
    """A handle on one bucket. Made by ``ctx.key_value(bucket)`` and ``ctx.create_key_value()``.

    Every call blocks and takes ``timeout=`` (seconds; ``None``: the
    context's default). Keys are checked before anything is sent
    (:class:`InvalidKeyError`, also a ``ValueError``): ``put``, ``create``
    and ``update`` take ADR-8 keys (``-/_=.a-zA-Z0-9`` in non-empty tokens);
    reads, ``delete``, ``purge`` and watch filters take any key another
    client could have stored (no space, control character or wildcard
    token). A key longer than :attr:`max_key_length` raises
    :class:`LimitExceededError` (a ``ValueError`` too). The handle is
    thread-safe; it holds no resources of its own (watchers do).

    Attributes:
        bucket: the bucket's name.
        stream_name: its stream, ``KV_<bucket>``.
    """

    def __init__(self, ctx: JetStreamContext, info: StreamInfo, api_prefix: str) -> None:
        config = info.config
        self._ctx = ctx
        self.stream_name = config.name
        self.bucket = config.name.removeprefix("KV_")
        self._stream = ctx.stream_no_info(config.name)
        self._direct = bool(config.allow_direct)
        self._direct_pre = f"{api_prefix}.DIRECT.GET.{config.name}"
        self._gone = f"bucket {self.bucket!r} not found"
        # Reads use this stream's subjects; a mirror keeps its origin's.
        self._read_pre = subjects_prefix(self.bucket)
        write_pre = self._read_pre
        use_api_prefix = api_prefix != _DEFAULT_API_PREFIX
        mirror = config.mirror
        if mirror is not None:
            origin = mirror.name.removeprefix("KV_")
            self._read_pre = write_pre = subjects_prefix(origin)
            if mirror.external is not None and mirror.external.api:
                use_api_prefix = False
                write_pre = f"{mirror.external.api}.{write_pre}"
        # ADR-8: behind a domain or an imported API, writes carry the API prefix.
        self._write_pre = f"{api_prefix}.{write_pre}" if use_api_prefix else write_pre
        self._line_overhead = self._longest_line_but_key(api_prefix)
        self._keys: dict[str, tuple[str, str, str, bool]] = {}  # see _subjects

    def _longest_line_but_key(self, api_prefix: str) -> int:
        """The bytes, besides the key, of the longest protocol line a key goes into.

        That is the largest of a write (``HPUB <write subject> <reply> <hdr
        size> <total size>``), a direct get (its subject holds the read
        subject) and a watch's consumer create (its subject holds the link's
        name and the read subject), sizes counted at ``max_payload``'s digits.
        """
        client = self._ctx.client
        consumer_create = f"{api_prefix}.CONSUMER.CREATE.{self.stream_name}."
        subject = max(
            len(self._write_pre),
            len(self._direct_pre) + 1 + len(self._read_pre),
            len(consumer_create) + _LINK_NAME + 1 + len(self._read_pre),
        )
        reply = len(client.new_inbox()) + _REPLY_COUNTER
        size = len(str(client.max_payload))
        return len("HPUB ") + subject + 1 + reply + 2 * (1 + size) + len("\r\n")

    @property
    def max_key_length(self) -> int:
        """The longest key or key filter this handle sends, in bytes (UTF-8).

        The server drops a connection whose protocol line passes its
        ``max_control_line`` (:attr:`Client.max_control_line`, 4,096 bytes by
        default); a key goes into lines with the bucket's subject prefix, a
        reply inbox and sizes, so it may use what those leave (about 3,950
        bytes with the defaults). A longer key raises
        :class:`~jetstream_sync.errors.LimitExceededError` before anything is sent.
        """
        return self._ctx.client.max_control_line - self._line_overhead

    def _check_length(self, key: str) -> None:
        check_control_line(
            "key", key_bytes(key), self._line_overhead, self._ctx.client.max_control_line
        )

    # ------------------------------------------------------------------ reads

    def _subjects(self, key: str) -> tuple[str, str, str, bool]:
        """``key``'s read, direct-get and write subjects, and whether this client may write it.

        The key is checked once (:class:`InvalidKeyError` or
        :class:`LimitExceededError` before anything is sent) and its subjects
        are kept, so a key used again costs a dict look-up; only plain
        ``str`` keys are kept, at most ``KEY_CACHE`` of them. Any key another
        client could have stored passes (see ``_keys.check_stored_key``).
        """
        subjects = self._keys.get(key) if type(key) is str else None
        if subjects is None:
            check_stored_key(key)
            self._check_length(key)
            read = self._read_pre + key
            subjects = (read, f"{self._direct_pre}.{read}", self._write_pre + key, is_new_key(key))
            if type(key) is str:
                if len(self._keys) >= KEY_CACHE:
                    self._keys.clear()
                self._keys[key] = subjects
        return subjects

    def _new_key_subject(self, key: str) -> str:
        """The write subject of a key this client stores (``put``, ``create``, ``update``)."""
        subjects = self._subjects(key)
        if not subjects[3]:
            check_key(key)  # raises, naming the rule
        return subjects[2]

    def _missing(self, key: str) -> KeyNotFoundError:
        return KeyNotFoundError(f"key {key!r} not found in bucket {self.bucket!r}")

    def _get(self, key: str, revision: int | None, timeout: float | None) -> KeyValueEntry:
        """The entry at ``revision`` (or the latest), markers included as entries."""
        subject, direct_subject, _, _ = self._subjects(key)
        if revision is not None:
            revision = ck.sequence(revision, "revision")
        got = None
        if self._direct:
            wait = self._ctx.timeout if timeout is None else timeout  # request() checks it
            start = monotonic()
            got = self._direct_get(key, revision, direct_subject, wait)
            timeout = max(wait - (monotonic() - start), 0.001)  # for the API get, if any
        if got is None and not is_utf8(key):
            raise InvalidKeyError(
                f"key {key!r} of bucket {self.bucket!r} is not UTF-8: it can be read only "
                "with a direct get, which the bucket does not allow or nobody answered"
            )
        if got is None:  # StreamNotFoundError there tells a bucket that is gone
            try:
                if revision is None:
                    raw = self._stream.get_last_msg_for_subject(subject, timeout=timeout)
                else:
                    raw = self._stream.get_msg(revision, timeout=timeout)
            except MessageNotFoundError:
                raise self._missing(key) from None
            except StreamNotFoundError as exc:
                raise BucketNotFoundError(exc.code, exc.err_code, self._gone) from None
            got = raw.subject, entry_from_stored(self.bucket, key, raw)
        stored, entry = got
        if stored != subject:
            raise KeyNotFoundError(f"revision {revision} of bucket {self.bucket!r} is not {key!r}")
        return entry

    def _direct_get(
        self, key: str, revision: int | None, direct_subject: str, wait: float
    ) -> tuple[str, KeyValueEntry] | None:
        """The stored subject and entry by a direct get; None when nobody answered it.

        Nobody answers while no replica of the bucket's stream is subscribed to
        its direct gets (a leader election; on a loaded cluster, a new R3
        bucket whose replicas' interest has not reached this server yet), or
        when the bucket is gone: the caller then asks the stream's leader
        through the API, as for a bucket without ``allow_direct``.
        """
        body = b""
        if revision is not None:
            direct_subject, body = self._direct_pre, b'{"seq":%d}' % revision
        request = self._ctx.client.request
        total, end = wait, monotonic() + wait
        while True:
            # Any replica may answer; one that stalls (a frozen node) holds the request
            # it got, and the next one may go to another: so ask again every few seconds.
            try:
                msg = request(direct_subject, body, timeout=min(wait, ASK_AGAIN_AFTER))
                break
            except NoRespondersError:
                return None
            except TimeoutError:
                wait = end - monotonic()
                if wait <= 0:
                    raise TimeoutError(
                        f"no reply on {direct_subject!r} within {seconds_text(total)} s "
                        f"(asked every {seconds_text(ASK_AGAIN_AFTER)} s)"
                    ) from None
        status = msg.status
        if status is not None:
            if status == 404:
                raise self._missing(key)
            raise api_error(status, 0, msg.description or f"direct get failed ({status})")
        return entry_from_direct(self.bucket, key, msg)

    def get(
        self, key: str, revision: int | None = None, timeout: float | None = None
    ) -> KeyValueEntry:
        """The latest entry of ``key``, or the one at ``revision``; a direct get.

        Args:
            key: the key.
            revision: a revision (stream sequence) of this key.

        Raises:
            KeyNotFoundError: no such key (or ``revision`` holds another key's entry).
            BucketNotFoundError: the bucket was deleted.
            KeyDeletedError: the entry is a delete/purge marker (a
                ``KeyNotFoundError`` too); ``.entry`` is the marker.
            InvalidKeyError: a bad key, before anything is sent; or a key that
                is not UTF-8 on a bucket without direct get (the API's JSON
                request cannot name it).
            ValueError, TypeError: ``revision`` is not a stream sequence (an
                int from 1 to 2**64 - 1), before anything is sent.
            TimeoutError: no answer within ``timeout``.
        """
        entry = self._get(key, revision, timeout)
        if entry.operation is not KeyValueOp.PUT:
            raise KeyDeletedError(
                f"key {key!r} was deleted at revision {entry.revision} ({entry.operation.value})",
                entry,
            )
        return entry

    # ------------------------------------------------------------------ writes

    def _publish(
        self,
        key: str,
        value: bytes | str,
        *,
        new: bool = True,
        headers: dict[str, str] | None = None,
        last: int | None = None,
        ttl: float | str | None = None,
        timeout: float | None = None,
    ) -> int:
        """Publish to ``key`` (``new``: a value, checked by the strict key rule)."""
        subject = self._new_key_subject(key) if new else self._subjects(key)[2]
        if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 0):
            raise ValueError(f"last must be a revision (an int >= 0), not {last!r}")
        try:
            ack = self._ctx.publish(
                subject, value, headers=headers, expected_last_subject_seq=last,
                ttl=ttl, timeout=timeout,
            )  # fmt: skip
        except WrongLastSequenceError as exc:
            raise _wrong_last(exc) from None
        return ack.seq

    def put(self, key: str, value: bytes | str, timeout: float | None = None) -> int:
        """Store ``value`` under ``key``; return its revision.

        Raises:
            InvalidKeyError: a bad key.
            LimitExceededError: a key longer than :attr:`max_key_length`.
            MaxPayloadError: the value is larger than the server accepts.
            APIError: the bucket refused it (e.g. over ``max_value_size``).
            NoRespondersError: no stream took it (after the context's publish retries).
            TimeoutError: no acknowledgement in time (the value may be stored).
        """
        # The hot path: one request and the PubAck's sequence, no expectations
        # to encode. No responders (JetStream not ready yet) goes to the
        # context's publish and its retries, within what is left of the timeout.
        subject = self._new_key_subject(key)
        wait = self._ctx.timeout if timeout is None else timeout  # request() checks it
        start = monotonic()
        try:
            reply = self._ctx.client.request(subject, value, timeout=wait)
        except NoRespondersError:
            left = wait - (monotonic() - start)
            if left <= 0:
                raise
            return self._publish(key, value, timeout=left)
        return pub_ack_seq(reply)

    def create(
        self,
        key: str,
        value: bytes | str,
        ttl: float | timedelta | None = None,
        timeout: float | None = None,
    ) -> int:
        """Store ``value`` only if ``key`` has no value (none yet, or deleted/purged).

        Args:
            ttl: seconds until the server removes this value (a per-key TTL:
                the bucket needs ``limit_marker_ttl``; server 2.11+).

        Returns:
            The new revision.

        ``timeout`` bounds the whole call: over a deleted key it makes three
        round trips (the refused publish, a get, the publish over the marker).

        Raises:
            KeyExistsError: the key holds a value (a ``KeyWrongLastSequenceError``).
            MessageTTLDisabledError: a ``ttl`` on a bucket without
                ``limit_marker_ttl``; nothing was stored.
            TimeoutError: no answer within what is left of ``timeout``.
        """
        if isinstance(ttl, timedelta):
            ttl = ttl.total_seconds()
        wait = self._ctx.timeout if timeout is None else timeout  # _publish checks it
        start = monotonic()
        try:
            return self._publish(key, value, last=0, ttl=ttl, timeout=wait)
        except KeyWrongLastSequenceError as exc:
            first = exc
        # ADR-8: the key may only hold a delete/purge marker; retry over it once.
        try:
            latest = self._get(key, None, max(wait - (monotonic() - start), 0.001))
        except KeyNotFoundError:
            latest = None
        if latest is None or latest.operation is KeyValueOp.PUT:
            raise _wrong_last(first, KeyExistsError) from None
        left = max(wait - (monotonic() - start), 0.001)
        try:
            return self._publish(key, value, last=latest.revision, ttl=ttl, timeout=left)
        except KeyWrongLastSequenceError as exc:
            raise _wrong_last(exc, KeyExistsError) from None

    def update(self, key: str, value: bytes | str, last: int, timeout: float | None = None) -> int:
        """Store ``value`` only if ``key``'s latest revision is ``last``; return the new one.

        Raises:
            KeyWrongLastSequenceError: the latest revision is another.
        """
        return self._publish(key, value, last=last, timeout=timeout)

    def delete(self, key: str, last: int | None = None, timeout: float | None = None) -> int:
        """Mark ``key`` deleted, keeping its history; return the marker's revision.

        Args:
            last: delete only if the latest revision is this one.

        Raises:
            KeyWrongLastSequenceError: ``last`` did not match.
        """
        return self._publish(
            key, b"", new=False, headers={OPERATION: "DEL"}, last=last, timeout=timeout
        )

    def purge(
        self,
        key: str,
        ttl: float | timedelta | None = None,
        last: int | None = None,
        timeout: float | None = None,
    ) -> int:
        """Remove every revision of ``key``, leaving one purge marker; return its revision.

        Args:
            ttl: seconds until the server removes the marker too (the bucket
                needs ``limit_marker_ttl``; server 2.11+).
            last: purge only if the latest revision is this one.

        Raises:
            KeyWrongLastSequenceError: ``last`` did not match.
            MessageTTLDisabledError: a ``ttl`` on a bucket without
                ``limit_marker_ttl``; nothing was purged.
        """
        if isinstance(ttl, timedelta):
            ttl = ttl.total_seconds()
        headers = {OPERATION: "PURGE", _ROLLUP: "sub"}
        return self._publish(
            key, b"", new=False, headers=headers, last=last, ttl=ttl, timeout=timeout
        )

    # ------------------------------------------------------------------ listings

    def watch(
        self,
        keys: str | Sequence[str] = ">",
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        timeout: float | None = None,
        resume_from_revision: int | None = None,
    ) -> KeyWatcher:
        """Watch keys: first their current entries, then ``None``, then every update.

        The watcher recovers by itself from reconnects, server restarts and
        the deletion of its consumer, resuming after the last revision it
        delivered: no update is lost or repeated (except revisions the
        bucket itself dropped meanwhile, through ``history`` or ``ttl``).

        Args:
            keys: a key filter (``*`` for one token, ``>`` for the rest) or a
                list of them; a filter another one covers is left out.
            include_history: deliver every stored revision, not only the latest.
            ignore_deletes: leave delete and purge markers out.
            meta_only: leave the values out (``value == b""``).
            updates_only: only changes made from now on; ``None`` comes first.
            timeout: seconds to set the watch up.
            resume_from_revision: instead of the current entries, every revision
                from this one on that the bucket still holds (as nats.go's
                ``ResumeFromRevision``): pass the last revision handled plus one to
                pick up where an earlier watch left off. ``None`` follows the newest
                revision stored when the watch began (at once when there is none
                from this one on).

        Raises:
            InvalidKeyError: a bad filter, or one holding bytes that are not
                UTF-8 (the server cannot filter on it; ``keys()`` lists such keys).
            ValueError: ``include_history`` or ``resume_from_revision`` together
                with ``updates_only``; a ``resume_from_revision`` below 1 or past
                64 bits.
            TypeError: a ``resume_from_revision`` that is not an int.
        """
        if updates_only and (include_history or resume_from_revision is not None):
            other = "include_history" if include_history else "resume_from_revision"
            raise ValueError(f"{other} and updates_only cannot be combined")
        if resume_from_revision is not None:
            resume_from_revision = ck.sequence(resume_from_revision, "resume_from_revision")
        return self._watcher(
            keys, timeout, WATCH_HEARTBEAT, include_history=include_history,
            ignore_deletes=ignore_deletes, meta_only=meta_only, updates_only=updates_only,
            resume_from_revision=resume_from_revision,
        )  # fmt: skip

    def _watcher(
        self,
        keys: str | Sequence[str],
        timeout: float | None,
        heartbeat: float,
        resume_from_revision: int | None = None,
        **options: bool,
    ) -> KeyWatcher:
        """A :class:`KeyWatcher` of ``keys`` (checked) with ``options`` and ``heartbeat``."""
        filters = [keys] if isinstance(keys, (str, bytes, bytearray)) else list(keys)
        if not filters:
            filters = [">"]
        for key in filters:
            check_filter(key)
            self._check_length(key)
        subjects = [self._read_pre + key for key in distinct_filters(filters)]
        return KeyWatcher(
            self._ctx, self.stream_name, self.bucket, len(self._read_pre), subjects,
            timeout=timeout, heartbeat=heartbeat, resume_from_revision=resume_from_revision,
            **options,
        )  # fmt: skip

    def _initial(
        self, keys: str | Sequence[str], timeout: float | None, **options: bool
    ) -> list[KeyValueEntry]:
        """The initial entries of a watch of ``keys``: a listing, each of whose stalls may
        last ``timeout``. Its heartbeats come at a quarter of that, so that a pull the
        server dropped without a word is noticed, and the consumer replaced, in time."""
        limit = check_timeout("timeout", timeout, self._ctx.timeout)
        heartbeat = min(WATCH_HEARTBEAT, limit / 4)
        with self._watcher(keys, limit, heartbeat, listing=True, **options) as watcher:
            return watcher.initial()

    def keys(self, filters: str | Sequence[str] = ">", timeout: float | None = None) -> list[str]:
        """The keys holding a value (markers left out), filtered on the server.

        Args:
            filters: a key filter or a list of them.
            timeout: seconds the listing may stall (default: the context's), its
                consumer's creation included, which takes the server longer the more
                filters there are (about 1.6 s for 3,000).

        Returns:
            The keys, in revision order; ``[]`` for an empty bucket.
        """
        entries = self._initial(filters, timeout, ignore_deletes=True, meta_only=True)
        return list(dict.fromkeys(e.key for e in entries))

    def history(self, key: str, timeout: float | None = None) -> list[KeyValueEntry]:
        """Every stored revision of ``key`` (markers included), oldest first.

        Raises:
            KeyNotFoundError: the key has no revision stored.
            InvalidKeyError: a bad key, or one holding bytes that are not UTF-8
                (read through a consumer, whose filter the server reads as UTF-8).
        """
        entries = self._initial(check_stored_key(key), timeout, include_history=True)
        if not entries:
            raise KeyNotFoundError(f"key {key!r} not found in bucket {self.bucket!r}")
        return entries

    def purge_deletes(
        self, older_than: float | timedelta | None = None, timeout: float | None = None
    ) -> int:
        """Remove the delete and purge markers of the bucket; return how many keys were cleaned.

        Args:
            older_than: seconds; markers younger than this keep their own
                revision (older data still goes). ``None``: 30 minutes; a
                negative value removes every marker.

        Each key is purged below its marker's revision (or up to it): a value put on
        the key after the markers were listed stays. A key holding bytes that are
        not UTF-8 is left as it is: a purge request cannot name it.

        Raises:
            TypeError, ValueError: ``older_than`` is not a finite number of
                seconds (a bool, NaN, infinite, past ~292 years), before anything is sent.
        """
        older_than = _marker_age(older_than)
        # A key that is not UTF-8 cannot be named in a purge request (JSON): it is left as it is.
        markers = [
            e
            for e in self._initial(">", timeout)
            if e.operation is not KeyValueOp.PUT and is_utf8(e.key)
        ]
        limit = datetime.now(UTC) - timedelta(seconds=max(older_than, 0))
        for entry in markers:
            # By sequence, not by count: a value put after the listing is never purged.
            young = older_than > 0 and entry.created > limit
            below = entry.revision if young else entry.revision + 1
            self._stream.purge(subject=self._read_pre + entry.key, seq=below, timeout=timeout)
        return len(markers)

    def status(self, timeout: float | None = None) -> KeyValueStatus:
        """The bucket's status (values, history, TTL, bytes...) from its stream's info.

        Raises:
            BucketNotFoundError: the bucket was deleted.
        """
        try:
            info = self._stream.info(timeout=timeout)
        except StreamNotFoundError as exc:
            raise BucketNotFoundError(exc.code, exc.err_code, self._gone) from None
        return KeyValueStatus(bucket=self.bucket, stream_info=info)

    def info(self, timeout: float | None = None) -> KeyValueConfig:
        """The bucket's settings as the server holds them (ADR-8 ``Info()``).

        Raises:
            BucketNotFoundError: the bucket was deleted.
        """
        return self.status(timeout).config

    def __repr__(self) -> str:
        return f"<KeyValue {self.bucket!r}>"
