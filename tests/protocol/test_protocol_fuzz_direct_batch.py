"""Differential fuzzing of decode_direct_batch: the C core and the Python twin agree.

C side: csrc/jss_direct_batch.c, with the time stamps of csrc/jss_time.c.

Batches of generated direct-get header blocks (valid ones, random times,
statuses, headers of the message's own), then the same batches with random
byte edits, and header-ish garbage: both implementations must return the
same columns or raise the same error with the same message. The C function
is also called on exactly-sized arrays, so the ASan build catches any read
past the stated length. ``test_zz_enough_inputs`` checks that one run of
this file generated at least 20,000 batches.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetstream_sync._ffi import ffi, lib
from jetstream_sync._protocol import _c, _direct_batch
from jetstream_sync._timefmt import datetime_to_ns
from jetstream_sync.errors import ProtocolError
from tests.fixtures.fuzz import fuzz_settings

INPUTS: Counter[str] = Counter()
# the last test sums what every test of this file generated: one pytest-xdist worker runs them all
pytestmark = [pytest.mark.fuzz, pytest.mark.xdist_group("protocol-fuzz-direct-batch")]
REQUIRED_INPUTS = 20_000
UNITS = _direct_batch.TIME_UNITS
PIECES = [
    b"NATS/1.0",
    b" 204 EOB",
    b" 404",
    b"\r\n",
    b"\r\n\r\n",
    b"Nats-Subject: a.b",
    b"Nats-Sequence: 12",
    b"Nats-Time-Stamp: 2026-01-02T03:04:05.6Z",
    b"Nats-Stream: S",
    b"Nats-Num-Pending: 3",
    b"X: y",
    b":",
    b" ",
    b"\t",
    b"\r",
    b"\n",
    b"9",
    b"Z",
    b"+01:00",
]
MUTATION_BYTES = b"\r\n :.-+TZ0912\t\x00\xff"


def outcome(decode, data: bytes, count: int, unit: int):
    """The columns as plain values, or the error's type and message."""
    try:
        got = decode(data, count, unit)
    except (ProtocolError, ValueError) as exc:
        return ("raised", type(exc), str(exc))
    return (
        "ok",
        got.kinds.tolist(),
        got.seqs.tolist(),
        got.times.tolist(),
        got.subject_offsets.tolist(),
        bytes(got.subjects),
        got.messages,
        got.own_headers,
    )


def call_c_exactly(data: bytes, count: int, unit: int) -> None:
    """jss_direct_batch_decode on arrays of exactly the sizes it is told (for ASan)."""
    exact = ffi.new(f"char[{max(len(data), 1)}]")
    ffi.memmove(exact, data, len(data))
    slots = max(count, 1)
    lib.jss_direct_batch_decode(
        exact,
        len(data),
        count,
        unit,
        ffi.new(f"int32_t[{slots}]"),
        ffi.new(f"int64_t[{slots}]"),
        ffi.new(f"int64_t[{slots}]"),
        ffi.new(f"int32_t[{count + 1}]"),
        ffi.new(f"char[{max(len(data), 1)}]"),
        len(data),
        ffi.new("int64_t[]", lib.JSS_DIRECT_BATCH_STATE_FIELDS),
    )


def agree(data: bytes, count: int, unit: int):
    """Assert both implementations give the same outcome; return it."""
    expected = outcome(_direct_batch.decode_direct_batch, data, count, unit)
    assert outcome(_c.decode_direct_batch, data, count, unit) == expected
    call_c_exactly(data, count, unit)
    return expected


def random_stamp(rng: random.Random) -> tuple[bytes, int | None]:
    """An RFC 3339 time, usually valid, and its ns since the epoch (None: it is not valid)."""
    year = rng.choice([1, 1969, 1970, 2026, 2262, 9999, rng.randint(0, 9999)])
    month, day = rng.randint(1, 13), rng.randint(1, 31)
    hour, minute, second = rng.randint(0, 24), rng.randint(0, 60), rng.randint(0, 60)
    digits = rng.choice([0, 1, 3, 6, 9, 10])
    frac = "".join(rng.choice("0123456789") for _ in range(digits))
    zone = rng.choice(["Z", "z", "+00:00", "-11:59", "+23:59", "+24:00", "+05:75"])
    text = (
        f"{year:04d}-{month:02d}-{day:02d}{rng.choice('T t')}{hour:02d}:{minute:02d}:{second:02d}"
    )
    text += (f".{frac}" if digits else "") + zone
    offset = 0 if zone in "Zz" else int(zone[0] + "1") * (int(zone[1:3]) * 60 + int(zone[4:6]))
    try:
        base = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return text.encode(), None
    if digits > 9 or abs(offset) >= 1440:
        return text.encode(), None
    ns = datetime_to_ns(base) - offset * 60 * 10**9 + int(frac.ljust(9, "0") or 0)
    return text.encode(), ns


