"""Differential fuzzing: the C core and the Python twin agree on every input.

Valid frame streams are checked against what was generated, split at random
points and fed the way the reader feeds them; mutated streams and protocol-ish
garbage only need both implementations to agree, step by step, on the ops or
on the ProtocolError. Each Hypothesis example carries many inputs (streams,
split plans, blocks, subjects...); ``test_zz_enough_inputs`` checks that one
run of this file generated at least 100,000 of them. The sections follow the
C files (csrc/README.md); the batch encoder's fuzz is in test_protocol_batch.py,
the batched direct get's in test_protocol_fuzz_direct_batch.py.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetstream_sync._ffi import ffi, lib
from jetstream_sync._protocol import _c, _py
from jetstream_sync.errors import BadHeaderError, ProtocolError
from tests.fixtures.fuzz import fuzz_settings

IMPLS = (_c, _py)
INPUTS: Counter[str] = Counter()  # inputs generated per test, summed by test_zz_enough_inputs
# the last test sums what every test of this file generated: one pytest-xdist worker runs them all
pytestmark = [pytest.mark.fuzz, pytest.mark.xdist_group("protocol-fuzz")]
REQUIRED_INPUTS = 100_000


# --------------------------------------------------------------------------
# running both implementations


def outcome(func, *args):
    """func(*args), or the exception's type and message when it raises one of ours."""
    try:
        return ("ok", func(*args))
    except (ProtocolError, BadHeaderError, ValueError) as exc:
        return ("raised", type(exc), str(exc))


def materialize(buf, ops):
    """The ops as (kind, a, sid, r, h, p) tuples of bytes."""
    out = []
    for i in range(0, len(ops), 10):
        kind, a_off, a_len, sid, r_off, r_len, h_off, h_len, p_off, p_len = ops[i : i + 10]
        out.append(
            (
                kind,
                bytes(buf[a_off : a_off + a_len]),
                sid,
                bytes(buf[r_off : r_off + r_len]),
                bytes(buf[h_off : h_off + h_len]),
                bytes(buf[p_off : p_off + p_len]),
            )
        )
    return out


def feed_both(data: bytes, cuts, compact=True, junk=b""):
    """Feed data in pieces to both implementations as the reader would, in lockstep.

    Each step appends the next piece, parses ``buf[start:end]`` with ``junk``
    lying after ``end`` (it must not matter), then either drops the consumed
    bytes (compact) or keeps them and starts the next parse at ``consumed``.
    Both implementations must give equal results, or raise the same error at
    the same step. Returns (ops seen, unconsumed tail, error or None, steps).
    """
    buf = bytearray()
    start = 0
    seen = []
    last = 0
    steps = 0
    for cut in [*sorted(cuts), len(data)]:
        buf += data[last:cut]
        last = cut
        window = bytes(buf) + junk
        results = [outcome(impl.parse, window, start, len(buf)) for impl in IMPLS]
        steps += 1
        assert results[0] == results[1], (data, cuts, start)
        if results[0][0] == "raised":
            return seen, bytes(buf[start:]), results[0], steps
        ops, consumed, need = results[0][1]
        assert start <= consumed <= len(buf)
        assert need == 0 or consumed + need > len(buf)
        seen += materialize(window, ops)
        if compact:
            del buf[:consumed]
            start = 0
        else:
            start = consumed
    return seen, bytes(buf[start:]), None, steps


def c_parse_exact(data: bytes) -> int:
    """jss_parse on an exactly-sized copy (ASan sees any over-read); returns ops or error code."""
    array = ffi.new(f"char[{max(len(data), 1)}]")
    ffi.memmove(array, data, len(data))
    ops = ffi.new("int64_t[]", 64 * lib.JSS_OP_FIELDS)
    state = ffi.new("int64_t[]", lib.JSS_STATE_FIELDS)
    return lib.jss_parse(array, 0, len(data), ops, 64, state)


# --------------------------------------------------------------------------
# strategies for valid frames


def latin1(alphabet: str, min_size=0, max_size=10):
    """Bytes drawn from the given byte values (as latin-1 characters)."""
    return st.text(alphabet=alphabet, min_size=min_size, max_size=max_size).map(
        lambda s: s.encode("latin-1")
    )


NON_BLANK = "".join(chr(b) for b in range(256) if chr(b) not in " \t\r\n")
NO_CRLF = "".join(chr(b) for b in range(256) if chr(b) not in "\r\n")
KEY_CHARS = "".join(chr(b) for b in range(0x21, 0x7F) if chr(b) != ":")

