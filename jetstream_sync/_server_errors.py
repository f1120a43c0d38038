"""The typed error for each ``-ERR`` text the server sends.

The server's texts (nats-server ``client.go``, and the NATS ADR on ``-ERR``
handling) are matched
case-insensitively, without their quotes, by their leading words, so an
added detail at the end (a subject, a queue group) does not change the class.
What the connection does next is the server's call: it closes the connection
after every error but a permission violation, an invalid subject and the
subscription limit; the client then reconnects as after any disconnect.
"""

from __future__ import annotations

from .errors import (
    AuthorizationError,
    BadSubjectError,
    MaxConnectionsExceededError,
    MaxPayloadError,
    MaxSubscriptionsExceededError,
    NatsError,
    PermissionViolationError,
    ProtocolError,
    ServerError,
    ServerSlowConsumerError,
    StaleConnectionError,
)

# (leading words, lower case) -> class taking the server's text
_BY_PREFIX: tuple[tuple[str, type[NatsError]], ...] = (
    ("permissions violation", PermissionViolationError),
    ("stale connection", StaleConnectionError),
    ("maximum connections exceeded", MaxConnectionsExceededError),
    ("maximum account active connections exceeded", MaxConnectionsExceededError),
    ("connection throttling is active", MaxConnectionsExceededError),
    ("maximum subscriptions exceeded", MaxSubscriptionsExceededError),
    ("slow consumer", ServerSlowConsumerError),
    ("maximum payload violation", MaxPayloadError),
    ("invalid publish subject", BadSubjectError),
    ("invalid subject", BadSubjectError),
    ("unknown protocol operation", ProtocolError),
    ("parser error", ProtocolError),
    ("maximum control line exceeded", ProtocolError),
    ("invalid client protocol", ProtocolError),
    ("attempted to connect to route port", ProtocolError),
    ("no responders requires headers support", ProtocolError),
)
# Credentials refused or expired: 'Authorization Violation', 'Authorization
# Timeout', 'User/Account Authentication Expired', 'User Authentication Revoked'.
_AUTH_WORDS = ("authoriz", "authentic")


def server_error(text: str) -> NatsError:
    """The typed error for the text of an ``-ERR`` (its quotes are dropped).

    Returns:
        :class:`PermissionViolationError` (an :class:`AuthorizationError`),
        :class:`AuthorizationError`, :class:`StaleConnectionError`,
        :class:`MaxConnectionsExceededError`,
        :class:`MaxSubscriptionsExceededError`,
        :class:`ServerSlowConsumerError`, :class:`MaxPayloadError`,
        :class:`BadSubjectError`, :class:`ProtocolError`, or
        :class:`ServerError` for any other text.
    """
    words = text.strip(" \t'")
    lower = words.lower()
    for prefix, cls in _BY_PREFIX:
        if lower.startswith(prefix):
            if cls in (PermissionViolationError, ServerSlowConsumerError):
                return cls(words)
            return cls(f"server error: {words}")
    if any(word in lower for word in _AUTH_WORDS):
        return AuthorizationError(words)
    return ServerError(words)
