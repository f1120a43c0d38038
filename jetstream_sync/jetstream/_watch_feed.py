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
stored the newest messages and report none pending. The message at that end
may be removed before it is delivered (purged, expired): while the end is due
and nothing arrives, the feed asks the leader again (:data:`RECHECK`).

A purge under the initial values needs more: nats-server (2.15) never again
delivers on a "last per subject" consumer whose pending values a purge
removed, not even what is written afterwards (it reports them delivered).
When the stream's first message now comes after the last one delivered, the
feed replaces the link, which resumes right after that one.

A link replaced before the end of the initial values resumes after the last
one delivered, and delivers everything stored from there: on a "last per
subject" watch, the superseded revisions and markers too. Only from then on
(:attr:`OrderedMessageIterator.resumed`), and only up to the end, the feed
makes the selection itself: it keeps the newest message of each subject and
hands them out in stream order when the end is reached, so the initial values
stay one per subject, each the latest. Later messages, and those of a watch
never reset, pass through as they come.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from .._ack_subject import ack_tokens
from .._deadline import Deadline, seconds_text
from .._signals import wait
from ..errors import (
    APIError,
    IteratorClosedError,
    MessageNotFoundError,
    NatsError,
    TimeoutError,
)

if TYPE_CHECKING:
    from ..msg import Msg
    from .ordered import OrderedMessageIterator
    from .stream import Stream

__all__ = ["WatchFeed", "initial_end", "stored_bounds"]

T = TypeVar("T")

# How many items the feed holds ahead of its reader; then its thread waits
# (and stops pulling) until the reader takes some.
BUFFER = 10_000
# While the end of the initial values is due and no message came for this many
# seconds, the feed asks the stream leader again where they end.
RECHECK = 1.0
# While the stream elects a leader, a read of its last message is dropped (no
# reply) or refused with a 5xx (10008, JetStream temporarily unavailable): it is
# asked again, in attempts of at most ATTEMPT seconds, RETRY_PAUSE apart.
ATTEMPT = 2.0
RETRY_PAUSE = 0.1


class _Marker:
    """The end of the initial values, as an item of the feed (handed out as ``None``)."""

    __slots__ = ()


_MARKER = _Marker()


def initial_end(stream: Stream, filters: Sequence[str], timeout: float) -> int:
    """The stream sequence of the newest message matching any of ``filters`` (0: none).

    Asked of the stream leader, which holds every acknowledged message: one request
    per filter, each with ``timeout`` of its own (a watch of thousands of keys makes as
    many round trips, which one shared deadline cut short on a busy machine). A
    request dropped or refused (5xx) during a leader election is asked again
    within that timeout.

    Raises:
        StreamNotFoundError: the stream does not exist.
        TimeoutError: the leader did not answer one filter's request within ``timeout``.
    """
    last = 0
    for subject in filters:
        last = max(last, _last_seq(stream, subject, timeout))
    return last


def stored_bounds(stream: Stream, filters: Sequence[str], timeout: float) -> tuple[int, int]:
    """:func:`initial_end`'s answer, and the sequence of the first message the stream holds.

    Raises:
        As :func:`initial_end`.
    """
    end = initial_end(stream, filters, timeout)
    return end, stream.info(timeout=timeout).state.first_seq


def _last_seq(stream: Stream, subject: str, timeout: float) -> int:
    """The stream sequence of the newest message on ``subject`` (0: none), riding elections.

    Raises:
        TimeoutError: the leader did not answer within ``timeout``.
        APIError: a refusal other than a 5xx, or a 5xx still at the deadline.
    """
    deadline = Deadline(timeout)
    attempt = min(timeout, ATTEMPT)
    while True:
        try:
            return stream.get_last_msg_for_subject(subject, timeout=attempt).seq
        except MessageNotFoundError:
            return 0
        except TimeoutError:
            if deadline.expired():
                raise TimeoutError(
                    f"no answer from the leader of stream {stream.name!r} "
                    f"within {seconds_text(timeout)} s"
                ) from None
            # the request was dropped: ask again at once
        except APIError as exc:
            if exc.code < 500 or deadline.remaining() <= RETRY_PAUSE:
                raise
            time.sleep(RETRY_PAUSE)
        attempt = max(min(deadline.remaining(), ATTEMPT), 0.001)