blanks = latin1(" \t", 1, 3)
trailing = latin1(" \t", 0, 2)
tokens = st.one_of(
    st.sampled_from([b"a", b"orders.new", b"_INBOX.x1y2.3", b"$JS.ACK.S.C.1.2.3.4.5"]),
    latin1(NON_BLANK, 1, 12),
)
sids = st.integers(0, 2**63 - 1)
payloads = st.one_of(
    st.binary(max_size=40),
    st.lists(
        st.sampled_from([b"\r", b"\n", b"\r\n", b"MSG a 1 1\r\n", b"PING", b"x", b"\x00", b" "]),
        max_size=8,
    ).map(b"".join),
)


@st.composite
def op_names(draw, name: bytes) -> bytes:
    """name with a random case per letter."""
    mask = draw(st.integers(0, 15))
    return bytes(c ^ 0x20 if c >= 0x41 and mask >> i & 1 else c for i, c in enumerate(name))


@st.composite
def numbers(draw, value: int) -> bytes:
    """value in decimal, sometimes zero-padded."""
    return b"0" * draw(st.integers(0, 2)) + b"%d" % value


@st.composite
def header_blocks(draw):
    """A valid header block and the parse_headers result it must give."""
    status, description, status_part = None, "", b""
    if draw(st.booleans()):
        status = draw(st.integers(100, 999))
        text = draw(latin1(NO_CRLF, 0, 12))
        status_part = draw(blanks) + b"%d" % status
        if text.strip(b" \t"):
            status_part += draw(blanks) + text
            description = text.strip(b" \t").decode("utf-8", "surrogateescape")
        status_part += draw(trailing)
    lines, pairs = [], []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(latin1(KEY_CHARS, 1, 8))
        value = draw(latin1(NO_CRLF, 0, 10))
        lines.append(key + b":" + draw(trailing) + value)
        decode = lambda b: b.decode("utf-8", "surrogateescape")  # noqa: E731
        pairs.append((decode(key), decode(value.strip(b" \t"))))
    block = b"NATS/1.0" + status_part + b"\r\n" + b"".join(line + b"\r\n" for line in lines)
    return block + b"\r\n", (status, description, pairs)


@st.composite
def msg_frames(draw):
    """A MSG or HMSG frame and its expected op."""
    headers = draw(st.booleans())
    subject, sid, payload = draw(tokens), draw(sids), draw(payloads)
    reply = draw(st.one_of(st.just(b""), tokens))
    args = [subject, draw(numbers(sid))] + ([reply] if reply else [])
    block = b""
    if headers:
        block = draw(header_blocks())[0]
        args.append(draw(numbers(len(block))))
    args.append(draw(numbers(len(block) + len(payload))))
    line = draw(op_names(b"HMSG" if headers else b"MSG"))
    for arg in args:
        line += draw(blanks) + arg
    wire = line + draw(trailing) + b"\r\n" + block + payload + b"\r\n"
    return wire, (2 if headers else 1, subject, sid, reply, block, payload)


@st.composite
def other_frames(draw):
    """A PING, PONG, +OK, -ERR or INFO frame and its expected op."""
    kind = draw(st.sampled_from([3, 4, 5, 6, 7]))
    name = {3: b"PING", 4: b"PONG", 5: b"+OK", 6: b"-ERR", 7: b"INFO"}[kind]
    line = draw(op_names(name))
    text = b""
    if kind == 6:
        raw = draw(latin1(NO_CRLF, 0, 16))
        quoted = b"'" + raw + b"'" if draw(st.booleans()) else raw
        line += draw(blanks) + quoted if quoted else b""
        text = quoted.strip(b" \t'")
    elif kind == 7:
        text = draw(latin1(NO_CRLF, 1, 24)).strip(b" \t") or b"{}"
        line += draw(blanks) + text
    return line + draw(trailing) + b"\r\n", (kind, text, 0, b"", b"", b"")


frame_lists = st.lists(st.one_of(msg_frames(), other_frames()), min_size=1, max_size=10)


@st.composite
def cut_plans(draw, length: int):
    """Up to 8 split points in [0, length]."""
    return draw(st.lists(st.integers(0, length), max_size=8))


# --------------------------------------------------------------------------
# parse (csrc/jss_parser.c)


@fuzz_settings(700)
@given(data=st.data(), stream=frame_lists)
def test_valid_streams_come_out_whole_at_any_split(data, stream):
    """Generated frames come back exactly, whatever the split points, from both cores."""
    wire = b"".join(w for w, _ in stream)
    expected = [e for _, e in stream]
    for _ in range(4):
        cuts = data.draw(cut_plans(len(wire)))
        compact = data.draw(st.booleans())
        junk = data.draw(st.sampled_from([b"", b"\r\nMSG", b"X"]))
        seen, tail, error, steps = feed_both(wire, cuts, compact, junk)
        INPUTS["valid streams"] += steps
        assert error is None
        assert (seen, tail) == (expected, b"")


