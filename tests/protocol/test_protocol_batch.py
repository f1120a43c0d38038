"""``jss_encode_batch_hpub`` (C, called directly) and ``encode_batch_hpub`` (C and Python twin)."""

from __future__ import annotations

import hashlib
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jetstream_sync._ffi import ffi, lib
from jetstream_sync._protocol import _c, _py
from jetstream_sync._protocol._py import BatchColumn

IMPLS = (_c, _py)


def column(values: list[bytes | None], first: int = 0) -> BatchColumn:
    """Arrow's layout of ``values`` (64-bit offsets), ``first`` unused rows in front."""
    rows = [b"junk"] * first + values
    offsets = array("q", [0])
    for value in rows:
        offsets.append(offsets[-1] + len(value or b""))
    valid = bytearray((len(rows) + 7) // 8)
    for i, value in enumerate(rows):
        if value is not None:
            valid[i >> 3] |= 1 << (i & 7)
    has_null = any(v is None for v in values)
    return BatchColumn(
        b"".join(v or b"" for v in rows), offsets, bytes(valid) if has_null else None, first
    )


def derived(prefix: bytes, index: int, subject: bytes, payload: bytes) -> bytes:
    """The id a row without msgId gets (the Spark sink's scheme)."""
    digest = hashlib.blake2b(payload, digest_size=6, key=subject[:64]).hexdigest()
    return b"%s%d:%s" % (prefix, index, digest.encode())


def frame(subject: bytes, reply: bytes, lines: bytes, msg_id: bytes, payload: bytes) -> bytes:
    """One HPUB frame as the encoder must write it."""
    block = b"NATS/1.0\r\n%sNats-Msg-Id: %s\r\n\r\n" % (lines, msg_id)
    total = len(block) + len(payload)
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, len(block), total, block, payload)


def c_column(col: BatchColumn | None, keep: list):
    """The C struct of ``col``; its buffers copied to exactly-sized arrays (for ASan)."""
    if col is None:
        return ffi.NULL
    c = ffi.new("jss_batch_column *")
    offsets = ffi.new("int64_t[]", list(col.offsets))
    data = ffi.new("char[]", max(len(col.data), 1))
    ffi.memmove(data, col.data, len(col.data))
    keep += [c, offsets, data]
    c.offsets, c.data, c.first = offsets, data, col.first
    if col.valid is not None:
        valid = ffi.new("uint8_t[]", bytes(col.valid))
        keep.append(valid)
        c.valid = valid
    return c


def c_encode(cap, payloads, subjects=None, ids=None, headers=None, start=0, end=None, **kw):
    """Call jss_encode_batch_hpub; return (rc, bytes written, state)."""
    end = len(payloads.offsets) - 1 - payloads.first if end is None else end
    keep: list = []
    out = ffi.new("char[]", max(cap, 1))
    state = ffi.new("int64_t[]", lib.JSS_BATCH_STATE_FIELDS)
    default = kw.get("default", b"")
    prefix = kw.get("prefix", b"w:0:")
    c_prefix = ffi.NULL if prefix is None else prefix
    reply = kw.get("reply", b"_INBOX.r.")
    suffix = kw.get("suffix", b"")
    rc = lib.jss_encode_batch_hpub(
        out, cap, state,
        c_column(payloads, keep), c_column(subjects, keep), c_column(ids, keep),
        c_column(headers, keep), start, end, default, len(default), c_prefix, len(prefix or b""),
        kw.get("first_index", 0), reply, len(reply), kw.get("first_token", 1), suffix,
        len(suffix), kw.get("max_payload", 1 << 20), kw.get("line_room", 4064),
    )  # fmt: skip
    return rc, ffi.buffer(out, state[0])[:], list(state)


def test_constants_match_the_python_twin():
    """The batch error codes in the header equal the Python module's."""
    for name in ("NULL_DATA", "NO_SUBJECT", "SUBJECT", "MSG_ID", "TOO_BIG", "LINE"):
        assert getattr(lib, f"JSS_BATCH_ERR_{name}") == getattr(_py, f"BATCH_ERR_{name}")
    assert (_py.ENC_ERR_KEY, _py.ENC_ERR_VALUE, _py.ENC_ERR_KV) == (
        lib.JSS_ENC_ERR_KEY, lib.JSS_ENC_ERR_VALUE, lib.JSS_ENC_ERR_KV,
    )  # fmt: skip
    assert lib.JSS_BATCH_STATE_FIELDS == 3


