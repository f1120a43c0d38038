"""Batched direct gets, each batch's replies raw, no ``Msg`` per message on the way in.

:meth:`Stream.get_msgs` sends its batched direct gets through a
:class:`DirectBatchRoute` and makes a :class:`RawStreamMsg` of each reply,
which is what a program reading a few messages wants. A bulk reader (the Spark
data source) wants columns instead: it decodes each batch's header blocks in
one call (:func:`jetstream_sync._protocol.decode_direct_batch`).

The route exists once per client (:meth:`Client.shared_resource`): one
:class:`~jetstream_sync._routes.ReplyRoute`, whose replies the reading thread
hands over as ``(token, payload, header block)`` tuples, a list per received
buffer. Each request holds its own token (a lasting slot: a batch has many
replies) and queue, so several readers (or replicas answering one reader's
consecutive requests) never mix. A request in flight when the connection drops
fails at once with :class:`ConnectionLostError`; one in flight when the client
closes, with :class:`ConnectionClosedError`.
"""

from __future__ import annotations

import json
import queue
from typing import TYPE_CHECKING, Any

from .. import _protocol
from .._deadline import Deadline
from .._reply import is_status_block
from .._routes import ReplyRoute
from .._subjects import filter_subject
from ..errors import (
    ConnectionClosedError,
    ConnectionLostError,
    MaxPayloadError,
    MaxSubscriptionsExceededError,
    NatsError,
    NoRespondersError,
    PermissionViolationError,
    TimeoutError,
    api_error,
)
from . import _api
from . import _checks as ck

if TYPE_CHECKING:
    from .._reply import Reply
    from ..client import Client
    from .stream import Stream

__all__ = [
    "DirectBatchRoute",
    "PendingBatch",
    "batch_status",
    "direct_batch_route",
]

_RESOURCE_KEY = "jetstream.direct_batch"
_BATCHED_GET_LEVEL = 1  # the server's api_lvl from which batched direct get exists (2.11)


class DirectBatchRoute:
    """A client's reply route for batched direct gets; see the module docstring.

    Args:
        client: the connection the requests go through.
    """

    def __init__(self, client: Client) -> None:
        self._client = client
        self._route: ReplyRoute[PendingBatch] = ReplyRoute(client, permissions=True)

    def send(
        self,
        stream: Stream,
        start_seq: int,
        batch: int,
        subject: str | None,
        deadline: Deadline,
        max_bytes: int | None = None,
    ) -> PendingBatch:
        """Send one batched direct get: up to ``batch`` messages from ``start_seq``.

        Args:
            stream: the stream to read.
            start_seq: the first sequence to look at.
            batch: the most messages to return.
            subject: only messages on this subject (wildcards allowed), or None.
            deadline: when the whole batch must have arrived.
            max_bytes: the server ends the batch with the message that reaches this
                many bytes (subjects, stored headers and payloads), or None.

        Returns:
            The request in flight: :meth:`PendingBatch.replies` collects its replies.

        Raises:
            RequiredApiLevelError: the server is older than 2.11.
            ConnectionClosedError: the client is closed.
            PermissionViolationError: the server refused the replies' inbox by
                permission on this connection; nothing was sent.
        """
        body: dict[str, Any] = {"seq": ck.sequence(start_seq, "start_seq"), "batch": int(batch)}
        if subject:
            body["next_by_subj"] = filter_subject(subject)
        if max_bytes:
            body["max_bytes"] = max_bytes
        return self.send_body(stream, body, deadline)

    def send_body(self, stream: Stream, body: dict[str, Any], deadline: Deadline) -> PendingBatch:
        """Send one batched direct get whose request is ``body``, already checked (its
        ``batch``, or ``multi_last``, makes it a batched one); otherwise as :meth:`send`."""
        client = self._client
        if int(client.server_info.get("api_lvl", 0)) < _BATCHED_GET_LEVEL:
            raise _api.RequiredApiLevelError(
                412, 10185, "batched direct get needs nats-server 2.11 or newer"
            )
        pending = PendingBatch(self._route, stream, deadline)
        token = pending.open()
        try:
            client.publish(
                stream._api.subject(_api.DIRECT_GET, stream=stream.name),
                json.dumps(body).encode(),
                reply=f"{self._route.prefix}{token}",
                timeout=max(deadline.remaining(), 0.001),
            )
        except BaseException:
            pending.close()
            raise
        return pending

    def close(self) -> None:
        """Fail the requests in flight (the client closed); called by :meth:`Client.close`."""
        self._route.close()


