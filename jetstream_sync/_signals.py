"""Which thread a signal handler's exception can land on, and where in the code.

CPython runs Python signal handlers (``KeyboardInterrupt`` for Ctrl-C, an
alarm's handler) only on the main thread, and only at three kinds of point:
after a call into C returns, on entry to a Python function, and at the jump
back of a loop. Between those points (stores to attributes and locals,
arithmetic, ``bytearray`` appends and slice assignments) no handler runs.

The client relies on that in two ways. On the main thread it avoids work
that an exception would leave half done and that no later call could finish
(a fetch leaves the reading to the reader thread). And where a state change
must be whole, it is written as plain stores with no call in between, with
what a call did reported in memory the caller owns (see ``jetstream_sync._connection.writer``).

Locks that threads wait on through a ``threading.Condition`` follow two rules:

* the lock is entered itself (``with lock:``), never through the condition:
  ``Condition.__enter__`` is Python code, so a handler can run after it took the
  lock and before the block begins, and then nothing ever releases the lock (a
  queue whose lock a Ctrl-C kept held stops the reader thread for good);
* the lock is an ``RLock`` and waits go through :func:`wait`: a handler can run
  inside ``Condition.wait`` after it released the lock and before the code that
  takes it back is in place. :func:`wait` takes it back then (an ``RLock``
  knows whether this thread holds it), so the ``with`` block releases a lock it
  holds, never one another thread took meanwhile.

``threading.Event`` breaks the first rule inside, so the client's flags are a
:class:`Flag`. The tests raise an exception at every such point of a call in
turn (``tests/fixtures/signals.interrupted_at``).

After ``fork()`` the thread that forked is the child's main thread, so the
thread recorded here follows it.

Under gevent or eventlet every greenlet runs on the main thread, so a signal
handler's exception can land on one of the client's own greenlets too (its
reader, its writer, a callback's greenlet) while it runs Python code. Those
loops catch :data:`INTERRUPTS`, have the hub raise the exception in the main
greenlet (:func:`raise_in_main`), where the program expects it, as the hubs do
with one that lands on them, and make their own state whole again (the reader
and the writer give up the connection they were in the middle of: the client
reconnects). Under eventlet they also cancel the timeouts an interrupt kept
from being cancelled (:func:`drop_stray_timeouts`).
"""

from __future__ import annotations

import os
import sys
import threading
from threading import get_ident
from types import FrameType
from typing import Any

# What a signal handler raises that a greenlet of the client must not die of:
# Ctrl-C's KeyboardInterrupt, the SystemExit of a SIGTERM handler calling sys.exit().
INTERRUPTS = (KeyboardInterrupt, SystemExit)

_main_ident = threading.main_thread().ident


def on_signal_thread() -> bool:
    """Whether the calling thread is the one signal handlers run on (the main thread)."""
    return get_ident() == _main_ident


def _ours(frame: FrameType) -> bool:
    name = str(frame.f_globals.get("__name__", ""))
    return name == __package__ or name.startswith(f"{__package__}.")


def in_handler_interrupting_a_call() -> bool:
    """Whether the caller runs in a signal handler that interrupted a call of this package.

    CPython runs a handler on top of the frame it interrupted, so on the main
    thread the stack below the caller's own frames of this package and the
    handler's (the user's) frames holds a frame of this package exactly when
    the handler landed inside a call of the client: that call may hold the
    socket's read role or a lock until the handler returns.
    """
    if get_ident() != _main_ident:
        return False
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _ours(frame):
        frame = frame.f_back
    while frame is not None:
        if _ours(frame):
            return True
        frame = frame.f_back
    return False


def wait(cond: threading.Condition, lock: Any, timeout: float | None = None) -> None:
    """``cond.wait(timeout)`` inside ``with lock:``, ``lock`` being the ``RLock`` of ``cond``.

    Holds ``lock`` again when it returns or raises, whatever a signal handler's
    exception interrupted (see the module docstring).
    """
    try:
        cond.wait(timeout)
    finally:
        if not lock._is_owned():
            lock.acquire()


