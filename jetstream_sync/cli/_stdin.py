"""Message bodies from standard input, as the ``nats`` CLI reads them.

``-`` as the body always means stdin. With no body at all, stdin is read when
something was redirected into it (a pipe, a file, a socket: ``printf x | ...``,
``... < file``); a terminal or ``/dev/null`` gives an empty body instead of a
wait for input nobody is going to type.
"""

from __future__ import annotations

import os
import stat
import sys

STDIN = "-"
"""The body argument that means "read stdin"."""


def redirected() -> bool:
    """Whether stdin is a pipe, a regular file or a socket."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # stdin closed, or replaced by a non-file
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


def body_argument(value: str | None) -> str | bytes:
    """The body a command was given: its text (a template), or stdin's bytes.

    Args:
        value: the BODY argument; ``None`` when it was left out.

    Returns:
        ``value`` itself, stdin's bytes (read to the end) for ``-`` or for no
        value with stdin redirected, else ``""``.
    """
    if value == STDIN or (value is None and redirected()):
        return sys.stdin.buffer.read()
    return value or ""
