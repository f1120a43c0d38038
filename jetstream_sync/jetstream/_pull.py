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
                                                    (PriorityGroupError: group options)
423         Nats-Pin-Id mismatch / Wrong-Pin-Id     pin lost: cleared, pulled again
400         Not a Pinned Client Priority consumer   the same (a pin from before a policy change)
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
from typing import TYPE_CHECKING, Any, NamedTuple

from .._deadline import Deadline, check_timeout
from .._dispatch import refuse_in_inline_callback
from ..errors import (
    ConnectionClosedError,
    ConsumerDeletedError,
    ConsumerPushBasedError,
    LeadershipChangedError,
    NoHeartbeatError,
    NoRespondersError,
    PermissionViolationError,
    PinIdMismatchError,
    PriorityGroupError,
    PullBadRequestError,
    PullRequestLimitError,
    PullStatusError,
    ServerShutdownError,
    TimeoutError,
)
from ..msg import Msg, first_status, pull_size
from ._checks import MAX_INT64, group_names

if TYPE_CHECKING:
    from ..client import Client
    from ..subscription import Subscription

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


def classify(msg: Msg, group: str | None = None) -> tuple[int, BaseException | None]:
    """Sort a status message into a kind, with the error it stands for (if any).

    ``group`` is the priority group the request named, for the text of a
    :class:`PriorityGroupError`.
    """
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
        if "not a pinned client" in lower:
            # Only a pull with a pin id gets this: the consumer left PINNED_CLIENT since
            # the pin was won, so the pin is stale, as after a 423.
            return WARNING, PinIdMismatchError(400, text)
        if "priority" in lower:  # the server's priority-group refusals (ADR-42)
            return TERMINAL, PriorityGroupError(text, group, 400)
        return TERMINAL, PullBadRequestError(400, text)
    if status == 423:
        return WARNING, PinIdMismatchError(423, text)
    if status == 503:
        return NO_RESPONDERS, NoRespondersError("no responders for the pull request")
    return WARNING, PullStatusError(status or 0, text)


class Pin:
    """The pin id one consumer handle holds in one priority group (ADR-42).

    Shared by every pull the handle makes in the group (fetch after fetch,
    ``messages()``, ``consume()``), as nats.go keeps one pin per consumer:
    the server's ``Nats-Pin-Id`` header sets it, a 423 clears it.
    """

    __slots__ = ("id",)

    def __init__(self) -> None:
        self.id: str | None = None

    def clear(self, sent: str | None) -> None:
        """Forget the pin after a 423 to a request that carried ``sent``.

        A pin won meanwhile (by another pull of the handle) is kept.
        """
        if self.id == sent:
            self.id = None


