"""``KeyWatcher``: a bucket's entries as they change, on the public ordered consumer.

The ordered consumer delivers each stream message once, in order, and
recreates its server-side consumer after a reconnect, a server restart,
missed heartbeats or a deletion, starting at the last delivered stream
sequence plus one: the watcher resumes right after the last revision it
handed out, losing and repeating nothing (ADR-8 "Watch"). It runs on the
watcher's own thread (JetStream's watch feed), so a reset is made as soon
as the server drops the consumer, not at the next call. A reset before the
initial values are all in leaves them each key's latest revision: the feed
keeps back the rest of them until their end and drops the superseded ones.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self

from .._seam import Deadline, check_timeout
from ..errors import (
    BucketNotFoundError,
    IteratorClosedError,
    NatsError,
    StreamNotFoundError,
    TimeoutError,
)
from ..jetstream._seam import WatchFeed, initial_end, stored_bounds
from ..jetstream.consumer_config import OrderedConsumerConfig
from ..jetstream.enums import DeliverPolicy
from .entry import KeyValueEntry, KeyValueOp, entry_from_delivered

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext
    from ..jetstream.info import StreamInfo
    from ..msg import Msg

__all__ = ["KeyWatcher"]

# Pull sizes of the underlying iterator: big batches keep a large initial
# delivery fast; the heartbeat notices a silent server (or a pull it dropped)
# within ~2 x 5 s.
_MAX_MESSAGES = 1000
_EXPIRES = 30.0
HEARTBEAT = 5.0

_serial = itertools.count(1)


class KeyWatcher:
    """The entries of watched keys: first the current ones, then ``None``, then updates.

    Made by :meth:`KeyValue.watch`. Iterate it (blocks; ends after
    :meth:`stop`) or call :meth:`next`. ``None`` comes exactly once, right
    after the last entry present at the start (at once when there are none,
    or with ``updates_only``). Every revision written after the last one
    handed out is handed out once, in order, even when the server-side
    consumer is lost meanwhile: the watcher follows the bucket on a thread
    of its own (``jetstream_sync-watch-N``) and holds up to 10,000 entries
    its reader has not taken yet. Use it in a ``with`` block, or call
    :meth:`stop`: it holds a server-side consumer, a subscription and that
    thread. One reader at a time; :meth:`stop` is safe from any thread.
    """

    def __init__(
        self,
        ctx: JetStreamContext,
        stream: str,
        bucket: str,
        prefix_len: int,
        subjects: list[str],
        *,
        timeout: float | None,
        heartbeat: float = HEARTBEAT,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        listing: bool = False,
        resume_from_revision: int | None = None,
    ) -> None:
        self.bucket = bucket
        self._prefix_len = prefix_len
        self._ignore_deletes = ignore_deletes
        self._timeout = check_timeout("timeout", timeout, ctx.timeout)
        self._lock = threading.Lock()
        self._stopped = False
        fields: dict[str, Any] = {"filter_subjects": subjects, "headers_only": meta_only or None}
        self._stream = ctx.stream_no_info(stream)
        info = None if listing and not updates_only else self._stream_info()
        self._created = None if info is None else info.created
        try:
            if info is not None and updates_only:
                # Start after the last stored message, not at "new": a consumer
                # recreated before the first update must not miss one.
                fields.update(
                    deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                    opt_start_seq=info.state.last_seq + 1,
                )
                end = 0
            else:
                end = initial_end(ctx.stream_no_info(stream), subjects, self._timeout)
                if resume_from_revision is not None:
                    fields.update(
                        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                        opt_start_seq=resume_from_revision,
                    )
                    if end < resume_from_revision:
                        end = 0  # nothing stored from there on: the marker comes first
                else:
                    fields["deliver_policy"] = (
                        DeliverPolicy.ALL if include_history else DeliverPolicy.LAST_PER_SUBJECT
                    )
        except StreamNotFoundError as exc:
            raise self._gone(exc) from None
        self._consumer = ctx.ordered_consumer(
            stream, OrderedConsumerConfig(**fields), timeout=self._timeout
        )
        try:
            messages = self._consumer.messages(
                max_messages=_MAX_MESSAGES, expires=_EXPIRES, heartbeat=heartbeat
            )
        except StreamNotFoundError as exc:
            self._consumer.close()
            raise self._gone(exc) from None
        except BaseException:
            self._consumer.close()
            raise
        self._feed: WatchFeed[KeyValueEntry] = WatchFeed(
            messages, self._entry, end, f"jetstream_sync-watch-{next(_serial)}",
            lambda: stored_bounds(self._stream, subjects, self._timeout),
            last_per_subject=fields["deliver_policy"] is DeliverPolicy.LAST_PER_SUBJECT,
            same_stream=None if listing else self._check_same_bucket,
        )  # fmt: skip

    def _stream_info(self) -> StreamInfo:
        """The bucket's stream info; its ``created`` tells a bucket made again apart."""
        try:
            return self._stream.info(timeout=self._timeout)
        except StreamNotFoundError as exc:
            raise self._gone(exc) from None

    def _check_same_bucket(self) -> None:
        """Raise when the bucket was deleted and made again since the watch began: its
        revisions start at 1 again, and the new link resumed after the old last one."""
        try:
            created = self._stream_info().created
        except BucketNotFoundError:
            raise
        except NatsError:  # unanswered now (an election, a lost link): the watch goes on
            return
        if created != self._created:
            raise BucketNotFoundError(
                404, 10059, f"bucket {self.bucket!r} not found: it was deleted and made again"
            )

    def _entry(self, msg: Msg) -> KeyValueEntry | None:
        """The entry a message holds; ``None`` for a marker left out by ``ignore_deletes``."""
        entry = entry_from_delivered(self.bucket, self._prefix_len, msg)
        if self._ignore_deletes and entry.operation is not KeyValueOp.PUT:
            return None
        return entry

    def next(self, timeout: float | None = None) -> KeyValueEntry | None:
        """The next entry, or ``None`` once when the initial entries are all delivered.

        Args:
            timeout: seconds to wait; ``None`` waits until an entry comes or
                the watcher is stopped; ``0`` takes only what is already here.

        Raises:
            TimeoutError: nothing came within ``timeout``.
            BucketNotFoundError: the bucket was deleted (or deleted and made
                again: the new one's revisions start over).
            IteratorClosedError: the watcher was stopped.
            ConnectionClosedError: the client was closed.
            ForkedClientError: called in a process forked after the watcher was made.
        """
        if timeout == 0 and not isinstance(timeout, bool):
            deadline: Deadline | None = Deadline(0.0)
        else:
            deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        try:
            return self._feed.take(deadline)
        except StreamNotFoundError as exc:
            raise self._gone(exc) from None

    def _gone(self, exc: StreamNotFoundError) -> BucketNotFoundError:
        if isinstance(exc, BucketNotFoundError):
            return exc
        return BucketNotFoundError(exc.code, exc.err_code, f"bucket {self.bucket!r} not found")

    def initial(self) -> list[KeyValueEntry]:
        """The entries before the ``None`` marker (the first call only).

        Raises:
            TimeoutError: the delivery stalled for longer than the watch's timeout.
        """
        out: list[KeyValueEntry] = []
        while True:
            try:
                entry = self.next(self._timeout)
            except TimeoutError:
                raise TimeoutError("the initial entries stopped arriving") from None
            if entry is None:
                return out
            out.append(entry)

    def stop(self) -> None:
        """Stop watching and delete the server-side consumer. Safe from any thread.

        Raises:
            ForkedClientError: called in a process forked after the watcher was made.
        """
        self._feed.check_usable()
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._feed.stop()
        self._consumer.close()

    def __iter__(self) -> Iterator[KeyValueEntry | None]:
        """The entries as they come (blocks); ends once the watcher is stopped."""
        next_entry = self.next
        try:
            while True:
                yield next_entry()
        except IteratorClosedError:
            return

    def __next__(self) -> KeyValueEntry | None:
        try:
            return self.next()
        except IteratorClosedError:
            raise StopIteration from None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<KeyWatcher {self.bucket!r}>"
