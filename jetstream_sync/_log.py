"""The package's loggers: ``jetstream_sync`` and one child per area, silent by default.

``logger("client")`` is ``logging.getLogger("jetstream_sync.client")``. The
top logger carries a ``NullHandler``, so an application that configures no
logging sees nothing (not even warnings through Python's last-resort
handler); one that does configure logging gets every record through the
usual propagation. Every record of these loggers passes :class:`Redact`,
which removes credentials from URLs (``nats://user:pass@host`` becomes
``nats://***@host``), whatever a message or an exception text carries.
"""

from __future__ import annotations

import logging
import re

ROOT = "jetstream_sync"

# scheme://userinfo@ — the userinfo (user:password or a token) is replaced.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"]+@")


def redact(text: str) -> str:
    """``text`` with the userinfo of every ``scheme://userinfo@host`` URL replaced by ``***``."""
    return _USERINFO.sub(r"\g<scheme>***@", text)


class Redact(logging.Filter):
    """Formats a record's message once, with credentials in URLs removed."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace ``msg``/``args`` by the redacted message; keep every record."""
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True


_REDACT = Redact()
logging.getLogger(ROOT).addHandler(logging.NullHandler())


def logger(area: str) -> logging.Logger:
    """The logger ``jetstream_sync.<area>``, with the credential filter attached."""
    log = logging.getLogger(f"{ROOT}.{area}")
    if _REDACT not in log.filters:
        log.addFilter(_REDACT)
    return log
