"""Missed idle heartbeats on push subscriptions (nats.go's ``ErrConsumerNotActive``).

A push consumer made with ``idle_heartbeat`` sends a heartbeat to its
deliver subject whenever it has sent nothing for that long. Once the
consumer is deleted (or its stream), nothing comes at all: no status, no
error. So, as nats.go does, a subscription that received nothing
(:attr:`Subscription.delivered` unchanged) for two heartbeat intervals has
missed its heartbeats. While the client is disconnected nothing is expected:
a check that finds it disconnected, or reconnected since the last check,
starts the clock again.

Who checks: the thread taking messages (``next_msg``, iteration) checks its
subscription's :class:`HeartbeatClock` while it waits; the clocks of
callback subscriptions are checked by the client's one :class:`HeartbeatWatch`
thread, which reports to ``error_cb``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..client import Client
    from ..subscription import Subscription

__all__ = ["HeartbeatClock", "HeartbeatWatch"]

# A subscription is silent once it received nothing for this many heartbeat intervals.
MISSED = 2


class HeartbeatClock:
    """When a subscription's silence means missed heartbeats; not thread-safe (one checker).

    Attributes:
        due: the ``time.monotonic()`` of the next check.
    """

    __slots__ = ("_client", "_reconnects", "_seen", "_sub", "_window", "due")

    def __init__(self, client: Client, sub: Subscription, heartbeat: float) -> None:
        self._client = client
        self._sub = sub
        self._window = MISSED * heartbeat
        self._seen = 0
        self._reconnects = 0
        self.due = 0.0
        self.restart(monotonic())

    def restart(self, now: float) -> None:
        """Start counting the silence from ``now``."""
        self._seen = self._sub.delivered
        self._reconnects = self._client.stats.reconnects
        self.due = now + self._window

    def missed(self, now: float) -> bool:
        """Check at or after :attr:`due`: True when nothing arrived since the last check.

        The clock restarts either way, so a silence that goes on is reported
        again every two intervals.
        """
        silent = self._sub.delivered == self._seen
        reconnected = self._client.stats.reconnects != self._reconnects
        connected = self._client.is_connected
        self.restart(now)
        return silent and connected and not reconnected


class _Watched:
    __slots__ = ("clock", "on_missed", "sub")

    def __init__(
        self, clock: HeartbeatClock, sub: Subscription, on_missed: Callable[[], object]
    ) -> None:
        self.clock = clock
        self.sub = sub
        self.on_missed = on_missed


class HeartbeatWatch:
    """Per client (``Client.shared_resource``): checks the callback subscriptions' clocks.

    One thread for all of them, started by the first :meth:`watch`, waiting
    until the next clock is due (forever while none is watched), stopped and
    joined by :meth:`close` (called by ``Client.close``).
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._watched: dict[object, _Watched] = {}
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(
        self, key: object, sub: Subscription, heartbeat: float, on_missed: Callable[[], object]
    ) -> None:
        """Call ``on_missed()`` (on the watch thread) each time ``sub`` misses two heartbeats.

        ``key`` identifies the watch for :meth:`unwatch`. The watch ends by
        itself once ``sub`` is no longer active.
        """
        watched = _Watched(HeartbeatClock(self._client, sub, heartbeat), sub, on_missed)
        with self._lock:
            if self._closed:
                return
            self._watched[key] = watched
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="jetstream_sync-push-heartbeats", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def unwatch(self, key: object) -> None:
        """Stop watching (nothing happens when ``key`` is not watched)."""
        with self._lock:
            self._watched.pop(key, None)

    def _run(self) -> None:
        while True:
            missed = []
            with self._lock:
                if self._closed:
                    return
                now = monotonic()
                soonest = None
                for key, watched in list(self._watched.items()):
                    clock = watched.clock
                    if not watched.sub.is_active:
                        del self._watched[key]
                        continue
                    if clock.due <= now and clock.missed(now):
                        missed.append(watched.on_missed)
                    if soonest is None or clock.due < soonest:
                        soonest = clock.due
                if not missed:
                    self._cond.wait(None if soonest is None else soonest - now)
                    continue
            for on_missed in missed:
                on_missed()

    def close(self) -> None:
        """Stop watching everything and join the thread (unless called on it)."""
        with self._lock:
            self._closed = True
            self._watched.clear()
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