class TestBlake2b:
    """BLAKE2b-48 of the derived message ids, through jss_encode_batch_hpub."""

    C_FILE = "jss_blake2b.c"

    @pytest.mark.parametrize("size", [0, 1, 111, 127, 128, 129, 255, 256, 257, 1000])
    @pytest.mark.parametrize(
        "subject", [b"s", b"a." + b"k" * 62, b"a." + b"k" * 63, b"a." + b"k" * 99]
    )
    def test_jss_put_blake2b48_hex_is_hashlibs_blake2b(self, size, subject):
        """The derived id's digest equals hashlib's for block edges and keys up to and past 64."""
        payload = bytes(range(256)) * 4
        rc, out, _ = c_encode(4096, column([payload[:size]]), default=subject)
        assert rc == 1
        assert b"Nats-Msg-Id: " + derived(b"w:0:", 0, subject, payload[:size]) + b"\r\n" in out


class TestBatch:
    """jss_encode_batch_hpub called directly."""

    C_FILE = "jss_batch.c"

    def test_jss_encode_batch_hpub_frames(self):
        """Subjects (column, default for null and empty), headers, given and derived ids, tokens."""
        payloads = column([b"one", b"", b"x" * 300])
        subjects = column([b"a.b", None, b""])
        ids = column([b"given", None, None])
        headers = column([b"k\0v\0k\0w\0", None, b""])
        rc, out, state = c_encode(
            4096, payloads, subjects, ids, headers, default=b"d.e", first_index=7, first_token=40
        )
        assert (rc, state[0], state[1]) == (3, len(out), -1)
        assert out == (
            frame(b"a.b", b"_INBOX.r.40", b"k: v\r\nk: w\r\n", b"given", b"one")
            + frame(b"d.e", b"_INBOX.r.41", b"", derived(b"w:0:", 8, b"d.e", b""), b"")
            + frame(
                b"d.e", b"_INBOX.r.42", b"", derived(b"w:0:", 9, b"d.e", b"x" * 300), b"x" * 300
            )
        )

    def test_jss_encode_batch_hpub_reply_suffix_follows_each_token(self):
        """A reply suffix (a fast-ingest batch's ``.1.$FI``) ends every reply, and the room a
        row needs counts it: a buffer one byte short of the suffixed frame takes no row."""
        payloads = column([b"a", b"b"])
        rc, out, state = c_encode(
            4096, payloads, default=b"s", reply=b"_I.x.9.ok.", first_token=41, suffix=b".1.$FI"
        )
        assert (rc, state[1]) == (2, -1)
        assert out == frame(
            b"s", b"_I.x.9.ok.41.1.$FI", b"", derived(b"w:0:", 0, b"s", b"a"), b"a"
        ) + frame(b"s", b"_I.x.9.ok.42.1.$FI", b"", derived(b"w:0:", 1, b"s", b"b"), b"b")
        one = out.index(b"HPUB ", 1)
        rc, short, state = c_encode(
            one - 1, payloads, default=b"s", reply=b"_I.x.9.ok.", first_token=41, suffix=b".1.$FI"
        )
        assert (rc, short, state[2]) == (0, b"", one)

    def test_jss_encode_batch_hpub_first_and_validity_bitmap(self):
        """Arrow's array offset and null bitmap pick the rows (nulls past bit 7 included)."""
        values = [b"p%d" % i if i % 3 else None for i in range(12)]
        payloads = column([b"q%d" % i for i in range(12)], first=5)
        subjects = column([b"s.%d" % i if v else None for i, v in enumerate(values)], first=5)
        rc, out, _ = c_encode(8192, payloads, subjects, default=b"dflt", start=2, end=12)
        assert rc == 10
        got = [line.split(b" ")[1] for line in out.split(b"\r\n") if line.startswith(b"HPUB ")]
        assert got == [b"s.%d" % i if i % 3 else b"dflt" for i in range(2, 12)]

    def test_jss_encode_batch_hpub_without_a_prefix_derives_no_id(self):
        """With a NULL prefix a row without headers or id is a PUB frame, a row with headers
        an HPUB of them alone, and a given id is still written."""
        payloads = column([b"one", b"two", b"three", b""])
        ids = column([None, None, b"given", None])
        headers = column([None, b"k\0v\0", None, None])
        rc, out, state = c_encode(
            4096, payloads, None, ids, headers, default=b"d.e", prefix=None, first_token=7
        )
        assert (rc, state[0], state[1]) == (4, len(out), -1)
        block = b"NATS/1.0\r\nk: v\r\n\r\n"
        assert out == (
            b"PUB d.e _INBOX.r.7 3\r\none\r\n"
            + b"HPUB d.e _INBOX.r.8 %d %d\r\n%stwo\r\n" % (len(block), len(block) + 3, block)
            + frame(b"d.e", b"_INBOX.r.9", b"", b"given", b"three")
            + b"PUB d.e _INBOX.r.10 0\r\n\r\n"
        )

    def test_jss_encode_batch_hpub_without_a_prefix_checks_the_payload_size(self):
        """A PUB frame's payload alone counts against max_payload: 100 bytes fit, 101 do not."""
        payloads = column([b"a" * 100, b"b" * 101])
        rc, out, state = c_encode(4096, payloads, default=b"s", prefix=None, max_payload=100)
        assert (rc, state[1]) == (lib.JSS_BATCH_ERR_TOO_BIG, 1)
        assert out == b"PUB s _INBOX.r.1 100\r\n" + b"a" * 100 + b"\r\n"

    @pytest.mark.parametrize(
        ("rows", "kw", "code", "row"),
        [
            ({"payloads": [b"a", None]}, {"default": b"s"}, "BATCH_ERR_NULL_DATA", 1),
            ({"payloads": [b"a"], "subjects": [None]}, {}, "BATCH_ERR_NO_SUBJECT", 0),
            ({"payloads": [b"a", b"b"], "subjects": [b"ok", b"a.*"]}, {}, "BATCH_ERR_SUBJECT", 1),
            ({"payloads": [b"a"], "subjects": [b"a.>"]}, {}, "BATCH_ERR_SUBJECT", 0),
            ({"payloads": [b"a"], "subjects": [b"a b"]}, {}, "BATCH_ERR_SUBJECT", 0),
            (
                {"payloads": [b"a", b"b"], "ids": [b"ok", b"x\ny"]},
                {"default": b"s"},
                "BATCH_ERR_MSG_ID",
                1,
            ),
            (
                {"payloads": [b"a" * 100]},
                {"default": b"s", "max_payload": 100},
                "BATCH_ERR_TOO_BIG",
                0,
            ),
            (
                {"payloads": [b"a", b"b"], "subjects": [b"s", b"s.t"]},
                {"reply": b"R.", "first_token": 9, "line_room": 4},  # row 0 takes 4 exactly
                "BATCH_ERR_LINE",
                1,
            ),
            ({"payloads": [b"a"], "headers": [b"k:\0v\0"]}, {"default": b"s"}, "ENC_ERR_KEY", 0),
            ({"payloads": [b"a"], "headers": [b"k\0v\r\0"]}, {"default": b"s"}, "ENC_ERR_VALUE", 0),
            ({"payloads": [b"a"], "headers": [b"k\0v"]}, {"default": b"s"}, "ENC_ERR_KV", 0),
        ],
    )
    def test_jss_encode_batch_hpub_errors(self, rows, kw, code, row):
        """Each bad row gives its code and index; the rows before it are written."""
        cols = {name: column(values) for name, values in rows.items()}
        rc, out, state = c_encode(4096, **cols, **kw)
        assert (rc, state[1]) == (getattr(lib, "JSS_" + code), row)
        assert out.count(b"HPUB ") == row and state[0] == len(out)

    def test_jss_encode_batch_hpub_stops_when_out_is_full(self):
        """It writes the rows that fit, says what the next needs; a call from there finishes."""
        payloads = column([b"%03d" % i for i in range(20)])
        _, whole, _ = c_encode(1 << 16, payloads, default=b"s")
        first_len = whole.index(b"HPUB ", 1)
        for cap in (0, first_len - 1, first_len, first_len * 5 + 3):
            rc, out, state = c_encode(cap, payloads, default=b"s")
            assert rc == cap // first_len and state[0] == len(out) and state[1] == -1
            assert state[2] == first_len and out == whole[: len(out)]
            rest_rc, rest, _ = c_encode(
                1 << 16, payloads, default=b"s", start=rc, first_index=rc, first_token=1 + rc
            )
            assert rest_rc == 20 - rc and out + rest == whole