def test_valid_header_blocks_parse_to_what_was_generated():
    """The generated header blocks parse to their expected triples in both cores."""

    @fuzz_settings(300)
    @given(st.lists(header_blocks(), min_size=1, max_size=8))
    def check(blocks):
        for block, expected in blocks:
            INPUTS["valid header blocks"] += 1
            assert _c.parse_headers(block) == _py.parse_headers(block) == expected

    check()


MUTATION_BYTES = b" \t\r\n0123456789:MSGHPINOKERFmsgh+-'\x00\xff.{}"


def mutate(rng: random.Random, data: bytes) -> bytes:
    """data with 1-3 random byte edits (replace, insert, delete, duplicate, truncate)."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        if not buf:
            buf.append(rng.choice(MUTATION_BYTES))
            continue
        i = rng.randrange(len(buf))
        action = rng.randrange(5)
        if action == 0:
            buf[i] = rng.choice(MUTATION_BYTES) if rng.random() < 0.8 else rng.randrange(256)
        elif action == 1:
            buf.insert(i, rng.choice(MUTATION_BYTES))
        elif action == 2:
            del buf[i]
        elif action == 3:
            j = rng.randrange(i, min(len(buf), i + 16) + 1)
            buf[i:i] = buf[i:j]
        else:
            del buf[i:]
    return bytes(buf)


def random_cuts(rng: random.Random, length: int) -> list[int]:
    """0-4 random split points in [0, length]."""
    return [rng.randint(0, length) for _ in range(rng.randint(0, 4))]


@fuzz_settings(500)
@given(stream=frame_lists, rng=st.randoms(use_true_random=True))
def test_mutated_streams_agree(stream, rng):
    """Mutants of valid streams give identical results or identical errors, step by step."""
    wire = b"".join(w for w, _ in stream)
    for _ in range(16):
        mutant = mutate(rng, wire)
        assert outcome(_c.parse, mutant, 0, len(mutant)) == outcome(
            _py.parse, mutant, 0, len(mutant)
        )
        *_, steps = feed_both(mutant, random_cuts(rng, len(mutant)), rng.random() < 0.5)
        INPUTS["mutated streams"] += 1 + steps
        c_parse_exact(mutant)


OP_NAMES = [b"MSG", b"HMSG", b"PING", b"PONG", b"+OK", b"-ERR", b"INFO"]
WORDS = [b"a", b"a.b", b"_INBOX.1", b"'quoted'", b"{}", b"\x00", b"\xff", b"\x0b", b"x1"]
NUMBERS = [
    b"0",
    b"1",
    b"2",
    b"5",
    b"11",
    b"12",
    b"14",
    b"20",
    b"007",
    b"-1",
    b"+1",
    b"1x",
    b"",
    b"99999999999999999999",
    b"9223372036854775807",
    b"9223372036854775808",
    b"67108864",
    b"67108865",
]
BLOCKS = [
    b"NATS/1.0\r\n\r\n",
    b"NATS/1.0 503\r\n\r\n",
    b"NATS/1.0\r\nA: b\r\n\r\n",
    b"NATS/1.1\r\n\r\n",
]


def random_case(rng: random.Random, name: bytes) -> bytes:
    """name with each letter's case flipped at random."""
    return bytes(c ^ 0x20 if c >= 0x41 and rng.random() < 0.3 else c for c in name)


def garbage_args(rng: random.Random, name: bytes) -> list[bytes]:
    """Arguments shaped for the op most of the time, random ones otherwise."""
    if rng.random() < 0.1:
        return [rng.choice(WORDS + NUMBERS) for _ in range(rng.randint(0, 6))]
    if name == b"MSG":
        return (
            [rng.choice(WORDS), rng.choice(NUMBERS)]
            + [rng.choice(WORDS)] * rng.randint(0, 1)
            + [rng.choice(NUMBERS)]
        )
    if name == b"HMSG":
        return (
            [rng.choice(WORDS), rng.choice(NUMBERS)]
            + [rng.choice(WORDS)] * rng.randint(0, 1)
            + [rng.choice(NUMBERS), rng.choice(NUMBERS)]
        )
    if name in (b"-ERR", b"INFO"):
        return [rng.choice(WORDS) for _ in range(rng.randint(0, 3))]
    return []


