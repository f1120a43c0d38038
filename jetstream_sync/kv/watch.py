"""``KeyWatcher``: a bucket's entries as they change, on the public ordered consumer.

The ordered consumer delivers each stream message once, in order, and
recreates its server-side consumer after a reconnect, a server restart,
missed heartbeats or a deletion, starting at the last delivered stream
sequence plus one: the watcher resumes right after the last revision it
handed out, losing and repeating nothing (ADR-8 "Watch").
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self

from .._seam import Deadline, check_timeout
from ..errors import BucketNotFoundError, IteratorClosedError, StreamNotFoundError, TimeoutError
from ..jetstream.consumer_config import OrderedConsumerConfig
from ..jetstream.enums import DeliverPolicy
from .entry import KeyValueEntry, KeyValueOp, entry_from_delivered

if TYPE_CHECKING:
    from ..jetstream.context import JetStreamContext

__all__ = ["KeyWatcher"]

# Pull sizes of the underlying iterator: big batches keep a large initial
# delivery fast; the heartbeat notices a silent server within ~2 x 5 s.
_MAX_MESSAGES = 1000
_EXPIRES = 30.0
_HEARTBEAT = 5.0


class KeyWatcher:
    """The entries of watched keys: first the current ones, then ``None``, then updates.

    Made by :meth:`KeyValue.watch`. Iterate it (blocks; ends after
    :meth:`stop`) or call :meth:`next`. ``None`` comes exactly once, when the
    entries present at the start have all been delivered (at once when there
    are none, or with ``updates_only``). Use it in a ``with`` block, or call
    :meth:`stop`: it holds a server-side consumer and a subscription. One
    reader at a time; :meth:`stop` is safe from any thread.
    """

    def __init__(
        self,
        ctx: JetStreamContext,
        stream: str,
        bucket: str,
        prefix_len: int,
        subjects: list[str],
        *,
        include_history: bool,
        ignore_deletes: bool,
        meta_only: bool,
        updates_only: bool,
        timeout: float | None,
    ) -> None:
        self.bucket = bucket
        self._prefix_len = prefix_len
        self._ignore_deletes = ignore_deletes
        self._timeout = check_timeout("timeout", timeout, ctx.timeout)
        fields: dict[str, Any] = {"filter_subjects": subjects, "headers_only": meta_only or None}
        if updates_only:
            # Start after the last stored message, not at "new": a consumer
            # recreated before the first update must not miss one.
            try:
                info = ctx.stream_no_info(stream).info(timeout=self._timeout)
            except StreamNotFoundError as exc:
                raise self._gone(exc) from None
            last = info.state.last_seq
            fields.update(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=last + 1)
        elif include_history:
            fields["deliver_policy"] = DeliverPolicy.ALL
        else:
            fields["deliver_policy"] = DeliverPolicy.LAST_PER_SUBJECT
        self._consumer = ctx.ordered_consumer(stream, OrderedConsumerConfig(**fields))
        self._lock = threading.Lock()
        self._stopped = False
        self._received = 0
        try:
            self._messages = self._consumer.messages(
                max_messages=_MAX_MESSAGES, expires=_EXPIRES, heartbeat=_HEARTBEAT
            )
        except StreamNotFoundError as exc:
            self._consumer.close()
            raise self._gone(exc) from None
        except BaseException:
            self._consumer.close()
            raise
        cinfo = self._consumer.cached_info
        self._initial_pending = cinfo.num_pending if cinfo is not None else 0
        self._initial_done = updates_only or self._initial_pending == 0
        self._marker_due = self._initial_done

    def next(self, timeout: float | None = None) -> KeyValueEntry | None:
        """The next entry, or ``None`` once when the initial entries are all delivered.

        Args:
            timeout: seconds to wait; ``None`` waits until an entry comes or
                the watcher is stopped.

        Raises:
            TimeoutError: nothing came within ``timeout``.
            BucketNotFoundError: the bucket was deleted.
            IteratorClosedError: the watcher was stopped.
            ConnectionClosedError: the client was closed.
        """
        # Checked first: a bad timeout is refused whatever is ready.
        deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        if self._marker_due:
            self._marker_due = False
            return None
        while True:
            left = None if deadline is None else max(deadline.remaining(), 1e-6)
            try:
                msg = self._messages.next(left)
            except StreamNotFoundError as exc:
                raise self._gone(exc) from None
            entry = entry_from_delivered(self.bucket, self._prefix_len, msg)
            if not self._initial_done:
                self._received += 1
                if entry.delta == 0 or self._received >= self._initial_pending:
                    self._initial_done = True
                    self._marker_due = True
            if self._ignore_deletes and entry.operation is not KeyValueOp.PUT:
                if self._marker_due:
                    self._marker_due = False
                    return None
                continue
            return entry

    def _gone(self, exc: StreamNotFoundError) -> BucketNotFoundError:
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
        """Stop watching and delete the server-side consumer. Safe from any thread."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._messages.stop()
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
