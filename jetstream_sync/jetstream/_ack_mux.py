"""The async-publish ack multiplexer: one per client, shared by every JetStream context.

The :class:`AckMux` of a client owns one reply route (a
:class:`~jetstream_sync._routes.ReplyRoute`: the wildcard inbox ``<inbox>.*`` and
its token → window table, a one-shot slot per publish), one ack thread and one
ack-timer thread. It is made on a context's first
``publish_async`` (through :meth:`Client.shared_resource`, so 50 contexts
share one mux) and closed — threads joined — by :meth:`Client.close`.

Each context keeps its own :class:`AsyncPublisher`: its window
(``max_ack_inflight``, backpressure), its ``ack_timeout`` and its pending
futures (token → future), so contexts never wait on each other's acks; a
window is the route's sink for its tokens. Everything is guarded by the mux's
one lock; each window has its own condition on that lock, woken only when
someone waits on that window.

Threads:

* the thread that reads the socket (the reader thread, or a requester holding
  the read role) settles the acks itself: a buffer holding nothing but
  acks is decoded in one C call (``_protocol.puback_batch``: each reply's
  token, kind and sequence); under the lock, once per buffer, it pops each
  ack's window from the route and its future from the window and, for a
  plain PubAck to a future nobody waits on or listens to (the common
  case), stores the sequence and the stream in it — no user
  code runs, nothing is parsed later but the ``PubAck`` on the first
  ``result()``. It wakes a publisher waiting for room once its window has
  drained to three quarters;
* the ack thread settles the rest, handed over in lists: errors, status
  replies, duplicates and other bodies (parsed there), and futures someone
  waits on or listens to (``set_result`` may run a done-callback, which
  must never run on the reader thread);
* the timer fails futures whose ack is overdue with :class:`TimeoutError`.
  Within a window futures are kept in publish order and share one
  ``ack_timeout``, so the overdue ones are at the front; it sleeps until the
  earliest front is due and ends when nothing is pending.

Acks that came in a buffer with other messages reach their windows through
the route, as tuples (:meth:`AsyncPublisher.deliver`), and are settled the same
way. When the connection drops, the route fails every window with a pending
future that may have gone out on the lost link, and each of those futures
fails with :class:`ConnectionLostError` (its ack was addressed to the old
connection); a future published once the loss was known (its message buffered
for the next link) stays pending and gets its ack after the reconnect (see
``_routes.py``). When the client closes, every future fails with
:class:`ConnectionClosedError`.
"""

from __future__ import annotations

import math
import os
import queue
import threading
import weakref
from time import monotonic
from typing import TYPE_CHECKING

from .. import _protocol
from .._deadline import Deadline, check_timeout, seconds_text
from .._dispatch import refuse_in_inline_callback
from .._log import logger
from .._routes import ReplyRoute
from .._signals import INTERRUPTS, hand_to_main, mend, raise_in_main, wait
from ..errors import (
    ConnectionClosedError,
    ConnectionLostError,
    ForkedClientError,
    InlineCallbackError,
    MaxPayloadError,
    MaxSubscriptionsExceededError,
    NatsError,
    PermissionViolationError,
    TimeoutError,
    TooManyPendingAcksError,
)
from ..msg import Msg
from .info import PubAck
from .publish import ACK_THREAD, INHERITED_LOCKS, PubAckFuture, parse_pub_ack

if TYPE_CHECKING:
    from .._reply import Reply
    from ..client import Client
    from ..headers import Headers

log = logger("jetstream")
_RESOURCE_KEY = "jetstream.ack_mux"
_ACK_BATCH = 1024
_ACK_SAME = _protocol.ACK_SAME
_ACK_NEW = _protocol.ACK_NEW
_puback_batch = _protocol.puback_batch
_LOST = (
    "connection lost before the PubAck arrived; the message may or may not "
    "have been processed by the server (republish with the same msg_id to be sure)"
)

