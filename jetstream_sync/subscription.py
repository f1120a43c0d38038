"""Subscriptions: the user's handle on the messages arriving for a subject."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from . import _defaults as D
from ._deadline import Deadline, check_timeout
from ._dispatch import (
    CallbackWorker,
    Filling,
    InlineCallback,
    MsgQueue,
    refuse_in_inline_callback,
)
from .errors import NatsError
from .msg import Msg

if TYPE_CHECKING:
    from .client import Client


class Subscription:
    """Interest in a subject, with a bounded queue of pending messages.

    Without a callback, take messages with :meth:`next_msg` or by iterating.
    With ``cb=``, the callback runs on one thread owned by this subscription,
    one message at a time, in arrival order; with ``inline=True`` as well, it runs
    on the thread that read the message instead (see :meth:`Client.subscribe`).

    Layers built on a subscription (the JetStream pull engine) use
    :meth:`next_msgs`, :meth:`read_pending`, :meth:`interrupt`, :meth:`check_usable`,
    :attr:`is_active`, :meth:`unsubscribe` and :meth:`drain`, nothing else.
    In a child process forked after the client connected, every blocking
    method raises :class:`~jetstream_sync.errors.ForkedClientError`.

    Attributes:
        sid: the subscription id on the wire.
        subject: the subject (wildcards allowed).
        queue: the queue group, or ``""``.
    """

    def __init__(
        self,
        client: Client,
        sid: int,
        subject: str,
        queue: str,
        cb: Callable[[Msg], object] | None,
        msgs_limit: int,
        bytes_limit: int,
        inline: bool = False,
    ) -> None:
        self._client = client
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self._queue = MsgQueue(msgs_limit, bytes_limit)
        # Changed only by the client's SubscriptionTable, under its lock.
        self._received = 0
        self._max: int | None = None
        self._worker: CallbackWorker | InlineCallback | None = None
        self._inline: InlineCallback | None = None  # the reading thread calls it
        if cb is not None and inline:
            self._worker = self._inline = InlineCallback(cb, client._report_error)
        elif cb is not None:
            self._worker = CallbackWorker(
                self._queue, cb, client._report_error, f"jetstream_sync-sub-{sid}"
            )

    @property
    def pending_msgs(self) -> int:
        """Messages received and not yet taken."""
        return len(self._queue)

    @property
    def pending_bytes(self) -> int:
        """Payload bytes received and not yet taken."""
        return self._queue.pending_bytes

    @property
    def delivered(self) -> int:
        """Messages received for this subscription so far."""
        return self._received

    @property
    def is_active(self) -> bool:
        """False once unsubscribed, drained, auto-unsubscribed or the client closed."""
        return not self._queue.closed

    def next_msg(self, timeout: float | None = D.NEXT_MSG_TIMEOUT) -> Msg:
        """Block until the next message arrives.

        Args:
            timeout: seconds to wait; ``None`` waits forever.

        Raises:
            TimeoutError: nothing arrived in time (also the builtin ``TimeoutError``).
            NatsError: the subscription has a callback, or it ended with nothing left.
            PermissionViolationError: the server refused the subscription (nothing left).
            InlineCallbackError: called from an inline callback.
            ConnectionClosedError: the client was closed.
            ForkedClientError: called in a process forked after the client connected.
        """
        deadline = None if timeout is None else Deadline(check_timeout("timeout", timeout))
        if self._worker is not None:
            raise NatsError("next_msg() is not available on a subscription with a callback")
        refuse_in_inline_callback("next_msg()")
        self._client._check_same_process()
        msg = self._queue.get(deadline)
        if msg is None:
            raise NatsError(f"subscription to {self.subject!r} has ended")
        return msg

    def next_msgs(
        self,
        max_msgs: int = D.NEXT_MSGS_MAX,
        timeout: float | None = D.NEXT_MSG_TIMEOUT,
        *,
        deadline: Deadline | None = None,
    ) -> list[Msg]:
        """Block until a message is pending, then take up to ``max_msgs`` at once.

        Cheaper per message than :meth:`next_msg` when messages come in bursts.

        Args:
            max_msgs: the most messages to return.
            timeout: seconds to wait for the first; ``None`` waits forever.
            deadline: a ``jetstream_sync._deadline.Deadline`` to wait until
                instead of ``timeout`` (for the library's own layers, which
                carry one deadline through several waits).

        Returns:
            The messages in arrival order. An empty list once the
            subscription has ended and nothing is left (then
            :attr:`is_active` is False), or when :meth:`interrupt` was called
            and nothing is pending.

        Raises:
            TimeoutError: nothing arrived in time.
            ConnectionClosedError: the client was closed.
            ForkedClientError: called in a process forked after the client connected.
            InlineCallbackError: called from an inline callback.
        """
        if deadline is None and timeout is not None:
            deadline = Deadline(check_timeout("timeout", timeout))
        if max_msgs < 1:
            raise ValueError("max_msgs must be at least 1")
        if self._worker is not None:
            raise NatsError("next_msgs() is not available on a subscription with a callback")
        refuse_in_inline_callback("next_msgs() (a fetch)")
        self._client._check_same_process()
        return self._queue.get_batch(max_msgs, deadline)

    def read_pending(self, count: int, *, deadline: Deadline) -> None:
        """Read the connection on this thread until ``count`` messages are pending.

        For the library's own layers (a fetch), before :meth:`next_msgs`: when
        no other thread reads the connection (nor waits for a reply), this one
        reads and routes everything that arrives until ``count`` messages (or a
        status message) are pending here, or until ``deadline``. Its messages
        then need no hand-off from the reader thread. Otherwise, and always on
        the main thread (where signal handlers run), it returns at once. It
        raises nothing: what happened is for :meth:`next_msgs` to
        tell. Not for a subscription that :meth:`interrupt` may wake (the
        read notices an interrupt only between its waits, half a second
        apart) nor for one with a callback.
        """
        queue = self._queue
        if self._worker is None and not queue.filled(count):
            self._client._read_until(Filling(queue, count), deadline)

    def interrupt(self) -> None:
        """Wake the thread blocked in :meth:`next_msgs`: it returns at once.

        With nothing pending it returns an empty list while :attr:`is_active`
        stays True. When no thread is waiting, the next call returns at once
        instead. Safe from any thread; nothing is sent to the server.
        """
        self._queue.interrupt()

    def report_error(self, error: BaseException) -> None:
        """Hand ``error`` to the client's ``error_cb`` (on its events thread), and log it.

        For the library's own layers: an error of this subscription that no
        call of the application can raise (a push consumer's missed
        heartbeats), reported as an exception of its callback would be.
        Never blocks.
        """
        self._client._report_error(error)

    def check_usable(self) -> None:
        """Raise when this process may not use the subscription.

        Raises:
            ForkedClientError: this is a child process forked after the
                client connected (the subscription belongs to the parent).
        """
        if self._client._forked:  # inline: the pull engine calls this once per message
            self._client._check_same_process()

    def __iter__(self) -> Iterator[Msg]:
        """Yield messages as they arrive, until the subscription ends.

        Raises:
            ForkedClientError: iterated in a process forked after the client connected.
            InlineCallbackError: iterated in an inline callback.
        """
        if self._worker is not None:
            raise NatsError("cannot iterate a subscription with a callback")
        refuse_in_inline_callback("iterating a subscription")
        client = self._client
        while True:
            client._check_same_process()
            msg = self._queue.get(None)
            if msg is None:
                return
            yield msg

    def unsubscribe(self, limit: int | None = None) -> None:
        """Remove interest now, or after ``limit`` messages in total have arrived.

        Pending messages are discarded when unsubscribing at once. With
        ``limit``, no more than ``limit`` messages are ever delivered, however
        many are already on their way; once that many have arrived the
        subscription ends (iteration stops after the pending ones). When
        ``limit`` were already received, it ends now and keeps pending only
        what makes ``limit`` with those already taken.

        A callback subscription's callback is never called once this returns:
        called from another thread, it waits for a call in progress to return
        (a callback that never returns blocks it, as it blocks :meth:`Client.close`).
        Called from the callback itself, it returns at once.

        Raises:
            ValueError: ``limit`` is not a positive int, or is past 999,999,999
                (nats-server reads at most 9 digits).
            ForkedClientError: called in a process forked after the client connected.
            ConnectionClosedError: the client is closed.
        """
        self._client._unsubscribe(self, limit)

    def drain(self, timeout: float | None = None) -> None:
        """Stop new messages, then let the pending ones be handled.

        The server is told to stop sending; messages already on their way are
        still queued. A callback subscription returns once its callback has run
        for every one of them; a plain one returns at once and :meth:`next_msg`
        or iteration keep yielding the rest. Called from the subscription's own
        callback, it returns once the server has the UNSUB: the callback's thread
        handles the rest after that callback returns. The UNSUB never waits for
        room in the write buffer.

        Raises:
            TimeoutError: the server did not confirm the UNSUB (a flush), or the
                callback did not finish, within ``timeout``.
            InlineCallbackError: called from an inline callback (nothing was done).
        """
        self._client._drain_subscription(self, timeout)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.is_active and not self._client.is_closed:
            self.unsubscribe()

    def __repr__(self) -> str:
        return f"<Subscription sid={self.sid} subject={self.subject!r} queue={self.queue!r}>"
