"""``ObjectWatcher``: an Object Store bucket's object infos, then each change.

An ordered consumer over ``$O.<bucket>.M.>`` (the meta subjects): deliver
last per subject for the current infos, every one with ``include_history``,
new ones only with ``updates_only``. It runs on JetStream's watch feed (a
thread of the watcher's own), so a lost consumer is replaced at once.
``None`` marks the end of the initial values (not given with
``updates_only``): right after the meta at the newest meta sequence the
stream leader reported at the start, or at once for an empty bucket.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING

from .._seam import Deadline, check_timeout, logger
from ..errors import IteratorClosedError, ObjectStoreNotFoundError, StreamNotFoundError
from ..jetstream._seam import WatchFeed, initial_end, stored_bounds
from ..jetstream.enums import DeliverPolicy
from .config import ObjectInfo

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext
    from ..msg import Msg
    from .store import ObjectStore

__all__ = ["ObjectWatcher"]

log = logger("object_store")

_PREFETCH = 256
_serial = itertools.count(1)


class ObjectWatcher:
    """Yields :class:`ObjectInfo` of the watched bucket; ``None`` once after the initial ones.

    Made by :meth:`ObjectStore.watch`. Iterate it (ends when stopped) or call
    :meth:`next`; :meth:`stop` (or leaving a ``with`` block) ends it and
    deletes its server-side consumer. Survives reconnects, server restarts
    and the deletion of its consumer (it rides on the ordered consumer, on a
    thread of its own: ``jetstream_sync-object-watch-N``). One reader at a time.

    Attributes:
        bucket: the bucket watched.
    """

    def __init__(
        self,
        ctx: JetStreamContext,
        store: ObjectStore,
        include_history: bool,
        ignore_deletes: bool,
        updates_only: bool,
        timeout: float | None,
        heartbeat: float | None = None,
    ) -> None:
        """``heartbeat``: the pulls' idle heartbeat (None: the iterator's default)."""
        timeout = check_timeout("timeout", timeout, ctx.timeout)
        self.bucket = store.bucket
        self._ignore_deletes = ignore_deletes
        all_meta = f"$O.{store.bucket}.M.>"
        end = None  # no marker
        if updates_only:
            policy = DeliverPolicy.NEW
        else:
            try:
                end = initial_end(ctx.stream_no_info(store.stream_name), [all_meta], timeout)
            except StreamNotFoundError as exc:
                raise self._gone(exc) from None
            policy = DeliverPolicy.ALL if include_history else DeliverPolicy.LAST_PER_SUBJECT
        self._oc = ctx.ordered_consumer(
            store.stream_name, filter_subjects=[all_meta], deliver_policy=policy, timeout=timeout
        )
        try:
            messages = self._oc.messages(max_messages=_PREFETCH, heartbeat=heartbeat)
        except StreamNotFoundError as exc:
            self._oc.close()
            raise self._gone(exc) from None
        except BaseException:
            self._oc.close()
            raise
        stream = ctx.stream_no_info(store.stream_name)
        self._feed: WatchFeed[ObjectInfo] = WatchFeed(
            messages, self._info, end, f"jetstream_sync-object-watch-{next(_serial)}",
            lambda: stored_bounds(stream, [all_meta], timeout),
            last_per_subject=policy is DeliverPolicy.LAST_PER_SUBJECT,
        )  # fmt: skip

    def _info(self, msg: Msg) -> ObjectInfo | None:
        """The info a meta message holds; ``None`` for one left out (deleted, or not a meta)."""
        try:
            info = ObjectInfo.from_api(json.loads(msg.data), mtime=msg.metadata.timestamp)
        except (ValueError, TypeError) as exc:
            log.warning("jetstream_sync: object watcher skips bad meta on %s: %s",
                        msg.subject, exc)  # fmt: skip
            return None
        if info.deleted and self._ignore_deletes:
            return None
        return info

    def next(self, timeout: float | None = None) -> ObjectInfo | None:
        """The next object info, or ``None`` right after the initial ones.

        Args:
            timeout: seconds to wait (``None``: until one comes or :meth:`stop`).

        Raises:
            TimeoutError: nothing within ``timeout``.
            ObjectStoreNotFoundError: the bucket was deleted.
            IteratorClosedError: the watcher was stopped.
            ForkedClientError: called in a process forked after the watcher was made.
        """
        deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        try:
            return self._feed.take(deadline)
        except StreamNotFoundError as exc:
            raise self._gone(exc) from None

    def _gone(self, exc: StreamNotFoundError) -> ObjectStoreNotFoundError:
        return ObjectStoreNotFoundError(
            exc.code, exc.err_code, f"object store {self.bucket!r} not found"
        )

    def stop(self) -> None:
        """Stop watching and delete the server-side consumer. Safe from any thread.

        Raises:
            ForkedClientError: called in a process forked after the watcher was made.
        """
        self._feed.stop()
        self._oc.close()

    def __iter__(self) -> ObjectWatcher:
        return self

    def __next__(self) -> ObjectInfo | None:
        try:
            return self.next()
        except IteratorClosedError:
            raise StopIteration from None

    def __enter__(self) -> ObjectWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
