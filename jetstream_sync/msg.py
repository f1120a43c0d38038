"""The message object handed to subscribers and returned by requests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from . import _protocol
from .errors import NatsError
from .headers import Headers

if TYPE_CHECKING:
    from .client import Client

_NO_HEADERS = Headers()


class Msg:
    """A message received from the server.

    Attributes:
        subject: the subject it was published to.
        reply: the reply subject, or ``""`` when there is none.
        data: the payload.
        sid: the id of the subscription that received it.
    """

    __slots__ = ("subject", "reply", "data", "sid", "_raw_headers", "_parsed", "_client")

    def __init__(
        self,
        subject: str,
        reply: str,
        data: bytes,
        raw_headers: bytes | None = None,
        client: Client | None = None,
        sid: int = 0,
    ) -> None:
        self.subject = subject
        self.reply = reply
        self.data = data
        self.sid = sid
        self._raw_headers = raw_headers
        self._parsed: tuple[int | None, str, Headers] | None = None
        self._client = client

    def _parse_headers(self) -> tuple[int | None, str, Headers]:
        parsed = self._parsed
        if parsed is None:
            if self._raw_headers is None:
                parsed = (None, "", _NO_HEADERS)
            else:
                status, description, pairs = _protocol.parse_headers(self._raw_headers)
                parsed = (status, description, Headers.from_pairs(pairs))
            self._parsed = parsed
        return parsed

    @property
    def headers(self) -> Headers:
        """The message headers (empty when it had none)."""
        return self._parse_headers()[2]

    @property
    def status(self) -> int | None:
        """The status code of a status message (e.g. 503, 408), else ``None``."""
        raw = self._raw_headers
        # "NATS/1.0\r\n" has no status; only parse when a code follows the version.
        if raw is None or raw[8:9] != b" ":
            return None
        return self._parse_headers()[0]

    @property
    def description(self) -> str:
        """The text after a status code (e.g. ``"Request Timeout"``), else ``""``."""
        return self._parse_headers()[1] if self.status is not None else ""

    def respond(
        self, data: bytes | str = b"", headers: Mapping[str, str | Sequence[str]] | None = None
    ) -> None:
        """Publish ``data`` to this message's reply subject.

        Raises:
            NatsError: the message has no reply subject or no client.
        """
        if not self.reply or self._client is None:
            raise NatsError("message has no reply subject to respond to")
        self._client._publish_now(self.reply, data, headers)

    def __repr__(self) -> str:
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={self.data[:32]!r}>"
