"""``ObjectStore``: large objects in chunks on a JetStream stream (ADR-20).

An object is its chunks, published to ``$O.<bucket>.C.<nuid>``, then one
meta message ``$O.<bucket>.M.<base64url(name)>`` holding its
:class:`ObjectInfo` as JSON, rolled up (``Nats-Rollup: sub``) so only the
newest meta of a name is kept. Built on the public JetStream API only:
direct get for meta, async publish for chunks, the ordered consumer to read.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, Protocol, cast

import attrs

from .._seam import NUID, Deadline, check_timeout
from ..errors import (
    APIError,
    BadObjectMetaError,
    ConnectionLostError,
    DigestMismatchError,
    DirectGetNotAllowedError,
    LimitExceededError,
    LinkIsABucketError,
    MessageNotFoundError,
    NatsError,
    NoRespondersError,
    ObjectAlreadyExistsError,
    ObjectLinkError,
    ObjectNotFoundError,
    ObjectReplacedError,
    ObjectSizeMismatchError,
    ObjectStoreNotFoundError,
    StreamNotFoundError,
    TimeoutError,
    WrongLastSequenceError,
)
from ..jetstream._seam import merge_config
from ..jetstream.info import RawStreamMsg
from .config import (
    DEFAULT_CHUNK_SIZE,
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectStoreStatus,
    check_bucket,
    check_object_name,
    decode_digest,
    digest_value,
    encode_name,
)
from .watch import ObjectWatcher

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext
    from ..jetstream.info import PubAck
    from ..jetstream.ordered import OrderedMessageIterator
    from ..jetstream.publish import PubAckFuture
    from ..jetstream.stream import Stream
    from ..msg import Msg

__all__ = ["ObjectStore"]

_ROLLUP = {"Nats-Rollup": "sub"}
# Bytes of chunks in flight (published, ack not yet seen) during a put, and
# requested ahead during a get: what bounds the memory a transfer uses.
WINDOW_BYTES = 8 * 1024 * 1024
_MAX_WINDOW_CHUNKS = 64
# How many times a get reads a name again that was replaced under it.
_REREADS = 3
# A reply inbox's request counter at most (``<inbox>.<counter>``).
_REPLY_COUNTER = 1 + 20
# A purge of chunks often follows the failover that failed a put: each try waits at most
# this long for its reply, and tries go on (this far apart after an instant refusal) for
# the call's timeout, so a request lost in the stream's election is sent again.
_PURGE_TRY = 2.0
_PURGE_PAUSE = 0.25
# ... and for at least this long: a stream whose leader's node died elects a new one 4 to
# 20 s later (the server's Raft election timeout; longer when that node led the meta group
# too), and chunks whose purge gave up stay stored, named by no object.
_PURGE_OUTAGE = 30.0
# How long a put waits before sending again the chunks that found no stream leader.
_RESEND_PAUSE = 0.25
# The idle heartbeat of list()'s and get()'s pulls at most (a quarter of their timeout when
# that is shorter), so that a pull the server dropped is noticed within the timeout.
_LISTING_HEARTBEAT = 5.0

Data = bytes | bytearray | memoryview | str | IO[bytes] | Iterable[bytes | bytearray | memoryview]


class Writable(Protocol):
    """Anything with ``write(bytes)`` (a file opened ``"wb"``, ``BytesIO``, a socket file)."""

    def write(self, data: bytes, /) -> int | None:
        """Write ``data``; return how many bytes were written (or ``None``: all)."""


# A nuid names its chunks' subject, ``$O.<bucket>.C.<nuid>``: it must be literal (no
# wildcard, space or empty token), or a read, delete or purge would reach other objects.
_LITERAL_NUID = re.compile(r"[^\s.*>]+(?:\.[^\s.*>]+)*")


def _has_literal_nuid(info: ObjectInfo) -> bool:
    """Whether ``info``'s nuid names only its own chunks (``>`` would name every object's)."""
    return _LITERAL_NUID.fullmatch(info.nuid) is not None


def _check_nuid(info: ObjectInfo) -> None:
    """Raise unless ``info``'s chunks can be read or purged by their subject.

    Raises:
        BadObjectMetaError: the meta has no nuid, or one that is not a literal subject tail.
    """
    if not _has_literal_nuid(info):
        raise BadObjectMetaError(
            f"the meta of object {info.name!r} has no usable nuid ({info.nuid!r})"
        )


def _window(chunk_size: int) -> int:
    return max(2, min(_MAX_WINDOW_CHUNKS, WINDOW_BYTES // max(chunk_size, 1)))


def _chunks(data: Any, chunk_size: int) -> Iterator[bytes | memoryview]:
    """The chunks of ``data`` (at most ``chunk_size`` bytes each); a file is read lazily.

    Raises:
        TypeError: ``data`` is not bytes-like, ``str``, a binary file or an
            iterable of bytes-like pieces (checked before the first chunk is made;
            a later piece that is not bytes-like raises as it comes).
    """
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data).cast("B")
        return (view[off : off + chunk_size] for off in range(0, len(view), chunk_size))
    if callable(getattr(data, "readinto", None)):
        return _read_into(data, chunk_size)
    if callable(getattr(data, "read", None)):
        return _read(data, chunk_size)
    if isinstance(data, Iterable):
        pieces = iter(data)
        first = next(pieces, _END)
        if first is _END:
            return iter(())
        _check_piece(first)  # a list of str or ints fails here, before anything is sent
        return _rechunk(first, pieces, chunk_size)
    raise TypeError(
        f"data must be bytes, str, a binary file or an iterable of bytes, not {type(data).__name__}"
    )


_END = object()  # past an iterable's last piece (a None piece is an error, not the end)


def _check_piece(piece: Any) -> None:
    if not isinstance(piece, (bytes, bytearray, memoryview)):
        raise TypeError(f"an iterable's items must be bytes-like, not {type(piece).__name__}")


def _rechunk(first: Any, pieces: Iterator[Any], chunk_size: int) -> Iterator[bytes]:
    """Cut the pieces of an iterable, of any sizes, into chunks of ``chunk_size`` bytes."""
    buf = bytearray()
    piece = first
    while True:
        _check_piece(piece)
        buf += piece
        while len(buf) >= chunk_size:
            yield bytes(buf[:chunk_size])
            del buf[:chunk_size]
        piece = next(pieces, _END)
        if piece is _END:
            break
    if buf:
        yield bytes(buf)


def _not_ready(f: Any) -> BlockingIOError:
    """The error for a non-blocking file with no data ready: not its end, so not stored."""
    return BlockingIOError(
        f"{type(f).__name__} is non-blocking and had no data ready: the object would be "
        "cut short, so nothing was stored (pass a blocking file)"
    )


def _read_into(f: Any, chunk_size: int) -> Iterator[memoryview]:
    """Fill one reused buffer per chunk (each chunk is published before the next read)."""
    buf = memoryview(bytearray(chunk_size))
    while True:
        n = 0
        while n < chunk_size:
            got = f.readinto(buf[n:])
            if got is None:
                raise _not_ready(f)
            if not got:
                break
            n += got
        if n:
            yield buf[:n]
        if n < chunk_size:
            return


def _read(f: Any, chunk_size: int) -> Iterator[bytes]:
    while True:
        data = f.read(chunk_size)
        if data is None:
            raise _not_ready(f)
        if isinstance(data, str):
            raise TypeError("data is a text file: open it in binary mode ('rb')")
        if not data:
            return
        yield data


def _ack(future: PubAckFuture, wait: float) -> PubAck:
    """Wait for one chunk's ack; raise the publish's error or this package's TimeoutError."""
    try:
        return future.result(wait)
    except TimeoutError:
        raise
    except builtins.TimeoutError:
        raise TimeoutError(f"no ack for a chunk within {wait} s") from None


