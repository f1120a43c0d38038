"""What every job of the twin shares (mirrors ``csrc/jss_proto.h``): op kinds, limits,
error codes, the bytes types the jobs take, and the errors they raise for them.

The constants equal their ``JSS_*`` namesakes in the C header
(``tests/protocol/test_protocol_c_functions.py`` compares them);
:func:`protocol_error` builds the ProtocolError both implementations raise for a code,
and :func:`check_range` refuses a window that does not fit its buffer.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

from jetstream_sync.errors import ProtocolError

__all__ = [
    "ERR_ARGS",
    "ERR_BARE_LF",
    "ERR_HDR_CRLF",
    "ERR_HDR_END",
    "ERR_HDR_KEY",
    "ERR_HDR_LINE",
    "ERR_HDR_PREFIX",
    "ERR_HDR_SIZE",
    "ERR_HDR_STATUS",
    "ERR_LINE_TOO_LONG",
    "ERR_NUMBER",
    "ERR_OP",
    "ERR_PAYLOAD_END",
    "ERR_RANGE",
    "ERR_SIZE",
    "ERR_STRAY_CR",
    "ERROR_MESSAGES",
    "MAX_CONTROL_LINE",
    "MAX_PAYLOAD",
    "MIN_HEADER_BLOCK",
    "OP_ERR",
    "OP_FIELDS",
    "OP_HMSG",
    "OP_INFO",
    "OP_MSG",
    "OP_OK",
    "OP_PING",
    "OP_PONG",
    "BytesLike",
    "Sliceable",
    "check_range",
    "protocol_error",
]


BytesLike: TypeAlias = bytes | bytearray | memoryview
"""What the parser and encoders accept as bytes."""


class Sliceable(Protocol):
    """Bytes that can be sliced (bytes-like objects and cffi buffers)."""

    def __getitem__(self, span: slice, /) -> BytesLike: ...


OP_MSG = 1
OP_HMSG = 2
OP_PING = 3
OP_PONG = 4
OP_OK = 5
OP_ERR = 6
OP_INFO = 7
OP_FIELDS = 10

MAX_PAYLOAD = 64 * 1024 * 1024
MAX_CONTROL_LINE = 1024 * 1024
MIN_HEADER_BLOCK = len(b"NATS/1.0\r\n\r\n")
_INT64_MAX = 2**63 - 1

# Error codes, equal to the JSS_ERR_* values of jss_proto.h.
ERR_RANGE = -1
ERR_OP = -2
ERR_LINE_TOO_LONG = -3
ERR_BARE_LF = -4
ERR_STRAY_CR = -5
ERR_ARGS = -6
ERR_NUMBER = -7
ERR_SIZE = -8
ERR_HDR_SIZE = -9
ERR_PAYLOAD_END = -10
ERR_HDR_PREFIX = -12
ERR_HDR_END = -13
ERR_HDR_STATUS = -14
ERR_HDR_LINE = -15
ERR_HDR_KEY = -16
ERR_HDR_CRLF = -17

ERROR_MESSAGES = {
    ERR_RANGE: "start is after end",
    ERR_OP: "unknown protocol operation",
    ERR_LINE_TOO_LONG: f"control line longer than {MAX_CONTROL_LINE} bytes",
    ERR_BARE_LF: "control line ends with LF without CR",
    ERR_STRAY_CR: "CR inside a control line",
    ERR_ARGS: "wrong arguments for the operation",
    ERR_NUMBER: "sid or size is not an unsigned 64-bit decimal",
    ERR_SIZE: f"payload larger than {MAX_PAYLOAD} bytes",
    ERR_HDR_SIZE: "header size larger than total size",
    ERR_PAYLOAD_END: "payload not followed by CRLF",
    ERR_HDR_PREFIX: "header block does not start with a NATS/1.0 line",
    ERR_HDR_END: "header block does not end with a blank line",
    ERR_HDR_STATUS: "header status is not a 3-digit code",
    ERR_HDR_LINE: "header line without ':'",
    ERR_HDR_KEY: "header line with an empty key",
    ERR_HDR_CRLF: "CR or LF inside a header line",
}


def protocol_error(code: int, data: Sliceable, pos: int, end: int) -> ProtocolError:
    """Build the ProtocolError both implementations raise for an error code.

    Args:
        code: one of the ``ERR_*`` codes.
        data: the bytes being parsed (a short excerpt goes into the message).
        pos: the offset of the op or header line in error.
        end: the index just past the bytes received for it. A reused read
            buffer holds older bytes beyond it (an earlier message's payload),
            which the message must never quote.

    Returns:
        The exception, with the reason, the offset (also its ``offset``) and up
        to 32 bytes of ``data[pos:end]``, cut after the first line end: the
        control line (or header line) in error, never the payload after it,
        which is a message's content.
    """
    excerpt = bytes(data[pos : min(pos + 32, end)])
    line_end = excerpt.find(b"\n")
    if line_end >= 0:
        excerpt = excerpt[: line_end + 1]
    error = ProtocolError(f"{ERROR_MESSAGES[code]} at offset {pos}: {excerpt!r}")
    error.offset = pos
    return error


def check_range(size: int, start: int, end: int) -> None:
    """Reject a ``[start, end)`` window that does not fit a buffer of ``size`` bytes.

    Args:
        size: the buffer's length in bytes.
        start: first index of the window.
        end: index just past the window.

    Raises:
        ValueError: unless ``0 <= start <= end <= size``.
    """
    if not 0 <= start <= end <= size:
        raise ValueError(f"bad window [{start}, {end}) of a {size}-byte buffer")
