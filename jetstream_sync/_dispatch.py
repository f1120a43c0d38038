"""Bounded per-subscription queues, the thread that runs a subscription's callback, and
the inline callbacks that run on the thread that read their messages."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from ._deadline import Deadline
from ._joins import join_thread, waiting_for
from ._signals import (
    INTERRUPTS,
    drop_stray_timeouts,
    hand_to_main,
    mend,
    on_signal_thread,
    raise_in_main,
    wait,
)
from .errors import InlineCallbackError, TimeoutError
from .msg import Msg

WORKER_WAIT_SLICE = 0.5
"""Seconds a callback thread first waits on its doorbell before it looks at its queue again."""

IDLE_SLICE = 8.0
"""The longest wait for a message between two looks at a queue: each look that finds
nothing doubles the wait (from half a second) up to this, so thousands of idle
subscriptions, consumers and watchers do not wake thousands of times a second."""


class MsgQueue:
    """A bounded FIFO of messages for one subscription.

    The reader thread adds a whole batch with one lock acquisition and one
    wake-up. Messages past ``msgs_limit`` or ``bytes_limit`` are not queued:
    :meth:`put_batch` returns how many were refused so the client can report a
    :class:`~jetstream_sync.errors.SlowConsumerError`.

    A subscription's callback thread waits through :meth:`next_for_worker` on a
    :class:`Doorbell` rather than the ``Condition`` other readers wait on: a
    ``Condition`` wait costs about 6 us more per message (on a 2-core VM, in
    Python on both threads), and a request answered by a callback pays it in
    its round trip.
    """

    def __init__(self, msgs_limit: int, bytes_limit: int) -> None:
        self._msgs_limit = msgs_limit
        self._bytes_limit = bytes_limit
        self._lock = (
            threading.RLock()
        )  # see jetstream_sync._signals: entered itself, waited on by wait()
        self._cond = threading.Condition(self._lock)
        self._items: deque[Msg] = deque()
        self.pending_bytes = 0
        self._closed = False
        self._close_reason: BaseException | None = None
        self._interrupted = False
        self._waiting = 0  # threads in a Condition wait: notified only when some are
        self._bell = Doorbell()  # the callback thread's (next_for_worker)

    def __len__(self) -> int:
        return len(self._items)

    def filled(self, count: int) -> bool:
        """Whether ``count`` messages are queued, or the last queued is a status message,
        or the queue closed or was interrupted (read without the lock: a hint for the
        thread that reads the connection meanwhile, see :class:`Filling`)."""
        items = self._items
        if len(items) >= count or self._closed or self._interrupted:
            return True
        try:
            return items[-1].is_status
        except IndexError:  # empty, or emptied by another thread since (no lock)
            return False

    def put_batch(self, msgs: list[Msg]) -> int:
        """Queue ``msgs`` in order; return the number refused for lack of room."""
        refused = 0
        with self._lock:
            if self._closed:
                return 0
            items = self._items
            size = sum([len(msg.data) for msg in msgs])
            if (
                len(items) + len(msgs) <= self._msgs_limit
                and self.pending_bytes + size <= self._bytes_limit
            ):  # room for all: one extend, no check per message
                items.extend(msgs)
                self.pending_bytes += size
                self._wake()
                return 0
            for msg in msgs:
                size = len(msg.data)
                if len(items) >= self._msgs_limit or self.pending_bytes + size > self._bytes_limit:
                    refused += 1
                    continue
                items.append(msg)
                self.pending_bytes += size
            self._wake()
        return refused

    def _wake(self) -> None:
        """Under the lock: wake the callback thread and every thread in a wait."""
        self._bell.ring()
        if self._waiting:
            self._cond.notify_all()

    def _wait(self, timeout: float) -> None:
        """Under the lock: a ``Condition`` wait, counted so that :meth:`_wake` knows of it."""
        self._waiting += 1
        try:
            wait(self._cond, self._lock, timeout)
        finally:
            self._waiting -= 1

    def _wait_for_items(self, deadline: Deadline | None, interruptible: bool = False) -> bool:
        """Under the lock: wait until a message is queued; False when closed and empty.

        With ``interruptible``, also False (at once) after :meth:`interrupt`.

        Raises:
            TimeoutError: nothing arrived before the deadline.
            ConnectionClosedError: the queue was closed because the client closed.
        """
        items = self._items
        slice_ = WORKER_WAIT_SLICE  # doubled after each wait, as the callback thread's
        while not items:
            if interruptible and self._interrupted:
                self._interrupted = False
                return False
            if self._closed:
                if self._close_reason is not None:
                    raise self._close_reason
                return False
            if deadline is None:
                self._wait(slice_)
            elif deadline.expired():
                raise TimeoutError("timed out waiting for a message")
            else:
                self._wait(min(slice_, deadline.remaining()))
            slice_ = min(slice_ * 2, IDLE_SLICE)
        return True

    def get(self, deadline: Deadline | None) -> Msg | None:
        """Take the next message, waiting until ``deadline`` (forever when None).

        Returns ``None`` when the queue is closed and empty.

        Raises:
            TimeoutError: nothing arrived before the deadline.
            ConnectionClosedError: the queue was closed because the client closed.
        """
        with self._lock:
            if not self._wait_for_items(deadline):
                return None
            msg = self._items.popleft()
            self.pending_bytes -= len(msg.data)
            return msg

    def next_for_worker(self) -> Msg | None:
        """The callback thread's :meth:`get`: the next message, or None once closed and empty.

        Waits on the doorbell (never on the main thread; under gevent or
        eventlet a signal's exception can land here, and the worker mends the
        queue's lock). A wait also ends after :data:`WORKER_WAIT_SLICE` seconds,
        then twice as long each time nothing came, up to
        :data:`IDLE_SLICE`: a ring that an interrupted reading thread
        never made delays a message, never loses it, and an idle subscription
        costs a wake-up every few seconds.
        """
        bell = self._bell
        slice_ = WORKER_WAIT_SLICE
        while True:
            with self._lock:
                items = self._items
                if items:
                    msg = items.popleft()
                    self.pending_bytes -= len(msg.data)
                    return msg
                if self._closed:
                    return None
                bell.arm()
            if not bell.wait(slice_):
                with self._lock:
                    bell.settle()
                slice_ = min(slice_ * 2, IDLE_SLICE)

    def get_batch(self, max_count: int, deadline: Deadline | None) -> list[Msg]:
        """Take up to ``max_count`` messages at once, waiting until ``deadline`` for the first.

        Returns an empty list when the queue is closed and empty, or when
        :meth:`interrupt` was called (then or before) and nothing is queued.

        Raises:
            TimeoutError: nothing arrived before the deadline.
            ConnectionClosedError: the queue was closed because the client closed.
        """
        with self._lock:
            if not self._wait_for_items(deadline, interruptible=True):
                return []
            self._interrupted = False
            items = self._items
            if len(items) <= max_count:
                taken = list(items)
                items.clear()
                self.pending_bytes = 0
            else:
                popleft = items.popleft
                taken = [popleft() for _ in range(max_count)]
                self.pending_bytes -= sum(len(m.data) for m in taken)
            return taken

    def interrupt(self) -> None:
        """Make the current (or else the next) :meth:`get_batch` return at once."""
        with self._lock:
            self._interrupted = True
            self._wake()

    def close_at(self, received: int, limit: int) -> None:
        """Close, keeping only what makes ``limit`` with the messages already taken.

        Args:
            received: how many messages were ever queued here.
            limit: how many may be taken in total.
        """
        with self._lock:
            items = self._items
            keep = max(limit - (received - len(items)), 0)
            while len(items) > keep:
                self.pending_bytes -= len(items.pop().data)
            self._closed = True
            self._wake()

    def close(self, discard: bool = False, reason: BaseException | None = None) -> None:
        """Accept no more messages; wake every waiter.

        Args:
            discard: drop what is still queued.
            reason: raised by :meth:`get` once the queue is empty, instead of
                returning ``None`` (e.g. the client closed).
        """
        with self._lock:
            self._closed = True
            self._close_reason = reason
            if discard:
                self._items.clear()
                self.pending_bytes = 0
            self._wake()

    @property
    def closed(self) -> bool:
        """True once no more messages will be queued."""
        return self._closed


class Doorbell:
    """How the thread routing messages wakes the one thread waiting for them.

    A plain lock, held while nobody rang: the waiting thread blocks in its
    ``acquire`` and the ringing thread's ``release`` wakes it, one call in C
    on each side. :meth:`arm`, :meth:`ring` and :meth:`settle` run under the
    lock of the queue that owns the doorbell, :meth:`wait` outside it.
    """

    __slots__ = ("_lock", "_armed")

    def __init__(self) -> None:  # noqa: D107
        self._lock = threading.Lock()
        self._lock.acquire()
        self._armed = False  # a thread waits, or is about to

    def arm(self) -> None:
        """The calling thread is about to :meth:`wait`: the next :meth:`ring` wakes it."""
        self._armed = True

    def ring(self) -> None:
        """Wake the waiting thread, if one is armed (only one ring counts per wait)."""
        if self._armed:
            self._armed = False
            self._lock.release()

    def wait(self, timeout: float) -> bool:
        """Block until rung (True) or ``timeout`` seconds passed (False: then :meth:`settle`)."""
        return self._lock.acquire(True, timeout)

    def settle(self) -> None:
        """After a :meth:`wait` that timed out: disarm, or take back a ring that came since.

        Without this, a ring between the timeout and here would leave the lock
        released: the next wait would not block, and the next ring would
        release a lock that is not held (``RuntimeError`` in the ringing thread).
        """
        if self._armed:
            self._armed = False
        else:
            self._lock.acquire()


class Filling:
    """What a thread reading the connection for its own subscription waits for.

    ``done`` once the queue holds ``count`` messages or ends with a status
    message (which ends a pull request), or closed.
    """

    __slots__ = ("_queue", "_count")

    def __init__(self, queue: MsgQueue, count: int) -> None:
        self._queue = queue
        self._count = count

    @property
    def done(self) -> bool:
        """Whether the wait is over."""
        return self._queue.filled(self._count)


class CallbackWorker:
    """The one thread that calls a subscription's callback, in order, outside locks.

    Args:
        queue: where messages come from; the thread ends once it is closed and empty.
        callback: called with each message.
        on_error: called with an exception the callback raised.
        name: the thread's name.
    """

    def __init__(
        self,
        queue: MsgQueue,
        callback: Callable[[Msg], object],
        on_error: Callable[[BaseException], None],
        name: str,
    ) -> None:
        self._queue = queue
        self._callback = callback
        self._on_error = on_error
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        queue = self._queue
        callback = self._callback
        while True:
            try:
                msg = queue.next_for_worker()
                if msg is None:
                    return
                try:
                    callback(msg)
                except INTERRUPTS as exc:  # a signal's under gevent/eventlet, or sys.exit()
                    if not hand_to_main(exc):
                        self._on_error(exc)
                except BaseException as exc:  # a user's bug must not kill the worker
                    self._on_error(exc)
            except INTERRUPTS as exc:  # a signal's (Ctrl-C), on this greenlet (gevent, eventlet)
                mend(queue._lock)  # it may have landed inside the lock's own code
                drop_stray_timeouts()
                raise_in_main(exc)

    def is_current(self) -> bool:
        """True when called from this worker's own thread (from the callback)."""
        return self._thread is threading.current_thread()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to finish; False if it is still running after ``timeout``.

        Returns True at once when the thread's callback is itself waiting for the
        caller's callback (two subscriptions ending each other): it ends once the
        caller's callback returns.
        """
        if self._thread is threading.current_thread():
            return False
        return join_thread(self._thread, timeout)


class _Reading(threading.local):
    """Per thread: whether it is running an inline callback now."""

    inline = False


_READING = _Reading()


def refuse_in_inline_callback(call: str) -> None:
    """Raise :class:`InlineCallbackError` when an inline callback makes ``call``.

    For every call that waits for what the connection reads: on the thread that
    reads it, that wait could only end at its timeout.
    """
    if _READING.inline:
        raise InlineCallbackError(
            f"{call} waits for what the connection reads, and an inline callback runs on "
            "the thread that reads it: publish from the callback, or hand the work to a "
            "thread of your own"
        )


class InlineCallback:
    """A subscription's callback run on the thread that read its messages (``inline=True``).

    The thread reading the connection (the reader thread, or a requester or a fetch
    reading for itself) calls :meth:`run` as it routes the messages, in order, with
    no hand-off to a thread of the subscription's own. While it runs, calls that
    wait for what the connection reads raise :class:`InlineCallbackError`
    (:func:`refuse_in_inline_callback`).

    The same interface as :class:`CallbackWorker` for the client's unsubscribe,
    drain and close: :meth:`is_current` and :meth:`join`.

    Args:
        callback: called with each message.
        on_error: called with an exception the callback raised.
    """

    def __init__(
        self, callback: Callable[[Msg], object], on_error: Callable[[BaseException], None]
    ) -> None:
        self._callback = callback
        self._on_error = on_error
        self._running = threading.Lock()  # held while a thread runs the callback
        self._thread: int | None = None
        self._stopped = False  # set by join(): no call begins after it

    def run(self, msgs: list[Msg]) -> None:
        """Call the callback with each message (the thread that read them)."""
        callback = self._callback
        reading = _READING
        with self._running:
            self._thread = threading.get_ident()
            reading.inline = True
            try:
                for msg in msgs:
                    if self._stopped:  # unsubscribed, by the callback or meanwhile
                        break
                    try:
                        callback(msg)
                    except Exception as exc:  # a user's bug must not stop the reading
                        self._on_error(exc)
                    except BaseException as exc:  # sys.exit(): it would end the reader thread
                        if on_signal_thread():  # a Ctrl-C, or an exit asked on the main thread
                            raise
                        if isinstance(exc, INTERRUPTS) and hand_to_main(exc):
                            continue  # a signal's under gevent/eventlet: the main greenlet's
                        self._on_error(exc)
            finally:
                reading.inline = False
                self._thread = None

    def is_current(self) -> bool:
        """True when called from the callback itself."""
        return self._thread == threading.get_ident()

    def join(self, timeout: float | None = None) -> bool:
        """Stop: no call begins after this; wait until a call in progress has returned.

        Called once the subscription is no longer routed (unsubscribe, drain,
        close). From the callback itself it returns False at once: the rest of
        the messages read with the current one are not handed to it.

        Returns:
            False from the callback itself or after ``timeout``, else True (at
            once when the thread running the callback waits for the caller's).
        """
        self._stopped = True
        if self.is_current():
            return False
        with waiting_for(self._thread) as may_wait:
            if not may_wait:
                return True
            if not self._running.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
                return False
        self._running.release()
        return True
