"""C-backed protocol core: a thin typed wrapper around ``jetstream_sync._ffi``.

Same interface and results as :mod:`jetstream_sync._protocol._py`. Each
function makes one C call per buffer (cffi releases the GIL during it) and
turns the C side's int64 output array into Python ints with one
``ffi.unpack``. The scratch arrays are per thread, so several reader threads
may parse at once.

The header encoders flatten the pairs into ``key\\0value\\0...`` with one
join, let C validate and write the block (or the whole HPUB frame) into a
per-thread buffer, and copy it out once. Anything unusual (a non-str, an
unencodable string, a NUL, a pair that is not a pair, a C error code) is
handed to the Python twin, which produces the same result or raises the
same exception with the same message.

``encode_pub`` and ``encode_hpub`` (a ready header block) are the twin's
(``%``-formatting, ``b"".join`` above 64 KiB), and the C core has no PUB
encoder: one lost at every size, since it paid a cffi call plus a copy out of
its buffer. Measured (CPython 3.11, best of 15, µs per frame, C + ``ffi.unpack``
/ twin): 128 B 0.51 / 0.20; 128 B with reply 0.52 / 0.22; 64 KiB 3.47 / 1.68.

``encode_batch_hpub`` (the Spark sink) is the other way round: one C call
encodes thousands of frames straight from Arrow buffers, message ids
(BLAKE2b) included, for about 0.6 µs per 128-byte row.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

from jetstream_sync._ffi import ffi, lib
from jetstream_sync._protocol import _py
from jetstream_sync._protocol._direct_batch import (
    DirectBatch,
    batch_error,
    check_unit,
    check_whole,
)
from jetstream_sync._protocol._py import (
    ACK_NEW,
    ACK_OTHER,
    ACK_SAME,
    BATCH_ERRORS,
    MAX_CONTROL_LINE,
    MAX_PAYLOAD,
    OP_ERR,
    OP_FIELDS,
    OP_HMSG,
    OP_INFO,
    OP_MSG,
    OP_OK,
    OP_PING,
    OP_PONG,
    RT_FIELDS,
    RT_OP,
    RT_PUBACK,
    RT_PUBACK_OK,
    RT_RECEIVED,
    RT_REPLY,
    SEND_FIELDS,
    AckBatch,
    BatchColumn,
    BytesLike,
    DirectMeta,
    RoundTrip,
    check_range,
    encode_hpub,
    encode_pub,
    protocol_error,
)

if TYPE_CHECKING:  # types declared by _ffi.pyi only
    from jetstream_sync._ffi import BufferView, CharArray, Int64Array, Uint8Array

__all__ = [
    "ACK_NEW",
    "ACK_OTHER",
    "ACK_SAME",
    "BATCH_ERRORS",
    "IMPL",
    "MAX_CONTROL_LINE",
    "MAX_PAYLOAD",
    "OP_ERR",
    "OP_FIELDS",
    "OP_HMSG",
    "OP_INFO",
    "OP_MSG",
    "OP_OK",
    "OP_PING",
    "OP_PONG",
    "AckBatch",
    "BatchColumn",
    "encode_batch_hpub",
    "decode_direct_batch",
    "encode_headers",
    "encode_hpub",
    "encode_hpub_pairs",
    "encode_pub",
    "parse",
    "parse_direct_meta",
    "parse_headers",
    "last_round_trip",
    "parse_puback",
    "puback_batch",
    "round_trip",
    "send_nowait",
    "send_report",
    "valid_subject",
]

IMPL = "c"

CHUNK_OPS = 1024  # ops per C call; parse loops until the buffer is done
HEADER_PAIRS = 64  # header pairs that fit the per-thread array (more: one-off array)
_HDR_FIELDS = lib.JSS_HDR_FIELDS
_PUBACK_FIELDS = lib.JSS_PUBACK_FIELDS
_DIRECT_META_FIELDS = lib.JSS_DIRECT_META_FIELDS

_scratch = threading.local()


class _Arrays:
    """One thread's output arrays for the C functions."""

    __slots__ = ("ops", "state", "pairs", "meta", "puback", "direct", "round_trip")

    def __init__(self) -> None:
        self.ops = ffi.new("int64_t[]", CHUNK_OPS * OP_FIELDS)
        self.state = ffi.new("int64_t[]", lib.JSS_STATE_FIELDS)
        self.pairs = ffi.new("int64_t[]", HEADER_PAIRS * _HDR_FIELDS)
        self.meta = ffi.new("int64_t[]", lib.JSS_HDR_META_FIELDS)
        self.puback = ffi.new("int64_t[]", _PUBACK_FIELDS)
        self.direct = ffi.new("int64_t[]", _DIRECT_META_FIELDS)
        self.round_trip = ffi.new("int64_t[]", RT_FIELDS)


