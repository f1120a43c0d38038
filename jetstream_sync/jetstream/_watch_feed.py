"""What Key-Value and Object Store watchers share: a feed that follows the stream at once.

A watcher must hand out every revision written after the last one it handed
out, however long its user waits before the next call. An iterator that
pulls only when asked cannot: when its consumer is deleted (by an operator,
a limit, a server restart), nothing notices until the next call, and a
bucket keeping one revision per key has dropped the older ones by then. So
a :class:`WatchFeed` runs the ordered iterator on a thread of its own: a
reset is made as soon as it is needed, and what arrives waits in the feed's
buffer.

The end of the initial values is decided from the stream leader's answer
(:func:`initial_end`), not from the count a consumer reports when it is
created: on a cluster, the consumer may sit on a replica that has not yet
stored the newest messages and report none pending.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from .._deadline import Deadline
from .._signals import wait
from ..errors import IteratorClosedError, MessageNotFoundError, TimeoutError

if TYPE_CHECKING:
    from ..msg import Msg
    from .ordered import OrderedMessageIterator
    from .stream import Stream

__all__ = ["WatchFeed", "initial_end"]

T = TypeVar("T")

# How many items the feed holds ahead of its reader; then its thread waits
# (and stops pulling) until the reader takes some.
BUFFER = 10_000


class _Marker:
    """The end of the initial values, as an item of the feed (handed out as ``None``)."""

    __slots__ = ()


_MARKER = _Marker()


def initial_end(stream: Stream, filters: Sequence[str], timeout: float) -> int:
    """The stream sequence of the newest message matching any of ``filters`` (0: none).

    Asked of the stream leader, which holds every acknowledged message.

    Raises:
        StreamNotFoundError: the stream does not exist.
    """
    deadline = Deadline(timeout)
    last = 0
    for subject in filters:
        try:
            msg = stream.get_last_msg_for_subject(subject, timeout=max(deadline.remaining(), 1e-3))
        except MessageNotFoundError:
            continue
        last = max(last, msg.seq)
    return last


class WatchFeed(Generic[T]):
    """Items made from an ordered iterator's messages, on a thread of its own.

    ``convert`` turns a message into an item, or ``None`` to leave it out.
    :data:`None` is handed out once, right after the message at stream
    sequence ``end`` or later (at once when ``end`` is 0). Errors that end
    the iterator (the stream deleted, the client closed) are raised by
    :meth:`take` once the items before them were taken.
    """

    def __init__(
        self,
        messages: OrderedMessageIterator,
        convert: Callable[[Msg], T | None],
        end: int | None,
        name: str,
    ) -> None:
        self._messages = messages
        self._convert = convert
        self._items: deque[T | _Marker] = deque()
        # Entered itself, waited on through wait(): see jetstream_sync._signals.
        self._lock = threading.RLock()
        self._ready = threading.Condition(self._lock)
        self._error: BaseException | None = None
        self._stopped = False
        if end == 0:
            self._items.append(_MARKER)
        self._end = end or 0
        self._marker_due = bool(end)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        try:
            self._thread.start()
        except BaseException:  # interrupted (Ctrl-C) while the thread started: it ends, too
            messages.stop()
            raise

    def _run(self) -> None:
        messages = self._messages
        try:
            while True:
                self._put(messages.next())
        except BaseException as exc:  # the end of the iteration: kept for the reader
            with self._lock:
                self._error = exc
                self._ready.notify_all()

    def _put(self, msg: Msg) -> None:
        item = self._convert(msg)
        with self._lock:
            while len(self._items) >= BUFFER and not self._stopped:
                wait(self._ready, self._lock)
            if item is not None:
                self._items.append(item)
            if self._marker_due and msg.metadata.sequence.stream >= self._end:
                self._marker_due = False
                self._items.append(_MARKER)
            self._ready.notify_all()

    def take(self, deadline: Deadline | None) -> T | None:
        """The next item, or ``None`` for the marker; waits until ``deadline`` (``None``: no end).

        Raises:
            TimeoutError: nothing came before ``deadline``.
            IteratorClosedError: the feed was stopped.
            NatsError: what ended the iteration (e.g. ``StreamNotFoundError``).
        """
        with self._lock:
            while not self._items:
                if self._stopped:
                    raise IteratorClosedError("the watcher was stopped")
                if self._error is not None:
                    raise self._error
                if deadline is None:
                    wait(self._ready, self._lock)
                    continue
                left = deadline.remaining()
                if left <= 0:
                    raise TimeoutError("no entry within the timeout")
                wait(self._ready, self._lock, left)
            item = self._items.popleft()
            self._ready.notify_all()  # room for the thread
            return None if isinstance(item, _Marker) else item

    def stop(self) -> None:
        """Stop the iterator and join the thread; discards what was not taken."""
        with self._lock:
            self._stopped = True
            self._items.clear()
            self._ready.notify_all()
        self._messages.stop()
        if self._thread is not threading.current_thread():
            self._thread.join()
