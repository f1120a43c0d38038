"""``ObjectWatcher``: an Object Store bucket's object infos, then each change.

An ordered consumer over ``$O.<bucket>.M.>`` (the meta subjects): deliver
last per subject for the current infos, every one with ``include_history``,
new ones only with ``updates_only``. ``None`` marks the end of the initial
values: after the message with no more pending, or at once for an empty bucket.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .._seam import Deadline, check_timeout, logger
from ..errors import IteratorClosedError, MessageNotFoundError
from ..jetstream.enums import DeliverPolicy
from .config import ObjectInfo

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext
    from .store import ObjectStore

__all__ = ["ObjectWatcher"]

log = logger("object_store")

_PREFETCH = 256


class ObjectWatcher:
    """Yields :class:`ObjectInfo` of the watched bucket; ``None`` once after the initial ones.

    Made by :meth:`ObjectStore.watch`. Iterate it (ends when stopped) or call
    :meth:`next`; :meth:`stop` (or leaving a ``with`` block) ends it and
    deletes its server-side consumer. Survives reconnects and server
    restarts (it rides on the ordered consumer). One reader at a time.
    """

    def __init__(
        self,
        ctx: JetStreamContext,
        store: ObjectStore,
        include_history: bool,
        ignore_deletes: bool,
        updates_only: bool,
        timeout: float | None,
    ) -> None:
        timeout = check_timeout("timeout", timeout, ctx.timeout)
        self._ignore_deletes = ignore_deletes
        self._stopped = False
        self._marker_due = False
        self._init_done = updates_only
        all_meta = f"$O.{store.bucket}.M.>"
        if not updates_only:
            try:
                ctx.stream_no_info(store.stream_name).get_last_msg_for_subject(
                    all_meta, timeout=timeout
                )
            except MessageNotFoundError:
                self._init_done = self._marker_due = True
        if updates_only:
            policy = DeliverPolicy.NEW
        elif include_history:
            policy = DeliverPolicy.ALL
        else:
            policy = DeliverPolicy.LAST_PER_SUBJECT
        self._oc = ctx.ordered_consumer(
            store.stream_name, filter_subjects=[all_meta], deliver_policy=policy
        )
        try:
            self._msgs = self._oc.messages(max_messages=_PREFETCH)
        except BaseException:
            self._oc.close()
            raise

    def next(self, timeout: float | None = None) -> ObjectInfo | None:
        """The next object info, or ``None`` right after the initial ones.

        Args:
            timeout: seconds to wait (``None``: until one comes or :meth:`stop`).

        Raises:
            TimeoutError: nothing within ``timeout``.
            IteratorClosedError: the watcher was stopped.
        """
        # Checked first: a bad timeout is refused whatever is ready. One
        # deadline for the call, however many bad metas are skipped.
        deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        while True:
            if self._stopped:
                raise IteratorClosedError("the object watcher was stopped")
            if self._marker_due:
                self._marker_due = False
                return None
            msg = self._msgs.next(None if deadline is None else max(deadline.remaining(), 1e-6))
            if not self._init_done and msg.metadata.num_pending == 0:
                self._init_done = self._marker_due = True
            try:
                info = ObjectInfo.from_api(json.loads(msg.data), mtime=msg.metadata.timestamp)
            except (ValueError, TypeError) as exc:
                log.warning("jetstream_sync: object watcher skips bad meta on %s: %s",
                            msg.subject, exc)  # fmt: skip
                continue
            if info.deleted and self._ignore_deletes:
                continue
            return info

    def stop(self) -> None:
        """Stop watching and delete the server-side consumer. Safe from any thread."""
        self._stopped = True
        self._msgs.stop()
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