def random_block(rng: random.Random) -> tuple[bytes, tuple | None]:
    """A direct-get header block and what it must decode to (None: no expectation)."""
    if rng.random() < 0.1:
        code = rng.choice([204, 404, 408, 413, 503])
        return b"NATS/1.0 %d Status\r\nNats-Num-Pending: 0\r\n\r\n" % code, (code,)
    seq = rng.choice([0, 1, rng.randint(1, 2**63 - 1)])
    subject = rng.choice([b"a", b"orders.eu.1", b"\xc3\xa9t\xc3\xa9", b"x" * rng.randint(1, 40)])
    stamp, ns = random_stamp(rng)
    while ns is None and rng.random() < 0.97:  # mostly valid, so that whole batches are
        stamp, ns = random_stamp(rng)
    lines = [
        b"Nats-Stream: S",
        b"Nats-Subject: " + subject,
        b"Nats-Sequence: %d" % seq,
        b"Nats-Time-Stamp: " + stamp,
    ]
    own = rng.random() < 0.2
    if own:
        lines.append(b"K%d: v" % rng.randint(0, 9))
    rng.shuffle(lines)
    data = b"NATS/1.0\r\n" + b"".join(line + b"\r\n" for line in lines) + b"\r\n"
    return data, (None if ns is None else (seq, ns, subject, own))


def garbage_block(rng: random.Random) -> bytes:
    """Header-ish bytes, usually starting right."""
    parts = [b"NATS/1.0"] if rng.random() < 0.8 else []
    parts += [rng.choice(PIECES) for _ in range(rng.randint(0, 10))]
    if rng.random() < 0.7:
        parts.append(b"\r\n\r\n")
    return b"".join(parts)


def mutate(rng: random.Random, data: bytes) -> bytes:
    """data with 1-3 random byte edits."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        if not buf:
            buf.append(rng.choice(MUTATION_BYTES))
            continue
        i = rng.randrange(len(buf))
        action = rng.randrange(4)
        if action == 0:
            buf[i] = rng.choice(MUTATION_BYTES)
        elif action == 1:
            buf.insert(i, rng.choice(MUTATION_BYTES))
        elif action == 2:
            del buf[i]
        else:
            del buf[i:]
    return bytes(buf)


@fuzz_settings(400, scaled=False)
@given(rng=st.randoms(use_true_random=True))
def test_generated_batches_decode_to_what_was_generated(rng):
    """Valid batches: both agree, and the columns are the generated values."""
    for _ in range(20):
        blocks = [random_block(rng) for _ in range(rng.randint(0, 12))]
        unit = rng.choice(UNITS)
        data = b"".join(block for block, _ in blocks)
        INPUTS["generated"] += 1
        result = agree(data, len(blocks), unit)
        if any(want is None for _, want in blocks):
            continue
        INPUTS["checked against what was generated"] += 1
        if unit == 1 and any(len(w) > 1 and not -(2**63) <= w[1] < 2**63 for _, w in blocks):
            assert result[0] == "raised"
            continue
        assert result[0] == "ok", result
        kinds, seqs, times = result[1], result[2], result[3]
        for i, (_, want) in enumerate(blocks):
            if len(want) == 1:
                assert (kinds[i], seqs[i], times[i]) == (want[0], 0, 0)
            else:
                seq, ns, subject, own = want
                assert kinds[i] == (_direct_batch.DIRECT_BATCH_MSG_HEADERS if own else -1)
                assert (seqs[i], times[i]) == (seq, ns // unit)
                start, end = result[4][i], result[4][i + 1]
                assert result[5][start:end] == subject


@fuzz_settings(400, scaled=False)
@given(rng=st.randoms(use_true_random=True))
def test_mutated_batches_agree(rng):
    """Valid batches with random edits, with the right count or one off: the same outcome."""
    for _ in range(20):
        blocks = [random_block(rng)[0] for _ in range(rng.randint(1, 6))]
        data = mutate(rng, b"".join(blocks))
        count = len(blocks) + rng.choice([0, 0, 0, -1, 1])
        INPUTS["mutated"] += 1
        agree(data, max(count, 0), rng.choice(UNITS))


@fuzz_settings(300, scaled=False)
@given(rng=st.randoms(use_true_random=True))
def test_garbage_agrees(rng):
    """Header-ish garbage, laid end to end: the same outcome."""
    for _ in range(20):
        blocks = [garbage_block(rng) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.3:
            blocks[0] = mutate(rng, blocks[0])
        INPUTS["garbage"] += 1
        agree(b"".join(blocks), rng.randint(0, 5), rng.choice([*UNITS, 7]))


def test_zz_enough_inputs():
    """One run of this file generated at least 20,000 batches."""
    if not {"generated", "mutated", "garbage"} <= set(INPUTS):
        pytest.skip(f"only part of the file ran: {sorted(INPUTS)}")
    total = INPUTS["generated"] + INPUTS["mutated"] + INPUTS["garbage"]
    assert total >= REQUIRED_INPUTS, dict(INPUTS)
    assert INPUTS["checked against what was generated"] >= INPUTS["generated"] // 2, dict(INPUTS)
