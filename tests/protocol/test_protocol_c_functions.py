"""Each exported C function, called directly through cffi on exactly-sized buffers.

The inputs are copied into ``char[len]`` arrays with nothing after them, so
the ASan build (``csrc/asan.sh``) catches any read past the stated length.
"""

from __future__ import annotations

import ast
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jetstream_sync._ffi import ffi, lib
from jetstream_sync._protocol import _py

GUARD = -12345  # sentinel value that output slots past the written ones must keep


def exact(data: bytes):
    """A cdata char array holding exactly data, no terminator."""
    array = ffi.new(f"char[{max(len(data), 1)}]")
    ffi.memmove(array, data, len(data))
    return array


def guarded(count: int):
    """An int64 array of count slots, all set to GUARD."""
    array = ffi.new(f"int64_t[{count}]")
    for i in range(count):
        array[i] = GUARD
    return array


def c_parse(data: bytes, start=0, end=None, max_ops=64):
    """Call jss_parse; return (rc, ops list, consumed, need, err_pos, ops array)."""
    end = len(data) if end is None else end
    ops = guarded(max_ops * lib.JSS_OP_FIELDS + lib.JSS_OP_FIELDS)
    state = guarded(lib.JSS_STATE_FIELDS)
    rc = lib.jss_parse(exact(data), start, end, ops, max_ops, state)
    flat = list(ffi.unpack(ops, max(rc, 0) * lib.JSS_OP_FIELDS))
    return rc, flat, state[0], state[1], state[2], ops


# --------------------------------------------------------------------------
# constants


def test_constants_match_the_python_twin():
    """Op kinds, limits and error codes in the header equal the Python module's."""
    assert (lib.JSS_OP_MSG, lib.JSS_OP_HMSG, lib.JSS_OP_PING, lib.JSS_OP_PONG) == (1, 2, 3, 4)
    assert (lib.JSS_OP_OK, lib.JSS_OP_ERR, lib.JSS_OP_INFO) == (5, 6, 7)
    assert lib.JSS_OP_FIELDS == _py.OP_FIELDS
    assert lib.JSS_MAX_PAYLOAD == _py.MAX_PAYLOAD
    assert lib.JSS_MAX_CONTROL_LINE == _py.MAX_CONTROL_LINE
    assert lib.JSS_MIN_HEADER_BLOCK == _py.MIN_HEADER_BLOCK
    c_errors = {
        name[len("JSS_ERR_") :]: getattr(lib, name)
        for name in dir(lib)
        if name.startswith("JSS_ERR_")
    }
    py_errors = {
        name[len("ERR_") :]: getattr(_py, name) for name in dir(_py) if name.startswith("ERR_")
    }
    assert c_errors == py_errors
    assert set(_py.ERROR_MESSAGES) == set(c_errors.values())


# --------------------------------------------------------------------------
# one test class per C file, one test at least per C function

CSRC = Path(__file__).resolve().parents[2] / "csrc"
TESTS = Path(__file__).resolve().parent


def without_comments(path: Path) -> str:
    """The text of a C file without its /* */ comments."""
    return re.sub(r"/\*.*?\*/", "", path.read_text(encoding="utf-8"), flags=re.S)


def declared_functions() -> set[str]:
    """Every function of jss_proto.h (the cdef) and of jss_internal.h shared between files."""
    names: set[str] = set()
    for header in ("jss_proto.h", "jss_internal.h"):
        names.update(re.findall(r"\b(jss_\w+)\s*\(", without_comments(CSRC / header)))
    return names


def defined_functions() -> dict[str, list[str]]:
    """The C file(s) defining each non-static jss_ function (definitions start a line)."""
    files: dict[str, list[str]] = {}
    for source in sorted(CSRC.glob("*.c")):
        text = without_comments(source)
        for name in re.findall(r"^(?!static)[a-z][\w \*]*?\b(jss_\w+)\(", text, flags=re.M):
            files.setdefault(name, []).append(source.name)
    return files


