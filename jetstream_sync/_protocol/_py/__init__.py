"""Pure-Python twin of the C protocol core (``csrc/``), split by job as ``csrc/`` is.

Same interface and same results as :mod:`jetstream_sync._protocol._c`,
including the same exceptions; it mirrors the C code check for check, so keep
both in step (a regex fast path takes well-formed MSG/HMSG lines and leaves
anything unusual to the mirrored path). ``encode_pub`` and ``encode_hpub`` are
plain Python in both implementations (a cffi call cannot beat
``%``-formatting), so ``_c`` imports them from here; ``_c`` encodes header
blocks in C and falls back on these functions for every error.

One module per job, each named after the C file it mirrors:

- :mod:`.proto` (``jss_proto.h``): op kinds, limits, error codes, the ProtocolError of a code;
- :mod:`.parser` (``jss_parser.c``): :func:`parse`, the ops in a buffer;
- :mod:`.headers` (``jss_headers.c``): :func:`parse_headers`, a header block;
- :mod:`.encode` (``jss_encode.c``): header blocks, PUB and HPUB frames;
- :mod:`.subjects` (``jss_subjects.c``): :func:`valid_subject`;
- :mod:`.puback` (``jss_puback.c``): :func:`parse_puback` and :func:`puback_batch`;
- :mod:`.batch` (``jss_batch.c``): :func:`encode_batch_hpub`, Arrow columns as HPUB frames;
- :mod:`.direct_meta` (``jss_direct_meta.c``): :func:`parse_direct_meta`;
- :mod:`.round_trip` (``jss_round_trip.c``): :func:`round_trip` and :func:`send_nowait`, the IO.

The batched direct get's twin is :mod:`jetstream_sync._protocol._direct_batch`.
This package defines nothing but :data:`IMPL`: it re-exports every public name
of its modules, so ``_py.parse``, ``_py.OP_MSG`` and the rest resolve as one
namespace.
"""

from __future__ import annotations

from .batch import (
    BATCH_ERR_LINE,
    BATCH_ERR_MSG_ID,
    BATCH_ERR_NO_SUBJECT,
    BATCH_ERR_NULL_DATA,
    BATCH_ERR_SUBJECT,
    BATCH_ERR_TOO_BIG,
    BATCH_ERRORS,
    ENC_ERR_KEY,
    ENC_ERR_KV,
    ENC_ERR_VALUE,
    BatchColumn,
    encode_batch_hpub,
)
from .direct_meta import DirectMeta, parse_direct_meta
from .encode import JOIN_ABOVE, encode_headers, encode_hpub, encode_hpub_pairs, encode_pub
from .headers import parse_headers
from .parser import parse
from .proto import (
    ERR_ARGS,
    ERR_BARE_LF,
    ERR_HDR_CRLF,
    ERR_HDR_END,
    ERR_HDR_KEY,
    ERR_HDR_LINE,
    ERR_HDR_PREFIX,
    ERR_HDR_SIZE,
    ERR_HDR_STATUS,
    ERR_LINE_TOO_LONG,
    ERR_NUMBER,
    ERR_OP,
    ERR_PAYLOAD_END,
    ERR_RANGE,
    ERR_SIZE,
    ERR_STRAY_CR,
    ERROR_MESSAGES,
    MAX_CONTROL_LINE,
    MAX_PAYLOAD,
    MIN_HEADER_BLOCK,
    OP_ERR,
    OP_FIELDS,
    OP_HMSG,
    OP_INFO,
    OP_MSG,
    OP_OK,
    OP_PING,
    OP_PONG,
    BytesLike,
    Sliceable,
    check_range,
    protocol_error,
)
from .puback import ACK_NEW, ACK_OTHER, ACK_SAME, AckBatch, parse_puback, puback_batch
from .round_trip import (
    DECODE_NONE,
    DECODE_PUBACK,
    RT_CONSUMED,
    RT_EOF,
    RT_ERRNO,
    RT_FIELDS,
    RT_IDLE,
    RT_INTERRUPTED,
    RT_NEED,
    RT_OP,
    RT_OTHER,
    RT_PUBACK,
    RT_PUBACK_OK,
    RT_RECEIVED,
    RT_RECV_ERROR,
    RT_REPLY,
    SEND_ERRNO,
    SEND_FIELDS,
    SEND_SENT,
    RoundTrip,
    last_round_trip,
    round_trip,
    send_nowait,
    send_report,
)
from .subjects import valid_subject

__all__ = [
    "IMPL",
    # .proto
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
    # .parser
    "parse",
    # .headers
    "parse_headers",
    # .encode
    "JOIN_ABOVE",
    "encode_headers",
    "encode_hpub",
    "encode_hpub_pairs",
    "encode_pub",
    # .subjects
    "valid_subject",
    # .puback
    "ACK_NEW",
    "ACK_OTHER",
    "ACK_SAME",
    "AckBatch",
    "parse_puback",
    "puback_batch",
    # .batch
    "BATCH_ERR_LINE",
    "BATCH_ERR_MSG_ID",
    "BATCH_ERR_NO_SUBJECT",
    "BATCH_ERR_NULL_DATA",
    "BATCH_ERR_SUBJECT",
    "BATCH_ERR_TOO_BIG",
    "BATCH_ERRORS",
    "ENC_ERR_KEY",
    "ENC_ERR_KV",
    "ENC_ERR_VALUE",
    "BatchColumn",
    "encode_batch_hpub",
    # .direct_meta
    "DirectMeta",
    "parse_direct_meta",
    # .round_trip
    "DECODE_NONE",
    "DECODE_PUBACK",
    "RT_CONSUMED",
    "RT_EOF",
    "RT_ERRNO",
    "RT_FIELDS",
    "RT_IDLE",
    "RT_INTERRUPTED",
    "RT_NEED",
    "RT_OP",
    "RT_OTHER",
    "RT_PUBACK",
    "RT_PUBACK_OK",
    "RT_RECEIVED",
    "RT_RECV_ERROR",
    "RT_REPLY",
    "SEND_ERRNO",
    "SEND_FIELDS",
    "SEND_SENT",
    "RoundTrip",
    "last_round_trip",
    "round_trip",
    "send_nowait",
    "send_report",
]

IMPL = "python"
