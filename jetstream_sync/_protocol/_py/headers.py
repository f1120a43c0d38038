"""A ``NATS/1.0`` header block: its status line and pairs, validated and decoded (mirrors
``csrc/jss_headers.c``)."""

from __future__ import annotations

import re

from .proto import (
    ERR_HDR_CRLF,
    ERR_HDR_END,
    ERR_HDR_KEY,
    ERR_HDR_LINE,
    ERR_HDR_PREFIX,
    ERR_HDR_STATUS,
    MIN_HEADER_BLOCK,
    BytesLike,
    protocol_error,
)

__all__ = ["parse_headers"]


def parse_headers(block: BytesLike) -> tuple[int | None, str, list[tuple[str, str]]]:
    """Parse a header block as located by ``parse``'s h fields.

    Args:
        block: the raw bytes from ``NATS/1.0`` up to and including the blank line.

    Returns:
        ``(status, description, pairs)``: the 3-digit status code or None, the
        text after it ("" if none), and every ``(key, value)`` in wire order
        (values stripped of spaces and tabs), decoded as UTF-8 with
        ``surrogateescape``.

    Raises:
        ProtocolError: the block is not a valid NATS header block.
    """
    data = bytes(block)
    if data[:8] != b"NATS/1.0":
        raise protocol_error(ERR_HDR_PREFIX, data, 0, len(data))
    if len(data) < MIN_HEADER_BLOCK or data[-4:] != b"\r\n\r\n":
        raise protocol_error(ERR_HDR_END, data, 0, len(data))
    status: int | None = None
    description = ""
    pairs: list[tuple[str, str]] = []
    pos = 0
    for index, line in enumerate(data[:-4].split(b"\r\n")):
        if b"\r" in line or b"\n" in line:
            raise protocol_error(ERR_HDR_CRLF, data, pos, len(data))
        if index == 0:
            status, description = _status_line(line, data, pos, len(data))
        else:
            pairs.append(_header_line(line, data, pos))
        pos += len(line) + 2
    return status, description, pairs


_STATUS = re.compile(rb"[ \t]*([^ \t]*)(.*)", re.DOTALL)


def _status_line(line: bytes, data: bytes, pos: int, end: int) -> tuple[int | None, str]:
    """Status code and description of the ``NATS/1.0`` line (``data[:end]`` holds its block)."""
    rest = line[8:]
    if rest and rest[:1] not in (b" ", b"\t"):
        raise protocol_error(ERR_HDR_PREFIX, data, pos, end)
    match = _STATUS.match(rest)
    assert match is not None  # the pattern matches any bytes
    code, description = match.groups()
    if not code:
        return None, ""
    if len(code) != 3 or not code.isdigit():
        raise protocol_error(ERR_HDR_STATUS, data, pos, end)
    return int(code), description.strip(b" \t").decode("utf-8", "surrogateescape")


def _header_line(line: bytes, data: bytes, pos: int) -> tuple[str, str]:
    """One ``Key: value`` pair."""
    key, colon, value = line.partition(b":")
    if not colon:
        raise protocol_error(ERR_HDR_LINE, data, pos, len(data))
    if not key:
        raise protocol_error(ERR_HDR_KEY, data, pos, len(data))
    return (
        key.decode("utf-8", "surrogateescape"),
        value.strip(b" \t").decode("utf-8", "surrogateescape"),
    )