def c_file_test_classes() -> dict[str, set[str]]:
    """The test methods of every class with a ``C_FILE`` in tests/test_protocol*.py, by C file."""
    tests: dict[str, set[str]] = {}
    for module in sorted(TESTS.glob("test_protocol*.py")):
        for node in ast.parse(module.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            c_file = [
                item.value.value
                for item in node.body
                if isinstance(item, ast.Assign)
                and [getattr(t, "id", None) for t in item.targets] == ["C_FILE"]
                and isinstance(item.value, ast.Constant)
            ]
            if c_file:
                methods = {
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("test_")
                }
                tests.setdefault(c_file[0], set()).update(methods)
    return tests


def test_every_c_file_has_a_test_class_and_every_c_function_a_test():
    """A C file or function added without a test fails here.

    Every csrc/*.c has a test class (``C_FILE = "<file>"``, in a test_protocol*.py
    module); every function that jss_proto.h or jss_internal.h declares is defined in
    exactly one file, and that file's class has ``test_<function>`` or
    ``test_<function>_...``; every non-static jss_ function is declared.
    """
    declared = declared_functions()
    defined = defined_functions()
    tests = c_file_test_classes()
    assert sorted(tests) == sorted(p.name for p in CSRC.glob("*.c"))
    assert sorted(defined) == sorted(declared)
    for name in sorted(declared):
        assert len(defined[name]) == 1, f"{name} is defined in {defined[name]}"
        methods = tests[defined[name][0]]
        assert any(m == f"test_{name}" or m.startswith(f"test_{name}_") for m in methods), (
            f"{name} ({defined[name][0]}) has no test_{name}* in its test class"
        )


# --------------------------------------------------------------------------
# csrc/jss_parser.c


class TestParser:
    """jss_parse, the op parser."""

    C_FILE = "jss_parser.c"

    def test_jss_parse_writes_ops_and_state(self):
        """Whole ops go to ops, consumed/need/err_pos to state; nothing past them is touched."""
        data = b"MSG a 1 r 2\r\nhi\r\nPING\r\nMSG b 2 5\r\nab"
        rc, flat, consumed, need, _, ops = c_parse(data)
        assert rc == 2
        msg = [lib.JSS_OP_MSG, 4, 1, 1, 8, 1, 0, 0, 13, 2]
        assert flat == msg + [lib.JSS_OP_PING] + [0] * 9
        assert (consumed, need) == (23, len(b"MSG b 2 5\r\n") + 5 + 2)
        assert ops[2 * lib.JSS_OP_FIELDS] == GUARD

    def test_jss_parse_stops_at_max_ops(self):
        """With max_ops reached it returns max_ops and consumed points at the next op."""
        data = b"PING\r\n" * 5
        rc, flat, consumed, need, _, ops = c_parse(data, max_ops=3)
        assert (rc, consumed, need) == (3, 18, 0)
        assert ops[3 * lib.JSS_OP_FIELDS] == GUARD
        rc, _, consumed, _, _, _ = c_parse(data, start=18, max_ops=3)
        assert (rc, consumed) == (2, 30)

    def test_jss_parse_window_and_absolute_offsets(self):
        """Parsing starts at start, stops at end, and offsets index the whole buffer."""
        data = b"xxMSG s 4 1\r\nz\r\nyy"
        rc, flat, consumed, need, _, _ = c_parse(data, start=2, end=len(data) - 2)
        assert rc == 1
        assert flat == [lib.JSS_OP_MSG, 6, 1, 4, 0, 0, 0, 0, 13, 1]
        assert (consumed, need) == (len(data) - 2, 0)

    def test_jss_parse_hmsg_fields(self):
        """HMSG: h covers the header block, p the rest of total_size."""
        data = b"HMSG s 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
        rc, flat, consumed, _, _, _ = c_parse(data)
        assert rc == 1
        assert flat == [lib.JSS_OP_HMSG, 5, 1, 1, 0, 0, 16, 12, 28, 2]
        assert consumed == len(data)

    def test_jss_parse_start_after_end_is_an_error(self):
        """start > end returns JSS_ERR_RANGE without reading anything."""
        rc, _, consumed, need, _, _ = c_parse(b"PING\r\n", start=5, end=2)
        assert (rc, consumed, need) == (lib.JSS_ERR_RANGE, 5, 0)

    def test_jss_parse_empty_window(self):
        """start == end returns 0 ops."""
        assert c_parse(b"PING\r\n", start=6)[:4] == (0, [], 6, 0)

    @pytest.mark.parametrize(
        ("data", "code"),
        [
            (b"XYZ", lib.JSS_ERR_OP),
            (b"PINGX", lib.JSS_ERR_OP),
            (b"PING\n", lib.JSS_ERR_OP),
            (b"PING \n", lib.JSS_ERR_BARE_LF),
            (b"MSG a\r 1 1\r\n", lib.JSS_ERR_STRAY_CR),
            (b"MSG a 1\r\n", lib.JSS_ERR_ARGS),
            (b"MSG a b 1\r\n", lib.JSS_ERR_NUMBER),
            (b"MSG a 1 67108865\r\n", lib.JSS_ERR_SIZE),
            (b"HMSG a 1 21 20\r\n", lib.JSS_ERR_HDR_SIZE),
            (b"MSG a 1 1\r\nxyz", lib.JSS_ERR_PAYLOAD_END),
            (b"INFO " + b"x" * lib.JSS_MAX_CONTROL_LINE, lib.JSS_ERR_LINE_TOO_LONG),
        ],
    )
    def test_jss_parse_error_codes(self, data, code):
        """Each kind of bad input has its code; state[0] and state[2] point at the bad op."""
        rc, _, consumed, _, err_pos, _ = c_parse(b"+OK\r\n" + data)
        assert (rc, consumed, err_pos) == (code, 5, 5)

    @pytest.mark.parametrize("cut", range(len(b"HMSG a 1 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")))
    def test_jss_parse_reads_nothing_past_end(self, cut):
        """Every prefix of a frame is 'need more' (the buffer ends exactly at end)."""
        data = b"HMSG a 1 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"[:cut]
        rc, _, consumed, _, _, _ = c_parse(data)
        assert (rc, consumed) == (0, 0)


# --------------------------------------------------------------------------
# csrc/jss_headers.c


def c_headers(block: bytes, max_pairs=8):
    """Call jss_parse_headers; return (rc, pairs as bytes, meta list, pairs array)."""
    pairs = guarded(max_pairs * lib.JSS_HDR_FIELDS + lib.JSS_HDR_FIELDS)
    meta = guarded(lib.JSS_HDR_META_FIELDS)
    rc = lib.jss_parse_headers(exact(block), len(block), pairs, max_pairs, meta)
    found = []
    for i in range(min(max(rc, 0), max_pairs)):
        k, k_len, v, v_len = pairs[4 * i : 4 * i + 4]
        found.append((block[k : k + k_len], block[v : v + v_len]))
    return rc, found, list(meta), pairs


class TestHeaders:
    """jss_parse_headers, the header block reader."""

    C_FILE = "jss_headers.c"

    def test_jss_parse_headers_pairs_and_status(self):
        """Returns the pair count, offsets of keys/values, and the status in meta."""
        block = b"NATS/1.0 408 Request Timeout\r\nA: 1\r\nB:two  \r\n\r\n"
        rc, found, meta, _ = c_headers(block)
        assert rc == 2
        assert found == [(b"A", b"1"), (b"B", b"two")]
        assert meta[0] == 408
        assert block[meta[1] : meta[1] + meta[2]] == b"Request Timeout"

    def test_jss_parse_headers_without_status(self):
        """meta[0] is -1 when the first line has no status."""
        rc, found, meta, _ = c_headers(b"NATS/1.0\r\n\r\n")
        assert (rc, found, meta[0]) == (0, [], -1)

    def test_jss_parse_headers_counts_beyond_max_pairs(self):
        """With too little room it still returns the total and writes only max_pairs."""
        block = b"NATS/1.0\r\n" + b"".join(b"K%d: v\r\n" % i for i in range(5)) + b"\r\n"
        rc, found, _, pairs = c_headers(block, max_pairs=2)
        assert rc == 5
        assert found == [(b"K0", b"v"), (b"K1", b"v")]
        assert pairs[2 * lib.JSS_HDR_FIELDS] == GUARD

    @pytest.mark.parametrize(
        ("block", "code", "line"),
        [
            (b"NATS/1.", lib.JSS_ERR_HDR_PREFIX, 0),
            (b"NATS/1.0\r\n", lib.JSS_ERR_HDR_END, 0),
            (b"NATS/1.0x\r\n\r\n", lib.JSS_ERR_HDR_PREFIX, 0),
            (b"NATS/1.0 99\r\n\r\n", lib.JSS_ERR_HDR_STATUS, 0),
            (b"NATS/1.0\r\nA: b\r\nnope\r\n\r\n", lib.JSS_ERR_HDR_LINE, 16),
            (b"NATS/1.0\r\n:v\r\n\r\n", lib.JSS_ERR_HDR_KEY, 10),
            (b"NATS/1.0\r\nA: b\nc\r\n\r\n", lib.JSS_ERR_HDR_CRLF, 10),
        ],
    )
    def test_jss_parse_headers_errors(self, block, code, line):
        """Each defect has its code; meta[3] is the offset of the line in error."""
        rc, _, meta, _ = c_headers(block)
        assert (rc, meta[3]) == (code, line)


# --------------------------------------------------------------------------
# csrc/jss_subjects.c


class TestSubjects:
    """jss_valid_subject."""

    C_FILE = "jss_subjects.c"

    @pytest.mark.parametrize(
        ("subject", "wildcards", "valid"),
        [
            (b"a.b", 0, 1),
            (b"a.*", 0, 0),
            (b"a.*", 1, 1),
            (b"a.>", 1, 1),
            (b">.a", 1, 0),
            (b"a..b", 1, 0),
            (b"", 1, 0),
            (b"a\x00", 0, 0),
            (b"a.b.", 0, 0),
            (b"a\x0cb", 1, 0),
            (b"a\x0bb", 1, 0),
            (b"a\tb", 1, 0),
            (b"ev.*.x", 1, 1),
            (b"ev.*.x", 0, 0),
            (b"ev.>x", 0, 1),
        ],
    )
    def test_jss_valid_subject(self, subject, wildcards, valid):
        """1 for valid subjects, 0 otherwise, reading exactly len bytes."""
        assert lib.jss_valid_subject(exact(subject), len(subject), wildcards) == valid

    def test_jss_valid_subject_respects_len(self):
        """Bytes after len are not part of the subject."""
        assert lib.jss_valid_subject(exact(b"a.b c"), 3, 0) == 1
        assert lib.jss_valid_subject(exact(b"a.b"), 2, 0) == 0


# --------------------------------------------------------------------------
# csrc/jss_puback.c


def c_puback(body: bytes):
    """Call jss_parse_puback; return (rc, out list)."""
    out = guarded(lib.JSS_PUBACK_FIELDS)
    rc = lib.jss_parse_puback(exact(body), len(body), out)
    return rc, list(out)


class TestPuback:
    """jss_parse_puback, the PubAck fast path."""

    C_FILE = "jss_puback.c"

    def test_jss_parse_puback_fields(self):
        """Stream and domain come back as offsets, seq as a number, duplicate as 0/1."""
        body = b'{"stream":"ORDERS","domain":"hub","seq":42,"duplicate":true}'
        rc, out = c_puback(body)
        assert rc == 1
        assert body[out[0] : out[0] + out[1]] == b"ORDERS"
        assert out[2:4] == [42, 1]
        assert body[out[4] : out[4] + out[5]] == b"hub"

    def test_jss_parse_puback_absent_domain(self):
        """domain_len is -1 when there is no domain."""
        rc, out = c_puback(b'{"seq":1,"stream":"S"}')
        assert rc == 1
        assert out[2:] == [1, 0, 0, -1]

    @pytest.mark.parametrize(
        "body", [b"", b"{", b'{"stream":"S","seq":1', b'{"error":1}', b'{"stream":"S","seq":1} ,']
    )
    def test_jss_parse_puback_declines(self, body):
        """0 for anything outside the fast path, including truncated bodies."""
        assert c_puback(body)[0] == 0

    @pytest.mark.parametrize("cut", range(len(b'{"stream":"S","seq":12,"duplicate":false}')))
    def test_jss_parse_puback_truncations(self, cut):
        """Every truncation of a good body is declined without reading past it."""
        assert c_puback(b'{"stream":"S","seq":12,"duplicate":false}'[:cut])[0] == 0

    def test_jss_puback_batch_kinds_tokens_and_specials(self):
        """Plain acks of one stream are SAME after the first (NEW); others carry their spans."""
        data = b"".join(
            [
                ack_frame(b"1", b'{"stream":"S","seq":10}'),
                ack_frame(b"2", b'{"stream":"S","seq":11}'),
                b"PING\r\n",
                ack_frame(b"3", b'{"stream":"S","seq":11,"duplicate":true}'),
                ack_frame(b"x4", b'{"stream":"T","domain":"hub","seq":1}'),
                ack_frame(b"5", b"", headers=b"NATS/1.0 503\r\n\r\n"),
                ack_frame(b"6", b'{"stream":"S","seq":12}', sid=8),
            ]
        )
        rc, tokens, seqs, kinds, specials, state = c_puback_batch(data, max_acks=8)
        assert rc == 5
        assert tokens == [1, 2, 3, -1, 5]
        assert seqs == [10, 11, 0, 1, 0]
        assert kinds == [lib.JSS_ACK_NEW, lib.JSS_ACK_SAME, lib.JSS_ACK_OTHER, lib.JSS_ACK_NEW,
                         lib.JSS_ACK_OTHER]  # fmt: skip
        assert state == [len(data), 0, 4]
        (i0, so, sl, _, dl), (i2, po, pl, _, hl), (i3, so3, sl3, do3, dl3), (i4, *rest) = specials
        assert (i0, data[so : so + sl], dl) == (0, b"S", -1)
        assert (i2, data[po : po + pl], hl) == (2, b'{"stream":"S","seq":11,"duplicate":true}', 0)
        assert (i3, data[so3 : so3 + sl3], data[do3 : do3 + dl3]) == (3, b"T", b"hub")
        po4, pl4, ho4, hl4 = rest
        assert (i4, pl4, data[ho4 : ho4 + hl4]) == (4, 0, b"NATS/1.0 503\r\n\r\n")

    def test_jss_puback_batch_stops_at_max_acks_and_resumes(self):
        """With room for two acks it writes two; state[0] is where the next call starts."""
        frames = [ack_frame(b"%d" % i, b'{"stream":"S","seq":%d}' % i) for i in range(5)]
        data = b"".join(frames)
        rc, tokens, _, _, _, state = c_puback_batch(data, max_acks=2)
        assert (rc, tokens, state[0]) == (2, [0, 1], len(frames[0]) + len(frames[1]))
        rc, tokens, _, kinds, _, state = c_puback_batch(data, start=state[0], max_acks=8)
        assert (rc, tokens, kinds[0], state[0]) == (3, [2, 3, 4], lib.JSS_ACK_NEW, len(data))

    def test_jss_puback_batch_leaves_an_incomplete_frame(self):
        """A frame cut short is not read (nor past the buffer): consumed stops before it."""
        whole = ack_frame(b"1", b'{"stream":"S","seq":1}')
        cut = ack_frame(b"2", b'{"stream":"S","seq":2}')[:-3]
        rc, tokens, _, _, _, state = c_puback_batch(whole + cut)
        assert (rc, tokens, state[0]) == (1, [1], len(whole))

    def test_jss_puback_batch_reports_protocol_errors(self):
        """Bytes that are not protocol give the parser's code and the op's offset."""
        good = ack_frame(b"1", b'{"stream":"S","seq":1}')
        rc, *_, state = c_puback_batch(good + b"BOGUS\r\n")
        assert rc == lib.JSS_ERR_OP and state[1] == len(good)


def ack_frame(token: bytes, body: bytes, sid: int = 7, headers: bytes | None = None) -> bytes:
    """An MSG (or, with headers, HMSG) ack frame to ``_INBOX.p.<token>`` on ``sid``."""
    subject = b"_INBOX.p." + token
    if headers is None:
        return b"MSG %s %d %d\r\n%s\r\n" % (subject, sid, len(body), body)
    size = len(headers) + len(body)
    return b"HMSG %s %d %d %d\r\n%s%s\r\n" % (subject, sid, len(headers), size, headers, body)


def c_puback_batch(data: bytes, start: int = 0, max_acks: int = 16):
    """Call jss_puback_batch for sid 7, prefix ``_INBOX.p.``; return every output as lists."""
    tokens, seqs = guarded(max_acks), guarded(max_acks)
    kinds = ffi.new(f"uint8_t[{max_acks}]")
    specials = guarded(max_acks * lib.JSS_ACK_SPECIAL_FIELDS)
    state = guarded(lib.JSS_ACK_STATE_FIELDS)
    rc = lib.jss_puback_batch(
        exact(data), start, len(data), 7, len(b"_INBOX.p."), max_acks,
        tokens, seqs, kinds, specials, state,
    )  # fmt: skip
    n = max(rc, 0)
    fields = lib.JSS_ACK_SPECIAL_FIELDS
    flat = ffi.unpack(specials, state[2] * fields) if rc >= 0 else []
    if n < max_acks:
        assert tokens[n] == GUARD  # nothing written past the acks returned
    return (
        rc,
        ffi.unpack(tokens, n),
        ffi.unpack(seqs, n),
        list(ffi.unpack(kinds, n)),
        [flat[i : i + fields] for i in range(0, len(flat), fields)],
        ffi.unpack(state, lib.JSS_ACK_STATE_FIELDS),
    )


# --------------------------------------------------------------------------
# csrc/jss_direct_meta.c

DIRECT_BLOCK = (
    b"NATS/1.0\r\nNats-Stream: KV_B\r\nNats-Subject: $KV.B.k1\r\nKV-Operation: PURGE\r\n"
    b"Nats-Sequence: 42\r\nNats-Time-Stamp: 2026-11-22T20:25:26.75Z\r\n\r\n"
)


def c_direct_meta(block: bytes):
    """Call jss_direct_meta_parse; return (rc, out list)."""
    out = guarded(lib.JSS_DIRECT_META_FIELDS)
    rc = lib.jss_direct_meta_parse(exact(block), len(block), out)
    return rc, list(out)


class TestDirectMeta:
    """jss_direct_meta_parse, the direct-get reply fast path."""

    C_FILE = "jss_direct_meta.c"

    def test_jss_direct_meta_parse_fields(self):
        """Subject and operation come back as offsets, seq and the time stamp as numbers."""
        rc, out = c_direct_meta(DIRECT_BLOCK)
        assert rc == 1
        assert DIRECT_BLOCK[out[0] : out[0] + out[1]] == b"$KV.B.k1"
        assert out[2:4] == [42, 1795379126750000000]
        assert DIRECT_BLOCK[out[4] : out[4] + out[5]] == b"PURGE"
        assert out[6:] == [0, -1]  # no Nats-Marker-Reason

    def test_jss_direct_meta_parse_declines_leaving_out_untouched(self):
        """0 for a status block, and nothing is written."""
        assert c_direct_meta(b"NATS/1.0 404 Message Not Found\r\n\r\n") == (
            0, [GUARD] * lib.JSS_DIRECT_META_FIELDS,
        )  # fmt: skip

    @pytest.mark.parametrize("cut", range(len(DIRECT_BLOCK)))
    def test_jss_direct_meta_parse_truncations(self, cut):
        """Every truncation of a good block is declined without reading past it."""
        assert c_direct_meta(DIRECT_BLOCK[:cut])[0] == 0

    def test_jss_direct_meta_parse_length_bounds_the_read(self):
        """Bytes after len are not part of the block."""
        assert (
            lib.jss_direct_meta_parse(exact(DIRECT_BLOCK + b"x"), len(DIRECT_BLOCK), guarded(8))
            == 1
        )


# --------------------------------------------------------------------------
# csrc/jss_time.c: the RFC 3339 readers behind jss_direct_meta_parse and
# jss_direct_batch_decode

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_ns(*fields: int) -> int:
    """Nanoseconds since the epoch of a UTC date and time (whole seconds)."""
    return (datetime(*fields, tzinfo=UTC) - EPOCH) // timedelta(seconds=1) * 10**9


def c_stamp_ns(stamp: bytes) -> int | None:
    """The time stamp jss_direct_meta_parse reads from a block holding stamp, or None."""
    block = b"NATS/1.0\r\nNats-Subject: s\r\nNats-Sequence: 1\r\nNats-Time-Stamp: %s\r\n\r\n"
    rc, out = c_direct_meta(block % stamp)
    return out[3] if rc == 1 else None


def c_stamp_units(stamp: bytes, unit_ns: int) -> int | None:
    """The time jss_direct_batch_decode reads from one block holding stamp, or None."""
    block = b"NATS/1.0\r\nNats-Subject: s\r\nNats-Sequence: 1\r\nNats-Time-Stamp: %s\r\n\r\n"
    data = exact(block % stamp)
    times = ffi.new("int64_t[1]")
    n = lib.jss_direct_batch_decode(
        data, len(block % stamp), 1, unit_ns, ffi.new("int32_t[1]"), ffi.new("int64_t[1]"),
        times, ffi.new("int32_t[2]"), ffi.new("char[1]"), 1,
        ffi.new("int64_t[]", lib.JSS_DIRECT_BATCH_STATE_FIELDS),
    )  # fmt: skip
    return times[0] if n == 1 else None


class TestTime:
    """The RFC 3339 readers, through the public functions that use them."""

    C_FILE = "jss_time.c"

    @pytest.mark.parametrize(
        ("stamp", "ns"),
        [
            (b"1970-01-01T00:00:00Z", 0),
            (b"2024-02-29T12:00:00.5Z", utc_ns(2024, 2, 29, 12) + 500_000_000),
            (b"2000-02-29T00:00:00.000000001Z", utc_ns(2000, 2, 29) + 1),
            (b"2261-12-31T23:59:59.999999999Z", utc_ns(2261, 12, 31, 23, 59, 59) + 999_999_999),
            (b"2026-11-22T20:24:51.123456789Z", 1_795_379_091_123_456_789),
        ],
    )
    def test_jss_time_utc_ns(self, stamp, ns):
        """The strict form (Z, 1..9 fraction digits, years 1970..2261) in nanoseconds."""
        assert c_stamp_ns(stamp) == ns

    @pytest.mark.parametrize(
        "stamp",
        [
            b"2023-02-29T00:00:00Z",
            b"1900-02-29T00:00:00Z",
            b"1969-12-31T23:59:59Z",
            b"2262-01-01T00:00:00Z",
            b"2026-01-01T00:00:00.1234567890Z",
            b"2026-01-01T00:00:00.Z",
            b"2026-01-01T00:00:00+01:00",
            b"2026-01-01T24:00:00Z",
            b"2026-01-01t00:00:00Z",
        ],
    )
    def test_jss_time_utc_ns_declines(self, stamp):
        """Anything else is left to the Python fallback."""
        assert c_stamp_ns(stamp) is None

    @pytest.mark.parametrize(
        ("stamp", "unit_ns", "value"),
        [
            (b"2026-01-01T01:00:00+01:00", 1, utc_ns(2026, 1, 1)),
            (b"2025-12-31T23:30:00-00:30", 1, utc_ns(2026, 1, 1)),
            (b"2026-01-01 00:00:00z", 1000, utc_ns(2026, 1, 1) // 1000),
            (b"2026-01-01t00:00:00.0000015Z", 1000, utc_ns(2026, 1, 1) // 1000 + 1),
            (b"2026-01-01T00:00:00.999Z", 1_000_000_000, utc_ns(2026, 1, 1) // 10**9),
            (b"0001-01-01T00:00:00.5Z", 1_000_000_000, utc_ns(1, 1, 1) // 10**9),
            (b"1969-12-31T23:59:59.5Z", 1_000_000, -500),
        ],
    )
    def test_jss_time_units(self, stamp, unit_ns, value):
        """Offsets, lower-case separators and units; values round down (before 1970 too)."""
        assert c_stamp_units(stamp, unit_ns) == value

    @pytest.mark.parametrize(
        "stamp",
        [
            b"2026-01-01T00:00:00+24:00",
            b"2026-01-01T00:00:60Z",
            b"2026-13-01T00:00:00Z",
            b"0000-12-31T00:00:00Z",
            b"2026-01-01T00:00:00",
            b"2026-01-01T00:00:00.Z",
            b"2026-01-01X00:00:00Z",
        ],
    )
    def test_jss_time_units_refuses(self, stamp):
        """What datetime would not accept fails the batch."""
        assert c_stamp_units(stamp, 1) is None


# --------------------------------------------------------------------------
# csrc/jss_encode.c

CANARY = 0xA5  # byte value every output byte at or past cap must keep


def canaried(cap: int):
    """A char array of cap + 1 bytes, all CANARY (the last one lies past cap)."""
    array = ffi.new(f"char[{cap + 1}]")
    ffi.memmove(array, bytes([CANARY]) * (cap + 1), cap + 1)
    return array


def c_encode(func, cap: int, *parts: bytes):
    """Call an encoder with each part as an exactly-sized (pointer, length) pair.

    Returns (rc, the bytes written when rc >= 0, the whole output array as bytes).
    """
    out = canaried(cap)
    args = []
    for part in parts:
        args += [exact(part), len(part)]
    rc = func(out, cap, *args)
    raw = ffi.unpack(out, cap + 1)
    assert raw[cap] == CANARY, "wrote past cap"
    return rc, raw[: max(rc, 0)], raw


def kv_of(pairs) -> bytes:
    """Header pairs flattened the way the encoders take them: key NUL value NUL ..."""
    return b"".join(k + b"\0" + v + b"\0" for k, v in pairs)


HPUB_PAIRS = [(b"Nats-Msg-Id", b"a b:c"), (b"X", b""), (b"K~y", "Ключ".encode() + b"\xff\xfe\t")]
HPUB_BLOCK = (
    b"NATS/1.0\r\nNats-Msg-Id: a b:c\r\nX: \r\nK~y: " + "Ключ".encode() + b"\xff\xfe\t\r\n\r\n"
)


BAD_KV = [
    (b"\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"a b\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"a:b\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"a\tb\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"a\rb\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"a\nb\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"\x7f\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"\xc3\xa9\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"a\x80\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"a\xff\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"\x01\0v\0", lib.JSS_ENC_ERR_KEY),
    (b"k\0a\rb\0", lib.JSS_ENC_ERR_VALUE),
    (b"k\0a\nb\0", lib.JSS_ENC_ERR_VALUE),
    (b"k\0v\0k\0\n\0", lib.JSS_ENC_ERR_VALUE),
    (b"k", lib.JSS_ENC_ERR_KV),
    (b"k\0", lib.JSS_ENC_ERR_KV),
    (b"k\0v", lib.JSS_ENC_ERR_KV),
    (b"k\0v\0k2\0", lib.JSS_ENC_ERR_KV),
    (b"\0", lib.JSS_ENC_ERR_KEY),
    # the first bad pair decides, each key before its value
    (b"k\0\r\0 \0v\0", lib.JSS_ENC_ERR_VALUE),
    (b" \0\r\0", lib.JSS_ENC_ERR_KEY),
    (b"k\0\r\0x", lib.JSS_ENC_ERR_VALUE),
    (b"a b\0v", lib.JSS_ENC_ERR_KEY),
]


class TestEncode:
    """jss_encode_hpub and jss_encode_headers, the encoders."""

    C_FILE = "jss_encode.c"

    def test_jss_encode_constants(self):
        """Error codes are -1..-3 and every encoding is longer than 3, so the ranges never meet."""
        assert (lib.JSS_ENC_ERR_KEY, lib.JSS_ENC_ERR_VALUE, lib.JSS_ENC_ERR_KV) == (-1, -2, -3)
        assert lib.JSS_ENC_MIN_SIZE == 10 < lib.JSS_MIN_HEADER_BLOCK

    @pytest.mark.parametrize(
        ("reply", "payload"), [(b"", b"hi"), (b"_INBOX.r", b""), (b"r", b"\0\r\n")]
    )
    def test_jss_encode_hpub(self, reply, payload):
        """Writes HPUB with header and total sizes, the block built from kv, then the payload."""
        head = b"HPUB s.t %s%d %d\r\n" % (
            reply + b" " if reply else b"",
            len(HPUB_BLOCK),
            len(HPUB_BLOCK) + len(payload),
        )
        frame = head + HPUB_BLOCK + payload + b"\r\n"
        rc, written, _ = c_encode(
            lib.jss_encode_hpub, len(frame) + 3, b"s.t", reply, kv_of(HPUB_PAIRS), payload
        )
        assert (rc, written) == (len(frame), frame)
        assert frame == _py.encode_hpub(b"s.t", reply, HPUB_BLOCK, payload)

    def test_jss_encode_hpub_without_pairs(self):
        """kvlen 0 gives the minimal block."""
        frame = b"HPUB s 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
        assert c_encode(lib.jss_encode_hpub, 64, b"s", b"", b"", b"hi")[:2] == (len(frame), frame)

    def test_jss_encode_hpub_exact_cap_and_every_smaller_cap(self):
        """cap == size fits; any smaller cap returns -size and writes nothing at all."""
        parts = (b"s", b"r", kv_of(HPUB_PAIRS), b"data")
        head = b"HPUB s r %d %d\r\n" % (len(HPUB_BLOCK), len(HPUB_BLOCK) + 4)
        size = len(head) + len(HPUB_BLOCK) + len(b"data\r\n")
        assert c_encode(lib.jss_encode_hpub, size, *parts)[0] == size
        for cap in range(size):
            rc, _, raw = c_encode(lib.jss_encode_hpub, cap, *parts)
            assert rc == -size
            assert raw == bytes([CANARY]) * (cap + 1)

    def test_jss_encode_hpub_size_query_with_null(self):
        """out may be NULL with cap 0 to learn the size."""
        frame = b"HPUB s 12 17\r\nNATS/1.0\r\n\r\n12345\r\n"
        assert lib.jss_encode_hpub(
            ffi.NULL, 0, b"s", 1, ffi.NULL, 0, ffi.NULL, 0, b"12345", 5
        ) == -len(frame)

    def test_jss_encode_hpub_size_digits(self):
        """Sizes at digit boundaries are written in full."""
        for size in (0, 9, 10, 99, 100, 65535, 1000000):
            payload = b"x" * size
            frame = b"HPUB s 12 %d\r\nNATS/1.0\r\n\r\n%s\r\n" % (12 + size, payload)
            assert c_encode(lib.jss_encode_hpub, len(frame), b"s", b"", b"", payload)[:2] == (
                len(frame),
                frame,
            )

    def test_jss_encode_headers(self):
        """Writes just the block and returns its length."""
        block = HPUB_BLOCK
        rc, written, _ = c_encode(lib.jss_encode_headers, len(block) + 1, kv_of(HPUB_PAIRS))
        assert (rc, written) == (len(block), block)
        assert c_encode(lib.jss_encode_headers, 12, b"")[:2] == (12, b"NATS/1.0\r\n\r\n")

    def test_jss_encode_headers_exact_cap_and_every_smaller_cap(self):
        """cap == size fits; any smaller cap returns -size and writes nothing at all."""
        kv = kv_of(HPUB_PAIRS)
        assert c_encode(lib.jss_encode_headers, len(HPUB_BLOCK), kv)[0] == len(HPUB_BLOCK)
        for cap in range(len(HPUB_BLOCK)):
            rc, _, raw = c_encode(lib.jss_encode_headers, cap, kv)
            assert rc == -len(HPUB_BLOCK)
            assert raw == bytes([CANARY]) * (cap + 1)
        assert lib.jss_encode_headers(ffi.NULL, 0, ffi.NULL, 0) == -12

    @pytest.mark.parametrize(("kv", "code"), BAD_KV)
    @pytest.mark.parametrize("cap", [0, 4096])
    def test_jss_encode_header_errors(self, kv, code, cap):
        """Bad keys, bad values and malformed kv have their codes, whatever cap is; nothing is
        written."""
        for func, parts in [
            (lib.jss_encode_headers, (kv,)),
            (lib.jss_encode_hpub, (b"s", b"r", kv, b"payload")),
        ]:
            rc, _, raw = c_encode(func, cap, *parts)
            assert rc == code
            assert raw == bytes([CANARY]) * (cap + 1)

    def test_jss_encode_keys_may_hold_any_printable_ascii_byte_but_colon(self):
        """Every printable ASCII byte but ':' is a valid key byte (ADR-4); no other is."""
        key = bytes(b for b in range(0x21, 0x7F) if b != 0x3A)
        value = bytes(b for b in range(1, 0x100) if b not in (0x0A, 0x0D))
        block = b"NATS/1.0\r\n" + key + b": " + value + b"\r\n\r\n"
        assert c_encode(lib.jss_encode_headers, len(block), kv_of([(key, value)]))[:2] == (
            len(block),
            block,
        )
        for bad in [*range(1, 0x21), 0x3A, *range(0x7F, 0x100)]:  # NUL ends the key
            kv = kv_of([(b"a" + bytes([bad]), b"v")])
            assert c_encode(lib.jss_encode_headers, 64, kv)[0] == lib.JSS_ENC_ERR_KEY, bad