def _arrays() -> _Arrays:
    """This thread's arrays, made on first use."""
    try:
        return cast("_Arrays", _scratch.arrays)
    except AttributeError:
        arrays = _scratch.arrays = _Arrays()
        return arrays


def _to_list(array: Int64Array, count: int) -> list[int]:
    # memoryview.tolist() makes ints ~30% faster than ffi.unpack but costs
    # more to set up; it wins from about 128 ints (a dozen ops) on.
    if count < 128:
        return ffi.unpack(array, count)
    return memoryview(ffi.buffer(array, count * 8)).cast("q").tolist()


def parse(buf: BytesLike, start: int, end: int) -> tuple[list[int], int, int]:
    """Parse every complete op in ``buf[start:end]``.

    Args:
        buf: bytes, bytearray or memoryview holding the received bytes.
        start: index of the first unparsed byte.
        end: index just past the last received byte.

    Returns:
        ``(ops, consumed, need)``: ``OP_FIELDS`` ints per op
        (``kind, a_off, a_len, sid, r_off, r_len, h_off, h_len, p_off, p_len``,
        offsets absolute into ``buf``); the index just past the last whole op;
        and, when the next op's control line is complete but its payload is
        not, the number of bytes from ``consumed`` that op occupies (else 0).

    Raises:
        ProtocolError: the bytes can never become valid protocol.
        ValueError: the window does not fit the buffer.
    """
    arrays = _arrays()
    ops_out, state = arrays.ops, arrays.state
    # Release the buffer export on return, even on error: a bytearray that is
    # still exported cannot be resized by the reader.
    with ffi.from_buffer(buf) as cbuf:
        check_range(len(cbuf), start, end)
        n = lib.jss_parse(cbuf, start, end, ops_out, CHUNK_OPS, state)
        if n < 0:
            raise protocol_error(n, ffi.buffer(cbuf), state[2], end)
        ops = _to_list(ops_out, n * OP_FIELDS)
        while n == CHUNK_OPS:
            n = lib.jss_parse(cbuf, state[0], end, ops_out, CHUNK_OPS, state)
            if n < 0:
                raise protocol_error(n, ffi.buffer(cbuf), state[2], end)
            ops += _to_list(ops_out, n * OP_FIELDS)
    return ops, state[0], state[1]


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
    arrays = _arrays()
    pairs_out, meta = arrays.pairs, arrays.meta
    count = lib.jss_parse_headers(data, len(data), pairs_out, HEADER_PAIRS, meta)
    if count > HEADER_PAIRS:
        pairs_out = ffi.new("int64_t[]", count * _HDR_FIELDS)
        count = lib.jss_parse_headers(data, len(data), pairs_out, count, meta)
    if count < 0:
        raise protocol_error(count, data, meta[3], len(data))
    status, desc_off, desc_len = meta[0], meta[1], meta[2]
    flat = ffi.unpack(pairs_out, count * _HDR_FIELDS)
    # ASCII (the usual case) decodes once and slices the str: byte and
    # character offsets are the same.
    text: str | _SurrogateEscaped = (
        data.decode("ascii") if data.isascii() else _SurrogateEscaped(data)
    )
    pairs = [
        (text[flat[i] : flat[i] + flat[i + 1]], text[flat[i + 2] : flat[i + 2] + flat[i + 3]])
        for i in range(0, len(flat), _HDR_FIELDS)
    ]
    if status < 0:
        return None, "", pairs
    return status, text[desc_off : desc_off + desc_len], pairs