class WatchFeed(Generic[T]):
    """Items made from an ordered iterator's messages, on a thread of its own.

    ``convert`` turns a message into an item, or ``None`` to leave it out.
    ``last_per_subject``: the iterator's deliver policy is "last per subject";
    after a reset before the end, the feed keeps that selection (module doc).
    :data:`None` is handed out once, right after the message at stream
    sequence ``end`` or later (at once when ``end`` is 0). ``recheck`` gives
    the end again and the stream's first sequence (:func:`stored_bounds`'s
    answer now): when the message at the end was removed before it came,
    ``None`` follows the last one delivered up to the new end instead of
    never coming; when messages after the last one delivered were removed,
    the link is replaced (see the module doc). ``same_stream`` is called
    before the first batch of each new link, and raises when the stream was
    deleted and made again meanwhile (the link resumed at a sequence of the
    old one, skipping the new stream's first messages). Errors that end
    the iterator (the stream deleted, the client closed) are raised by
    :meth:`take` once the items before them were taken.
    """

    def __init__(
        self,
        messages: OrderedMessageIterator,
        convert: Callable[[Msg], T | None],
        end: int | None,
        name: str,
        recheck: Callable[[], tuple[int, int]] | None = None,
        last_per_subject: bool = False,
        same_stream: Callable[[], None] | None = None,
    ) -> None:
        self._messages = messages
        self._convert = convert
        self._items: deque[T | _Marker] = deque()
        # Entered itself, waited on through wait(): see jetstream_sync._signals.
        self._lock = threading.RLock()
        self._ready = threading.Condition(self._lock)
        self._error: BaseException | None = None
        self._stopped = False
        # Who waits on _ready: readers for an item, the thread for room. Items move
        # through the deque without the lock (append and popleft are atomic); a side
        # takes the lock only to wake the other when it waits. Each side says it
        # waits before it looks at the deque, and the other changes the deque before
        # it looks at that: no wake-up is missed, and no lock is passed to and fro
        # per item (with the GIL, that hand-over is what a hand-off costs).
        self._readers_waiting = 0
        self._thread_waiting = False
        if end == 0:
            self._items.append(_MARKER)
        self._end = end or 0
        self._marker_due = bool(end)
        self._recheck = recheck
        self._delivered = 0  # the stream sequence of the last message, while the end is due
        self._last_per_subject = last_per_subject
        self._same_stream = same_stream
        self._links = messages.links_made
        # After a reset before the end: the newest message of each subject up to the end,
        # oldest first (None: messages pass through).
        self._latest: dict[str, Msg] | None = None
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
                if self._marker_due and self._recheck is not None:
                    try:
                        batch = messages.next_buffered(RECHECK)
                    except TimeoutError:
                        self._check_end()
                        continue
                else:
                    batch = messages.next_buffered()
                self._put(batch)
        except BaseException as exc:  # the end of the iteration: kept for the reader
            with self._lock:
                self._error = exc
                self._ready.notify_all()

    def _put(self, batch: deque[Msg]) -> None:
        """Convert and buffer the messages of ``batch`` (emptying it); wake a waiting reader
        once, after the last."""
        items, convert = self._items, self._convert
        if self._same_stream is not None and self._messages.links_made != self._links:
            self._links = self._messages.links_made
            self._same_stream()  # raises, before a message of a stream made again goes out
        if (
            self._last_per_subject
            and self._marker_due
            and self._latest is None
            and self._messages.resumed  # so this batch comes from a link that resumed
        ):
            self._latest = {}
        while batch and not self._stopped:
            msg = batch.popleft()
            latest = self._latest
            if latest is not None:  # only while the end is due
                seq = int(ack_tokens(msg.reply)[5])
                if seq <= self._end:  # the newest of each subject moves last
                    latest.pop(msg.subject, None)
                    latest[msg.subject] = msg
                    self._delivered = seq
                    if seq == self._end:
                        self._end_initial()
                    continue
                self._end_initial()  # the end was removed: this one is an update
            item = convert(msg)
            if len(items) >= BUFFER:
                self._wait_for_room()
            if item is not None:
                items.append(item)
            if self._marker_due:
                self._delivered = int(ack_tokens(msg.reply)[5])
                if self._delivered >= self._end:
                    self._end_initial()
        if self._readers_waiting:
            with self._lock:
                self._ready.notify_all()

    def _check_end(self) -> None:
        """Ask where the initial values end now and where the stream begins; hand out the
        marker when the message at the old end is gone and every one up to the new end was
        delivered; replace the link when messages after the last one delivered are gone."""
        try:
            end, first = self._recheck()  # type: ignore[misc]
        except NatsError:  # unanswered (a timeout, a lost link): asked again after a wait
            return
        if self._stopped:
            return
        # Gone up to after the last one delivered: purged under the link, which may never
        # deliver again. (Before the first delivery, a stream whose first messages were
        # superseded long ago looks the same, so nothing is concluded then.)
        if self._delivered and first > self._delivered + 1:
            self._messages._need_reset("messages purged under the initial values")
        if end >= self._end:  # still stored, or newer ones came: it will be delivered
            return
        self._end = end
        if self._delivered >= end:
            self._end_initial()
            with self._lock:
                self._ready.notify_all()

    def _end_initial(self) -> None:
        """Hand out what was kept back after a reset (the newest of each subject, in stream
        order), then the marker; later messages pass through."""
        self._marker_due = False
        latest, self._latest = self._latest, None
        items, convert = self._items, self._convert
        if latest:
            for msg in latest.values():
                if self._stopped:
                    return
                item = convert(msg)
                if len(items) >= BUFFER:
                    self._wait_for_room()
                if item is not None:
                    items.append(item)
        items.append(_MARKER)

    def _wait_for_room(self) -> None:
        with self._lock:
            self._ready.notify_all()  # a reader may wait for what is buffered already
            self._thread_waiting = True
            try:
                while len(self._items) >= BUFFER and not self._stopped:
                    wait(self._ready, self._lock)
            finally:
                self._thread_waiting = False

    def check_usable(self) -> None:
        """Raise in a process forked after the feed was made (its thread stayed in the parent).

        Raises:
            ForkedClientError: this is such a child process.
        """
        self._messages.check_usable()

    def take(self, deadline: Deadline | None) -> T | None:
        """The next item, or ``None`` for the marker; waits until ``deadline`` (``None``: no end).

        Raises:
            TimeoutError: nothing came before ``deadline``.
            IteratorClosedError: the feed was stopped.
            ForkedClientError: called in a process forked after the feed was made.
            NatsError: what ended the iteration (e.g. ``StreamNotFoundError``).
        """
        self._messages.check_usable()
        try:
            item = self._items.popleft()
        except IndexError:
            item = self._wait_for_item(deadline)
        if self._thread_waiting:
            with self._lock:
                self._ready.notify_all()  # room for the thread
        return None if isinstance(item, _Marker) else item

    def _wait_for_item(self, deadline: Deadline | None) -> T | _Marker:
        """:meth:`take` when nothing is buffered: wait for an item, the end or the deadline."""
        with self._lock:
            self._readers_waiting += 1
            try:
                while not self._items:
                    if self._stopped:
                        raise IteratorClosedError("the watcher was stopped")
                    if self._error is not None:
                        raise self._error
                    left = None if deadline is None else deadline.remaining()
                    if left is not None and left <= 0:
                        raise TimeoutError("no entry within the timeout")
                    wait(self._ready, self._lock, left)
                return self._items.popleft()
            finally:
                self._readers_waiting -= 1

    def stop(self) -> None:
        """Stop the iterator and join the thread; discards what was not taken.

        Raises:
            ForkedClientError: called in a process forked after the feed was made.
        """
        self._messages.check_usable()
        with self._lock:
            self._stopped = True
            self._items.clear()
            self._ready.notify_all()
        self._messages.stop()
        if self._thread is not threading.current_thread():
            self._thread.join()
