"""Reply routes: one wildcard inbox of a client, each reply handed to the sink holding its token.

Library machinery that sends many requests and takes their replies raw (no
:class:`~jetstream_sync.msg.Msg`, no subscription queue per request) does it
through a :class:`ReplyRoute`: JetStream's async-publish acks
(``jetstream/_ack_mux.py``), batched direct gets (``jetstream/_direct_batch.py``)
and columnar publishing (``jetstream/arrow_publish.py``). A route:

* subscribes ``<inbox>.*`` once, on first use (:meth:`Client.add_reply_route`);
  a request's reply subject is ``<prefix><token>``;
* gives out tokens, integers from one counter that only grows, so a late reply
  to a request that is over never reaches a later request's sink;
* keeps the table of *slots*, token -> sink. A one-shot slot (:meth:`open_once`,
  a request that gets exactly one reply) is gone with its reply; a lasting slot
  (:meth:`open`) holds one token or a range of them until :meth:`release`;
* hands each buffer's replies to their sinks on the thread that read them,
  grouped by sink, in arrival order: ``sink.deliver(replies)`` with
  ``(token, payload, header block)`` tuples (:data:`~jetstream_sync._reply.Reply`).
  ``deliver`` must only hand them on: never block, never raise. A reply whose
  token no slot holds is dropped;
* tells a sink when the request of one of its tokens was dropped unsent
  (``sink.lost(token, error)``: buffered while disconnected, too big for the
  server reconnected to), on the reading thread;
* tells every sink with a slot when its replies can no longer come:
  ``sink.fail(error, below)``, on the client's events thread, with
  :class:`ConnectionLostError` when the connection drops, and with
  :class:`ConnectionClosedError` when the client closes (every slot is
  dropped; ``below`` is None). ``fail`` may run user code; it is called
  outside the route's lock.

  A loss concerns only the requests that may have gone out on the lost link.
  The reading thread marks the token counter as soon as the writer stopped
  sending on it (``link_lost``, before the status handler runs, maybe much
  later): a token given out after the mark is that of a request written
  after the loss, buffered for the next link, whose reply will come. So the
  status handler drops the one-shot slots below the mark only, fails the
  sinks of those and of the lasting slots opened below it, and tells each
  ``below``: the tokens under it are lost, the others still expected;
* when the server refuses the inbox's subscription at its subscription limit
  (at first use, or its re-subscription after a reconnect), fails every sink
  with a slot, on the reading thread, with that
  :class:`~jetstream_sync.errors.MaxSubscriptionsExceededError` (``fail``
  must then run no user code), tells its owner (``refused``), and subscribes
  the same prefix again on its next use (:attr:`prefix`, :meth:`open`);
* with ``permissions``, when the server refuses the inbox's subscription by
  permission, fails every sink with a slot, on the reading thread, with that
  :class:`~jetstream_sync.errors.PermissionViolationError` (``fail`` must then
  run no user code), and :meth:`open` raises it until a reconnect subscribes the
  inbox again (the server then decides anew);

A user that decodes a buffer of nothing but its own replies in one C call (the
acks) passes ``buffer_handler`` (see :meth:`Client.add_reply_route`) and looks
its tokens up itself with :attr:`ReplyRoute.take`.
"""

from __future__ import annotations

import itertools
import threading
from bisect import bisect_right, insort
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from .errors import (
    ConnectionClosedError,
    ConnectionLostError,
    NatsError,
    PermissionViolationError,
)

if TYPE_CHECKING:
    from ._reply import Reply
    from .client import Client

__all__ = ["ReplyRoute", "RouteSink"]

# Longer tokens are not ours (int() of thousands of digits would raise): a foreign
# reply must not end the connection.
_MAX_TOKEN_DIGITS = 19


class RouteSink(Protocol):
    """What a slot hands replies to; see the module docstring."""

    def deliver(self, replies: list[Reply]) -> None:
        """Take this sink's replies of one buffer (the reading thread: never block or raise)."""

    def fail(self, error: NatsError, below: int | None = None) -> None:
        """Learn that the replies still expected will not come (lost connection or closed).

        ``below``: only those of the tokens under it (the others' requests were
        written after the loss, for the next link); None: all of them.
        """

    def lost(self, token: int, error: NatsError) -> None:
        """Learn that the request of ``token`` was dropped unsent: its reply will not come.

        ``error`` is a :class:`~jetstream_sync.errors.MaxPayloadError`: the request was
        buffered while disconnected and the server reconnected to accepts less. On the
        reading thread: never block, never raise, run no user code.
        """


S = TypeVar("S", bound=RouteSink)