class PendingBatch:
    """One batched direct get in flight, its token's sink; made by :meth:`DirectBatchRoute.send`.

    Attributes:
        deadline: when the whole batch must have arrived.
    """

    def __init__(self, route: ReplyRoute[PendingBatch], stream: Stream, deadline: Deadline) -> None:
        self._route = route
        self._stream = stream
        self._token = 0
        # Each buffer's replies, or the error that ends the request.
        self._queue: queue.SimpleQueue[list[Reply] | NatsError] = queue.SimpleQueue()
        self.deadline = deadline

    def open(self) -> int:
        """Take this request's token from the route."""
        self._token = self._route.open(self)
        return self._token

    def deliver(self, replies: list[Reply]) -> None:
        """The reading thread: this request's replies of one buffer."""
        self._queue.put(replies)

    def fail(self, error: NatsError, below: int | None = None) -> None:
        """The connection dropped, the client closed or the server refused the inbox (at its
        subscription limit or by permission: the reading thread): no more replies will come."""
        self._queue.put(error)

    def lost(self, token: int, error: NatsError) -> None:
        """The request was dropped unsent (too big for the server reconnected to)."""
        self._queue.put(error)

    def replies(self) -> list[Reply]:
        """Block until the batch's closing status reply; return every reply, it included.

        The last reply is a status (``204`` end of batch, ``404`` nothing
        found, or an error: check it with :func:`batch_status`); the others
        are the messages, in sequence order. Releases the request's token.

        Raises:
            TimeoutError: the batch did not end before the deadline.
            ConnectionLostError: the connection dropped meanwhile.
            ConnectionClosedError: the client closed meanwhile.
            MaxSubscriptionsExceededError: the server refused the replies' inbox
                at its subscription limit (the next batch subscribes it again).
            PermissionViolationError: the server refused the replies' inbox by
                permission (the next batch on this connection raises it unsent).
        """
        out: list[Reply] = []
        try:
            while True:
                left = self.deadline.remaining()
                try:
                    got = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    raise TimeoutError(
                        f"batched direct get on {self._stream.name!r} timed out "
                        f"after {len(out)} replies"
                    ) from None
                if isinstance(got, ConnectionLostError):
                    raise ConnectionLostError(
                        f"the connection dropped during a batched direct get on "
                        f"{self._stream.name!r}"
                    )
                if isinstance(got, MaxPayloadError):  # the request was dropped unsent
                    raise MaxPayloadError(str(got))
                if isinstance(got, MaxSubscriptionsExceededError):  # the inbox was refused
                    raise MaxSubscriptionsExceededError(str(got))
                if isinstance(got, PermissionViolationError):  # the inbox was refused
                    raise PermissionViolationError(got.text)
                if isinstance(got, NatsError):
                    raise ConnectionClosedError("the client is closed")
                out += got
                if is_status_block(out[-1][2]):  # a status ends the batch
                    return out
        finally:
            self.close()

    def close(self) -> None:
        """Stop collecting this request's replies (late ones are dropped)."""
        if self._token:
            self._route.release(self._token)


def batch_status(stream: Stream, block: bytes | None, deadline: Deadline) -> int:
    """The status that ended a batch: ``204`` or ``404``, else the error it means, raised.

    Args:
        stream: the stream read.
        block: the header block of the batch's last reply.
        deadline: the batch's deadline (a ``503`` asks the server why).

    Raises:
        DirectGetNotAllowedError: ``503``, and the stream does not allow direct get.
        NoRespondersError: ``503`` otherwise.
        APIError: any other status (``408`` bad request...).
        ProtocolError: the block is not a status.
    """
    status, description, _ = _protocol.parse_headers(block or b"")
    if status in (204, 404):
        return status
    if status == 503:
        stream._check_allows_direct(deadline)
        raise NoRespondersError(
            f"no responders for a batched direct get on stream {stream.name!r} "
            "(allow_direct is set; its replicas may not be subscribed yet: ask again)"
        )
    if status is None:
        raise api_error(0, 0, "a batched direct get ended without a status reply")
    raise api_error(status, 0, description or f"batched direct get failed with status {status}")


def direct_batch_route(client: Client) -> DirectBatchRoute:
    """The client's one :class:`DirectBatchRoute` (made on first use)."""
    return client.shared_resource(_RESOURCE_KEY, DirectBatchRoute)
