"""The JetStream API: subject templates and the one JSON request helper.

Every ``$JS.API.*`` call goes through :meth:`JsApi.request_json`, which sends
JSON (or nothing), waits within the caller's deadline, and turns an ``error``
reply into the matching :class:`~jetstream_sync.errors.APIError` subclass.
The paged listings (stream and consumer names and infos) go through
:meth:`JsApi.pages`, one request per page.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from .._deadline import Deadline, check_timeout, seconds_text
from .._subjects import (
    ApiSubject,
    check_control_line,
    filter_subject,
    name_token,
    publish_subject,
)
from ..errors import (
    APIError,
    JetStreamNotEnabledError,
    NoRespondersError,
    RequiredApiLevelError,
    TimeoutError,
    api_error,
)

__all__ = ["JsApi", "RequiredApiLevelError", "api_prefix", "check_api_reply"]

if TYPE_CHECKING:
    from ..client import Client
    from ..msg import Msg

# The templates of every API subject, relative to the API prefix.
ACCOUNT_INFO = "INFO"
STREAM_CREATE = "STREAM.CREATE.{stream}"
STREAM_UPDATE = "STREAM.UPDATE.{stream}"
STREAM_DELETE = "STREAM.DELETE.{stream}"
STREAM_INFO = "STREAM.INFO.{stream}"
STREAM_NAMES = "STREAM.NAMES"
STREAM_LIST = "STREAM.LIST"
STREAM_PURGE = "STREAM.PURGE.{stream}"
STREAM_MSG_GET = "STREAM.MSG.GET.{stream}"
STREAM_MSG_DELETE = "STREAM.MSG.DELETE.{stream}"
DIRECT_GET = "DIRECT.GET.{stream}"
DIRECT_GET_LAST = "DIRECT.GET.{stream}.{subject}"
CONSUMER_CREATE = "CONSUMER.CREATE.{stream}.{consumer}"
CONSUMER_CREATE_FILTERED = "CONSUMER.CREATE.{stream}.{consumer}.{filter}"
CONSUMER_INFO = "CONSUMER.INFO.{stream}.{consumer}"
CONSUMER_DELETE = "CONSUMER.DELETE.{stream}.{consumer}"
CONSUMER_NAMES = "CONSUMER.NAMES.{stream}"
CONSUMER_LIST = "CONSUMER.LIST.{stream}"
CONSUMER_PAUSE = "CONSUMER.PAUSE.{stream}.{consumer}"
CONSUMER_UNPIN = "CONSUMER.UNPIN.{stream}.{consumer}"
CONSUMER_NEXT = "CONSUMER.MSG.NEXT.{stream}.{consumer}"

REQUIRED_LEVEL_HEADER = "Nats-Required-Api-Level"

# Seconds a try of a read-only request waits before the request is sent again (a
# stream or consumer electing a leader drops what it gets meanwhile).
ASK_AGAIN_AFTER = 2.0
# A read-only request answered "JetStream system temporarily unavailable" (the
# stream or consumer has no leader yet) is sent again this many seconds later.
UNAVAILABLE = 10008
UNAVAILABLE_PAUSE = 0.25


# The template fields that hold a filter subject (wildcards allowed, always the
# last part of the subject); every other field is one name token.
_TAIL_FIELDS = frozenset(("filter", "subject"))
# The template fields an API error names (what was not found, for instance).
_NAMED_FIELDS = frozenset(("stream", "consumer"))
# What a request's control line adds to its API subject beyond the reply inbox
# and the two sizes: "HPUB ", three spaces, CRLF, and the reply token after the
# inbox (up to 20 digits) with its dot. The sizes (header, total) are at most
# max_payload: as many digits each. Key-Value and Object Store count the same way.
_LINE_OVERHEAD = 5 + 3 + 2 + 21
# How error texts name each template field.
_FIELD_NAMES = {"filter": "filter subject", "subject": "subject"}


def api_prefix(prefix: str | None, domain: str | None) -> str:
    """The API subject prefix for a context (``$JS.API``, a custom one, or a domain's).

    Raises:
        ValueError: both were given.
        BadSubjectError: ``prefix`` is not a publish subject or ``domain`` not
            one name token.
    """
    if prefix and domain:
        raise ValueError("give prefix or domain, not both")
    if domain:
        return f"$JS.{name_token(domain, 'domain')}.API"
    if prefix:
        prefix = prefix.rstrip(".")
        publish_subject(prefix, "API prefix")
        return prefix
    return "$JS.API"


def check_api_reply(body: dict[str, Any], **about: Any) -> dict[str, Any]:
    """Raise the typed error an API reply carries, or return the reply.

    Args:
        body: the decoded reply.
        **about: what the request was about (``stream``, ``consumer``, ``seq``,
            ``subject``), named by the error so that a not-found error says
            what was not found.
    """
    error = body.get("error")
    if error:
        raise api_error(
            int(error.get("code", 0)),
            int(error.get("err_code", 0)),
            error.get("description", ""),
            **about,
        )
    return body


class _Budget:
    """One timeout spread over the server round trips of a lazy listing."""

    def __init__(self, timeout: float) -> None:
        self.left = timeout

    def run(self, fn: Callable[[Deadline], Any]) -> Any:
        deadline = Deadline(self.left)
        try:
            return fn(deadline)
        finally:
            self.left = max(deadline.remaining(), 0.0)


class JsApi:
    """Sends JetStream API requests for one context.

    Args:
        client: the connection.
        prefix: the API prefix (see :func:`api_prefix`).
    """

    def __init__(self, client: Client, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        # A request's reply inbox is as long as any new inbox of the client.
        size = len(str(client.max_payload))
        self._line_overhead = len(client.new_inbox()) + _LINE_OVERHEAD + 2 * size

    def subject(self, template: str, **parts: str) -> ApiSubject:
        """The full subject of an API call, from parts checked by their roles.

        ``filter`` and ``subject`` parts (the tail) follow the filter rule
        (wildcards allowed: the server reads them from the tail); every other
        part is one name token. The result is an :class:`ApiSubject`, which
        the client sends without the publish check.

        The request line it makes is measured against the server's
        ``max_control_line`` first: past it, the server would drop the
        connection that every thread of the client shares.

        Raises:
            BadSubjectError: a part breaks its rule; nothing is sent.
            LimitExceededError: the request's control line would pass the
                server's ``max_control_line``; it names the longest part
                (``"filter subject"``, ``"stream name"``...); nothing is sent.
        """
        for field, value in parts.items():
            if field in _TAIL_FIELDS:
                filter_subject(value, _FIELD_NAMES[field])
            else:
                name_token(value, f"{field} name")
        subject = f"{self.prefix}.{template.format(**parts)}"
        # One comparison in the common case: UTF-8 takes at most 4 bytes a character.
        if 4 * len(subject) + self._line_overhead > self.client.max_control_line:
            self._check_line(subject, parts)
        return ApiSubject(subject)

    def _check_line(self, subject: str, parts: dict[str, str]) -> None:
        """Refuse an API subject whose request line passes ``max_control_line``.

        Raises:
            LimitExceededError: naming the longest part of the subject.
        """
        line = len(subject.encode("utf-8", "surrogateescape")) + self._line_overhead
        sizes = {f: len(v.encode("utf-8", "surrogateescape")) for f, v in parts.items()}
        longest = max(sizes, key=sizes.__getitem__, default="")
        length = sizes.get(longest, 0)
        argument = _FIELD_NAMES.get(longest, f"{longest} name") if longest else "API prefix"
        check_control_line(argument, length, line - length, self.client.max_control_line)

    def request(
        self,
        subject: str,
        payload: bytes,
        deadline: Deadline,
        headers: dict[str, str] | None = None,
    ) -> Msg:
        """Send a raw API request and return the reply message.

        Raises:
            JetStreamNotEnabledError: nobody answers on the API subject.
            TimeoutError: no reply before the deadline.
        """
        left = deadline.remaining()
        if left <= 0:
            raise TimeoutError(f"JetStream API request {subject} timed out")
        try:
            return self.client.request(subject, payload, timeout=left, headers=headers)
        except NoRespondersError:
            raise JetStreamNotEnabledError(
                503, 0, f"no responders on {subject}: JetStream is not enabled or not reachable"
            ) from None

    def request_again_while_dropped(
        self,
        subject: str,
        payload: bytes,
        deadline: Deadline,
        headers: dict[str, str] | None = None,
        total: float | None = None,
    ) -> Msg:
        """``request`` for a read-only request, sent again while it goes unanswered.

        In a cluster, a stream's or consumer's replicas drop the requests they get
        while they still wait for a leader whose node died (4 to 20 s after a kill);
        a request sent after the election is answered. So each try waits at most
        :data:`ASK_AGAIN_AFTER` seconds, until the deadline.

        Args:
            total: the whole call's timeout, which the error names (default: the
                timeout ``deadline`` was made with).

        Raises:
            TimeoutError: no try was answered before the deadline.
        """
        if total is None:
            total = deadline.timeout
        while True:
            attempt = Deadline(min(deadline.remaining(), ASK_AGAIN_AFTER))
            try:
                return self.request(subject, payload, attempt, headers)
            except TimeoutError:
                if deadline.expired():
                    raise TimeoutError(
                        f"no reply on {subject!r} within {seconds_text(total)} s "
                        f"(asked every {seconds_text(ASK_AGAIN_AFTER)} s)"
                    ) from None

    def request_json(
        self,
        template: str,
        body: dict[str, Any] | None,
        deadline: Deadline,
        required_level: int = 0,
        about: dict[str, Any] | None = None,
        read_only: bool = False,
        **parts: str,
    ) -> dict[str, Any]:
        """Send a JSON API request and return the decoded, error-checked reply.

        Args:
            template: one of this module's subject templates.
            body: the request JSON, or None for an empty request.
            deadline: the caller's deadline (shared across retries and pages).
            required_level: the JetStream API level the request needs; sent as
                ``Nats-Required-Api-Level`` and checked against the server's
                INFO first, so an older server fails with a clear error.
            about: what the request is about beyond its subject's fields
                (``seq``, ``subject``), for the error's text.
            read_only: the request changes nothing, so it is sent again while
                it goes unanswered (:meth:`request_again_while_dropped`) or is
                answered "temporarily unavailable" (no leader yet), until the
                deadline.
            **parts: the template's fields (stream, consumer, ...); an error
                names the stream and the consumer.

        Raises:
            APIError (a subclass by err_code): the server refused the request.
            RequiredApiLevelError: the server is too old for this request.
        """
        headers = None
        if required_level:
            level = int(self.client.server_info.get("api_lvl", 0))
            if level < required_level:
                raise RequiredApiLevelError(
                    412,
                    10185,
                    f"this request needs JetStream API level {required_level}; "
                    f"the server offers {level}",
                )
            headers = {REQUIRED_LEVEL_HEADER: str(required_level)}
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        subject = self.subject(template, **parts)
        names = {key: parts[key] for key in _NAMED_FIELDS.intersection(parts)}
        if about:
            names.update(about)
        if not read_only:
            reply = self.request(subject, payload, deadline, headers)
            return check_api_reply(json.loads(reply.data), **names)
        while True:
            reply = self.request_again_while_dropped(subject, payload, deadline, headers)
            try:
                return check_api_reply(json.loads(reply.data), **names)
            except APIError as exc:
                if exc.err_code != UNAVAILABLE or deadline.remaining() <= UNAVAILABLE_PAUSE:
                    raise
            time.sleep(UNAVAILABLE_PAUSE)

    def _page(
        self, template: str, body: dict[str, Any], parts: dict[str, str], deadline: Deadline
    ) -> Any:
        return self.request_json(template, body, deadline, 0, None, False, **parts)

    def pages(
        self,
        template: str,
        key: str,
        subject: str | None,
        timeout: float | None,
        default: float,
        **parts: str,
    ) -> Iterator[Any]:
        """Yield the items of a paged listing, fetching pages as they are needed.

        ``timeout`` (``None``: ``default``) bounds the time spent waiting for the
        server over all pages; it is checked when the first item is asked for.
        """
        budget = _Budget(check_timeout("timeout", timeout, default))
        offset = 0
        while True:
            body: dict[str, Any] = {"offset": offset}
            if subject:
                body["subject"] = subject
            page = budget.run(partial(self._page, template, body, parts))
            items = page.get(key) or []
            yield from items
            offset += len(items)
            if not items or offset >= int(page.get("total", 0)):
                return