class ReplyRoute(Generic[S]):
    """A client's wildcard reply inbox with its token -> sink table; see the module docstring.

    Args:
        client: the connection the requests and replies go through.
        buffer_handler: receives the buffers that hold nothing but this route's
            replies, undecoded (see :meth:`Client.add_reply_route`); None: every
            reply goes through the sinks.
        refused: told on the reading thread, after the sinks, that the server
            refused the inbox's subscription (see the module docstring).
        permissions: also fail the sinks when the server refuses the inbox's
            subscription by permission (see the module docstring); an owner
            that handles that refusal itself leaves it out.
    """

    def __init__(
        self,
        client: Client,
        buffer_handler: Callable[[memoryview, int, int], object] | None = None,
        refused: Callable[[NatsError], object] | None = None,
        permissions: bool = False,
    ) -> None:
        self._client = client
        self._buffer_handler = buffer_handler
        self._refused_hook = refused
        self._permissions = permissions
        # The server refused the inbox's SUB by permission: the refusal's text and the
        # connection it came on (Client.stats.reconnects then); open() raises it there.
        self._denied: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._tokens = itertools.count(1)
        self._once: dict[int, S] = {}
        self._lasting: dict[int, tuple[int, S]] = {}  # first token -> (end, sink)
        # The lasting slots' first tokens, sorted. Replaced, never changed in place: the
        # reading thread's lock-free lookup bisects one list and then indexes it.
        self._firsts: list[int] = []
        self._prefix: str | None = None
        # The prefix while the server refuses its subscription (the next use
        # subscribes it again: see _on_refused).
        self._unrouted: str | None = None
        self._listening = False
        self._closed = False
        # The first token given out after the last lost link (see link_lost): the
        # requests of lower tokens may have gone out on a lost link.
        self._lost_below = 0
        #: ``take(token, default)``: pop the one-shot slot of ``token`` and return its
        #: sink (for a ``buffer_handler``, which reads tokens itself).
        self.take = self._once.pop

    @property
    def prefix(self) -> str:
        """``<inbox>.``: what a token follows in a reply subject. Routes the inbox on first use.

        Raises:
            ConnectionClosedError: the route or the client is closed.
        """
        prefix = self._prefix
        if prefix is not None:
            return prefix
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("the client is closed")
            if self._prefix is None:
                if self._permissions and not self._listening:
                    # Listening before the SUB goes out; a refusal read meanwhile waits
                    # for this lock, so it finds the prefix set.
                    self._client.add_refusal_listener(self._on_permission)
                self._prefix = self._client.add_reply_route(
                    self._on_replies,
                    self._buffer_handler,
                    self._on_dropped,
                    self._on_link_lost,
                    self._on_refused,
                    prefix=self._unrouted,
                )
                self._unrouted = None
                if not self._listening:
                    self._client.add_status_listener(self._on_status)
                    self._listening = True
            return self._prefix

    def open_once(self, sink: S) -> int:
        """A token for one request with one reply; its slot is gone once the reply came.

        Cheap (the async-publish hot path): no lock is taken. The caller makes
        sure the route is not closed (its own close comes first) and that its
        prefix is routed. A route gives out one-shot slots or lasting ones, not
        both: a range opened meanwhile could take this token too.
        """
        token = next(self._tokens)
        self._once[token] = sink
        return token

    def open(self, sink: S, count: int = 1) -> int:
        """The first of ``count`` consecutive tokens, all ``sink``'s until :meth:`release`.

        Raises:
            ConnectionClosedError: the route or the client is closed.
            PermissionViolationError: the server refused the inbox's subscription
                by permission on this connection (``permissions`` only).
        """
        self.prefix  # noqa: B018 - the inbox is routed before any token of it is used
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("the client is closed")
            denied = self._denied
            if denied is not None:
                if denied[1] == self._client.stats.reconnects:
                    raise PermissionViolationError(denied[0])
                self._denied = None  # a reconnect subscribed the inbox again
            first = next(self._tokens)
            if count > 1:  # the counter moves past the whole range
                self._tokens = itertools.count(first + count)
            self._lasting[first] = (first + count, sink)
            firsts = list(self._firsts)
            insort(firsts, first)
            self._firsts = firsts
        return first

    def release(self, first: int) -> None:
        """End the lasting slot that starts at ``first``: its later replies are dropped."""
        with self._lock:
            if self._lasting.pop(first, None) is not None:
                self._firsts = [f for f in self._firsts if f != first]

    def lasting_slot(self, token: int) -> tuple[S | None, int, int]:
        """The lasting slot holding ``token``: ``(sink, first, end)``, or ``(None, 0, 0)``.

        For a ``buffer_handler``, which reads tokens itself; lock-free (the
        reading thread's lookup), like the route's own.
        """
        firsts = self._firsts
        at = bisect_right(firsts, token) - 1
        if at >= 0:
            first = firsts[at]
            slot = self._lasting.get(first)
            if slot is not None and token < slot[0]:
                return slot[1], first, slot[0]
        return None, 0, 0

    def _on_replies(self, replies: list[Reply]) -> None:
        """The reading thread: hand each reply to its slot's sink, a list per sink."""
        once_pop = self._once.pop
        groups: dict[S, list[Reply]] = {}
        group: list[Reply] = []
        low = high = 0  # the tokens of the lasting slot `group` belongs to
        for reply in replies:
            text = reply[0]
            if not (len(text) <= _MAX_TOKEN_DIGITS and text.isascii() and text.isdigit()):
                continue
            token = int(text)
            if low <= token < high:  # consecutive replies of one range: the common case
                group.append(reply)
                continue
            sink = once_pop(token, None)
            if sink is None:
                sink, low, high = self.lasting_slot(token)
                if sink is None:
                    continue
            else:
                low = high = 0
            found = groups.get(sink)
            if found is None:
                found = groups[sink] = []
            group = found
            group.append(reply)
        for sink, own in groups.items():
            sink.deliver(own)

    def _on_dropped(self, text: str, error: BaseException) -> None:
        """The reading thread: the request of token ``text`` was dropped unsent; its sink
        hears of it (a one-shot slot is gone with it)."""
        if not (len(text) <= _MAX_TOKEN_DIGITS and text.isascii() and text.isdigit()):
            return
        if not isinstance(error, NatsError):
            return
        token = int(text)
        sink = self._once.pop(token, None)
        if sink is None:
            sink = self.lasting_slot(token)[0]
        if sink is not None:
            sink.lost(token, error)

    def _on_refused(self, error: BaseException) -> None:
        """The reading thread: the server refused the inbox's subscription at its limit.

        Every sink with a slot fails with ``error`` (one-shot slots are dropped),
        then the owner hears of it; the next use subscribes the same prefix again.
        """
        if not isinstance(error, NatsError):
            return
        with self._lock:
            if self._closed or self._prefix is None:
                return
            self._unrouted, self._prefix = self._prefix, None
            lasting = [sink for _, sink in self._lasting.values()]
        sinks = self._take_once()
        sinks.update((sink, None) for sink in lasting)
        for sink in sinks:
            sink.fail(error, None)
        if self._refused_hook is not None:
            self._refused_hook(error)

    def _on_permission(self, error: PermissionViolationError) -> None:
        """The reading thread (a refusal listener): when the server refused the inbox's
        subscription by permission, every sink with a slot fails with it (one-shot slots
        are dropped), and :meth:`open` raises it on this connection."""
        if error.operation != "subscription":
            return
        with self._lock:
            prefix = self._prefix
            if self._closed or prefix is None or error.subject != prefix + "*":
                return
            # Read on the connection it refuses: the reconnect count is already its own.
            self._denied = (error.text, self._client.stats.reconnects)
            lasting = [sink for _, sink in self._lasting.values()]
        sinks = self._take_once()
        sinks.update((sink, None) for sink in lasting)
        for sink in sinks:
            sink.fail(PermissionViolationError(error.text), None)

    def _on_link_lost(self) -> None:
        """The reading thread, once the writer stopped sending on a lost link: a token
        given out from now on is that of a request written for the next link."""
        with self._lock:  # open() replaces the counter under it
            self._lost_below = next(self._tokens)

    def _take_once(self, below: int | None = None) -> dict[S, None]:
        """Drop every one-shot slot (also those opened meanwhile), or those of the tokens
        under ``below``; their sinks, once each."""
        sinks: dict[S, None] = {}
        once = self._once
        if below is not None:
            pop = once.pop
            for token in [t for t in list(once) if t < below]:  # list(): one C call
                sink = pop(token, None)
                if sink is not None:  # else taken by the reading thread meanwhile
                    sinks[sink] = None
            return sinks
        while once:
            try:
                sinks[once.popitem()[1]] = None
            except KeyError:  # emptied by the reading thread meanwhile
                break
        return sinks

    def _on_status(self, status: str) -> None:
        """Events thread: the replies to what went out on the lost link will not come."""
        if status != "disconnected":
            return
        below = self._lost_below  # the latest loss's mark: it covers the earlier ones
        sinks = self._take_once(below)
        with self._lock:
            lasting = self._lasting.items()
            sinks.update((sink, None) for first, (_, sink) in lasting if first < below)
        error = ConnectionLostError("the connection dropped before the reply arrived")
        for sink in sinks:
            sink.fail(error, below)

    def close(self) -> None:
        """Fail every slot's sink and stop routing (the client closes); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            lasting = [sink for _, sink in self._lasting.values()]
            self._lasting.clear()
            self._firsts = []
        sinks = self._take_once()
        sinks.update((sink, None) for sink in lasting)
        if self._listening:
            self._client.remove_status_listener(self._on_status)
            if self._permissions:
                self._client.remove_refusal_listener(self._on_permission)
        error = ConnectionClosedError("the client closed before the reply arrived")
        for sink in sinks:
            sink.fail(error, None)