@pytest.mark.parametrize("impl", IMPLS, ids=["c", "python"])
def test_encode_batch_hpub_results(impl):
    """Both implementations: the frames, and an error's code, row and the rows before it."""
    payloads = column([b"a", b"b", b"c"])
    frames, bad, code = impl.encode_batch_hpub(
        payloads, column([b"x.y", b"x.y", b"x.*"]), None, None, start=0, end=3,
        default_subject=b"", id_prefix=b"i:", first_index=0, reply_prefix=b"R.",
        first_token=5, max_payload=1024, line_room=4064,
    )  # fmt: skip
    assert (bad, code) == (2, _py.BATCH_ERR_SUBJECT)
    assert frames == frame(b"x.y", b"R.5", b"", derived(b"i:", 0, b"x.y", b"a"), b"a") + frame(
        b"x.y", b"R.6", b"", derived(b"i:", 1, b"x.y", b"b"), b"b"
    )
    assert code in _py.BATCH_ERRORS


def test_the_c_wrapper_grows_a_short_estimate(monkeypatch):
    """When its size estimate is short, the C wrapper goes on in a new buffer: same frames."""
    payloads = column([b"%d" % i for i in range(50)])
    args = dict(
        start=0, end=50, default_subject=b"s", id_prefix=b"p:", first_index=3,
        reply_prefix=b"R.", first_token=9, max_payload=1024, line_room=4064,
    )  # fmt: skip
    want = _py.encode_batch_hpub(payloads, None, None, None, **args)
    monkeypatch.setattr(_c, "_BATCH_ROW_BYTES", 0)
    assert _c.encode_batch_hpub(payloads, None, None, None, **args) == want