def _refuse_link(existing: ObjectInfo | None) -> None:
    """Raise ``ObjectLinkError`` when a put would replace a link (a deleted one may be)."""
    if existing is not None and existing.is_link and not existing.deleted:
        raise ObjectLinkError(f"object {existing.name!r} is a link: a put cannot replace it")


def _refuse_link_target(obj: ObjectInfo) -> None:
    """Raise ``ObjectLinkError`` when ``obj`` may not be linked to (deleted, or a link)."""
    if obj.deleted:
        raise ObjectLinkError(f"object {obj.name!r} is deleted: it cannot be linked to")
    if obj.is_link:
        raise ObjectLinkError(f"object {obj.name!r} is a link: a link cannot point to it")


def _write_all(writer: Writable, data: bytes) -> None:
    """Write all of ``data`` (raw files may take part of it per call)."""
    n = writer.write(data)
    if n is None or n >= len(data):
        return
    view = memoryview(data)
    while n < len(view):
        # Only a writer that took part of a write (a raw file) sees a memoryview.
        wrote = writer.write(cast(bytes, view[n:]))
        if not wrote:
            raise OSError(f"the writer took no bytes ({len(view) - n} left)")
        n += wrote


class _ChunkSender:
    """The chunks of one put in flight, each kept until acked (at most ``window``).

    A chunk sent while no replica led the stream (a leader step-down, a rolling
    restart) gets no responders, or no ack when an old leader dropped it: it is
    sent again, with every chunk after it, for up to twice the wait for an ack.
    A get reads chunks in stream order, so the chunks stored after the last one
    acked are deleted first.
    """

    def __init__(self, store: ObjectStore, subject: str, window: int, wait: float) -> None:
        self._store, self._subject, self._window, self._wait = store, subject, window, wait
        self._publish = store._ctx.publish_async
        self._pending: deque[tuple[PubAckFuture, bytes]] = deque()
        self._acked_seq = 0  # the stream sequence of the last chunk acked in order
        self._sent = 0
        self._resent = False

    def send(self, data: bytes) -> None:
        """Publish one chunk, first waiting for the oldest's ack when the window is full."""
        if len(self._pending) >= self._window:
            self._settle_oldest()
        self._pending.append((self._publish(self._subject, data, timeout=self._wait), data))
        self._sent += 1

    def drain(self) -> None:
        """Wait until every chunk sent is acked in order.

        Raises:
            ObjectSizeMismatchError: after chunks were sent again, the stream holds
                another number of them (one an old leader stored late).
        """
        while self._pending:
            self._settle_oldest()
        if self._resent:
            info = self._store._stream.info(subjects_filter=self._subject, timeout=self._wait)
            stored = (info.state.subjects or {}).get(self._subject, 0)
            if stored != self._sent:
                raise ObjectSizeMismatchError(
                    f"{stored} chunks stored under {self._subject!r} for {self._sent} sent, "
                    "after a leader change made the put send some again"
                )

    def abandon(self, within: Deadline | None = None) -> None:
        """Wait out the acks still pending (so a purge finds every chunk stored): each for
        the wait for an ack, or all ``within`` a deadline."""
        for future, _ in self._pending:
            try:
                future.result(self._wait if within is None else max(within.remaining(), 0))
            except (NatsError, builtins.TimeoutError):
                pass

    def _settle_oldest(self) -> None:
        outage: Deadline | None = None
        while True:
            try:
                self._acked_seq = _ack(self._pending[0][0], self._wait).seq
            except (NoRespondersError, TimeoutError):
                outage = outage or Deadline(2 * self._wait)
                if outage.remaining() <= _RESEND_PAUSE:
                    raise
                try:
                    self._resend()
                except (NoRespondersError, TimeoutError):
                    pass  # still no leader: the oldest chunk's error comes again at once
                continue
            self._pending.popleft()
            return

    def _resend(self) -> None:
        """Send every pending chunk again, in order, once those stored out of order are gone."""
        self._resent = True
        self.abandon(Deadline(self._wait))
        time.sleep(_RESEND_PAUSE)  # the election takes a moment
        self._store._delete_chunks_after(self._subject, self._acked_seq, self._wait)
        chunks = [data for _, data in self._pending]
        self._pending.clear()
        for data in chunks:
            self._pending.append((self._publish(self._subject, data, timeout=self._wait), data))


