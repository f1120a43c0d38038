"""One pull request (``fetch``), and what every pull shares: request bodies, statuses, pins.

Facts from ``server/consumer.go`` and nats.go's ``jetstream/pull.go`` (ADR-13,
ADR-37, ADR-42). A pull request is JSON published to
``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`` with an inbox as reply;
the server answers on that inbox with messages and these statuses:

==========  ======================================  =============================
status      description                             meaning here
==========  ======================================  =============================
100         Idle Heartbeat                          alive; resets the heartbeat clock
404         No Messages                             no_wait request found nothing: done
408         Request Timeout / Interest Expired      request expired: done (pending headers)
409         Message Size Exceeds MaxBytes           next message too big: done (pending)
409         Batch Completed                         batch done, bytes left: done (pending)
409         Exceeded MaxWaiting / MaxRequest...     warning: the request was refused
409         Leadership Change                       warning: pending requests dropped
409         Server Shutdown                         warning: pending requests dropped
409         Consumer Deleted                        terminal: ConsumerDeletedError
409         Consumer is push based                  terminal: ConsumerPushBasedError
400         Bad Request...                          terminal: PullBadRequestError
423         Nats-Pin-Id mismatch / Wrong-Pin-Id     warning: pin lost (cleared)
503         (no responders)                         nobody serves the consumer now
==========  ======================================  =============================

Every fetch uses a fresh inbox, unsubscribed when it returns, so a late
status from an earlier request can never end a later one. The continuous
modes live in ``_pull_stream.py``. Both use only the subscription's
``next_msgs`` / ``interrupt`` / ``is_active`` / ``check_usable``, and
``jetstream_sync.msg.first_status`` with the message's ``status`` /
``header_size``, never their internals.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .._deadline import Deadline, check_timeout
from ..errors import (
    ConnectionClosedError,
    ConsumerDeletedError,
    ConsumerPushBasedError,
    LeadershipChangedError,
    NoHeartbeatError,
    NoRespondersError,
    PinIdMismatchError,
    PullBadRequestError,
    PullRequestLimitError,
    PullStatusError,
    ServerShutdownError,
    TimeoutError,
)
from ..msg import Msg, first_status

if TYPE_CHECKING:
    from ..client import Client

PIN_ID = "Nats-Pin-Id"

# Status kinds.
HEARTBEAT = 0
DONE = 1
WARNING = 2
TERMINAL = 3
NO_RESPONDERS = 4

# The server expires a fetch's request this long before the caller's timeout,
# so the 408 (not the client's clock) normally ends the fetch.
EXPIRY_MARGIN = 0.1
NS = 1_000_000_000


def classify(msg: Msg) -> tuple[int, BaseException | None]:
    """Sort a status message into a kind, with the error it stands for (if any)."""
    status = msg.status
    text = msg.description
    lower = text.lower()
    if status == 100:
        return HEARTBEAT, None
    if status in (404, 408):
        return DONE, None
    if status == 409:
        if "exceeds maxbytes" in lower or "batch completed" in lower:
            return DONE, None
        if "consumer deleted" in lower:
            return TERMINAL, ConsumerDeletedError(f"the consumer was deleted ({text})")
        if "push based" in lower:
            return TERMINAL, ConsumerPushBasedError(409, text)
        if "leadership change" in lower:
            return WARNING, LeadershipChangedError(409, text)
        if "server shutdown" in lower:
            return WARNING, ServerShutdownError(409, text)
        if "exceeded" in lower:
            return WARNING, PullRequestLimitError(409, text)
        return WARNING, PullStatusError(409, text)
    if status == 400:
        return TERMINAL, PullBadRequestError(400, text)
    if status == 423:
        return WARNING, PinIdMismatchError(423, text)
    if status == 503:
        return NO_RESPONDERS, NoRespondersError("no responders for the pull request")
    return WARNING, PullStatusError(status or 0, text)


class Priority:
    """Priority-group options of pull requests (ADR-42), and the pin id being tracked.

    Args:
        group: the priority group to pull in.
        min_pending: OVERFLOW: only serve while the consumer has at least this
            many pending messages.
        min_ack_pending: OVERFLOW: only serve while at least this many acks
            are pending.
        priority: PRIORITIZED: 0 (highest) to 9.
    """

    __slots__ = ("group", "min_pending", "min_ack_pending", "priority", "pin_id")

    def __init__(
        self,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> None:
        if group is None and (min_pending or min_ack_pending or priority is not None):
            raise ValueError("min_pending, min_ack_pending and priority need group=")
        if priority is not None and not 0 <= priority <= 9:
            raise ValueError("priority must be between 0 and 9")
        self.group = group
        self.min_pending = min_pending
        self.min_ack_pending = min_ack_pending
        self.priority = priority
        self.pin_id: str | None = None

    def fill(self, body: dict[str, Any]) -> None:
        """Add the group fields (and the current pin id) to a request body."""
        body["group"] = self.group
        if self.min_pending:
            body["min_pending"] = self.min_pending
        if self.min_ack_pending:
            body["min_ack_pending"] = self.min_ack_pending
        if self.priority is not None:
            body["priority"] = self.priority
        if self.pin_id:
            body["id"] = self.pin_id

    def track(self, msg: Msg) -> None:
        """Remember the pin id a delivered message carries."""
        pin = msg.headers.get(PIN_ID) if msg.header_size else None
        if pin:
            self.pin_id = pin


def request_body(
    batch: int,
    expires: float | None,
    max_bytes: int | None = None,
    heartbeat: float | None = None,
    no_wait: bool = False,
    priority: Priority | None = None,
) -> bytes:
    """The JSON of one pull request (durations in ns on the wire)."""
    body: dict[str, Any] = {"batch": batch}
    if expires:
        body["expires"] = int(expires * NS)
    if max_bytes:
        body["max_bytes"] = max_bytes
    if no_wait:
        body["no_wait"] = True
    if heartbeat:
        body["idle_heartbeat"] = int(heartbeat * NS)
    if priority is not None and priority.group:
        priority.fill(body)
    return json.dumps(body, separators=(",", ":")).encode()


def check_heartbeat(heartbeat: float | None, expires: float | None) -> float | None:
    """Validate an idle-heartbeat interval against the request expiry."""
    if heartbeat is None:
        return None
    heartbeat = check_timeout("heartbeat", heartbeat)
    if expires is not None and heartbeat > expires / 2:
        raise ValueError("heartbeat must be at most half of the request expiry")
    return heartbeat


# --------------------------------------------------------------------------- fetch


def fetch(
    client: Client,
    next_subject: str,
    batch: int,
    timeout: float,
    *,
    max_bytes: int | None = None,
    heartbeat: float | None = None,
    no_wait: bool = False,
    priority: Priority | None = None,
) -> list[Msg]:
    """One pull request on a fresh inbox; collect until done, full, or ``timeout``.

    Returns the user messages received (possibly none).

    Raises:
        ConsumerDeletedError, ConsumerPushBasedError, PullBadRequestError:
            terminal statuses.
        PullStatusError: a warning status ended the request before any message.
        NoHeartbeatError: two heartbeats were missed before any message came.
        NoRespondersError: nothing serves the consumer (it does not exist or
            JetStream is not available).
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    deadline = Deadline(timeout)
    expires = None if no_wait else max(timeout - EXPIRY_MARGIN, timeout / 2)
    if not no_wait:
        heartbeat = check_heartbeat(heartbeat, expires)
    else:
        heartbeat = None
    inbox = client.new_inbox()
    sub = client.subscribe(inbox)
    msgs: list[Msg] = []
    track = priority is not None and priority.group is not None
    try:
        try:
            client.publish(
                next_subject,
                request_body(batch, expires, max_bytes, heartbeat, no_wait, priority),
                reply=inbox,
                timeout=timeout,
            )
        except TimeoutError:  # no room in the write buffer: nothing was asked, nothing came
            return msgs
        hb_wait = None if heartbeat is None else Deadline(2 * heartbeat)
        wait = deadline
        while len(msgs) < batch:
            if hb_wait is not None:
                wait = hb_wait if hb_wait.end < deadline.end else deadline
            try:
                got = sub.next_msgs(batch - len(msgs), None, deadline=wait)
            except TimeoutError:
                if wait is deadline:
                    break
                if msgs:
                    break
                raise NoHeartbeatError("no heartbeat from the server during fetch") from None
            if not got:
                break
            if hb_wait is not None:
                hb_wait = Deadline(2 * heartbeat)  # type: ignore[operator]
            done = False
            i, n = 0, len(got)
            while i < n:
                j = first_status(got, i)
                if j > i:  # user messages up to the next status
                    user = got[i:j] if i or j < n else got
                    msgs.extend(user)
                    if track:
                        for msg in user:
                            priority.track(msg)  # type: ignore[union-attr]
                    if j == n:
                        break
                msg = got[j]
                i = j + 1
                kind, error = classify(msg)
                if kind == HEARTBEAT:
                    continue
                if kind == DONE:
                    done = True
                    break
                if isinstance(error, PinIdMismatchError):
                    priority.pin_id = None  # type: ignore[union-attr]
                if kind == NO_RESPONDERS and not msgs:
                    raise NoRespondersError(
                        f"no responders for the pull request on {next_subject!r} "
                        "(does the consumer exist?)",
                        next_subject,
                    )
                if kind == TERMINAL or not msgs:
                    raise error  # type: ignore[misc]
                done = True
                break
            if done:
                break
    finally:
        try:
            sub.unsubscribe()
        except ConnectionClosedError:
            pass
    return msgs