def garbage_frame(rng: random.Random) -> bytes:
    """A frame-like sequence: a (usually) real op name, (usually) fitting arguments, a body
    sized (usually) by the last argument, and perturbed separators and endings."""
    upper = rng.choice(OP_NAMES)
    name = random_case(rng, upper)
    if rng.random() < 0.05:
        name = name[: rng.randrange(len(name))] + bytes([rng.choice(MUTATION_BYTES)])
    args = garbage_args(rng, upper)
    line = name + b"".join(rng.choice([b" ", b" ", b"\t", b"  ", b" \t"]) + a for a in args)
    line += rng.choice([b"", b"", b" ", b"\t"]) + rng.choice([b"\r\n"] * 12 + [b"\n", b"\r", b""])
    if upper not in (b"MSG", b"HMSG") or not args:
        return line
    size = int(args[-1]) if args[-1].isdigit() and int(args[-1]) < 64 else rng.randint(0, 30)
    body = rng.choice(BLOCKS) if upper == b"HMSG" else b""
    body += bytes(rng.choice(b"ab\r\n") for _ in range(max(0, size - len(body))))
    body = body[: max(0, size + rng.choice([0, 0, 0, 0, -1, 1]))]
    return line + body + rng.choice([b"\r\n"] * 6 + [b"\n", b"", b"\r", b"\r\r"])


def garbage(rng: random.Random) -> bytes:
    """A buffer of 1-4 frame-like sequences, sometimes with stray bytes between them."""
    parts = []
    for _ in range(rng.randint(1, 4)):
        parts.append(garbage_frame(rng))
        if rng.random() < 0.05:
            parts.append(bytes([rng.randrange(256)]))
    return b"".join(parts)


@fuzz_settings(1500)
@given(rng=st.randoms(use_true_random=True))
def test_garbage_agrees(rng):
    """Protocol-ish garbage: both cores agree on ops, need, or the error, at any split."""
    for _ in range(30):
        data = garbage(rng)
        assert outcome(_c.parse, data, 0, len(data)) == outcome(_py.parse, data, 0, len(data))
        *_, steps = feed_both(data, random_cuts(rng, len(data)), rng.random() < 0.5)
        INPUTS["garbage"] += 1 + steps
        c_parse_exact(data)


# --------------------------------------------------------------------------
# parse_headers (csrc/jss_headers.c)


HEADER_PIECES = [
    b"NATS/1.0",
    b"NATS/1.0",
    b" ",
    b"\t",
    b"\r\n",
    b"\r\n",
    b"\r",
    b"\n",
    b"503",
    b"100",
    b"5",
    b"Idle Heartbeat",
    b"Key",
    b"k",
    b":",
    b": ",
    b"v",
    b"a:b",
    b"\xff",
    b"\xc3\xa9",
]


def header_garbage(rng: random.Random) -> bytes:
    """A header-block-like sequence, usually starting right."""
    parts = [b"NATS/1.0"] if rng.random() < 0.8 else []
    parts += [rng.choice(HEADER_PIECES) for _ in range(rng.randint(0, 12))]
    if rng.random() < 0.7:
        parts.append(b"\r\n\r\n")
    return b"".join(parts)


@fuzz_settings(1000)
@given(rng=st.randoms(use_true_random=True))
def test_parse_headers_agrees(rng):
    """Header blocks, good or bad: identical triples or identical ProtocolErrors."""
    for _ in range(25):
        block = header_garbage(rng)
        if rng.random() < 0.3:
            block = mutate(rng, block)
        INPUTS["header blocks"] += 1
        assert outcome(_c.parse_headers, block) == outcome(_py.parse_headers, block)
        array = ffi.new(f"char[{max(len(block), 1)}]")
        ffi.memmove(array, block, len(block))
        pairs = ffi.new("int64_t[]", 4 * lib.JSS_HDR_FIELDS)
        meta = ffi.new("int64_t[]", lib.JSS_HDR_META_FIELDS)
        lib.jss_parse_headers(array, len(block), pairs, 4, meta)


# --------------------------------------------------------------------------
# encoders (csrc/jss_encode.c; encode_pub and encode_hpub are Python in both)


header_text = st.text(
    alphabet=st.one_of(
        st.sampled_from("Ab-_:. \t\r\n\x00\x7f\x1féК"),
        st.characters(codec="utf-8"),
        st.sampled_from(["\udcff", "\ud800"]),
    ),
    max_size=8,
)


def expected_header_error(key: str, value: str) -> bool:
    """Whether encode_headers must refuse this pair."""
    try:
        raw_key = key.encode("utf-8", "surrogateescape")
        raw_value = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return True
    bad_key = not raw_key or any(b < 0x21 or b == 0x3A or b >= 0x7F for b in raw_key)
    return bad_key or b"\r" in raw_value or b"\n" in raw_value or b"\0" in raw_value


@fuzz_settings(500)
@given(st.lists(st.lists(st.tuples(header_text, header_text), max_size=4), min_size=1, max_size=10))
def test_encode_headers_agrees_and_round_trips(pair_lists):
    """Both encoders give the same block, which parses back, or both refuse."""
    for pairs in pair_lists:
        INPUTS["encode_headers"] += 1
        results = [outcome(impl.encode_headers, pairs) for impl in IMPLS]
        assert results[0] == results[1]
        if any(expected_header_error(k, v) for k, v in pairs):
            assert results[0][:2] == ("raised", BadHeaderError)
            continue
        block = results[0][1]
        stripped = [(k, v.strip(" \t")) for k, v in pairs]
        for impl in IMPLS:
            assert impl.parse_headers(block) == (None, "", stripped)


