"""Every subscription of one client, by sid: routing, delivery limits and removal under one lock.

A subscription's delivery state (whether it is routed, how many messages it
received, the limit an ``unsubscribe(limit)`` set, whether its queue still
accepts messages) changes only here and only under :attr:`SubscriptionTable.lock`.
The reader thread delivers a whole parsed buffer with one acquisition, so a
limit set by another thread applies either before or after a batch, never
half-way: no subscription receives more than its limit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..msg import Msg

if TYPE_CHECKING:
    from .._dispatch import InlineCallback
    from ..subscription import Subscription


class SubscriptionTable:
    """The subscriptions of one client, the sids they use, and their delivery limits.

    Attributes:
        lock: guards everything here; the client also holds it while creating
            its request multiplexer so the SUB frames sent on a reconnect
            always include it.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._subs: dict[int, Subscription] = {}
        # Routed, but the server was told to stop (a drain): not sent to the next server.
        self._stopped: set[int] = set()
        self._next_sid = 1

    def __len__(self) -> int:
        return len(self._subs)

    def sids(self) -> list[int]:
        """The sids routed now."""
        with self.lock:
            return list(self._subs)

    def subscriptions(self) -> list[Subscription]:
        """The subscriptions routed now."""
        with self.lock:
            return list(self._subs.values())

    def new_sid(self) -> int:
        """A fresh sid; call with :attr:`lock` held."""
        sid = self._next_sid
        self._next_sid += 1
        return sid

    def add(
        self, make: Callable[[int], Subscription], send: Callable[[Subscription], object]
    ) -> Subscription:
        """Route a new subscription: ``make(sid)`` builds it with a fresh sid.

        ``make`` runs outside the lock (it may start the callback thread);
        ``send(sub)`` (its SUB frame) runs under it, so the subscription is in
        a reconnect's snapshot (:meth:`routed`) or its SUB follows it, never both.
        """
        with self.lock:
            sid = self.new_sid()
        sub = make(sid)
        with self.lock:
            self._subs[sid] = sub
            send(sub)
        return sub

    def deliver(
        self, batches: dict[int, list[Msg]]
    ) -> tuple[list[Subscription], list[tuple[InlineCallback, list[Msg]]]]:
        """Queue each sid's messages, in order (the thread reading).

        A subscription that reaches its limit takes only the messages up to
        it, stops being routed and has its queue closed (its pending messages
        are still delivered). The messages of an inline callback's subscription
        are not queued: they are returned, for the caller to run the callback
        with once the table's lock is released.

        Returns:
            The subscriptions whose queue refused messages (slow consumers), and
            each inline callback with its messages, in the order they came.
        """
        slow = []
        inline = []
        with self.lock:
            subs = self._subs
            for sid, msgs in batches.items():
                sub = subs.get(sid)
                if sub is None:
                    continue
                queue = sub._queue
                room = None if sub._max is None else sub._max - sub._received
                ended = room is not None and room <= len(msgs)
                if ended:
                    msgs = msgs[:room]
                    del subs[sid]
                    self._stopped.discard(sid)
                sub._received += len(msgs)
                if sub._inline is not None:
                    inline.append((sub._inline, msgs))
                elif queue.put_batch(msgs):
                    slow.append(sub)
                if ended:
                    queue.close()
        return slow, inline

    def limit(self, sub: Subscription, limit: int, send: Callable[[], object]) -> bool:
        """Let ``sub`` receive ``limit`` messages in total, then stop routing it.

        When it already received that many, it stops at once and its queue
        keeps only the messages that, with those already taken, make
        ``limit``. Otherwise ``send()`` (its UNSUB with the limit) runs under the lock.

        Returns:
            True when the limit lies ahead (the server was told),
            False when the subscription stopped now (or was already gone).
        """
        with self.lock:
            if self._subs.get(sub.sid) is not sub:
                return False
            if limit > sub._received:
                sub._max = limit
                send()
                return True
            del self._subs[sub.sid]
            self._stopped.discard(sub.sid)
            sub._queue.close_at(sub._received, limit)
            return False

    def remove(
        self, sub: Subscription, discard: bool, send: Callable[[], object] | None = None
    ) -> None:
        """Stop routing ``sub`` and close its queue (``discard``: drop what is pending);
        then ``send()`` (its UNSUB), under the lock."""
        with self.lock:
            self._subs.pop(sub.sid, None)
            self._stopped.discard(sub.sid)
            sub._queue.close(discard=discard)
            if send is not None:
                send()

    def stop_interest(self, sub: Subscription, send: Callable[[], object]) -> None:
        """Keep routing ``sub`` but leave it out of the next server's (a drain); ``send()``
        (its UNSUB) runs under the lock."""
        with self.lock:
            if sub.sid in self._subs:
                self._stopped.add(sub.sid)
            send()

    def refuse(self, sub: Subscription, reason: BaseException) -> bool:
        """The server refused ``sub`` (a re-subscription): stop routing it; what is pending
        is still read, then its queue raises ``reason``. False when it was already gone."""
        with self.lock:
            if self._subs.get(sub.sid) is not sub:
                return False
            del self._subs[sub.sid]
            self._stopped.discard(sub.sid)
            sub._queue.close(reason=reason)
        return True

    def refuse_interest(
        self, subject: str, queue: str, reason: Callable[[], BaseException]
    ) -> list[Subscription]:
        """The server refused a SUB of ``subject`` in ``queue`` (``""``: none) by permission:
        stop routing every subscription on exactly those; what is pending is still read,
        then each queue raises its own ``reason()``. Returns the subscriptions ended."""
        with self.lock:
            subs = [s for s in self._subs.values() if s.subject == subject and s.queue == queue]
            for sub in subs:
                del self._subs[sub.sid]
                self._stopped.discard(sub.sid)
                sub._queue.close(reason=reason())
        return subs

    def remove_all(self, reason: BaseException) -> list[Subscription]:
        """Stop routing every subscription and close its queue (the client closed).

        Pending messages are dropped; a waiter gets ``reason``. Returns the
        subscriptions (the caller joins their callback threads, outside the lock).
        """
        with self.lock:
            subs = list(self._subs.values())
            self._subs.clear()
            self._stopped.clear()
            for sub in subs:
                sub._queue.close(discard=True, reason=reason)
        return subs

    def routed(self) -> list[tuple[Subscription, int | None]]:
        """Each subscription the next server is to get, with how many more messages it
        may receive.

        ``None`` means no limit. A drained subscription (see :meth:`stop_interest`)
        is left out. Call with :attr:`lock` held (the client adds its request
        multiplexer's frame to the same snapshot, and attaches the new link).
        """
        stopped = self._stopped
        return [
            (sub, None if sub._max is None else sub._max - sub._received)
            for sid, sub in self._subs.items()
            if sid not in stopped
        ]
