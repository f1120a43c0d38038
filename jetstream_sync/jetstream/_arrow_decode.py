"""Direct-get replies and consumed messages as Arrow record batches of the read schema.

The header blocks of a batch of direct-get replies are decoded in one call
(:func:`jetstream_sync._protocol.decode_direct_batch`: sequences, times and
subjects come back as buffers) and handed to Arrow as they are
(``pa.Array.from_buffers``); the payloads become the ``data`` column from one
joined buffer. Nothing is made per message except for the rare message
that carries headers of its own, whose header map is built in Python, and a
batch whose subjects are not all UTF-8. Messages a consumer delivered are
decoded a batch at a time too (:func:`decode_msgs`): Arrow splits their ack
subjects into the sequence and time columns.

What another client wrote is read back: a subject, header key or header
value that is not valid UTF-8 shows each invalid byte as U+FFFD. An error
about what the server sent names the stream and the sequence.
"""

from __future__ import annotations

import array
import functools
import re
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from .. import _protocol
from .._protocol._direct_batch import DIRECT_BATCH_MSG_HEADERS
from .._seam import ack_tokens
from ..errors import NotJetStreamMsgError, ProtocolError
from ..headers import Headers

if TYPE_CHECKING:
    import pyarrow as pa

    from .._reply import Reply
    from ..msg import Msg

__all__ = ["decode_msgs", "decode_replies", "import_pyarrow", "last_seq", "read_schema"]

_TIME_UNIT_NS = 1000  # the timestamp column is in microseconds
# The headers a direct-get reply adds to the stored message's own.
_DIRECT_GET_HEADERS = frozenset(
    ("Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
     "Nats-Last-Sequence", "Nats-UpTo-Sequence")
)  # fmt: skip
_SEQUENCE_HEADER = re.compile(rb"\r\nNats-Sequence:[ \t]*([0-9]+)")
# Ack subjects (see jetstream_sync._ack_subject): token count, (stream seq, ns) token index.
ACK_PREFIX = "$JS.ACK."
_V1_TOKENS, _V1_AT = 9, (5, 7)
_V2_TOKENS, _V2_AT = 11, (7, 9)


def import_pyarrow(needed_by: str = "Stream.read_arrow") -> Any:
    """The ``pyarrow`` module, imported now.

    Raises:
        ImportError: pyarrow is not installed (the message names ``needed_by`` and the
            extra to install).
    """
    try:
        import pyarrow
        import pyarrow.compute  # noqa: F401  # pyarrow.compute is not loaded by pyarrow itself
    except ImportError as exc:
        raise ImportError(
            f"{needed_by} needs the 'pyarrow' package, which is not installed: "
            "pip install 'jetstream_sync[spark]'"
        ) from exc
    return pyarrow