@fuzz_settings(300)
@given(
    st.lists(
        st.tuples(tokens, st.one_of(st.just(b""), tokens), payloads, st.booleans()),
        min_size=1,
        max_size=10,
    )
)
def test_encode_pub_and_hpub_agree_and_parse_back(frames):
    """PUB/HPUB frames are identical from both cores and parse back as MSG/HMSG."""
    block = _py.encode_headers([("K", "v")])
    for subject, reply, payload, headers in frames:
        INPUTS["encode_pub/hpub"] += 1
        if headers:
            encoded = [impl.encode_hpub(subject, reply, block, payload) for impl in IMPLS]
        else:
            encoded = [impl.encode_pub(subject, reply, payload) for impl in IMPLS]
        assert encoded[0] == encoded[1]
        name = b"HPUB " if headers else b"PUB "
        as_msg = b"H" * headers + b"MSG " + subject + b" 5" + encoded[0][len(name + subject) :]
        expected = (2 if headers else 1, subject, 5, reply, block if headers else b"", payload)
        for impl in IMPLS:
            ops, consumed, need = impl.parse(as_msg, 0, len(as_msg))
            assert materialize(as_msg, ops) == [expected]
            assert (consumed, need) == (len(as_msg), 0)


def encode_outcome(func, *args):
    """func(*args), or the type and message of what it raised (TypeError included)."""
    try:
        return ("ok", func(*args))
    except (BadHeaderError, ValueError, TypeError) as exc:
        return ("raised", type(exc), str(exc))