_values = st.binary(max_size=300)
_subjects = st.sampled_from([None, b"", b"a", b"a.b", b"a.*", b"a b", b"x." + b"y" * 70])
_ids = st.sampled_from([None, b"", b"id", b"i\rd"])
_headers = st.sampled_from([None, b"", b"k\0v\0", b"k\0v1\0k\0v2\0", b":\0v\0", b"k\0\n\0", b"k"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.tuples(st.one_of(st.none(), _values), _subjects, _ids, _headers), max_size=12),
    default=st.sampled_from([b"", b"d.s"]),
    first=st.integers(0, 3),
    max_payload=st.sampled_from([64, 1 << 20]),
    suffix=st.sampled_from([b"", b".1.$FI"]),
    line_room=st.sampled_from([4064, 16, 13, 12]),
    prefix=st.sampled_from([b"w:1:", None]),
)
def test_c_and_python_agree(rows, default, first, max_payload, suffix, line_room, prefix):
    """Random batches: the same frames, or the same error at the same row."""
    cols = [column([r[k] for r in rows], first) for k in range(4)]
    for k in (1, 2, 3):
        if all(r[k] is None for r in rows):
            cols[k] = None
    args = dict(
        start=0, end=len(rows), default_subject=default, id_prefix=prefix, first_index=2,
        reply_prefix=b"_INBOX.z.", first_token=1, max_payload=max_payload, reply_suffix=suffix,
        line_room=line_room,
    )  # fmt: skip
    assert _c.encode_batch_hpub(*cols, **args) == _py.encode_batch_hpub(*cols, **args)