@functools.cache
def read_schema() -> pa.Schema:
    """The Arrow schema of the batches: the Spark data source's read schema.

    ``stream`` string, ``subject`` string, ``seq`` int64, ``timestamp``
    timestamp[us, UTC], ``data`` binary, ``headers`` map<string, list<string>>
    (null for a message without headers of its own).
    """
    pa = import_pyarrow()
    return pa.schema(
        [
            pa.field("stream", pa.string()),
            pa.field("subject", pa.string()),
            pa.field("seq", pa.int64()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("data", pa.binary()),
            pa.field("headers", pa.map_(pa.string(), pa.list_(pa.field("element", pa.string())))),
        ]
    )


def decode_replies(replies: Sequence[Reply], stream: str, end: int) -> pa.RecordBatch:
    """The message replies of batched direct gets as one record batch of :func:`read_schema`.

    Args:
        replies: ``(token, payload, header block)`` per message, in sequence
            order (the batches' closing status replies left out).
        stream: the stream's name (the ``stream`` column; named by errors).
        end: rows after this sequence are left out.

    Raises:
        ProtocolError: a reply is not a direct-get message (names the stream and sequence).
    """
    pa = import_pyarrow()
    schema = read_schema()
    _, payloads, blocks = zip(*replies, strict=True)
    n = len(blocks)
    types = schema.types
    try:
        cols = _protocol.decode_direct_batch(_join(blocks), n, _TIME_UNIT_NS)
    except ProtocolError as exc:
        raise _error(stream, blocks, exc) from exc
    if cols.messages != n:
        raise ProtocolError(
            f"stream {stream!r}: a status reply among a batched direct get's "
            f"messages, after sequence {max(cols.seqs.tolist())}"
        )
    offsets, subjects = pa.py_buffer(cols.subject_offsets), pa.py_buffer(cols.subjects)
    arrays = [
        _repeat(pa, stream, n),
        _subject_column(pa, n, offsets, subjects),
        pa.Array.from_buffers(types[2], n, [None, pa.py_buffer(cols.seqs)]),
        pa.Array.from_buffers(types[3], n, [None, pa.py_buffer(cols.times)]),
        _binary_column(pa, payloads),
        (
            _headers(pa, blocks, cols.kinds, cols.seqs, stream)
            if cols.own_headers
            else pa.nulls(n, types[5])
        ),
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    if cols.seqs[n - 1] > end:
        batch = batch.filter(pa.compute.less_equal(batch.column(2), _int64(pa, end)))
    return batch


def _headers(
    pa: Any, blocks: Sequence[bytes], kinds: memoryview, seqs: memoryview, stream: str
) -> pa.Array:
    """The ``headers`` column: a map for each message with headers of its own, else null."""
    maps: list[list[tuple[str, list[str]]] | None] = [None] * len(blocks)
    for i in range(len(blocks)):
        if kinds[i] == DIRECT_BATCH_MSG_HEADERS:
            try:
                pairs = _protocol.parse_headers(blocks[i])[2]
            except ProtocolError as exc:
                raise ProtocolError(f"stream {stream!r}, sequence {seqs[i]}: {exc}") from exc
            own = Headers.from_pairs((k, v) for k, v in pairs if k not in _DIRECT_GET_HEADERS)
            maps[i] = _header_entries(own)
    return pa.array(maps, type=read_schema().types[5])


def last_seq(reply: Reply, stream: str) -> int:
    """The stream sequence of one direct-get message reply.

    Raises:
        ProtocolError: the reply is not a direct-get message.
    """
    try:
        cols = _protocol.decode_direct_batch(_join([reply[2]]), 1, _TIME_UNIT_NS)
    except ProtocolError as exc:
        raise _error(stream, [reply[2]], exc) from exc
    if not cols.messages:
        raise ProtocolError(
            f"stream {stream!r}: a status reply among a batched direct get's messages"
        )
    return int(cols.seqs[0])


def _error(stream: str, blocks: Sequence[bytes | None], exc: ProtocolError) -> ProtocolError:
    """``exc`` (about a batch of header blocks) naming the stream and the message's sequence."""
    after = None
    for block in blocks:
        try:
            cols = _protocol.decode_direct_batch(_join([block]), 1, _TIME_UNIT_NS)
        except ProtocolError:
            found = _SEQUENCE_HEADER.search(block or b"")
            if found is not None:
                where = f"sequence {int(found.group(1))}"
            elif after is not None:
                where = f"the message after sequence {after}"
            else:
                where = "the first message of a batched direct get"
            return ProtocolError(f"stream {stream!r}, {where}: {exc}")
        after = int(cols.seqs[0]) or after
    return ProtocolError(f"stream {stream!r}: {exc}")


def decode_msgs(msgs: Sequence[Msg], stream: str, end: int) -> pa.RecordBatch:
    """Messages a consumer delivered as one record batch of :func:`read_schema`.

    Column at a time: the ack subjects (``reply``) are split by Arrow, and the
    stream sequence and time taken from their tokens; subjects and payloads
    become columns from one joined buffer each. Only a message with headers
    of its own is decoded on its own.

    Args:
        msgs: the messages, in sequence order (no status messages).
        stream: the stream's name (the ``stream`` column; named by errors).
        end: rows after this sequence are left out.

    Raises:
        ProtocolError: a message's reply is not an ack subject (names the stream).
    """
    pa = import_pyarrow()
    schema = read_schema()
    types = schema.types
    n = len(msgs)
    seqs, times = _ack_columns(pa, [m.reply for m in msgs], stream)
    with_headers = [i for i, m in enumerate(msgs) if m.header_size]
    if with_headers:
        maps: list[list[tuple[str, list[str]]] | None] = [None] * n
        for i in with_headers:
            maps[i] = _header_entries(msgs[i].headers)
        header_column = pa.array(maps, type=types[5])
    else:
        header_column = pa.nulls(n, types[5])
    arrays = [
        _repeat(pa, stream, n),
        _string_column(pa, [m.subject for m in msgs]),
        seqs,
        times,
        _binary_column(pa, [m.data for m in msgs]),
        header_column,
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    if seqs[n - 1].as_py() > end:
        batch = batch.filter(pa.compute.less_equal(seqs, _int64(pa, end)))
    return batch


def _ack_columns(pa: Any, replies: list[str], stream: str) -> tuple[pa.Array, pa.Array]:
    """The ``seq`` and ``timestamp`` columns from the messages' ack subjects.

    Both layouts of ``jetstream_sync._ack_subject`` are read; a batch that
    mixes them is read a message at a time.
    """
    pc = pa.compute
    types = read_schema().types
    try:
        column = _string_column(pa, replies)
        if not pc.all(pc.starts_with(column, pattern=ACK_PREFIX)).as_py():
            raise ValueError("not an ack subject")
        tokens = pc.split_pattern(column, ".")
        lengths = pc.min_max(pc.list_value_length(tokens)).as_py()
        if lengths["min"] == lengths["max"] == _V1_TOKENS:
            at = _V1_AT
        elif lengths["min"] >= _V2_TOKENS:
            at = _V2_AT
        else:
            raise ValueError("mixed layouts")
        seqs = pc.cast(pc.list_element(tokens, _int64(pa, at[0])), types[2])
        ns = pc.cast(pc.list_element(tokens, _int64(pa, at[1])), pa.int64())
    except (ValueError, UnicodeEncodeError, pa.ArrowInvalid):
        return _ack_columns_one_by_one(pa, replies, stream)
    return seqs, _micros(pa, ns)


def _ack_columns_one_by_one(pa: Any, replies: list[str], stream: str) -> tuple[pa.Array, pa.Array]:
    types = read_schema().types
    seqs, times = array.array("q"), array.array("q")
    for reply in replies:
        try:
            tokens = ack_tokens(reply)
            seqs.append(int(tokens[5]))
            times.append(int(tokens[7]))
        except (NotJetStreamMsgError, ValueError):
            raise ProtocolError(
                f"stream {stream!r}: a consumer delivered a message whose reply {reply!r} "
                "is not an ack subject"
            ) from None
    n = len(replies)
    ns = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(times)])
    return pa.Array.from_buffers(types[2], n, [None, pa.py_buffer(seqs)]), _micros(pa, ns)


def _text(value: str) -> str:
    """``value`` with each byte that was not UTF-8 (kept as a surrogate escape) as U+FFFD."""
    if value.isascii():
        return value
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _header_entries(hdrs: Headers) -> list[tuple[str, list[str]]] | None:
    """Headers as the entries of a ``MAP<STRING, ARRAY<STRING>>`` (None when there are none)."""
    entries = [(_text(key), [_text(v) for v in hdrs.get_all(key)]) for key in hdrs]
    return entries or None


def _subject_column(pa: Any, n: int, offsets: pa.Buffer, subjects: pa.Buffer) -> pa.Array:
    """The ``subject`` column from the decoder's buffers; invalid UTF-8 bytes become U+FFFD."""
    column = pa.Array.from_buffers(pa.string(), n, [None, offsets, subjects])
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:  # another client's bytes: the rare slow path
        raw = pa.Array.from_buffers(pa.binary(), n, [None, offsets, subjects])
        column = pa.array([s.decode("utf-8", "replace") for s in raw.to_pylist()], pa.string())
    return column


# Columns are built from buffers: pa.array() and pa.scalar() on Python objects
# import pandas (some 0.5 s) the first time, in every Spark Python worker.


def _repeat(pa: Any, text: str, n: int) -> pa.Array:
    """A string column of ``n`` times ``text``."""
    data = text.encode()
    offsets = array.array("i", range(0, (n + 1) * len(data), len(data)) if data else [0] * (n + 1))
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)]
    )