# Mostly valid keys (so that whole lists of pairs get through), some invalid
# text, and now and then a key or value that is not a str at all.
valid_keys = st.text(alphabet=KEY_CHARS, min_size=1, max_size=12)
valid_values = st.text(
    alphabet=st.one_of(st.sampled_from(" \t:Ab\udcff"), st.characters(codec="utf-8")),
    max_size=12,
).filter(lambda v: not any(c in v for c in "\r\n\x00"))
odd_keys = st.one_of(header_text, st.binary(max_size=2), st.sampled_from(["é", "К", "\udcff"]))
odd_values = st.one_of(header_text, st.integers(0, 9))
header_keys = st.integers(0, 9).flatmap(lambda n: odd_keys if n == 0 else valid_keys)
header_values = st.integers(0, 9).flatmap(lambda n: odd_values if n == 0 else valid_values)
big_payloads = st.integers(16 * 1024 - 64, 70 * 1024).map(lambda n: b"\r\n\x00x" * (n // 4))


@fuzz_settings(400)
@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(header_keys, header_values), max_size=5),
            tokens,
            st.one_of(st.just(b""), tokens),
            st.one_of(payloads, payloads, payloads, big_payloads),
            st.sampled_from([bytes, bytes, bytearray, memoryview]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_header_encoders_agree_and_parse_back(frames):
    """encode_headers, encode_hpub_pairs and encode_hpub give identical frames (or raise the
    same error) in C and Python; good frames parse back as HMSG and their blocks as pairs."""
    for pairs, subject, reply, payload, kind in frames:
        INPUTS["header encoders"] += 1
        data = kind(payload)
        blocks = [encode_outcome(impl.encode_headers, pairs) for impl in IMPLS]
        hpubs = [
            encode_outcome(impl.encode_hpub_pairs, subject, reply, pairs, data) for impl in IMPLS
        ]
        assert blocks[0] == blocks[1], pairs
        assert hpubs[0] == hpubs[1], pairs
        assert blocks[0][0] == hpubs[0][0]
        if blocks[0][0] == "raised":
            assert blocks[0][1:] == hpubs[0][1:]
            continue
        block, frame = blocks[0][1], hpubs[0][1]
        assert frame == _py.encode_hpub(subject, reply, block, payload)
        for impl in IMPLS:
            assert impl.encode_hpub(subject, reply, block, data) == frame
        as_msg = b"HMSG " + subject + b" 5" + frame[len(b"HPUB " + subject) :]
        stripped = [(k, v.strip(" \t")) for k, v in pairs]
        for impl in IMPLS:
            ops, consumed, need = impl.parse(as_msg, 0, len(as_msg))
            assert materialize(as_msg, ops) == [(2, subject, 5, reply, block, payload)]
            assert (consumed, need) == (len(as_msg), 0)
            assert impl.parse_headers(block) == (None, "", stripped)


def reference_block(kv: bytes):
    """The header block the C encoders must build from kv, or their error code."""
    lines = [b"NATS/1.0\r\n"]
    i = 0
    while i < len(kv):
        key_end = kv.find(b"\0", i)
        if key_end < 0:
            return lib.JSS_ENC_ERR_KV
        key = kv[i:key_end]
        if not key or any(b < 0x21 or b == 0x3A or b >= 0x7F for b in key):
            return lib.JSS_ENC_ERR_KEY
        value_end = kv.find(b"\0", key_end + 1)
        if value_end < 0:
            return lib.JSS_ENC_ERR_KV
        value = kv[key_end + 1 : value_end]
        if b"\r" in value or b"\n" in value:
            return lib.JSS_ENC_ERR_VALUE
        lines.append(key + b": " + value + b"\r\n")
        i = value_end + 1
    return b"".join(lines) + b"\r\n"


def random_kv(rng: random.Random) -> bytes:
    """Flattened pairs: mostly well-formed, with bad bytes and broken framing mixed in."""
    parts = []
    for _ in range(rng.randrange(4)):
        for alphabet in (b"Ab-_.\xc3\xa9", b" v:\t\xff"):
            text = bytes(rng.choice(alphabet) for _ in range(rng.randrange(6)))
            if rng.random() < 0.1:
                text += bytes([rng.choice(b"\r\n :\t\x7f\x01")])
            parts.append(text)
    kv = b"".join(part + b"\0" for part in parts)
    if kv and rng.random() < 0.15:
        kv = kv[: rng.randrange(len(kv))]
    return kv


def c_encode_exact(func, cap: int, *parts: bytes):
    """Call a C encoder on exactly-sized inputs with a canary byte after cap.

    Returns the result code and the bytes written (None when it wrote nothing).
    """
    out = ffi.new(f"char[{cap + 1}]")
    ffi.memmove(out, b"\xa5" * (cap + 1), cap + 1)
    args = []
    for part in parts:
        array = ffi.new(f"char[{max(len(part), 1)}]")
        ffi.memmove(array, part, len(part))
        args += [array, len(part)]
    rc = func(out, cap, *args)
    raw = ffi.unpack(out, cap + 1)
    assert raw[cap] == 0xA5, "wrote past cap"
    if rc < 0:
        assert raw == b"\xa5" * (cap + 1), "wrote although it failed"
        return rc, None
    return rc, raw[:rc]


@fuzz_settings(600)
@given(rng=st.randoms(use_true_random=True))
def test_c_encoders_follow_the_reference(rng):
    """jss_encode_headers/hpub on random kv, subjects, payloads and caps: the exact
    frame, the error code, or -(size needed) when cap is short; never a byte past cap."""
    for _ in range(8):
        INPUTS["C encoders"] += 1
        kv = random_kv(rng)
        subject = bytes(rng.choice(b"ab.*>") for _ in range(rng.randrange(6)))
        reply = rng.choice([b"", b"_INBOX.r"])
        payload = rng.randbytes(rng.choice([0, 3, 200]))
        block = reference_block(kv)
        if isinstance(block, bytes):
            hpub = _py.encode_hpub(subject, reply, block, payload)
        else:
            hpub = block
        for func, parts, expected in [
            (lib.jss_encode_headers, (kv,), block),
            (lib.jss_encode_hpub, (subject, reply, kv, payload), hpub),
        ]:
            if isinstance(expected, int):
                assert expected < 0 and expected > -lib.JSS_ENC_MIN_SIZE
                cap = rng.randrange(300)
                assert c_encode_exact(func, cap, *parts) == (expected, None)
                continue
            assert len(expected) >= lib.JSS_ENC_MIN_SIZE
            cap = rng.choice([len(expected), len(expected) + rng.randrange(1, 9)])
            assert c_encode_exact(func, cap, *parts) == (len(expected), expected)
            short = rng.randrange(len(expected))
            assert c_encode_exact(func, short, *parts) == (-len(expected), None)


# --------------------------------------------------------------------------
# valid_subject (csrc/jss_subjects.c)


def reference_valid_subject(subject: bytes, wildcards: bool) -> bool:
    """The rule, written the obvious way."""
    if not subject or any(b in b" \t\n\v\f\r\x00" for b in subject):
        return False
    tokens = subject.split(b".")
    if not all(tokens):
        return False
    for i, token in enumerate(tokens):
        if token == b"*" and not wildcards:
            return False
        if token == b">" and (not wildcards or i != len(tokens) - 1):
            return False
    return True


SUBJECT_BYTES = b"ab.*>. \t\n\v\f\r\x00\xc3"


@fuzz_settings(500)
@given(rng=st.randoms(use_true_random=True))
def test_valid_subject_agrees_with_the_rule(rng):
    """Both cores follow the reference rule on random subjects, with and without wildcards."""
    for _ in range(100):
        subject = bytes(rng.choice(SUBJECT_BYTES) for _ in range(rng.randint(0, 8)))
        wildcards = rng.random() < 0.5
        INPUTS["valid_subject"] += 1
        expected = reference_valid_subject(subject, wildcards)
        assert _c.valid_subject(subject, wildcards) is _py.valid_subject(subject, wildcards)
        assert _c.valid_subject(subject, wildcards) is expected


# --------------------------------------------------------------------------
# parse_puback (csrc/jss_puback.c)

JSON_WS = ["", "", " ", "\n", "\t ", "\r\n"]


def puback_body(rng: random.Random) -> bytes:
    """A PubAck-like JSON object with random key order, spacing and extra members."""
    members = [
        ("stream", json.dumps(rng.choice(["ORDERS", "S", "", "a b"]))),
        ("seq", str(rng.choice([0, 1, 42, 2**63 - 1, 2**63, -1]))),
    ]
    optional = [
        ("duplicate", rng.choice(["true", "false", "null", "1"])),
        ("domain", rng.choice(['"hub"', '""', "null", "3"])),
        ("batch", '"b1"'),
        ("count", rng.choice(["3", "-0", "1.5", "2e10", "-7"])),
        ("val", rng.choice(["null", "true", '"x"'])),
        ("error", '{"code":503}'),
        ("nested", rng.choice(["{}", "[1]"])),
    ]
    members += rng.sample(optional, rng.randint(0, 3))
    rng.shuffle(members)

    def ws() -> str:
        return rng.choice(JSON_WS)

    inner = ",".join(f'{ws()}"{k}"{ws()}:{ws()}{v}{ws()}' for k, v in members)
    return (ws() + "{" + inner + "}" + ws()).encode()


def json_oracle(body: bytes):
    """What json.loads says the PubAck fields are, or None when it fails."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    return obj.get("stream"), obj.get("seq"), obj.get("duplicate", False), obj.get("domain")


@fuzz_settings(1000)
@given(rng=st.randoms(use_true_random=True))
def test_parse_puback_agrees_and_is_never_wrong(rng):
    """Both cores agree, and any answer they give matches json.loads."""
    for _ in range(25):
        body = puback_body(rng)
        if rng.random() < 0.4:
            body = mutate(rng, body)
        INPUTS["parse_puback"] += 1
        result = _c.parse_puback(body)
        assert result == _py.parse_puback(body)
        if result is not None:
            assert result == json_oracle(body)
            assert isinstance(result[1], int) and isinstance(result[2], bool)


def ack_stream(rng: random.Random) -> bytes:
    """Acks to ``_INBOX.p.<token>`` on sid 7 (some on sid 8, some HMSG, a PING), often cut."""
    frames = []
    for _ in range(rng.randint(1, 12)):
        token = rng.choice([b"1", b"42", b"9223372036854775807", b"9223372036854775808", b"x",
                            b""])  # fmt: skip
        body = puback_body(rng) if rng.random() < 0.8 else b'{"stream":"S","seq":1}'
        subject = b"_INBOX.p." + token if token else b"_INBOX.p"
        sid = rng.choice([7, 7, 7, 8])
        roll = rng.random()
        if roll < 0.1:
            frames.append(b"PING\r\n")
        elif roll < 0.2:
            head = b"NATS/1.0 503\r\n\r\n"
            total = len(head) + len(body)
            frames.append(b"HMSG %s %d %d %d\r\n%s%s\r\n" % (subject, sid, len(head), total,
                                                              head, body))  # fmt: skip
        else:
            frames.append(b"MSG %s %d %d\r\n%s\r\n" % (subject, sid, len(body), body))
    data = b"".join(frames)
    return mutate(rng, data) if rng.random() < 0.3 else data


@fuzz_settings(500)
@given(rng=st.randoms(use_true_random=True))
def test_puback_batch_agrees(rng):
    """Both cores decode the same acks of any buffer (or raise the same error)."""
    for _ in range(10):
        data = ack_stream(rng)
        INPUTS["puback_batch"] += 1
        try:
            expected = _py.puback_batch(data, 0, len(data), 7, len(b"_INBOX.p."))
        except ProtocolError as exc:
            with pytest.raises(ProtocolError) as got:
                _c.puback_batch(data, 0, len(data), 7, len(b"_INBOX.p."))
            assert str(got.value) == str(exc)
            continue
        assert _c.puback_batch(data, 0, len(data), 7, len(b"_INBOX.p.")) == expected


# --------------------------------------------------------------------------
# parse_direct_meta (csrc/jss_direct_meta.c, csrc/jss_time.c)


def random_stamp(rng: random.Random) -> bytes:
    """A server-like time stamp; often at or past the edges of the fast path's range and form."""
    edgy = rng.random() < 0.4
    year = rng.choice([1969, 1970, 2100, 2261, 2262, 1, 9999]) if edgy else rng.randint(1970, 2261)
    month = rng.choice([1, 2, 12, 0, 13]) if edgy else rng.randint(1, 12)
    day = rng.choice([28, 29, 30, 31, 0, 32]) if edgy else rng.randint(1, 28)
    hour = rng.choice([0, 23, 24]) if edgy else rng.randint(0, 23)
    minute, second = (rng.choice([59, 60]), rng.choice([59, 60])) if edgy else (1, 2)
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 10 if edgy else 9)))
    frac = rng.choice(["", "." + digits, "." + digits] + (["."] if edgy else []))
    end = rng.choice(["z", "+00:00", ""]) if edgy and rng.random() < 0.3 else "Z"
    sep = rng.choice("t ") if edgy and rng.random() < 0.2 else "T"
    date = f"{year:04d}-{month:02d}-{day:02d}"
    return f"{date}{sep}{hour:02d}:{minute:02d}:{second:02d}{frac}{end}".encode()