class Flag:
    """``threading.Event``'s job (set, clear, wait) under the rules above.

    ``threading.Event`` enters its condition in Python code, so a Ctrl-C in
    ``set()`` (say, while closing an iterator) could keep its lock, and the
    next ``set()`` or ``wait()`` would block for good. Under gevent or eventlet
    the patched ``threading`` makes the waits cooperative, as with ``Event``.
    """

    __slots__ = ("_lock", "_cond", "_set")

    def __init__(self) -> None:  # noqa: D107
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._set = False

    def is_set(self) -> bool:
        """Whether the flag is set."""
        return self._set

    def set(self) -> None:
        """Set the flag and wake every thread waiting for it."""
        with self._lock:
            self._set = True
            self._cond.notify_all()

    def clear(self) -> None:
        """Unset the flag."""
        with self._lock:
            self._set = False

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is set or ``timeout`` seconds passed; whether it is set."""
        with self._lock:
            if not self._set:
                wait(self._cond, self._lock, timeout)
            return self._set


def mend(lock: Any) -> None:
    """After an interrupt caught on a greenlet holding no lock: free ``lock`` if left taken.

    Under gevent and eventlet ``threading.RLock`` is CPython's pure-Python
    ``_RLock`` over the library's lock, so a signal handler's exception can
    land inside its ``release`` (the end of a ``with`` block): before it began
    (the greenlet still owns the lock), or between clearing the owner and
    releasing the lock under it (nobody owns it, nobody can take it). Under
    eventlet it can also land inside that lock's release, after freeing it and
    before waking its waiters. Either way every later ``with lock:`` waits
    for good. The C ``RLock`` of OS threads is left alone: its steps are whole.

    The caller is handling an interrupt, and another can land in here (the
    ``RLock``'s ``_is_owned`` is Python code): that one is dropped and the
    mending starts over, each step being safe to repeat, and the caller raises
    its own. Only one landing on the entry to this function, or on the jump
    back of its loop, still escapes: Python code has no step that is whole.
    """
    while True:
        try:
            _mend_once(lock)
            return
        except INTERRUPTS:
            continue


def _mend_once(lock: Any) -> None:
    """One pass of :func:`mend`."""
    block = getattr(lock, "_block", None)
    if block is None:
        return
    if lock._is_owned():
        lock._count = 0
        lock._owner = None
        block.release()
    elif lock._owner is None:
        if block.locked():
            block.release()
        elif block.acquire(blocking=False):  # and released: wakes the waiters left asleep
            block.release()


def hand_to_main(exc: BaseException) -> bool:
    """Have the hub raise ``exc`` in the main greenlet on its next turn; False: no hub.

    For a signal handler's exception caught on one of the client's greenlets
    (gevent, eventlet): that greenlet goes on (and makes its state whole before
    it next waits), then the program gets the exception where it waits, as when
    the signal lands on the hub itself. Without a patched hub (OS threads, where
    a signal's exception reaches only the main thread) nothing is done.
    """
    # Neither library is imported here: one that patched is in sys.modules already.
    gevent_monkey = sys.modules.get("gevent.monkey")
    if gevent_monkey is not None and gevent_monkey.is_module_patched("threading"):
        hub = sys.modules["gevent.hub"].get_hub()
        hub.loop.run_callback(hub.handle_system_error, type(exc), exc, exc.__traceback__)
        return True
    eventlet_patcher = sys.modules.get("eventlet.patcher")
    if eventlet_patcher is not None and eventlet_patcher.is_monkey_patched("thread"):
        eventlet_hub = sys.modules["eventlet.hubs"].get_hub()
        main = eventlet_hub.greenlet.parent
        if main is not None and not main.dead:
            eventlet_hub.schedule_call_global(0, main.throw, exc)
            return True
    return False


def drop_stray_timeouts() -> None:
    """On a client's own greenlet that caught an interrupt: cancel the eventlet timeouts it left.

    Under eventlet a timed lock wait starts an ``eventlet.Timeout`` (a timer that
    raises it in the greenlet that started it) and only then enters the ``with``
    block that cancels it. An interrupt landing between the two leaves the timer
    running: half a second later the ``Timeout`` is raised in whatever the
    greenlet runs then, a user's callback (reported as its error) or a wait of
    the client's (which it would end). Called where none of the greenlet's frames
    waits under a timeout any more, so every timeout it started is a stray. Each
    step is safe to repeat: an interrupt landing in here starts it over.
    """
    patcher = sys.modules.get("eventlet.patcher")
    if patcher is None or not patcher.is_monkey_patched("thread"):
        return
    while True:
        try:
            _drop_stray_timeouts_once()
            return
        except INTERRUPTS:
            continue


def _drop_stray_timeouts_once() -> None:
    """One pass of :func:`drop_stray_timeouts`."""
    hub = sys.modules["eventlet.hubs"].get_hub()
    timeout_type = sys.modules["eventlet.timeout"].Timeout
    throw = sys.modules["greenlet"].getcurrent().throw
    for _, timer in (*hub.timers, *hub.next_timers):
        call, args, _ = getattr(timer, "tpl", (None, (), None))  # gone once called or cancelled
        if call == throw and args and isinstance(args[0], timeout_type):
            timer.cancel()


def raise_in_main(exc: BaseException) -> None:
    """:func:`hand_to_main`, or, without a hub to take it, raise ``exc`` here."""
    if not hand_to_main(exc):
        raise exc


def _after_fork_in_child() -> None:
    global _main_ident
    _main_ident = get_ident()


os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = [
    "INTERRUPTS",
    "Flag",
    "drop_stray_timeouts",
    "hand_to_main",
    "in_handler_interrupting_a_call",
    "mend",
    "on_signal_thread",
    "raise_in_main",
    "wait",
]