class _Collect:
    """A writer keeping the chunks (for :meth:`ObjectStore.get`)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.parts.append(data)


class ObjectStore:
    """A handle on one Object Store bucket; made by ``ctx.object_store(bucket)`` and friends.

    Thread-safe: every call works on its own consumer or request. Calls take
    ``timeout``: the seconds each server round trip may take (an API call,
    one chunk's ack, one chunk's arrival), default the context's; a
    transfer as a whole takes as long as its size needs.

    Attributes:
        bucket: the bucket name.
        stream_name: its stream, ``OBJ_<bucket>``.
    """

    def __init__(self, ctx: JetStreamContext, bucket: str, stream: Stream) -> None:
        self._ctx = ctx
        self.bucket = bucket
        self.stream_name = stream.name
        self._stream = stream
        info = stream.cached_info
        self._direct = bool(info is not None and info.config.allow_direct)
        # Besides the encoded name, the longest line: a direct get of its meta
        # (HPUB <api>.DIRECT.GET.<stream>.$O.<bucket>.M.<name> <reply> <sizes>).
        client = ctx.client
        subject = len(f"{ctx.api_prefix}.DIRECT.GET.{stream.name}.") + len(self._meta_subject(""))
        reply = len(client.new_inbox()) + _REPLY_COUNTER
        size = len(str(client.max_payload))
        self._line_overhead = len("HPUB ") + subject + 1 + reply + 2 * (1 + size) + len("\r\n")

    def _chunk_subject(self, nuid: str) -> str:
        return f"$O.{self.bucket}.C.{nuid}"

    @property
    def max_name_length(self) -> int:
        """The longest object name this handle sends, in bytes (UTF-8).

        A name goes into its meta subject base64-encoded (4 bytes for every
        3), in protocol lines with the bucket's subject prefix, a reply inbox
        and sizes; the server drops a connection whose line passes its
        ``max_control_line`` (:attr:`Client.max_control_line`, 4,096 bytes by
        default), so names may use about 2,900 bytes with the defaults. A
        longer name raises :class:`~jetstream_sync.errors.LimitExceededError`
        before anything is sent.
        """
        room = self._ctx.client.max_control_line - self._line_overhead
        return room // 4 * 3

    def _check_name(self, name: str) -> None:
        """Refuse a name that is not a non-empty ``str`` or does not fit a protocol line."""
        check_object_name(name)
        size = len(name.encode())
        if size > self.max_name_length:
            encoded = len(encode_name(name))
            raise LimitExceededError(
                "object name", size, self._ctx.client.max_control_line,
                f"base64-encoded ({encoded} bytes) into a subject, it makes a protocol line of "
                f"{encoded + self._line_overhead} bytes; names up to {self.max_name_length} "
                "bytes fit",
            )  # fmt: skip

    def _meta_subject(self, name: str) -> str:
        return f"$O.{self.bucket}.M.{encode_name(name)}"

    # -- meta ---------------------------------------------------------------------

    def _last_meta(self, subject: str, timeout: float | None) -> RawStreamMsg:
        """The newest meta on ``subject``: by direct get (any replica) when the stream allows.

        A bucket whose stream no longer allows direct get (changed by another
        client) is read through the stream leader instead.
        """
        try:
            if self._direct:
                try:
                    return self._stream.direct_get_last_for_subject(subject, timeout=timeout)
                except DirectGetNotAllowedError:
                    self._direct = False
            return self._stream.get_last_msg_for_subject(subject, timeout=timeout)
        except StreamNotFoundError as exc:
            raise ObjectStoreNotFoundError(
                404, 10059, f"object store {self.bucket!r} not found"
            ) from exc

    def get_info(
        self, name: str, show_deleted: bool = False, timeout: float | None = None
    ) -> ObjectInfo:
        """The info of object ``name`` (``mtime``: when its meta was stored).

        Args:
            show_deleted: return the info of a deleted object too.

        Raises:
            ObjectNotFoundError: no such object (or deleted, without ``show_deleted``).
            BadObjectMetaError: the stored meta is not an object's info.
            InvalidObjectNameError: ``name`` is empty or not a ``str``.
        """
        return self._info_and_seq(name, show_deleted, timeout)[0]

    def _info_and_seq(
        self, name: str, show_deleted: bool, timeout: float | None
    ) -> tuple[ObjectInfo, int]:
        """``get_info``, with the stream sequence of the meta read."""
        self._check_name(name)
        try:
            raw = self._last_meta(self._meta_subject(name), timeout)
        except MessageNotFoundError:
            raise ObjectNotFoundError(f"object {name!r} not found in {self.bucket!r}") from None
        try:
            info = ObjectInfo.from_api(json.loads(raw.data), mtime=raw.time)
        except (ValueError, TypeError) as exc:
            raise BadObjectMetaError(f"the meta of object {name!r} is not valid: {exc}") from exc
        if info.deleted and not show_deleted:
            raise ObjectNotFoundError(f"object {name!r} in {self.bucket!r} was deleted")
        return info, raw.seq

    def _find(self, name: str, timeout: float | None) -> tuple[ObjectInfo | None, int]:
        """The info of ``name`` (deleted ones included) and its meta's stream sequence.

        ``(None, 0)`` when the name has no meta: a publish expecting sequence 0
        on the name's subject stores only while there still is none.
        """
        try:
            return self._info_and_seq(name, True, timeout)
        except ObjectNotFoundError:
            return None, 0

    def _publish_meta(
        self,
        info: ObjectInfo,
        timeout: float | None,
        expected_last_subject_seq: int | None = None,
    ) -> ObjectInfo:
        """Store ``info`` as the (rolled up) meta of its name; return it with ``mtime`` now."""
        body = json.dumps(info.stored_json(), separators=(",", ":")).encode()
        self._ctx.publish(
            self._meta_subject(info.name), body, headers=_ROLLUP, timeout=timeout,
            expected_last_subject_seq=expected_last_subject_seq,
        )  # fmt: skip
        return attrs.evolve(info, mtime=datetime.now(UTC))

    def _purge_chunks(self, nuid: str, timeout: float | None) -> None:
        """Purge the chunks of ``nuid`` (see :meth:`_purge_through_outage`)."""
        self._purge_through_outage(self._chunk_subject(nuid), None, timeout)

    def _purge_through_outage(self, subject: str, below: int | None, timeout: float | None) -> None:
        """Purge ``subject`` (below sequence ``below`` when given), trying again through an
        outage for ``timeout`` (at least ``_PURGE_OUTAGE`` seconds).

        A purge names one object's chunks or one name's old meta, so sending it
        again is harmless; a request sent while the stream elects a leader gets
        no reply at all.

        Raises:
            TimeoutError, ConnectionLostError, APIError: what the last try raised.
        """
        deadline = Deadline(max(self._ctx.timeout if timeout is None else timeout, _PURGE_OUTAGE))
        while True:
            try:
                left = max(deadline.remaining(), 0.001)
                self._stream.purge(subject=subject, seq=below, timeout=min(_PURGE_TRY, left))
                return
            except (TimeoutError, ConnectionLostError, NoRespondersError, APIError) as exc:
                if isinstance(exc, APIError) and exc.code != 503:
                    raise
                if deadline.remaining() <= _PURGE_PAUSE:
                    raise
                if not isinstance(exc, TimeoutError):
                    time.sleep(_PURGE_PAUSE)  # refused at once: the election takes a moment

    # -- put ------------------------------------------------------------------------

    def put(
        self,
        name: str,
        data: Data,
        description: str | None = None,
        headers: Mapping[str, str | Sequence[str]] | None = None,
        metadata: Mapping[str, str] | None = None,
        chunk_size: int | None = None,
        timeout: float | None = None,
    ) -> ObjectInfo:
        """Store ``data`` as object ``name``, replacing what the name held.

        A file is read chunk by chunk, never whole; at most about 8 MiB of
        chunks wait for their acks at once. The meta is stored once every
        chunk is, over exactly the version the put read (another put of the
        name meanwhile, by any client, makes it read the newer version and
        store over that); then the chunks of the version it replaced are
        purged. Chunks that find no stream leader (a step-down) are sent
        again, in order, for up to twice ``timeout``. If anything fails, the chunks
        sent so far are purged and the name keeps what it held: the purge is
        tried again for at least 30 s (through a stream leader election); if
        it still fails, a note on the raised exception names the chunks' subject.

        Args:
            name: the object's name (any non-empty ``str``).
            data: ``bytes``-like, ``str`` (UTF-8), a binary file (anything
                with ``readinto`` or ``read``) or an iterable (a generator) of
                bytes-like pieces of any sizes, cut into chunks as they come.
            description: stored in the object's meta.
            headers: stored in the object's meta.
            metadata: stored in the object's meta.
            chunk_size: bytes per chunk (at most the server's max payload);
                ``None``: 128 KiB, or the max payload when the server's is smaller.
            timeout: seconds each round trip may take.

        Returns:
            The object's info (``mtime`` is the local time of the put).

        Raises:
            InvalidObjectNameError, TypeError, ValueError: bad input, raised
                before anything is sent.
            ObjectLinkError: ``name`` is a link (delete it first), or became
                one while the chunks were sent.
            BlockingIOError: ``data`` is a non-blocking file that had no data
                ready (its read returned ``None``); the chunks sent are removed.
            APIError: the server refused a chunk or the meta (bucket sealed,
                full...).
            ObjectStoreNotFoundError: the bucket was deleted (before or during the put).
        """
        self._check_name(name)
        max_payload = int(self._ctx.client.server_info.get("max_payload", 1024 * 1024))
        if chunk_size is None:
            chunk_size = min(DEFAULT_CHUNK_SIZE, max_payload)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise TypeError(f"chunk_size must be an int, got {type(chunk_size).__name__}")
        if not 0 < chunk_size <= max_payload:
            raise ValueError(f"chunk_size must be in 1..{max_payload} (max payload)")
        meta = ObjectMeta(name=name, description=description, headers=headers, metadata=metadata)
        chunks = _chunks(data, chunk_size)
        existing, seq = self._find(name, timeout)
        _refuse_link(existing)
        nuid = NUID.next()
        wait = self._ctx.timeout if timeout is None else timeout
        try:
            size, count, digest = self._put_chunks(
                self._chunk_subject(nuid), chunks, chunk_size, wait
            )
            info = ObjectInfo(
                name=name, bucket=self.bucket, nuid=nuid, size=size, chunks=count,
                digest=digest, description=meta.description, headers=meta.headers,
                metadata=meta.metadata,
                options=ObjectMetaOptions(max_chunk_size=chunk_size),
            )  # fmt: skip
            info, existing = self._replace_meta(info, existing, seq, timeout)
        except BaseException as exc:
            try:
                self._purge_chunks(nuid, timeout)
            except StreamNotFoundError:
                pass  # the bucket was deleted, and its chunks with it
            except NatsError as purge_error:  # the put's failure is what is raised
                exc.add_note(
                    f"chunks of the failed put may remain under {self._chunk_subject(nuid)!r}"
                    f" (their purge failed: {purge_error}); purge that subject of the stream"
                )
            raise
        if existing is not None and not existing.deleted and _has_literal_nuid(existing):
            self._purge_chunks(existing.nuid, timeout)
        return info

    def _replace_meta(
        self, info: ObjectInfo, existing: ObjectInfo | None, seq: int, timeout: float | None
    ) -> tuple[ObjectInfo, ObjectInfo | None]:
        """Store a put's meta over exactly the version read; return it and the version replaced.

        The meta is stored only if the name still holds the version read (at
        stream sequence ``seq``); when another put (of any client) stored one
        meanwhile, the newer version is read and the store tried again. So each
        version's chunks are purged by the put that replaced it, and concurrent
        puts of one name leave no chunks behind that no meta names.

        Raises:
            ObjectLinkError: the name became a link meanwhile.
        """
        while True:
            try:
                return self._publish_meta(info, timeout, expected_last_subject_seq=seq), existing
            except WrongLastSequenceError:
                existing, seq = self._find(info.name, timeout)
                _refuse_link(existing)

    def _put_chunks(
        self, subject: str, chunks: Iterator[bytes | memoryview], chunk_size: int, wait: float
    ) -> tuple[int, int, str]:
        """Publish every chunk with a bounded window of pending acks; wait for all.

        On a failure, the acks still pending are awaited (so a purge after it
        finds every chunk that was stored) before the error is raised.
        """
        sender = _ChunkSender(self, subject, _window(chunk_size), wait)
        sha = hashlib.sha256()
        size = count = 0
        try:
            for chunk in chunks:
                sha.update(chunk)
                sender.send(bytes(chunk))  # kept until acked: a leader change makes it go again
                size += len(chunk)
                count += 1
            sender.drain()
        except BaseException:
            sender.abandon()
            raise
        return size, count, digest_value(sha.digest())

    def _delete_chunks_after(self, subject: str, seq: int, wait: float) -> None:
        """Delete the messages on ``subject`` stored after stream sequence ``seq``.

        Raises:
            ObjectStoreNotFoundError: the bucket was deleted.
        """
        while True:
            try:
                last = self._stream.get_last_msg_for_subject(subject, timeout=wait)
            except MessageNotFoundError:
                return
            except StreamNotFoundError as exc:
                raise ObjectStoreNotFoundError(
                    404, 10059, f"object store {self.bucket!r} not found"
                ) from exc
            if last.seq <= seq:
                return
            self._stream.delete_msg(last.seq, timeout=wait)

    # -- get ------------------------------------------------------------------------

    def _resolve(self, name: str, timeout: float | None) -> tuple[ObjectStore, ObjectInfo]:
        """The store and info holding ``name``'s bytes: a link to an object is followed."""
        info = self.get_info(name, timeout=timeout)
        link = info.link
        if link is None:
            return self, info
        if not link.name:
            raise LinkIsABucketError(f"object {name!r} links to bucket {link.bucket!r}")
        store = self if link.bucket == self.bucket else self._ctx.object_store(link.bucket)
        target = store.get_info(link.name, timeout=timeout)
        if target.is_link:
            raise ObjectLinkError(f"object {name!r} links to {link.name!r}, itself a link")
        return store, target

    def get_into(self, name: str, writer: Writable, timeout: float | None = None) -> ObjectInfo:
        """Write object ``name``'s bytes to ``writer`` chunk by chunk; return its info.

        Follows a link to an object (in this bucket or another). The SHA-256
        is computed as the chunks arrive and checked at the end, with the
        size and chunk count; on a mismatch what was written is not the
        object (the error says so). At most about 8 MiB is requested ahead.
        When another put replaces the object before ``writer`` got a byte,
        the new version is read instead.

        Args:
            writer: anything with ``write(bytes)``.
            timeout: seconds to wait for each chunk (and each API call).

        Raises:
            ObjectNotFoundError: no such object.
            ObjectStoreNotFoundError: the bucket does not exist, or was deleted
                while it was read.
            LinkIsABucketError: ``name`` links to a whole bucket.
            DigestMismatchError, ObjectSizeMismatchError: the bytes read are
                not those the meta describes, or (size mismatch) its chunks are
                no longer stored (purged while the meta stayed).
            ObjectReplacedError: another put replaced the object after
                ``writer`` got part of it (its chunks are gone).
            BadObjectMetaError: the meta has no ``nuid`` (or one that is not a
                literal subject token) or a bad digest form.
            TimeoutError: a chunk did not arrive within ``timeout`` (and the
                object was not replaced or deleted meanwhile).
        """
        return self._get(name, writer, timeout, None)

    def _get(
        self,
        name: str,
        writer: Writable,
        timeout: float | None,
        restart: Callable[[], None] | None,
    ) -> ObjectInfo:
        """Read ``name`` into ``writer``, again when it is replaced under the read.

        A read whose version was replaced starts over with the new one when
        the writer got nothing yet, or when ``restart`` (which empties the
        writer) is given; at most :data:`_REREADS` times.
        """
        rereads = 0
        while True:
            store, info = self._resolve(name, timeout)
            try:
                return store._read_chunks(info, writer, timeout)
            except ObjectReplacedError as exc:
                rereads += 1
                if rereads > _REREADS or (exc.written and restart is None):
                    raise
                if restart is not None:
                    restart()

    def _read_chunks(self, info: ObjectInfo, writer: Writable, timeout: float | None) -> ObjectInfo:
        _check_nuid(info)
        want = decode_digest(info.digest) if info.digest is not None else None
        sha = hashlib.sha256()
        size = count = 0
        more = 0  # chunks stored after the last one read
        if info.chunks:
            chunk_size = (info.options.max_chunk_size if info.options else None) or (
                -(-info.size // info.chunks) or DEFAULT_CHUNK_SIZE
            )
            wait = self._ctx.timeout if timeout is None else timeout
            oc = self._ctx.ordered_consumer(
                self.stream_name, filter_subjects=[self._chunk_subject(info.nuid)], timeout=wait
            )
            try:
                # Heartbeats at a quarter of the wait for a chunk (see list()).
                heartbeat = min(_LISTING_HEARTBEAT, wait / 4)
                pulls = oc.messages(max_messages=_window(chunk_size), heartbeat=heartbeat)
                with oc, pulls as msgs:
                    while count < info.chunks:
                        msg = self._next_chunk(msgs, info, size, wait)
                        data = msg.data
                        sha.update(data)
                        _write_all(writer, data)
                        size += len(data)
                        count += 1
                        more = msg.metadata.num_pending
                        if more == 0:
                            break
            except StreamNotFoundError as exc:  # the reading consumer's stream: the bucket
                raise ObjectStoreNotFoundError(
                    404, 10059, f"object store {self.bucket!r} not found"
                ) from exc
        if count != info.chunks or size != info.size or more:
            raise ObjectSizeMismatchError(
                f"object {info.name!r}: read {count} chunks, {size} bytes"
                f"{f' ({more} more stored)' if more else ''}; its meta says {info.chunks} "
                f"chunks, {info.size} bytes (what was written is not the object)"
            )
        if want is not None and sha.digest() != want:
            raise DigestMismatchError(
                f"object {info.name!r}: the bytes read hash to {digest_value(sha.digest())}, "
                f"its meta says {info.digest} (what was written is not the object)"
            )
        return info

    def _next_chunk(
        self, msgs: OrderedMessageIterator, info: ObjectInfo, written: int, wait: float
    ) -> Msg:
        """The next chunk of ``info``'s version, waiting up to ``wait`` seconds.

        A put that replaces the object (or a delete) purges its chunks, after
        which they never come: while none arrives, the name's meta is read
        every half second to tell that from a slow transfer, and so is whether
        the stream still holds any chunk of this version (a purge of the
        chunks alone leaves the meta as it was).

        Raises:
            ObjectReplacedError: the name holds another version now.
            ObjectNotFoundError: the object was deleted meanwhile.
            ObjectSizeMismatchError: its chunks are no longer stored.
            TimeoutError: no chunk within ``wait`` and the object is unchanged.
        """
        deadline = Deadline(wait)
        while True:
            try:
                return msgs.next(timeout=max(deadline.slice(), 0.001))
            except TimeoutError:
                if deadline.expired():
                    raise TimeoutError(
                        f"object {info.name!r}: no chunk within {wait:g} s"
                    ) from None
            try:  # within the chunk's own wait
                current, _ = self._find(info.name, max(deadline.remaining(), 0.001))
            except (TimeoutError, ConnectionLostError, NoRespondersError):
                continue  # the meta cannot be read either: keep waiting for the chunk
            if current is None or current.deleted:
                raise ObjectNotFoundError(
                    f"object {info.name!r} in {self.bucket!r} was deleted while it was read"
                )
            if current.nuid != info.nuid:
                raise ObjectReplacedError(
                    f"object {info.name!r} in {self.bucket!r} was replaced while it was read "
                    f"({written} bytes of the old version read)", written,
                )  # fmt: skip
            if not self._chunks_stored(info.nuid, deadline):
                raise ObjectSizeMismatchError(
                    f"object {info.name!r} in {self.bucket!r}: its chunks after the first "
                    f"{written} bytes are no longer stored (purged); its meta says "
                    f"{info.size} bytes"
                )

    def _chunks_stored(self, nuid: str, deadline: Deadline) -> bool:
        """Whether the stream holds a chunk of version ``nuid`` (its leader says); True when
        it does not answer in time (the chunk is waited for, as before asking)."""
        subject = self._chunk_subject(nuid)
        try:
            info = self._stream.info(
                subjects_filter=subject, timeout=max(deadline.remaining(), 0.001)
            )
        except (TimeoutError, ConnectionLostError, NoRespondersError):
            return True
        return bool(info.state.subjects)

    def get(self, name: str, timeout: float | None = None) -> bytes:
        """Object ``name``'s bytes, checked as :meth:`get_into` checks them.

        Holds the whole object in memory: prefer :meth:`get_into` for big ones.
        An object replaced while it is read is read again, whatever was read of
        it (up to three times).

        Raises:
            As :meth:`get_into`.
        """
        out = _Collect()
        self._get(name, out, timeout, out.parts.clear)
        return b"".join(out.parts)

    # -- changes ----------------------------------------------------------------

    def delete(self, name: str, timeout: float | None = None) -> None:
        """Delete object ``name``: its meta is marked deleted, its chunks purged.

        Deleting a deleted object does nothing. Only the version read is deleted: when
        the name is put again between the read and the delete, nothing is deleted.

        Raises:
            ObjectNotFoundError: no object of that name ever existed.
            WrongLastSequenceError: the object was replaced meanwhile; nothing was deleted.
            BadObjectMetaError: its meta has no ``nuid``, or one that is not a literal
                subject token (a wildcard would name other objects' chunks).
        """
        info, seq = self._info_and_seq(name, True, timeout)
        if info.deleted:
            return
        _check_nuid(info)
        gone = attrs.evolve(info, deleted=True, size=0, chunks=0, digest=None, mtime=None)
        # Only the version read: a put of the name meanwhile makes this refuse.
        self._publish_meta(gone, timeout, expected_last_subject_seq=seq)
        self._purge_chunks(info.nuid, timeout)

    def update_meta(self, name: str, meta: ObjectMeta, timeout: float | None = None) -> ObjectInfo:
        """Change object ``name``'s name, description, headers and metadata.

        ``meta.options`` is ignored: the chunks, size and link stay. A new
        ``meta.name`` renames the object (links and bucket links too); the old
        name's meta is then purged, tried again through a leader election. When
        another put of the name comes between the read and the write, the
        update is made on the new version.

        Raises:
            ObjectNotFoundError: no such object, or it was deleted.
            ObjectAlreadyExistsError: the new name is taken by an object not deleted.
        """
        if not isinstance(meta, ObjectMeta):
            raise TypeError(f"meta must be an ObjectMeta, not {type(meta).__name__}")
        renamed = meta.name != name
        while True:
            info, seq = self._info_and_seq(name, False, timeout)
            # The meta is stored only over the version read (the new name's
            # when renaming): a put meanwhile makes the update start again.
            expected = seq
            if renamed:
                taken, expected = self._find(meta.name, timeout)
                if taken is not None and not taken.deleted:
                    raise ObjectAlreadyExistsError(
                        f"object {meta.name!r} exists in {self.bucket!r}"
                    )
            info = attrs.evolve(
                info, name=meta.name, description=meta.description, headers=meta.headers,
                metadata=meta.metadata, mtime=None,
            )  # fmt: skip
            try:
                info = self._publish_meta(info, timeout, expected_last_subject_seq=expected)
            except WrongLastSequenceError:
                continue
            if renamed:  # the old name's meta up to the version renamed, not a newer one
                self._purge_through_outage(self._meta_subject(name), seq + 1, timeout)
            return info

    def _link(self, name: str, link: ObjectLink, timeout: float | None) -> ObjectInfo:
        self._check_name(name)
        info = ObjectInfo(
            name=name, bucket=self.bucket, nuid=NUID.next(),
            options=ObjectMetaOptions(link=link),
        )  # fmt: skip
        while True:
            existing, seq = self._find(name, timeout)
            if existing is not None and not existing.deleted and not existing.is_link:
                raise ObjectAlreadyExistsError(
                    f"object {name!r} exists in {self.bucket!r}: a link cannot replace it"
                )
            try:  # only over the version checked: a put meanwhile makes it check again
                return self._publish_meta(info, timeout, expected_last_subject_seq=seq)
            except WrongLastSequenceError:
                continue

    def add_link(self, name: str, obj: ObjectInfo, timeout: float | None = None) -> ObjectInfo:
        """Make ``name`` a link to the object ``obj`` describes (in any bucket).

        A get of ``name`` reads the linked object. The name may be new, a
        deleted object's or another link's (replaced); an object put under it
        while the link is made is never replaced.

        ``obj``'s object is read again first (one request, and one for its
        bucket when it is another): an info read before a delete links to nothing.

        Raises:
            ObjectLinkError: ``obj``'s object is deleted or is itself a link.
            ObjectNotFoundError: ``obj``'s object is gone (its meta purged).
            ObjectStoreNotFoundError: ``obj``'s bucket is gone.
            ObjectAlreadyExistsError: ``name`` is an object that is not deleted.
        """
        if not isinstance(obj, ObjectInfo):
            raise TypeError(f"obj must be an ObjectInfo, not {type(obj).__name__}")
        self._check_name(name)
        _refuse_link_target(obj)
        # ``obj`` may have been read before its object was deleted or made a link.
        store = self if obj.bucket == self.bucket else self._ctx.object_store(obj.bucket, timeout)
        _refuse_link_target(store.get_info(obj.name, show_deleted=True, timeout=timeout))
        return self._link(name, ObjectLink(bucket=obj.bucket, name=obj.name), timeout)

    def add_bucket_link(
        self, name: str, bucket: ObjectStore | str, timeout: float | None = None
    ) -> ObjectInfo:
        """Make ``name`` a link to a whole bucket (a get of it raises ``LinkIsABucketError``).

        Raises:
            ObjectAlreadyExistsError: ``name`` is an object that is not deleted.
        """
        target = bucket.bucket if isinstance(bucket, ObjectStore) else check_bucket(bucket)
        return self._link(name, ObjectLink(bucket=target), timeout)

    # -- listing and watching ---------------------------------------------------

    def watch(
        self,
        include_history: bool = False,
        ignore_deletes: bool = False,
        updates_only: bool = False,
        timeout: float | None = None,
    ) -> ObjectWatcher:
        """Watch the bucket's objects: the info of each, then of each change.

        The watcher yields the newest info of every object (every stored one
        with ``include_history``), then ``None`` once, then each change as it
        is stored. Stop it with ``stop()`` or a ``with`` block.

        Args:
            include_history: start from every meta stored, not the newest of each name.
            ignore_deletes: skip deleted objects.
            updates_only: only changes from now on (no initial values, no ``None``).
            timeout: seconds for the set-up calls.
        """
        return ObjectWatcher(self._ctx, self, include_history, ignore_deletes, updates_only,
                             timeout)  # fmt: skip

    def list(self, show_deleted: bool = False, timeout: float | None = None) -> list[ObjectInfo]:
        """The info of every object in the bucket (an empty bucket gives ``[]``).

        Args:
            show_deleted: include deleted objects.
            timeout: seconds to wait for each info.
        """
        out: list[ObjectInfo] = []
        limit = check_timeout("timeout", timeout, self._ctx.timeout)
        # Heartbeats at a quarter of the wait for each info: a pull the server dropped
        # without a word is noticed, and the consumer replaced, within it.
        watcher = ObjectWatcher(self._ctx, self, False, not show_deleted, False, limit,
                                heartbeat=min(_LISTING_HEARTBEAT, limit / 4))  # fmt: skip
        with watcher:
            while True:
                info = watcher.next(timeout=limit)
                if info is None:
                    return out
                out.append(info)

    # -- the bucket --------------------------------------------------------------

    def status(self, timeout: float | None = None) -> ObjectStoreStatus:
        """The bucket's status (size, TTL, replicas, sealed...).

        Raises:
            ObjectStoreNotFoundError: the bucket was deleted.
        """
        try:
            info = self._stream.info(timeout=timeout)
        except StreamNotFoundError as exc:
            raise ObjectStoreNotFoundError(
                404, 10059, f"object store {self.bucket!r} not found"
            ) from exc
        return ObjectStoreStatus.from_stream_info(self.bucket, info)

    def seal(self, timeout: float | None = None) -> ObjectStoreStatus:
        """Seal the bucket: no change is accepted afterwards (it cannot be undone).

        Returns:
            The sealed bucket's status.
        """
        cfg = self.status(timeout).stream_info.config
        stream = self._ctx.update_stream(merge_config(type(cfg), cfg, {"sealed": True}),
                                         timeout=timeout)  # fmt: skip
        info = stream.cached_info or stream.info(timeout=timeout)
        return ObjectStoreStatus.from_stream_info(self.bucket, info)

    def __repr__(self) -> str:
        return f"<ObjectStore {self.bucket!r}>"