def direct_meta_block(rng: random.Random) -> bytes:
    """A direct-get-like header block: the usual headers, random order, spacing, repeats."""
    seq = rng.choice([b"1", b"42", b"007", b"9223372036854775807", b"1", b"42",
                      b"9223372036854775808", b"", b"-1", b"0" * 25 + b"5"])  # fmt: skip
    lines = [
        (b"Nats-Stream", b"KV_B"),
        (b"Nats-Subject", rng.choice([b"$KV.B.k1", b"", b"a\xc3\xa9", b"\xff"])),
        (b"Nats-Sequence", seq),
        (b"Nats-Time-Stamp", random_stamp(rng)),
    ]
    optional = [
        (b"KV-Operation", rng.choice([b"DEL", b"PURGE", b"", b"PUT"])),
        (b"Nats-Marker-Reason", rng.choice([b"MaxAge", b"Remove", b"Purge", b""])),
        (b"Nats-Subject", b"other"),
        (b"nats-subject", b"case"),
        (b"X-User", b"v"),
    ]
    if rng.random() < 0.2:
        lines = rng.sample(lines, rng.randint(2, 3))
    lines += rng.sample(optional, rng.randint(0, 3))
    rng.shuffle(lines)

    def ws() -> bytes:
        return rng.choice([b"", b" ", b" ", b"\t", b"  "])

    status = rng.choice([b"NATS/1.0"] * 8 + [b"NATS/1.0 404 Not Found", b"NATS/1.0 "])
    body = b"".join(k + b":" + ws() + v + ws() + b"\r\n" for k, v in lines)
    return status + b"\r\n" + body + b"\r\n"