def _binary_column(pa: Any, values: Sequence[bytes]) -> pa.Array:
    """A binary column of ``values``."""
    try:
        offsets = array.array("i", accumulate(map(len, values), initial=0))
    except OverflowError:  # 2 GiB or more in one batch: Arrow's own conversion says so
        return pa.array(values, pa.binary())
    data = pa.py_buffer(b"".join(values))
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets), data])


def _string_column(pa: Any, values: list[str]) -> pa.Array:
    """A string column of ``values``; bytes kept as surrogate escapes become U+FFFD."""
    joined = "".join(values)
    if joined.isascii():
        offsets = array.array("i", accumulate(map(len, values), initial=0))
        data = pa.py_buffer(joined.encode("ascii"))
        return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(offsets), data])
    encoded = [value.encode("utf-8", "surrogateescape") for value in values]
    offsets = array.array("i", accumulate(map(len, encoded), initial=0))
    return _subject_column(pa, len(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded)))


def _int64(pa: Any, value: int) -> Any:
    """``value`` as an Arrow int64 scalar."""
    return pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(array.array("q", [value]))])[0]


def _micros(pa: Any, ns: pa.Array) -> pa.Array:
    """Nanoseconds since the epoch as the ``timestamp`` column (µs, truncated)."""
    return ns.cast(pa.timestamp("ns", tz="UTC")).cast(read_schema().types[3], safe=False)


def _join(blocks: Sequence[bytes | None]) -> bytes:
    try:
        return b"".join(blocks)  # type: ignore[arg-type]  # None is caught below
    except TypeError:
        raise ProtocolError("a batched direct get reply without a header block") from None