class _SurrogateEscaped:
    """Byte-offset slicing of non-ASCII bytes, each slice decoded on its own."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __getitem__(self, span: slice) -> str:
        return self.data[span].decode("utf-8", "surrogateescape")


def valid_subject(subject: bytes, wildcards: bool) -> bool:
    """Tell whether ``subject`` is a valid subject.

    Args:
        subject: the subject bytes.
        wildcards: allow ``*`` tokens and a final ``>`` token (subscriptions).

    Returns:
        True for non-empty dot-separated non-empty tokens without ASCII
        whitespace (space, ``\\t \\n \\v \\f \\r``) or NUL, where ``*``/``>``
        tokens obey ``wildcards`` (``>`` only as the last token).
    """
    if type(subject) is not bytes:
        subject = bytes(subject)
    return lib.jss_valid_subject(subject, len(subject), bool(wildcards)) == 1


def parse_puback(data: BytesLike) -> tuple[str, int, bool, str | None] | None:
    """Read a JetStream PubAck body the fast way, or decline.

    Args:
        data: the reply payload (bytes-like).

    Returns:
        ``(stream, seq, duplicate, domain)`` for a flat JSON object with a
        plain-string ``stream`` and a non-negative integer ``seq``; None for
        anything else (an ``error`` key, nesting, escapes, non-ASCII,
        duplicate keys, malformed JSON...), meaning "use json.loads".
    """
    raw = data if type(data) is bytes else bytes(data)
    out = _arrays().puback
    if not lib.jss_parse_puback(raw, len(raw), out):
        return None
    stream_off, stream_len, seq, duplicate, domain_off, domain_len = ffi.unpack(out, _PUBACK_FIELDS)
    stream = raw[stream_off : stream_off + stream_len].decode("ascii")
    domain = None if domain_len < 0 else raw[domain_off : domain_off + domain_len].decode("ascii")
    return stream, seq, bool(duplicate), domain


ACK_CHUNK = 1024  # acks per jss_puback_batch call
_ACK_SPECIAL = lib.JSS_ACK_SPECIAL_FIELDS
_ack_scratch = threading.local()


class _AckArrays:
    """One thread's output arrays for jss_puback_batch (the reader thread's, in practice)."""

    __slots__ = ("tokens", "seqs", "kinds", "specials", "state")

    def __init__(self) -> None:
        self.tokens = ffi.new("int64_t[]", ACK_CHUNK)
        self.seqs = ffi.new("int64_t[]", ACK_CHUNK)
        self.kinds: Uint8Array = ffi.new("uint8_t[]", ACK_CHUNK)
        self.specials = ffi.new("int64_t[]", ACK_CHUNK * _ACK_SPECIAL)
        self.state = ffi.new("int64_t[]", lib.JSS_ACK_STATE_FIELDS)


def puback_batch(buf: BytesLike, start: int, end: int, sid: int, prefix_len: int) -> AckBatch:
    """Decode the replies of subscription ``sid`` in ``buf[start:end]``, a C call per 1,024.

    Same interface and results as :func:`jetstream_sync._protocol._py.puback_batch`.
    """
    try:
        a = cast("_AckArrays", _ack_scratch.arrays)
    except AttributeError:
        a = _ack_scratch.arrays = _AckArrays()
    batch = AckBatch([], b"", [], [], [])
    kinds = bytearray()
    streams = batch.streams
    with ffi.from_buffer(buf) as cbuf:
        check_range(len(cbuf), start, end)
        raw = ffi.buffer(cbuf)
        pos = start
        while True:
            n = lib.jss_puback_batch(
                cbuf, pos, end, sid, prefix_len, ACK_CHUNK,
                a.tokens, a.seqs, a.kinds, a.specials, a.state,
            )  # fmt: skip
            if n < 0:
                raise protocol_error(n, raw, a.state[1], end)
            first = len(batch.tokens)
            batch.tokens.extend(_to_list(a.tokens, n))
            batch.seqs.extend(_to_list(a.seqs, n))
            kinds += ffi.buffer(a.kinds, n)[:]
            specials = _to_list(a.specials, a.state[2] * _ACK_SPECIAL)
            chunk_start = first > 0  # C compares streams within one call only
            for j in range(0, len(specials), _ACK_SPECIAL):
                at, a_off, a_len, b_off, b_len = specials[j : j + _ACK_SPECIAL]
                if kinds[first + at] == ACK_NEW:
                    domain = None if b_len < 0 else raw[b_off : b_off + b_len].decode("ascii")
                    stream = (raw[a_off : a_off + a_len].decode("ascii"), domain)
                    if chunk_start and streams and streams[-1] == stream:
                        kinds[first + at] = ACK_SAME
                    else:
                        streams.append(stream)
                    chunk_start = False
                else:
                    headers = raw[b_off : b_off + b_len] if b_len else None
                    batch.others.append((raw[a_off : a_off + a_len], headers))
            if n < ACK_CHUNK:
                return batch._replace(kinds=bytes(kinds))
            pos = a.state[0]


def round_trip(
    sock: socket.socket,
    buf: bytearray,
    have: int,
    reply: bytes,
    timeout_ms: int,
    decode: int,
) -> RoundTrip:
    """Wait, receive and parse in one C call with the GIL released.

    See :func:`jetstream_sync._protocol._py.round_trip` (same results, but
    EINTR returns ``RT_INTERRUPTED`` here: the caller runs the signal
    handlers when it next executes Python).
    """
    try:
        out = _scratch.arrays.round_trip  # the hot path: no call to _arrays()
    except AttributeError:
        out = _arrays().round_trip
    with ffi.from_buffer(buf) as cbuf:
        status = lib.jss_round_trip(
            sock.fileno(), cbuf, have, len(cbuf), reply, len(reply), timeout_ms, decode, out
        )
    fields = ffi.unpack(out, RT_PUBACK)
    puback = None
    if status == RT_REPLY and fields[RT_PUBACK_OK]:
        base = fields[RT_OP + 8]  # the payload's offset
        stream_off, stream_len, seq, duplicate, domain_off, domain_len = ffi.unpack(
            out + RT_PUBACK, _PUBACK_FIELDS
        )
        stream = buf[base + stream_off : base + stream_off + stream_len].decode("ascii")
        domain = (
            None
            if domain_len < 0
            else buf[base + domain_off : base + domain_off + domain_len].decode("ascii")
        )
        puback = (stream, seq, bool(duplicate), domain)
    out[RT_RECEIVED] = 0  # returned: nothing is pending for last_round_trip
    return status, fields, puback


def last_round_trip() -> int:
    """The bytes received by this thread's :func:`round_trip` call that did not return.

    For a caller interrupted (Ctrl-C) inside the call, after the C function
    wrote them into this thread's scratch array; 0 once a call returned (the
    caller has them) or before any call.
    """
    return int(_arrays().round_trip[RT_RECEIVED])


def send_report() -> Int64Array:
    """Where :func:`send_nowait` reports: ``[bytes sent, errno]`` in C memory the caller owns."""
    return ffi.new("int64_t[]", SEND_FIELDS)


def send_nowait(sock: socket.socket, data: bytearray, report: Int64Array) -> None:
    """Send what ``sock`` takes at once of ``data``, in one C call; report it in ``report``.

    See :func:`jetstream_sync._protocol._py.send_nowait`. The report is written
    by C before the call returns, so a caller interrupted right after the
    call (a signal handler's exception) still reads how much went out.
    """
    with ffi.from_buffer(data) as cdata:
        lib.jss_send_nowait(sock.fileno(), cdata, len(data), report)


def parse_direct_meta(block: BytesLike) -> DirectMeta | None:
    """Read what a direct-get reply's header block says of the stored message, or decline.

    See :func:`jetstream_sync._protocol._py.parse_direct_meta` (same results):
    ``(subject, seq, time_ns, kv_operation, marker_reason)``, or None.
    """
    raw = block if type(block) is bytes else bytes(block)
    out = _arrays().direct
    if not lib.jss_direct_meta_parse(raw, len(raw), out):
        return None
    subject_off, subject_len, seq, ns, op_off, op_len, reason_off, reason_len = ffi.unpack(
        out, _DIRECT_META_FIELDS
    )
    subject = raw[subject_off : subject_off + subject_len].decode("utf-8", "surrogateescape")
    op = None if op_len < 0 else raw[op_off : op_off + op_len].decode("utf-8", "surrogateescape")
    reason = (
        None
        if reason_len < 0
        else raw[reason_off : reason_off + reason_len].decode("utf-8", "surrogateescape")
    )
    return subject, seq, ns, op, reason


# ---------------------------------------------------------------------------
# header encoders

ENCODE_SCRATCH = 16 * 1024  # first size of a thread's encode buffer
ENCODE_SCRATCH_MAX = 1024 * 1024  # outputs above this get a one-off buffer, not kept
# encode_hpub_pairs builds the whole frame in C for bytes payloads up to this
# size; larger ones (and non-bytes payloads) get the header block from C and
# the frame from encode_hpub, which copies the payload once, not twice (into
# the buffer, then out of it). Measured (CPython 3.11, 2 pairs, best of 15,
# µs per frame, whole frame in C / C block + encode_hpub): 128 B 1.28 / 1.49;
# 8 KiB 1.49 / 1.69; 16 KiB 1.88 / 1.87; 32 KiB 2.71 / 2.29; 64 KiB 3.98 / 2.91.
C_FRAME_MAX_PAYLOAD = 16 * 1024
_ENC_MIN_SIZE = lib.JSS_ENC_MIN_SIZE  # results <= -this are -(bytes needed)
_new_raw = ffi.new_allocator(should_clear_after_alloc=False)


def _encode_buffer() -> CharArray:
    """This thread's encode buffer, made on first use."""
    try:
        return cast("CharArray", _scratch.out)
    except AttributeError:
        out = _scratch.out = _new_raw("char[]", ENCODE_SCRATCH)
        return out


def _buffer_for(need: int) -> CharArray:
    """A buffer of at least need bytes: this thread's, grown, or a one-off when huge."""
    if need > ENCODE_SCRATCH_MAX:
        return _new_raw("char[]", need)
    out = _scratch.out = _new_raw("char[]", 1 << (need - 1).bit_length())
    return out


def _flatten(pairs: Iterable[tuple[str, str]]) -> bytes | None:
    """pairs as UTF-8 ``key\\0value\\0...``, or None when the Python twin must decide.

    None for a non-str key or value, a pair that is not a pair, a string UTF-8
    cannot carry or a NUL inside a key or value (which would shift the pairs).
    """
    flat: list[str] = []
    try:
        for key, value in pairs:
            flat += (key, value)
        flat.append("")
        text = "\0".join(flat)
        kv = text.encode("utf-8", "surrogateescape")
    except (TypeError, ValueError):  # ValueError covers UnicodeEncodeError and unpacking
        return None
    if text.count("\0") != len(flat) - 1:
        return None
    return kv


def _c_headers(kv: bytes) -> bytes | None:
    """The header block of flattened pairs, or None when C finds a bad key or value."""
    out = _encode_buffer()
    n = lib.jss_encode_headers(out, len(out), kv, len(kv))
    if n <= -_ENC_MIN_SIZE:
        out = _buffer_for(-n)
        n = lib.jss_encode_headers(out, len(out), kv, len(kv))
    return ffi.unpack(out, n) if n >= 0 else None


def encode_headers(pairs: Iterable[tuple[str, str]]) -> bytes:
    """Encode header pairs as a NATS/1.0 header block.

    Args:
        pairs: ``(key, value)`` strings, in the order to send them.

    Returns:
        ``b"NATS/1.0\\r\\n" + b"Key: value\\r\\n"... + b"\\r\\n"``.

    Raises:
        BadHeaderError: a key is empty or holds CR, LF, ':', space, tab or any
            byte below 0x21 or 0x7f, or a value holds CR, LF or NUL; nothing is
            encoded.
        TypeError: a key or value is not a str.
    """
    if type(pairs) is not list and type(pairs) is not tuple:
        pairs = list(pairs)  # the twin may need to go over them again
    kv = _flatten(pairs)
    block = None if kv is None else _c_headers(kv)
    return _py.encode_headers(pairs) if block is None else block


def encode_hpub_pairs(
    subject: bytes, reply: bytes, pairs: Iterable[tuple[str, str]], payload: BytesLike
) -> bytes:
    """Encode an HPUB frame straight from header pairs (one C call).

    Same result as ``encode_hpub(subject, reply, encode_headers(pairs), payload)``.

    Args:
        subject: the subject (already validated).
        reply: the reply subject, or ``b""`` for none.
        pairs: ``(key, value)`` strings, in the order to send them.
        payload: any bytes-like object.

    Returns:
        ``HPUB <subject> [<reply> ]<hdr_len> <total_len>\\r\\n<headers><payload>\\r\\n``.

    Raises:
        BadHeaderError: as :func:`encode_headers`.
        TypeError: a key or value is not a str.
    """
    if type(pairs) is not list and type(pairs) is not tuple:
        pairs = list(pairs)  # the twin may need to go over them again
    kv = _flatten(pairs)
    if kv is None:
        return _py.encode_hpub_pairs(subject, reply, pairs, payload)
    if (
        type(payload) is bytes
        and len(payload) <= C_FRAME_MAX_PAYLOAD
        and type(subject) is bytes
        and type(reply) is bytes
    ):
        out = _encode_buffer()
        n = lib.jss_encode_hpub(
            out,
            len(out),
            subject,
            len(subject),
            reply,
            len(reply),
            kv,
            len(kv),
            payload,
            len(payload),
        )
        if n >= 0:
            return ffi.unpack(out, n)
        if n <= -_ENC_MIN_SIZE:
            return _hpub_retry(-n, subject, reply, kv, payload)
        return _py.encode_hpub_pairs(subject, reply, pairs, payload)  # raises its error
    block = _c_headers(kv)
    if block is None:
        return _py.encode_hpub_pairs(subject, reply, pairs, payload)  # raises its error
    return encode_hpub(subject, reply, block, payload)


def _hpub_retry(need: int, subject: bytes, reply: bytes, kv: bytes, payload: bytes) -> bytes:
    """encode_hpub_pairs' C call again, into a buffer of need bytes."""
    out = _buffer_for(need)
    n = lib.jss_encode_hpub(
        out, len(out), subject, len(subject), reply, len(reply), kv, len(kv), payload, len(payload)
    )
    return ffi.unpack(out, n)


# ---------------------------------------------------------------------------
# encode_batch_hpub

# Bytes per row of a batch's frames besides its payload, subject, msg id and
# header pairs: "HPUB " + 3 spaces + 3 numbers (20 digits each at most) + CRLF,
# "NATS/1.0\r\n", "Nats-Msg-Id: ", CRLF, CRLF, CRLF; a derived id adds a
# number, ':' and 12 hex digits; each header pair adds ": " and CRLF less 2 NULs.
_BATCH_ROW_BYTES = 5 + 3 + 60 + 2 + 10 + 13 + 2 + 2 + 2 + 20 + 1 + 12


class _Column:
    """A :class:`BatchColumn` as C sees it (kept alive with its buffers while C reads it)."""

    def __init__(self, col: BatchColumn | None) -> None:
        self.views: list[BufferView] = []
        if col is None:
            self.c = ffi.NULL
            self.offsets = None
            self.first = 0
            return
        c = self.c = ffi.new("jss_batch_column *")
        offsets = memoryview(col.offsets).cast("B").cast("q")
        self.offsets = offsets
        c.offsets = ffi.cast("int64_t *", self._view(col.offsets))
        if col.data is not None:
            c.data = ffi.cast("char *", self._view(col.data))
        if col.valid is not None:
            c.valid = ffi.cast("uint8_t *", self._view(col.valid))
        c.first = self.first = col.first

    def _view(self, buf: BytesLike) -> BufferView:
        view = ffi.from_buffer(buf)
        self.views.append(view)
        return view

    def span(self, start: int, end: int) -> int:
        """Bytes the rows ``start..end-1`` hold (0 without a column)."""
        if self.offsets is None:
            return 0
        return int(self.offsets[self.first + end] - self.offsets[self.first + start])


def encode_batch_hpub(
    payloads: BatchColumn,
    subjects: BatchColumn | None,
    msg_ids: BatchColumn | None,
    headers: BatchColumn | None,
    *,
    start: int,
    end: int,
    default_subject: bytes,
    id_prefix: bytes | None,
    first_index: int,
    reply_prefix: bytes,
    first_token: int,
    max_payload: int,
    line_room: int,
    reply_suffix: bytes = b"",
) -> tuple[bytes, int, int]:
    """Encode rows ``start..end-1`` as HPUB frames: one C call (see the Python twin's doc)."""
    cols = [_Column(c) for c in (payloads, subjects, msg_ids, headers)]
    rows = end - start
    spans = [col.span(start, end) for col in cols]
    cap = (
        sum(spans)
        + spans[3]  # a header pair's ": " and CRLF in place of its 2 NULs
        + rows
        * (
            _BATCH_ROW_BYTES
            + len(default_subject)
            + len(id_prefix or b"")
            + len(reply_prefix)
            + len(reply_suffix)
        )
    )
    state = ffi.new("int64_t[]", lib.JSS_BATCH_STATE_FIELDS)
    c_prefix = ffi.NULL if id_prefix is None else id_prefix
    parts: list[bytes] = []
    while True:
        out = _new_raw("char[]", max(cap, 1))
        n = lib.jss_encode_batch_hpub(
            out, len(out), state,
            cols[0].c, cols[1].c, cols[2].c, cols[3].c, start, end,
            default_subject, len(default_subject), c_prefix, len(id_prefix or b""), first_index,
            reply_prefix, len(reply_prefix), first_token, reply_suffix, len(reply_suffix),
            max_payload, line_room,
        )  # fmt: skip
        parts.append(ffi.buffer(out, state[0])[:])
        if n < 0:
            return b"".join(parts), state[1], n
        if start + n == end:
            return parts[0] if len(parts) == 1 else b"".join(parts), -1, 0
        # out filled up (the estimate was short): go on from the next row in a new buffer
        cap = max(state[2], cap)
        first_index += n
        first_token += n
        start += n


# ---------------------------------------------------------------------------
# batched direct get

_DIRECT_BATCH_STATE = lib.JSS_DIRECT_BATCH_STATE_FIELDS
_new_columns = ffi.new_allocator(should_clear_after_alloc=False)


def decode_direct_batch(blocks: BytesLike, count: int, unit_ns: int) -> DirectBatch:
    """Decode the header blocks of ``count`` direct-get replies in one C call.

    Same interface and results as
    :func:`jetstream_sync._protocol._direct_batch.decode_direct_batch`; the
    columns are fresh C arrays (not cleared: C writes every entry it returns).
    """
    check_unit(unit_ns)
    data = blocks if type(blocks) is bytes else bytes(blocks)
    size = len(data)
    kinds = _new_columns("int32_t[]", max(count, 1))
    seqs = _new_columns("int64_t[]", max(count, 1))
    times = _new_columns("int64_t[]", max(count, 1))
    offsets = _new_columns("int32_t[]", count + 1)
    subjects = _new_columns("char[]", max(size, 1))
    state = ffi.new("int64_t[]", _DIRECT_BATCH_STATE)
    n = lib.jss_direct_batch_decode(
        data, size, count, unit_ns, kinds, seqs, times, offsets, subjects, size, state
    )
    if n < 0:
        raise batch_error(n, data, state[1])
    check_whole(n, state[0], size, count)
    return DirectBatch(
        memoryview(ffi.buffer(kinds, 4 * n)).cast("i"),
        memoryview(ffi.buffer(seqs, 8 * n)).cast("q"),
        memoryview(ffi.buffer(times, 8 * n)).cast("q"),
        memoryview(ffi.buffer(offsets, 4 * (n + 1))).cast("i"),
        memoryview(ffi.buffer(subjects, offsets[n])),
        state[2],
        state[3],
    )