def direct_meta_oracle(block: bytes):
    """What the generic header parser and datetime say, for a block the fast path accepted."""
    import datetime

    status, _, pairs = _py.parse_headers(block)
    assert status is None
    first: dict[str, str] = {}
    for key, value in pairs:
        first.setdefault(key, value)
    stamp = datetime.datetime.fromisoformat(first["Nats-Time-Stamp"])
    secs = int((stamp - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)).total_seconds())
    frac = first["Nats-Time-Stamp"][20:-1]
    ns = secs * 1_000_000_000 + (int(frac.ljust(9, "0")) if frac else 0)
    return (first["Nats-Subject"], int(first["Nats-Sequence"]), ns, first.get("KV-Operation"),
            first.get("Nats-Marker-Reason"))  # fmt: skip


@fuzz_settings(1000)
@given(rng=st.randoms(use_true_random=True))
def test_parse_direct_meta_agrees_and_is_never_wrong(rng):
    """Both cores agree, and any answer they give is what the generic header parser says."""
    for _ in range(25):
        block = direct_meta_block(rng)
        if rng.random() < 0.4:
            block = mutate(rng, block)
        INPUTS["parse_direct_meta"] += 1
        result = _c.parse_direct_meta(block)
        assert result == _py.parse_direct_meta(block)
        if result is not None:
            assert result == direct_meta_oracle(block)


# --------------------------------------------------------------------------


def test_zz_enough_inputs():
    """One run of this file generated at least 100,000 inputs."""
    counted = {
        "valid streams",
        "valid header blocks",
        "mutated streams",
        "garbage",
        "header blocks",
        "encode_headers",
        "encode_pub/hpub",
        "header encoders",
        "C encoders",
        "valid_subject",
        "parse_puback",
        "puback_batch",
        "parse_direct_meta",
    }
    if set(INPUTS) != counted:
        pytest.skip(f"only part of the file ran: {sorted(INPUTS)}")
    total = sum(INPUTS.values())
    print(f"\nfuzz inputs: {total} {dict(INPUTS)}")
    assert total >= REQUIRED_INPUTS, dict(INPUTS)
