"""The thread that runs the user's connection callbacks (never the reader thread)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from ._joins import join_thread
from ._log import logger
from ._signals import INTERRUPTS, hand_to_main

log = logger("client")


class EventRunner:
    """Runs queued callbacks one at a time, in order, on its own thread."""

    def __init__(self, name: str) -> None:
        # Entered itself, not as _cond (see jetstream_sync._signals); a plain Lock, as
        # only the runner's own thread waits on it, where no signal handler runs.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: deque[tuple[Callable[..., object], tuple[object, ...]]] = deque()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., object] | None, *args: object) -> None:
        """Queue ``fn(*args)``; ignored when ``fn`` is None or the runner stopped."""
        if fn is None:
            return
        with self._lock:
            if self._stopping:
                return
            self._queue.append((fn, args))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                fn, args = self._queue.popleft()
            try:
                fn(*args)
            except INTERRUPTS as exc:  # a signal's under gevent/eventlet (Ctrl-C), or sys.exit()
                if not hand_to_main(exc):
                    log.exception("jetstream_sync: connection callback %r raised", fn)
            except BaseException:  # a user's callback must not stop the others
                log.exception("jetstream_sync: connection callback %r raised", fn)

    def stop(self) -> None:
        """Run what is queued, then end the thread and join it."""
        with self._lock:
            self._stopping = True
            self._cond.notify()
        if self._thread is not threading.current_thread():
            join_thread(self._thread)