# What the reader hands the ack thread per ack: the future, then the PubAck of a plain
# ack (a future someone waits on), or the reply's payload and header block, or the
# error of a publish the server refused by permission or the client dropped unsent, or
# that of an ack inbox the server refused (and None).
Settle = tuple[
    PubAckFuture,
    PubAck | bytes | PermissionViolationError | MaxPayloadError | MaxSubscriptionsExceededError,
    bytes | None,
]
_ERRORS = (PermissionViolationError, MaxPayloadError, MaxSubscriptionsExceededError)


def _settle(future: PubAckFuture, value: object = None, error: BaseException | None = None) -> None:
    """Resolve ``future`` on a thread of the mux, which its done-callbacks must not end.

    ``concurrent.futures`` logs a callback's ``Exception``; a ``SystemExit``
    (``sys.exit()`` in a callback) would end the thread, and every later
    future would wait for nothing: it is logged the same way.
    """
    try:
        future._resolve(value, error)
    except INTERRUPTS as exc:  # a signal's under gevent/eventlet (Ctrl-C), or sys.exit()
        if not hand_to_main(exc):
            log.exception("jetstream_sync: a PubAckFuture done-callback raised")
    except BaseException:
        log.exception("jetstream_sync: a PubAckFuture done-callback raised")


def _settled(lock: threading.RLock, futures: list[PubAckFuture]) -> None:
    """``futures``, handed off by their windows (see :meth:`AsyncPublisher._hand_off`), are
    settled now: their windows stop counting them, and whoever waits for completion wakes."""
    counts: dict[AsyncPublisher, int] = {}
    for future in futures:
        window = future._ack_window
        counts[window] = counts.get(window, 0) + 1
    with lock:
        for window, count in counts.items():
            window._unsettled -= count
            if window._waiting:
                assert window._cond is not None  # made when the window attached
                window._cond.notify_all()


_live_muxes: weakref.WeakSet[AckMux] = weakref.WeakSet()


def _mark_inherited() -> None:
    """In a forked child: the futures of every mux are settled only in the parent."""
    for mux in list(_live_muxes):
        mux._forked = True
        INHERITED_LOCKS.add(mux._lock)


os.register_at_fork(after_in_child=_mark_inherited)