def _option(name: str, value: int | None, low: int, high: int, group: str | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise PriorityGroupError(f"{name} must be an int, got {value!r}", group)
    if not low <= value <= high:
        raise PriorityGroupError(f"{name} must be between {low} and {high}, got {value}", group)


class Priority:
    """Priority-group options of pull requests (ADR-42), with the group's shared :class:`Pin`.

    Args:
        group: the priority group to pull in (1-16 characters of
            ``a-z A-Z 0-9 / _ = -``, the server's rule).
        min_pending: OVERFLOW: only serve while the consumer has at least this
            many pending messages.
        min_ack_pending: OVERFLOW: only serve while at least this many acks
            are pending.
        priority: PRIORITIZED: 0 (highest) to 9.
        pin: the handle's pin in ``group`` (a fresh one when omitted).

    Raises:
        PriorityGroupError: an option without ``group``, a bad group name, or
            a value out of range (before anything is sent).
    """

    __slots__ = ("group", "min_pending", "min_ack_pending", "priority", "pin")

    def __init__(
        self,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
        pin: Pin | None = None,
    ) -> None:
        # The server reads both as int64: a larger one would be refused after sending.
        _option("min_pending", min_pending, 0, MAX_INT64, group)
        _option("min_ack_pending", min_ack_pending, 0, MAX_INT64, group)
        _option("priority", priority, 0, 9, group)
        if group is None:
            if min_pending or min_ack_pending or priority is not None:
                raise PriorityGroupError("min_pending, min_ack_pending and priority need group=")
        elif not isinstance(group, str):
            raise PriorityGroupError(f"group must be a str, got {group!r}")
        else:
            try:
                group_names((group,), "group")
            except ValueError:
                raise PriorityGroupError(
                    "a group name must be 1-16 characters of a-z A-Z 0-9 / _ = -", group
                ) from None
        self.group = group
        self.min_pending = min_pending
        self.min_ack_pending = min_ack_pending
        self.priority = priority
        self.pin = pin if pin is not None else Pin()

    def fill(self, body: dict[str, Any]) -> str | None:
        """Add the group fields and the current pin id to a request body; return the pin id."""
        body["group"] = self.group
        if self.min_pending:
            body["min_pending"] = self.min_pending
        if self.min_ack_pending:
            body["min_ack_pending"] = self.min_ack_pending
        if self.priority is not None:
            body["priority"] = self.priority
        pin = self.pin.id
        if pin:
            body["id"] = pin
        return pin

    def track(self, msg: Msg) -> None:
        """Remember the pin id a delivered message carries."""
        pin = msg.headers.get(PIN_ID) if msg.header_size else None
        if pin:
            self.pin.id = pin


class RequestLimits(NamedTuple):
    """A pull consumer's limits on each request, from its config (0: no limit).

    ``max_batch``, ``max_bytes`` and ``max_expires``: the server refuses a request
    past one with a 409 "Exceeded MaxRequest...". Sizes the client picks itself (a
    bytes-limited pull's batch, what ``messages()`` keeps requested) keep within them.
    """

    batch: int = 0
    bytes: int = 0
    expires: float = 0.0

    def cap_batch(self, batch: int) -> int:
        """``batch``, or the consumer's ``max_batch`` if that is smaller."""
        return min(batch, self.batch) if self.batch else batch

    def cap_timeout(self, timeout: float) -> float:
        """A :func:`fetch` ``timeout``, shortened so that its request expires within
        the consumer's ``max_expires`` (the server refuses a longer one)."""
        if not self.expires:
            return timeout
        return min(timeout, self.expires + EXPIRY_MARGIN, 2 * self.expires)


NO_LIMITS = RequestLimits()

# The server's texts for a request past one of RequestLimits (server/consumer.go).
_REFUSALS = (("maxrequestbatch", "batch"), ("maxrequestexpires", "expires"),
             ("maxrequestmaxbytes", "bytes"))  # fmt: skip


def refused_limit(error: BaseException | None) -> str | None:
    """Which of :class:`RequestLimits` a refused pull broke: ``"batch"``, ``"expires"``
    or ``"bytes"`` (None: another error, such as a refusal past ``max_waiting``)."""
    if not isinstance(error, PullRequestLimitError):
        return None
    text = error.description.lower()
    for needle, limit in _REFUSALS:
        if needle in text:
            return limit
    return None


def check_size(name: str, value: int) -> int:
    """A pull's ``batch`` or ``max_bytes``: a positive int within the server's int64.

    Raises:
        ValueError: not an int, under 1, or past 2**63 - 1 (nothing is sent).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if value > MAX_INT64:
        raise ValueError(f"{name} must be at most {MAX_INT64} (the server's int64), got {value}")
    return value


def request_fields(
    batch: int,
    expires: float | None,
    max_bytes: int | None = None,
    heartbeat: float | None = None,
    no_wait: bool = False,
    priority: Priority | None = None,
) -> tuple[bytes, str | None]:
    """The JSON of one pull request (durations in ns on the wire) and the pin id it carries."""
    body: dict[str, Any] = {"batch": batch}
    if expires:
        body["expires"] = int(expires * NS)
    if max_bytes:
        body["max_bytes"] = max_bytes
    if no_wait:
        body["no_wait"] = True
    if heartbeat:
        body["idle_heartbeat"] = int(heartbeat * NS)
    pin = None
    if priority is not None and priority.group:
        pin = priority.fill(body)
    return json.dumps(body, separators=(",", ":")).encode(), pin


def request_body(
    batch: int,
    expires: float | None,
    max_bytes: int | None = None,
    heartbeat: float | None = None,
    no_wait: bool = False,
    priority: Priority | None = None,
) -> bytes:
    """The JSON of one pull request (durations in ns on the wire)."""
    return request_fields(batch, expires, max_bytes, heartbeat, no_wait, priority)[0]


def check_heartbeat(heartbeat: float | None, expires: float | None) -> float | None:
    """Validate an idle-heartbeat interval against the request expiry (a fetch: its timeout)."""
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

    Returns the user messages received (possibly none). A ``heartbeat`` over half
    the request's expiry is lowered to it (the caller checks it against its own
    timeout: see :func:`check_heartbeat`). A 423 (this handle's
    pin in its priority group is no longer valid) clears the pin and, when
    nothing came yet, pulls again without it for the rest of ``timeout``, as
    ADR-42 asks of clients: the request then waits as a candidate for the pin.

    Raises:
        ConsumerDeletedError, ConsumerPushBasedError, PullBadRequestError:
            terminal statuses.
        PriorityGroupError: the server refused the request's priority-group options.
        PullStatusError: a warning status ended the request before any message.
        NoHeartbeatError: two heartbeats were missed before any message came.
        NoRespondersError: nothing serves the consumer (it does not exist or
            JetStream is not available).
        PermissionViolationError: the user may not publish the pull request
            (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``) or subscribe to its
            inbox, raised as soon as the server's ``-ERR`` arrives.
        MaxSubscriptionsExceededError: the server refused the inbox's subscription
            at the connection's subscription limit, raised as soon as that is known.
        InlineCallbackError: called from an inline callback; nothing was sent.
    """
    check_size("batch", batch)
    if max_bytes is not None:
        check_size("max_bytes", max_bytes)
    refuse_in_inline_callback("a fetch")  # before the pull request is sent
    deadline = Deadline(timeout)
    expires = None if no_wait else max(timeout - EXPIRY_MARGIN, timeout / 2)
    if not no_wait:
        # The request expires a little before the timeout: it asks for heartbeats at
        # most half its expiry apart (the server's rule).
        heartbeat = check_heartbeat(heartbeat, None)
        if heartbeat is not None:
            heartbeat = min(heartbeat, expires / 2)  # type: ignore[operator]
    else:
        heartbeat = None
    inbox = client.new_inbox()
    # Listening before the SUB goes out: the server's refusal of it may be read before
    # subscribe() returns.
    refusal = Refusal(next_subject, inbox)
    client.add_refusal_listener(refusal)
    try:
        # Checked: at the subscription limit the refused inbox raises, not times out.
        sub = client.subscribe(inbox, checked=True)
    except BaseException:
        client.remove_refusal_listener(refusal)
        raise
    refusal.watch(sub)
    msgs: list[Msg] = []
    track = priority is not None and priority.group is not None
    group = priority.group if priority is not None else None
    try:
        body, sent_pin = request_fields(batch, expires, max_bytes, heartbeat, no_wait, priority)
        try:
            client.publish(next_subject, body, reply=inbox, timeout=timeout)
        except TimeoutError:  # no room in the write buffer: nothing was asked, nothing came
            return msgs
        hb_wait = None if heartbeat is None else Deadline(2 * heartbeat)
        # The server ends a request whose bytes are used up exactly without a status.
        bytes_left = max_bytes
        while len(msgs) < batch and (bytes_left is None or bytes_left > 0):
            wait = hb_wait if hb_wait is not None and hb_wait.end < deadline.end else deadline
            sub.read_pending(batch - len(msgs), deadline=wait)  # no hand-off when we can read
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
                    if bytes_left is not None:
                        bytes_left -= sum(map(pull_size, user))
                    if track:
                        for msg in user:
                            priority.track(msg)  # type: ignore[union-attr]
                    if j == n:
                        break
                msg = got[j]
                i = j + 1
                kind, error = classify(msg, group)
                if kind == HEARTBEAT:
                    continue
                if kind == DONE:
                    done = True
                    break
                if isinstance(error, PinIdMismatchError) and priority is not None:
                    priority.pin.clear(sent_pin)
                    if not msgs and sent_pin:
                        # The 423 removed the request; ask again without the pin.
                        heartbeat, sent_pin = _repull(
                            client, next_subject, inbox, batch, deadline,
                            max_bytes, heartbeat, no_wait, priority,
                        )  # fmt: skip
                        hb_wait = None if heartbeat is None else Deadline(2 * heartbeat)
                        continue
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
        if refusal.error is not None and not msgs:
            raise refusal.error
    finally:
        client.remove_refusal_listener(refusal)
        try:
            sub.unsubscribe()
        except ConnectionClosedError:
            pass
    return msgs


class Refusal:
    """A refusal listener (``Client.add_refusal_listener``) for pulls: the server refused
    a pull request published to ``subject``, or the subscription of the pull's ``inbox``
    (nothing would ever come: the pull must not look merely empty). It keeps the
    error and wakes the reader of the subscription it :meth:`watch`-es.

    It is added before the inbox is subscribed: the server's ``-ERR`` for that SUB may
    be read before ``subscribe()`` returns.

    Attributes:
        error: the :class:`PermissionViolationError` of a refused pull or inbox, or None.
    """

    __slots__ = ("_subject", "_inbox", "_sub", "error")

    def __init__(self, subject: str, inbox: str) -> None:
        self._subject = subject
        self._inbox = inbox
        self._sub: Subscription | None = None
        self.error: PermissionViolationError | None = None

    def watch(self, sub: Subscription) -> None:
        """Wake ``sub``'s reader on a refusal, one already kept included."""
        self._sub = sub
        if self.error is not None:  # it came first: the listener saw no sub to wake
            sub.interrupt()

    def __call__(self, error: PermissionViolationError) -> None:
        if error.operation == "publish":
            refused = error.subject == self._subject
        else:
            refused = error.operation == "subscription" and error.subject == self._inbox
        if refused:
            self.error = error
            sub = self._sub
            if sub is not None:
                sub.interrupt()


def _repull(
    client: Client,
    next_subject: str,
    inbox: str,
    batch: int,
    deadline: Deadline,
    max_bytes: int | None,
    heartbeat: float | None,
    no_wait: bool,
    priority: Priority,
) -> tuple[float | None, str | None]:
    """Send a fetch's request again (its pin was cleared) for the time left.

    Returns the heartbeat interval asked for (none when it no longer fits in
    half the shorter expiry) and the pin id sent. Nothing is sent when too
    little time is left or the write buffer has no room: the fetch then ends
    at its deadline.
    """
    left = deadline.remaining()
    if left <= 2 * EXPIRY_MARGIN:
        return None, None
    expires = None if no_wait else left - EXPIRY_MARGIN
    if heartbeat is not None and (expires is None or 2 * heartbeat > expires):
        heartbeat = None
    body, pin = request_fields(batch, expires, max_bytes, heartbeat, no_wait, priority)
    try:
        client.publish(next_subject, body, reply=inbox, timeout=left)
    except TimeoutError:
        return None, None
    return heartbeat, pin