class AckMux:
    """The per-client ack machinery; see the module docstring.

    Args:
        client: the connection whose acks this multiplexes.
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._lock = threading.RLock()  # waited on through wait(): see jetstream_sync._signals
        self._timer_cond = threading.Condition(self._lock)
        self._route: ReplyRoute[AsyncPublisher] = ReplyRoute(
            client, self._on_buffer, self._on_inbox_refused
        )  # one-shot slots: token -> window
        self._active: dict[AsyncPublisher, None] = {}  # windows the timer must look at
        self._prefix: str | None = None
        self._prefix_len = 0
        # What the reader thread leaves to the ack thread; None once closed. Not
        # bounded here: every ack answers a publish that a window let through.
        self._acks: queue.SimpleQueue[list[Settle] | None] = queue.SimpleQueue()
        self._ack_thread: threading.Thread | None = None
        self._timer: threading.Thread | None = None
        self._timer_due = math.inf  # when the timer wakes next (inf: it is not running)
        self._closed = False
        # The server refused the ack inbox's SUB, and on which connection
        # (Client.stats.reconnects then): by permission, no ack can come on that one, so
        # publish_async raises the error until a reconnect subscribes the inbox again; at
        # its subscription limit, the next publish_async subscribes it again.
        self._refused: tuple[PermissionViolationError | MaxSubscriptionsExceededError, int] | None
        self._refused = None
        self._forked = False  # this process is a child forked after the mux was made
        _live_muxes.add(self)

    def _start(self) -> str:
        """Route the ack inbox to this mux and start the ack thread (first publish only)."""
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("the client is closed")
            if self._prefix is None:
                # Listening before the inbox's SUB goes out: a refusal read meanwhile
                # waits for this lock, so it finds the prefix set.
                self._client.add_refusal_listener(self._on_refused)
                prefix = self._route.prefix
                self._ack_thread = threading.Thread(
                    target=self._ack_loop, args=(prefix,), name="jetstream_sync-acks", daemon=True
                )
                self._ack_thread.start()
                self._prefix_len = len(prefix.encode())
                self._prefix = prefix
            return self._prefix

    def _on_inbox_refused(self, error: NatsError) -> None:
        """The reading thread, after the route failed its windows: the server refused the
        ack inbox's SUB at its subscription limit. What is pending fails (on the ack
        thread); the next publish subscribes the inbox again (see :meth:`_check_inbox`)."""
        with self._lock:
            if self._closed:
                return
            refusal = MaxSubscriptionsExceededError(str(error))
            self._refused = (refusal, self._client.stats.reconnects)
            futures = self._take_all()
        self._fail_refused(futures, error)

    def _fail_refused(self, futures: list[PubAckFuture], error: NatsError) -> None:
        """Fail ``futures`` with the ack inbox's refusal ``error``, on the ack thread."""
        if futures:
            text = str(error)
            self._acks.put([(f, MaxSubscriptionsExceededError(text), None) for f in futures])

    def _check_inbox(self) -> None:
        """Under the lock, when the server refused the ack inbox: raise its permission
        refusal on the connection it came on, or go on with the inbox subscribed again.

        A refusal by permission holds for its connection only (a reconnect
        subscribes the inbox again); the count of reconnects tells, not the
        reconnect's status listener: the events thread may hear of the
        reconnect only after the reader read the new connection's refusal. One
        at the subscription limit: this call subscribes the inbox again.
        """
        assert self._refused is not None
        refused, on = self._refused
        if type(refused) is PermissionViolationError:
            if on == self._client.stats.reconnects:
                raise PermissionViolationError(refused.text)
        else:
            self._route.prefix  # noqa: B018 - subscribes the same prefix again
        self._refused = None

    def _on_refused(self, error: PermissionViolationError) -> None:
        """The reading thread: the server refused a publish by permission; the oldest
        future published to that subject fails (its ack cannot come), on the ack thread.
        When it refused the ack inbox's subscription, every pending future fails.

        The server answers each refused PUB with its own ``-ERR``, in the order
        the PUBs were sent; tokens grow in publish order across windows.
        """
        if error.operation == "subscription":
            with self._lock:
                if self._prefix is None or error.subject != self._prefix + "*":
                    return
                # Read on the connection it refuses: the reconnect count is already its own.
                self._refused = (error, self._client.stats.reconnects)
                futures = self._take_all()
            text = error.text
            self._acks.put([(f, PermissionViolationError(text), None) for f in futures])
            return
        if error.operation != "publish":
            return
        subject = error.subject
        with self._lock:
            found: tuple[AsyncPublisher, int] | None = None
            for window in self._active:
                for token, future in window._pending.items():
                    if future.subject == subject:
                        if found is None or token < found[1]:
                            found = (window, token)
                        break
            if found is None:
                return
            window, token = found
            future = window._pending.pop(token)
            window._hand_off(future)
            self._route.take(token, None)
            if not window._pending:
                del self._active[window]
            if window._waiting:
                assert window._cond is not None  # made when the window attached
                window._cond.notify_all()
        self._acks.put([(future, error, None)])

    # ------------------------------------------------------------------ reader thread

    def _on_buffer(self, buffer: memoryview, end: int, sid: int) -> None:
        """Reader thread: a buffer of nothing but acks, decoded in one C call, settled."""
        batch = _puback_batch(buffer, 0, end, sid, self._prefix_len)
        streams = iter(batch.streams)
        others = iter(batch.others)
        stream: tuple[str, str | None] = ("", None)
        later: list[Settle] = []
        waited_on: set[AsyncPublisher] = set()
        last = None  # consecutive acks mostly belong to one window
        pending: dict[int, PubAckFuture] = {}
        take = self._route.take
        with self._lock:
            for token, kind, seq in zip(batch.tokens, batch.kinds, batch.seqs, strict=True):
                if kind != _ACK_SAME:  # a plain ack of another stream, or another reply
                    if kind == _ACK_NEW:
                        stream = next(streams)
                    else:  # its payload and header block, handed on
                        payload, headers = next(others)
                window = take(token, None)
                if window is None:  # a late ack of a failed future (or not a token)
                    continue
                if window is not last:
                    last, pending = window, window._pending
                    if window._waiting:  # changes only under this lock
                        waited_on.add(window)
                future = pending.pop(token)
                if kind > _ACK_NEW:
                    window._hand_off(future)
                    later.append((future, payload, headers))
                elif future._ack_real:  # someone waits or listens: the ack thread sets it
                    window._hand_off(future)
                    ack = PubAck(stream=stream[0], seq=seq, domain=stream[1])
                    later.append((future, ack, None))
                else:  # PubAckFuture._resolve, inlined: the same lock
                    future._ack_value = seq
                    future._ack_stream = stream
                    future._ack_done = True
            self._wake_windows(waited_on)
        if later:
            self._acks.put(later)

    def _wake_windows(self, windows: set[AsyncPublisher]) -> None:
        """Under the lock: wake the publishers waiting on windows drained to three quarters."""
        for window in windows:
            if len(window._pending) <= window._low_water:
                assert window._cond is not None  # made when the window attached
                window._cond.notify_all()

    # ------------------------------------------------------------------ ack thread

    def _next_acks(self) -> list[Settle] | None:
        """What the reader handed over (up to about a batch), or None once closed."""
        acks = self._acks
        batch = acks.get()
        if batch is None:
            return None
        while len(batch) < _ACK_BATCH and not acks.empty():
            more = acks.get()
            if more is None:
                acks.put(None)  # seen again on the next call, after this batch
                break
            batch += more
        return batch

    def _ack_loop(self, prefix: str) -> None:
        """Settle what the reader left (errors, others, futures with waiters) until closed.

        Outside every lock: a done-callback may run (and may not wait for a future).
        """
        ACK_THREAD.lock = self._lock  # the futures of this mux: see PubAckFuture.result
        while True:
            try:
                acks = self._next_acks()
            except INTERRUPTS as exc:  # a signal's (Ctrl-C), on this greenlet (gevent, eventlet)
                raise_in_main(exc)
                continue
            if acks is None:
                return
            for future, value, headers in acks:
                self._settle_one(prefix, future, value, headers)
            _settled(self._lock, [future for future, _, _ in acks])

    @staticmethod
    def _settle_one(
        prefix: str, future: PubAckFuture, value: object, headers: bytes | None
    ) -> None:
        """The ack thread: settle one future with what the reader handed over."""
        if type(value) is PubAck:
            _settle(future, value)
            return
        if isinstance(value, _ERRORS):
            _settle(future, error=value)
            return
        assert type(value) is bytes  # a reply's payload
        if headers is None and b'"error"' not in value:
            _settle(future, value)  # a success: parsed when the result is read
            return
        try:
            ack = parse_pub_ack(Msg(prefix, "", value, headers), future.subject)
        except Exception as exc:
            _settle(future, error=exc)
        else:
            _settle(future, ack)

    # ------------------------------------------------------------------ timer

    def _wake_timer(self, due: float) -> None:
        """Under the lock: make sure the timer wakes by ``due``."""
        self._timer_due = due
        if self._timer is None:
            self._timer = threading.Thread(
                target=self._expire_loop, name="jetstream_sync-ack-timer", daemon=True
            )
            self._timer.start()
        else:
            self._timer_cond.notify()

    def _expire_loop(self) -> None:
        """Fail futures whose ack is overdue; end when nothing is pending."""
        while True:
            expired = []
            with self._lock:
                if self._closed:
                    return
                now = monotonic()
                next_due = math.inf
                for window in list(self._active):
                    pending = window._pending
                    overdue = []
                    for token, future in pending.items():
                        if future._ack_expires > now:
                            next_due = min(next_due, future._ack_expires)
                            break
                        overdue.append(token)
                    for token in overdue:
                        future = pending.pop(token)
                        window._hand_off(future)
                        expired.append((future, window._ack_timeout))
                        self._route.take(token, None)
                    if overdue and window._waiting:
                        assert window._cond is not None  # made when the window attached
                        window._cond.notify_all()
                    if not pending:
                        del self._active[window]
                if not expired:
                    if next_due == math.inf:
                        self._timer = None
                        self._timer_due = math.inf
                        return
                    self._timer_due = next_due
                    self._timer_cond.wait(next_due - now)
                    continue
            for future, ack_timeout in expired:
                _settle(
                    future,
                    error=TimeoutError(
                        f"no PubAck for {future.subject!r} within {seconds_text(ack_timeout)} s"
                    ),
                )
            _settled(self._lock, [future for future, _ in expired])

    # ------------------------------------------------------------------ failing everything

    def _take_all(self) -> list[PubAckFuture]:
        """Under the lock: empty every window, wake its waiters, return the futures."""
        futures: list[PubAckFuture] = []
        for window in list(self._active):
            futures.extend(window._take_pending())
        self._timer_cond.notify()
        return futures

    def close(self) -> None:
        """Fail what is pending and join the threads (called by :meth:`Client.close`).

        The client has already joined its reader, so no ack comes any more; the
        ack thread ends on the queue's end marker. A thread that is itself
        closing the client (a done-callback calling ``close()``) is not joined:
        it ends as soon as its callback returns.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending = self._take_all()
            threads = (self._ack_thread, self._timer)
        self._acks.put(None)
        self._client.remove_refusal_listener(self._on_refused)
        self._route.close()
        error = ConnectionClosedError("client closed before the PubAck arrived")
        for future in pending:
            future._resolve(error=error)
        _settled(self._lock, pending)
        current = threading.current_thread()
        for thread in threads:
            if thread is not None and thread is not current:
                thread.join()


class AsyncPublisher:
    """One context's async publishing: its window and ack timeout, on the client's mux.

    Args:
        client: the connection; its :class:`AckMux` is fetched on the first publish.
        max_inflight: the most futures of this context pending at once.
        backpressure: block when the window is full (else raise).
        ack_timeout: seconds before a future without ack fails with ``TimeoutError``.
    """

    def __init__(
        self, client: Client, max_inflight: int, backpressure: bool, ack_timeout: float
    ) -> None:
        self._client = client
        self._mux: AckMux | None = None
        self._max_inflight = max_inflight
        self._low_water = max_inflight * 3 // 4
        self._backpressure = backpressure
        self._ack_timeout = ack_timeout
        self._pending: dict[int, PubAckFuture] = {}  # publish order = expiry order
        # Futures out of _pending that another thread has yet to settle: still pending
        # for pending() and wait_completed() (see _hand_off).
        self._unsettled = 0
        self._waiting = 0  # threads blocked on this window (room or completion)
        self._cond: threading.Condition | None = None
        # Taken from the mux once it is attached, so a publish looks up less.
        self._lock = threading.RLock()  # replaced by the mux's
        self._prefix = ""
        self._send = client.publish_routed
        self._open_once = self._not_attached

    def _attach(self) -> AckMux:
        """Find (or make) the client's mux and start it: the first publish only."""
        mux = self._client.shared_resource(_RESOURCE_KEY, AckMux)
        if mux._prefix is None:
            mux._start()
        with mux._lock:
            if self._cond is None:
                self._cond = threading.Condition(mux._lock)
        assert mux._prefix is not None  # the mux is started
        self._lock = mux._lock
        self._prefix = mux._prefix
        self._open_once = mux._route.open_once
        self._mux = mux
        return mux

    def _not_attached(self, sink: AsyncPublisher) -> int:
        raise AssertionError("a token is taken only once the window is attached")

    # -- the route's sink: acks read with other messages, and failures

    def deliver(self, replies: list[Reply]) -> None:
        """The reading thread: acks of this window that came in a buffer with other messages.

        Settled as the buffer path settles them: a plain success's body is
        stored (parsed on the first ``result()``); errors, other bodies and
        futures someone waits on or listens to go to the ack thread.
        """
        mux = self._mux
        assert mux is not None  # a window gets tokens only once attached
        later: list[Settle] = []
        with self._lock:
            pending = self._pending
            for text, data, headers in replies:
                future = pending.pop(int(text), None)
                if future is None:  # failed meanwhile (overdue, lost)
                    continue
                if headers is None and not future._ack_real and b'"error"' not in data:
                    future._ack_value = data  # a success's body: parsed when the result is read
                    future._ack_done = True
                else:
                    self._hand_off(future)
                    later.append((future, data, headers))
            if self._waiting:
                mux._wake_windows({self})
        if later:
            mux._acks.put(later)

    def fail(self, error: NatsError, below: int | None = None) -> None:
        """Events thread or the closer: fail the pending futures whose acks will not come:
        all of them, or those of the tokens under ``below`` (a lost link's: the others'
        publishes were buffered after the loss and go out on the next link)."""
        mux = self._mux
        assert mux is not None  # a window gets tokens only once attached
        with self._lock:
            futures = self._take_pending() if below is None else self._take_below(below)
        if isinstance(error, MaxSubscriptionsExceededError):  # the reading thread: no user code
            mux._fail_refused(futures, error)
            return
        if isinstance(error, ConnectionLostError):
            error = ConnectionLostError(_LOST)
        else:
            error = ConnectionClosedError("client closed before the PubAck arrived")
        for future in futures:
            future._resolve(error=error)
        _settled(mux._lock, futures)

    def lost(self, token: int, error: NatsError) -> None:
        """The reading thread: the publish of ``token`` was dropped unsent (too big for the
        server reconnected to); its future fails with ``error`` now, on the ack thread."""
        mux = self._mux
        assert mux is not None and self._cond is not None  # a window gets tokens once attached
        with self._lock:
            future = self._pending.pop(token, None)
            if future is None:  # failed meanwhile (overdue, lost)
                return
            self._hand_off(future)
            if not self._pending:
                mux._active.pop(self, None)
            if self._waiting:
                self._cond.notify_all()
        value = error if isinstance(error, MaxPayloadError) else MaxPayloadError(str(error))
        mux._acks.put([(future, value, None)])

    def _take_below(self, below: int) -> list[PubAckFuture]:
        """Under the mux's lock: take the futures of the tokens under ``below`` out of this
        window and their slots, wake its waiters."""
        mux = self._mux
        assert mux is not None and self._cond is not None  # attached
        pending = self._pending
        tokens = [token for token in pending if token < below]
        if len(tokens) == len(pending):
            return self._take_pending()
        take = mux._route.take
        futures = []
        for token in tokens:
            take(token, None)
            future = pending.pop(token)
            self._hand_off(future)
            futures.append(future)
        self._cond.notify_all()
        return futures

    def _take_pending(self) -> list[PubAckFuture]:
        """Under the mux's lock: empty this window and its slots, wake its waiters."""
        mux = self._mux
        assert mux is not None and self._cond is not None  # attached
        take = mux._route.take
        for token in self._pending:
            take(token, None)
        futures = list(self._pending.values())
        for future in futures:
            self._hand_off(future)
        self._pending.clear()
        mux._active.pop(self, None)
        self._cond.notify_all()
        return futures

    def _hand_off(self, future: PubAckFuture) -> None:
        """Under the mux's lock: ``future``, taken out of ``_pending``, is to be settled by
        another thread (outside the lock); it counts as pending until :func:`_settled`."""
        future._ack_window = self
        self._unsettled += 1

    def publish(
        self, subject: str, data: bytes | str, headers: Headers | None, timeout: float
    ) -> PubAckFuture:
        """Register a future, send the message with its reply token, return the future.

        ``timeout`` bounds the whole call: waiting for room in the window, then
        for room in the client's write buffer (a stalled server).

        Raises:
            TooManyPendingAcksError: the window is full and backpressure is off.
            TimeoutError: no room in the window or the write buffer within
                ``timeout``; nothing was sent and no future is pending.
            ConnectionClosedError: the client is closed.
            PermissionViolationError: the server refused the ack inbox's
                subscription (no ack could come); nothing was sent.

        A future fails with :class:`MaxSubscriptionsExceededError` when the
        server refuses the ack inbox's subscription at its subscription limit
        (at first, or after a reconnect); the next call subscribes it again.
        """
        try:
            return self._publish(subject, data, headers, timeout)
        except INTERRUPTS:
            # Under gevent or eventlet the window's lock is pure Python: a Ctrl-C
            # landing in its release would keep it taken, and the reader, which
            # settles acks under it, would wait for good.
            mend(self._lock)
            raise

    def _publish(
        self, subject: str, data: bytes | str, headers: Headers | None, timeout: float
    ) -> PubAckFuture:
        mux = self._mux
        if mux is None:  # the first publish subscribes the ack inbox: not for bad input
            self._client.validate_publish(subject, data, None, headers)
            mux = self._attach()
        lock = self._lock
        future = PubAckFuture(subject, lock)
        pending = self._pending
        deadline = None  # made only if the call has to wait: the hot path does not
        with lock:
            if mux._closed:
                raise ConnectionClosedError("the client is closed")
            if mux._refused is not None:
                mux._check_inbox()
            if len(pending) >= self._max_inflight:
                deadline = Deadline(timeout)
                self._wait_for_room(mux, deadline)
            token = self._open_once(self)
            expires = future._ack_expires = monotonic() + self._ack_timeout
            if not pending:
                mux._active[self] = None
            pending[token] = future
            if expires < mux._timer_due:
                mux._wake_timer(expires)
        if deadline is not None:  # what is left of it bounds the wait for the write buffer
            timeout = max(deadline.remaining(), 0.001)
        try:
            if headers is None and type(data) is bytes:
                self._send(subject, data, self._prefix, token, timeout)
            else:
                reply = f"{self._prefix}{token}"
                self._client.publish(subject, data, reply=reply, headers=headers, timeout=timeout)
        except BaseException:
            with mux._lock:
                if pending.pop(token, None) is not None:
                    mux._route.take(token, None)
            raise
        return future

    def _wait_for_room(self, mux: AckMux, deadline: Deadline) -> None:
        """Under the lock: block until this window has room (or raise)."""
        if not self._backpressure:
            raise TooManyPendingAcksError(f"{len(self._pending)} acks pending (max_ack_inflight)")
        refuse_in_inline_callback("publish_async() with its window full")
        self._waiting += 1
        try:
            while len(self._pending) >= self._max_inflight:
                if mux._closed:
                    raise ConnectionClosedError("the client is closed")
                if deadline.expired():
                    raise TimeoutError("timed out waiting for room in the async publish window")
                assert self._cond is not None  # made by _attach
                wait(self._cond, mux._lock, deadline.slice())
        finally:
            self._waiting -= 1

    def pending(self) -> int:
        """This context's async publishes whose future is not done yet."""
        return len(self._pending) + self._unsettled

    def wait_completed(self, timeout: float) -> None:
        """Block until none of this context's acks is pending.

        Raises:
            TimeoutError: acks were still pending after ``timeout``.
            ForkedClientError: acks are pending in a process forked after they
                were published (they go to the parent).
        """
        deadline = Deadline(check_timeout("timeout", timeout))
        mux = self._mux
        if mux is None or not (self._pending or self._unsettled):
            return
        if mux._forked:
            raise ForkedClientError(
                f"{len(self._pending)} acks of publishes made before os.fork() go to the "
                "parent process; connect again in the child process"
            )
        refuse_in_inline_callback("publish_async_completed()")
        if ACK_THREAD.lock is mux._lock:
            raise InlineCallbackError(
                "publish_async_completed() from a PubAckFuture done-callback: the callback "
                "runs on the thread that settles the futures, so it would wait for itself"
            )
        with mux._lock:
            self._waiting += 1
            try:
                while self._pending or self._unsettled:
                    if deadline.expired():
                        raise TimeoutError(f"{self.pending()} acks still pending after {timeout} s")
                    assert self._cond is not None  # made by _attach
                    wait(self._cond, mux._lock, deadline.slice())
            finally:
                self._waiting -= 1
