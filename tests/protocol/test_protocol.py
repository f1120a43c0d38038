"""The protocol core's behaviour, for the C implementation and the pure-Python twin alike."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import threading

import pytest

from jetstream_sync.errors import BadHeaderError, ProtocolError

MIB = 1024 * 1024


@pytest.fixture(params=["c", "python"])
def proto(request):
    """The implementation module under test (the C one fails, never skips, when not built)."""
    name = {"c": "_c", "python": "_py"}[request.param]
    return importlib.import_module(f"jetstream_sync._protocol.{name}")


def frames(proto, buf, start=0, end=None):
    """Parse buf and return (ops as readable tuples, consumed, need)."""
    end = len(buf) if end is None else end
    ops, consumed, need = proto.parse(buf, start, end)
    assert len(ops) % proto.OP_FIELDS == 0
    out = []
    for i in range(0, len(ops), proto.OP_FIELDS):
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
    return out, consumed, need


def feed(proto, data, cuts):
    """Feed data split at cuts the way the reader does; return every op seen and the tail."""
    buf = bytearray()
    seen = []
    last = 0
    for cut in [*sorted(cuts), len(data)]:
        buf += data[last:cut]
        last = cut
        ops, consumed, _ = frames(proto, buf)
        seen += ops
        del buf[:consumed]
    return seen, bytes(buf)


# --------------------------------------------------------------------------
# parse: the ops


def test_ops_constants_are_the_interface(proto):
    """Op kinds and the field count have the documented values."""
    assert (proto.OP_MSG, proto.OP_HMSG, proto.OP_PING, proto.OP_PONG) == (1, 2, 3, 4)
    assert (proto.OP_OK, proto.OP_ERR, proto.OP_INFO, proto.OP_FIELDS) == (5, 6, 7, 10)
    assert proto.IMPL == {"_c": "c", "_py": "python"}[proto.__name__.rsplit(".", 1)[1]]


def test_msg_without_reply_gives_absolute_offsets(proto):
    """MSG subject sid size: a = subject, r = 0,0, h = 0,0, p = payload."""
    buf = b"MSG foo.bar 9 5\r\nhello\r\n"
    ops, consumed, need = proto.parse(buf, 0, len(buf))
    assert ops == [proto.OP_MSG, 4, 7, 9, 0, 0, 0, 0, 17, 5]
    assert (consumed, need) == (len(buf), 0)


def test_msg_with_reply(proto):
    """MSG subject sid reply size: r locates the reply subject."""
    buf = b"MSG foo 1 _INBOX.abc 3\r\nabc\r\n"
    assert frames(proto, buf)[0] == [(proto.OP_MSG, b"foo", 1, b"_INBOX.abc", b"", b"abc")]


def test_empty_payload(proto):
    """A zero-size MSG has an empty payload."""
    assert frames(proto, b"MSG a 2 0\r\n\r\n")[0] == [(proto.OP_MSG, b"a", 2, b"", b"", b"")]


def test_hmsg_splits_header_block_and_payload(proto):
    """HMSG: h is the header block including the blank line, p what follows."""
    block = b"NATS/1.0\r\nA: b\r\n\r\n"
    buf = b"HMSG s 7 r %d %d\r\n%shi\r\n" % (len(block), len(block) + 2, block)
    ops, consumed, _ = proto.parse(buf, 0, len(buf))
    body = buf.index(b"NATS")
    assert ops == [proto.OP_HMSG, 5, 1, 7, 9, 1, body, len(block), body + len(block), 2]
    assert consumed == len(buf)


def test_hmsg_without_reply_and_without_payload(proto):
    """HMSG with hdr_size == total_size has an empty payload."""
    buf = b"HMSG s 3 12 12\r\nNATS/1.0\r\n\r\n\r\n"
    assert frames(proto, buf)[0] == [(proto.OP_HMSG, b"s", 3, b"", b"NATS/1.0\r\n\r\n", b"")]


@pytest.mark.parametrize(
    ("line", "kind"),
    [(b"PING", 3), (b"PONG", 4), (b"+OK", 5), (b"ping", 3), (b"Pong", 4), (b"+ok", 5)],
)
def test_argumentless_ops(proto, line, kind):
    """PING, PONG and +OK in any case, all fields but the kind zero."""
    ops, consumed, need = proto.parse(line + b"\r\n", 0, len(line) + 2)
    assert ops == [kind] + [0] * 9
    assert (consumed, need) == (len(line) + 2, 0)


def test_trailing_blanks_are_tolerated(proto):
    """Spaces and tabs before CRLF are ignored for every op."""
    buf = b"PING \t\r\nMSG a 1 1 \t \r\nx\r\n+OK  \r\n"
    kinds = [op[0] for op in frames(proto, buf)[0]]
    assert kinds == [proto.OP_PING, proto.OP_MSG, proto.OP_OK]


@pytest.mark.parametrize(
    ("line", "text"),
    [
        (b"-ERR 'Authorization Violation'", b"Authorization Violation"),
        (b"-err  'Stale Connection' ", b"Stale Connection"),
        (b"-ERR unquoted text", b"unquoted text"),
        (
            b"-ERR 'Permissions Violation for Publish to \"x\"'",
            b'Permissions Violation for Publish to "x"',
        ),
    ],
)
def test_err_text_loses_quotes_and_blanks(proto, line, text):
    """-ERR: a is the text without the surrounding quotes and blanks."""
    assert frames(proto, line + b"\r\n")[0] == [(proto.OP_ERR, text, 0, b"", b"", b"")]


@pytest.mark.parametrize("line", [b"-ERR", b"-ERR ", b"-ERR ''"])
def test_err_without_text(proto, line):
    """-ERR with no text gives a = 0,0."""
    assert proto.parse(line + b"\r\n", 0, len(line) + 2)[0] == [proto.OP_ERR] + [0] * 9


def test_info_json_is_trimmed(proto):
    """INFO: a is the JSON after the op name, without surrounding blanks."""
    buf = b'INFO  {"server_id":"X","max_payload":1048576} \t\r\n'
    ops = frames(proto, buf)[0]
    assert ops == [(proto.OP_INFO, b'{"server_id":"X","max_payload":1048576}', 0, b"", b"", b"")]


@pytest.mark.parametrize("name", [b"MSG", b"msg", b"Msg", b"mSg"])
def test_op_names_are_case_insensitive(proto, name):
    """MSG in any case parses the same."""
    assert frames(proto, name + b" a 1 1\r\nx\r\n")[0] == [(proto.OP_MSG, b"a", 1, b"", b"", b"x")]


def test_hmsg_info_and_err_in_other_cases(proto):
    """hmsg, Info and -eRr are recognised too."""
    buf = b"hMsG a 1 12 12\r\nNATS/1.0\r\n\r\n\r\nInfo {}\r\n-eRr 'x'\r\n"
    kinds = [op[0] for op in frames(proto, buf)[0]]
    assert kinds == [proto.OP_HMSG, proto.OP_INFO, proto.OP_ERR]


def test_arguments_split_on_runs_of_spaces_and_tabs(proto):
    """One or more spaces or tabs separate arguments."""
    buf = b"MSG\t a.b \t\t7  reply\t3\r\nabc\r\n"
    assert frames(proto, buf)[0] == [(proto.OP_MSG, b"a.b", 7, b"reply", b"", b"abc")]


def test_payload_may_hold_crlf_and_protocol_text(proto):
    """The payload is taken by size, whatever bytes it holds."""
    payload = b"\r\nMSG x 1 1\r\n\n\rPING\r\n"
    buf = b"MSG a 1 %d\r\n%s\r\nPONG\r\n" % (len(payload), payload)
    ops = frames(proto, buf)[0]
    assert ops == [
        (proto.OP_MSG, b"a", 1, b"", b"", payload),
        (proto.OP_PONG, b"", 0, b"", b"", b""),
    ]


def test_pipelined_frames_all_come_out_in_one_call(proto):
    """Every whole op in the buffer is returned by a single call."""
    buf = b"PING\r\n" + b"MSG a 1 1\r\nx\r\n" * 3 + b"PONG\r\n"
    ops, consumed, need = frames(proto, buf)
    assert [op[0] for op in ops] == [3, 1, 1, 1, 4]
    assert (consumed, need) == (len(buf), 0)


def test_more_ops_than_one_c_chunk(proto):
    """Thousands of ops in one buffer all come back (the C side works in chunks)."""
    buf = b"MSG a 5 1\r\nx\r\n" * 2500 + b"PING\r\n" * 2600
    ops, consumed, need = proto.parse(buf, 0, len(buf))
    assert len(ops) == 5100 * proto.OP_FIELDS
    assert ops[-10:] == [proto.OP_PING] + [0] * 9
    assert ops[2499 * 10 : 2499 * 10 + 4] == [proto.OP_MSG, 2499 * 14 + 4, 1, 5]
    assert (consumed, need) == (len(buf), 0)


def test_start_and_end_window(proto):
    """Only buf[start:end] is parsed, offsets stay absolute, bytes after end are ignored."""
    buf = bytearray(b"garbage!" + b"MSG a 1 1\r\nx\r\n" + b"NOT PARSED")
    ops, consumed, need = proto.parse(buf, 8, 22)
    assert ops == [proto.OP_MSG, 12, 1, 1, 0, 0, 0, 0, 19, 1]
    assert (consumed, need) == (22, 0)


def test_empty_window(proto):
    """Nothing to parse gives nothing and consumed == start."""
    assert proto.parse(b"PING\r\n", 6, 6) == ([], 6, 0)
    assert proto.parse(b"", 0, 0) == ([], 0, 0)


@pytest.mark.parametrize(("start", "end"), [(-1, 3), (4, 3), (0, 7), (7, 7)])
def test_bad_window_is_a_value_error(proto, start, end):
    """start/end outside 0 <= start <= end <= len(buf) raise ValueError."""
    with pytest.raises(ValueError):
        proto.parse(b"PING\r\n", start, end)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_buffer_types(proto, kind):
    """bytes, bytearray and memoryview give identical results."""
    data = b"MSG a 1 r 2\r\nhi\r\nPING\r\nMSG b"
    assert proto.parse(kind(data), 0, len(data)) == proto.parse(data, 0, len(data))


def test_bytearray_stays_resizable_after_an_error(proto):
    """A failed parse does not keep the reader's bytearray exported."""
    buf = bytearray(b"XYZ\r\n")
    with pytest.raises(ProtocolError):
        proto.parse(buf, 0, len(buf))
    buf += b"more"
    del buf[:3]


def test_parallel_threads_get_their_own_results(proto):
    """Concurrent parses from several threads do not mix their outputs."""
    results = {}

    def work(n):
        buf = b"".join(b"MSG s%d %d 2\r\nab\r\n" % (n, i) for i in range(3000))
        for _ in range(20):
            ops, consumed, _ = proto.parse(buf, 0, len(buf))
            assert consumed == len(buf)
            assert ops[3::10] == list(range(3000))
        results[n] = bytes(buf[ops[1] : ops[1] + ops[2]])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {n: b"s%d" % n for n in range(4)}


# --------------------------------------------------------------------------
# parse: incomplete input


@pytest.mark.parametrize(
    "partial",
    [
        b"M",
        b"ms",
        b"MSG",
        b"MSG ",
        b"MSG a 1 5",
        b"MSG a 1 5\r",
        b"P",
        b"PI",
        b"PON",
        b"+",
        b"+O",
        b"-ER",
        b"-ERR 'x",
        b"INFO {",
        b"H",
        b"HMSG a 1 12 14\r",
    ],
)
def test_incomplete_control_line_needs_more_with_need_zero(proto, partial):
    """An unterminated control line that may still become valid waits with need == 0."""
    buf = b"PING\r\n" + partial
    ops, consumed, need = proto.parse(buf, 0, len(buf))
    assert (ops[:1], consumed, need) == ([proto.OP_PING], 6, 0)


def test_incomplete_payload_reports_the_whole_frame_size(proto):
    """Once the control line is complete, need is the op's full size counted from consumed."""
    frame = b"MSG a 1 10\r\n0123456789\r\n"
    buf = b"PONG\r\n" + frame
    for cut in range(6 + len(b"MSG a 1 10\r\n"), len(buf)):
        ops, consumed, need = proto.parse(buf, 0, cut)
        assert (len(ops), consumed, need) == (10, 6, len(frame))


def test_incomplete_hmsg_need(proto):
    """HMSG need counts the control line, total size and trailing CRLF."""
    line = b"HMSG a 1 12 20\r\n"
    ops, consumed, need = proto.parse(line + b"NATS", 0, len(line) + 4)
    assert (ops, consumed, need) == ([], 0, len(line) + 20 + 2)


def test_need_for_a_64_mib_payload_without_having_it(proto):
    """The largest payload is announced by need before any of it arrives."""
    line = b"MSG big 1 %d\r\n" % (64 * MIB)
    assert proto.parse(line, 0, len(line)) == ([], 0, len(line) + 64 * MIB + 2)


def test_a_64_mib_payload_parses(proto):
    """A payload of exactly 64 MiB is accepted."""
    line = b"MSG big 1 %d\r\n" % (64 * MIB)
    buf = bytearray(line) + bytearray(64 * MIB) + b"\r\n"
    ops, consumed, need = proto.parse(buf, 0, len(buf))
    assert ops[8:] == [len(line), 64 * MIB]
    assert (consumed, need) == (len(buf), 0)


def test_every_split_point_gives_the_same_ops(proto):
    """Feeding a stream split at any byte yields exactly the ops of the whole stream."""
    block = b"NATS/1.0 503\r\nX: y\r\n\r\n"
    data = (
        b'INFO {"a":1}\r\nMSG a.b 1 r 3\r\nx\r\n\r\nPING\r\n'
        + b"HMSG h 2 %d %d\r\n%sPAY\r\n" % (len(block), len(block) + 3, block)
        + b"-ERR 'boom'\r\n+OK\r\nPONG\r\n"
    )
    whole, _, _ = frames(proto, data)
    assert len(whole) == 7
    for cut in range(len(data) + 1):
        assert feed(proto, data, [cut]) == (whole, b"")
    for cut in range(0, len(data), 7):
        assert feed(proto, data, [cut, cut + 3, cut + 5]) == (whole, b"")


# --------------------------------------------------------------------------
# parse: errors


@pytest.mark.parametrize(
    "data",
    [
        b"X",
        b"XYZ\r\n",
        b"MSGX",
        b"MSG\n",
        b"PINGA",
        b"PX",
        b"PONGO\r\n",
        b"+OKAY",
        b"-ERRR",
        b"INFOX",
        b"HMS ",
        b"\r\n",
        b" PING\r\n",
        b"\n",
        b"HMSGX",
    ],
)
def test_bytes_that_cannot_start_an_op_fail_at_once(proto, data):
    """Unknown op names are a ProtocolError as soon as the first bytes decide it."""
    with pytest.raises(ProtocolError):
        proto.parse(data, 0, len(data))


def test_error_after_good_ops_still_raises(proto):
    """A bad op anywhere in the buffer raises, even after whole ops."""
    buf = b"PING\r\n" * 3000 + b"BAD\r\n"
    with pytest.raises(ProtocolError, match="offset 18000"):
        proto.parse(buf, 0, len(buf))


@pytest.mark.parametrize(
    "data",
    [b"PING\n", b"MSG a 1 1\nx\r\n", b"+OK\n", b"-ERR 'x'\n", b"INFO {}\n", b"MSG a 1 1 \n"],
)
def test_bare_lf_ends_nothing(proto, data):
    """A control line ended by LF without CR is a ProtocolError."""
    with pytest.raises(ProtocolError):
        proto.parse(data, 0, len(data))


@pytest.mark.parametrize("data", [b"MSG a\r1 1\r\nx\r\n", b"PING\r\r\n", b"INFO {\r}\r\n"])
def test_cr_inside_a_control_line(proto, data):
    """A CR that does not end the line is a ProtocolError."""
    with pytest.raises(ProtocolError):
        proto.parse(data, 0, len(data))


@pytest.mark.parametrize(
    "data",
    [
        b"MSG a 1 3\r\nabcd\r\n",
        b"MSG a 1 3\r\nab\r\n\r\n",
        b"MSG a 1 0\r\nx\r\n",
        b"MSG a 1 1\r\nx\n\r",
        b"HMSG a 1 12 13\r\nNATS/1.0\r\n\r\nxx\r\n",
    ],
)
def test_payload_must_end_with_crlf(proto, data):
    """The bytes right after the payload must be CRLF."""
    with pytest.raises(ProtocolError):
        proto.parse(data, 0, len(data))


@pytest.mark.parametrize(
    "line",
    [
        b"MSG",
        b"MSG a",
        b"MSG a 1",
        b"MSG a 1 r x 1",
        b"HMSG a 1 12",
        b"HMSG a 1 r x 12 12",
        b"PING x",
        b"PONG 1",
        b"+OK fine",
        b"INFO",
        b"INFO  \t",
    ],
)
def test_wrong_argument_counts(proto, line):
    """MSG takes 3-4 args, HMSG 4-5, PING/PONG/+OK none, INFO some JSON."""
    data = line + b"\r\n"
    with pytest.raises(ProtocolError):
        proto.parse(data, 0, len(data))


@pytest.mark.parametrize(
    "line",
    [
        b"MSG a x 1",
        b"MSG a -1 1",
        b"MSG a +1 1",
        b"MSG a 1 -1",
        b"MSG a 1 1x",
        b"MSG a 1 0x10",
        b"MSG a 9223372036854775808 1",
        b"MSG a 99999999999999999999999 1",
        b"HMSG a 1 1e2 200",
        b"MSG a \xd9\xa1 1",
    ],
)
def test_sid_and_sizes_are_unsigned_decimals(proto, line):
    """Signs, letters, non-ASCII digits and int64 overflow are ProtocolErrors."""
    data = line + b"\r\nx\r\n"
    with pytest.raises(ProtocolError):
        proto.parse(data, 0, len(data))


def test_largest_sid_and_leading_zeros(proto):
    """sid 2**63-1 and zero-padded numbers are accepted."""
    data = b"MSG a 9223372036854775807 0001\r\nx\r\nMSG b %s1 1\r\ny\r\n" % (b"0" * 40)
    sids = [op[2] for op in frames(proto, data)[0]]
    assert sids == [2**63 - 1, 1]


@pytest.mark.parametrize(
    "line",
    [b"MSG a 1 67108865", b"HMSG a 1 12 67108865", b"MSG a 1 9223372036854775807"],
)
def test_sizes_above_64_mib_are_refused(proto, line):
    """A payload above 64 MiB is a ProtocolError before any of it arrives."""
    data = line + b"\r\n"
    with pytest.raises(ProtocolError, match="larger than"):
        proto.parse(data, 0, len(data))


def test_hmsg_header_size_above_total_size_is_refused(proto):
    """hdr_size may not pass total_size."""
    data = b"HMSG a 1 13 12\r\n"
    with pytest.raises(ProtocolError, match="header size larger than total size"):
        proto.parse(data, 0, len(data))


@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"NATS/1.0",
        b"NATS/1.0\r\n",
        b"NATS/1.1\r\n\r\n",
        b"NATS/1.0\r\n\r\nab",
        b"XATS/1.0\r\n\r\n",
    ],
)
def test_hmsg_hands_on_a_header_block_it_does_not_check(proto, block):
    """A header block that is not NATS/1.0 ... CRLFCRLF is no framing error: another client
    wrote it and the server forwards it, so the HMSG comes out with it (reading its headers
    refuses it, for that message alone)."""
    buf = b"HMSG s 3 %d %d\r\n%shi\r\nPING\r\n" % (len(block), len(block) + 2, block)
    assert frames(proto, buf)[0] == [
        (proto.OP_HMSG, b"s", 3, b"", block, b"hi"),
        (proto.OP_PING, b"", 0, b"", b"", b""),
    ]


def test_control_line_limit(proto):
    """An unterminated control line fails once it exceeds 1 MiB; up to 1 MiB it waits."""
    line = b"INFO " + b"x" * (MIB - 5)
    assert proto.parse(line, 0, len(line)) == ([], 0, 0)
    with pytest.raises(ProtocolError, match="longer than"):
        proto.parse(line + b"x", 0, len(line) + 1)


def test_terminated_control_line_limit(proto):
    """A terminated control line counts its CR: 1 MiB before the LF is the most accepted."""
    ok = b"INFO " + b"x" * (MIB - 6) + b"\r\n"
    assert proto.parse(ok, 0, len(ok))[1] == len(ok)
    too_long = b"INFO " + b"x" * (MIB - 5) + b"\r\n"
    with pytest.raises(ProtocolError):
        proto.parse(too_long, 0, len(too_long))


def test_error_message_names_reason_and_offset(proto):
    """ProtocolError says what is wrong, where, and shows the bytes there."""
    with pytest.raises(ProtocolError, match=r"unknown protocol operation at offset 6: b'BOGUS"):
        proto.parse(b"PING\r\nBOGUS\r\n", 0, 13)


SECRET_MSG = b"MSG secret.subject 1 53\r\nTOPSECRET-password=correct-horse-battery-staple-42!!!\r\n"


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
@pytest.mark.parametrize("bad", [b"BAD\r\n", b"BAD", b"MSG a 1 x\r\n", b"\n"])
def test_error_excerpt_stops_at_the_end_of_the_received_bytes(proto, kind, bad):
    """A reused buffer's older bytes past ``end`` (an earlier payload) are never quoted."""
    buf = bytearray(SECRET_MSG)
    assert frames(proto, buf)[0][0][5].startswith(b"TOPSECRET")
    buf[: len(bad)] = bad  # the next read is shorter: the secret is still behind it
    with pytest.raises(ProtocolError) as caught:
        proto.parse(kind(buf), 0, len(bad))
    text = str(caught.value)
    assert text.endswith(repr(bad)), text
    assert b"secret" not in text.lower().encode()


def test_error_excerpt_starts_at_the_op_in_error(proto):
    """Bytes before the op in error (parsed ones, from ``start`` on) are not quoted either."""
    data = SECRET_MSG + b"BOGUS\r\n"
    with pytest.raises(ProtocolError) as caught:
        proto.parse(data, 0, len(data))
    assert str(caught.value).endswith(f"at offset {len(SECRET_MSG)}: b'BOGUS\\r\\n'")


@pytest.mark.parametrize(
    ("frame", "line"),
    [
        (b"MSG s.x 1 5\r\nhelloSECRETSECRET\r\n", b"MSG s.x 1 5\r\n"),  # payload unframed
        (b"HMSG s.x 1 12 14\r\nNATS/1.0\r\n\r\nSECRET\r\n", b"HMSG s.x 1 12 14\r\n"),
    ],
    ids=["payload-end", "header-block"],
)
def test_a_malformed_frame_quotes_its_control_line_only(proto, frame, line):
    """The excerpt of a frame in error stops at its control line: no payload or header bytes."""
    data = b"PING\r\n" + frame
    with pytest.raises(ProtocolError) as caught:
        proto.parse(data, 0, len(data))
    assert str(caught.value).endswith(f"at offset 6: {line!r}"), str(caught.value)
    assert caught.value.offset == 6


def test_the_error_offset_is_where_the_whole_frames_before_it_end(proto):
    """``offset``: parsing up to it gives every whole frame before the bad one, and no error."""
    frames_before = b"MSG s.x 1 5\r\nhello\r\n" * 3 + b"PING\r\n"
    data = frames_before + b"GARBAGE\r\n"
    with pytest.raises(ProtocolError) as caught:
        proto.parse(data, 0, len(data))
    assert caught.value.offset == len(frames_before)
    ops, consumed, need = proto.parse(data, 0, caught.value.offset)
    assert (len(ops) // proto.OP_FIELDS, consumed, need) == (4, len(frames_before), 0)


# --------------------------------------------------------------------------
# parse_headers


def test_minimal_header_block(proto):
    """Just the version line: no status, no pairs."""
    assert proto.parse_headers(b"NATS/1.0\r\n\r\n") == (None, "", [])


@pytest.mark.parametrize(
    ("block", "status", "description"),
    [
        (b"NATS/1.0 503\r\n\r\n", 503, ""),
        (b"NATS/1.0 408 Request Timeout\r\n\r\n", 408, "Request Timeout"),
        (b"NATS/1.0\t100  Idle Heartbeat \r\n\r\n", 100, "Idle Heartbeat"),
        (b"NATS/1.0 404 No Messages\r\n\r\n", 404, "No Messages"),
        (b"NATS/1.0   \r\n\r\n", None, ""),
    ],
)
def test_status_line(proto, block, status, description):
    """The 3-digit status and its description come from the first line."""
    assert proto.parse_headers(block) == (status, description, [])


def test_pairs_keep_order_repeats_case_and_inner_text(proto):
    """Pairs come in wire order with keys as sent and values stripped at the ends only."""
    block = (
        b"NATS/1.0 100 FlowControl Request\r\nNats-Msg-Id: 1\r\nnats-msg-id:2\r\n"
        b"X-Time: 12:30:00 UTC \t\r\nEmpty:\r\nSpaces:   \r\nNats-Msg-Id:  three  \r\n\r\n"
    )
    assert proto.parse_headers(block) == (
        100,
        "FlowControl Request",
        [
            ("Nats-Msg-Id", "1"),
            ("nats-msg-id", "2"),
            ("X-Time", "12:30:00 UTC"),
            ("Empty", ""),
            ("Spaces", ""),
            ("Nats-Msg-Id", "three"),
        ],
    )


def test_header_text_is_utf8_with_surrogateescape(proto):
    """UTF-8 decodes; invalid bytes survive as surrogate escapes."""
    block = "NATS/1.0 503 Ünïcode\r\nKëy: välue\r\n".encode() + b"Raw: \xff\xfe\r\n\r\n"
    status, description, pairs = proto.parse_headers(block)
    assert (status, description) == (503, "Ünïcode")
    assert pairs == [("Këy", "välue"), ("Raw", "\udcff\udcfe")]
    assert pairs[1][1].encode("utf-8", "surrogateescape") == b"\xff\xfe"


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_header_block_types(proto, kind):
    """bytes, bytearray and memoryview blocks parse the same."""
    assert proto.parse_headers(kind(b"NATS/1.0\r\nA: b\r\n\r\n")) == (None, "", [("A", "b")])


def test_many_header_pairs(proto):
    """More pairs than the C side's default array are all returned."""
    pairs = [(f"K{i}", f"v{i}") for i in range(500)]
    assert proto.parse_headers(proto.encode_headers(pairs)) == (None, "", pairs)


@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"NATS/1.",
        b"HTTP/1.0\r\n\r\n",
        b"nats/1.0\r\n\r\n",
        b"NATS/1.1\r\n\r\n",
        b"NATS/1.0X\r\n\r\n",
        b"NATS/1.0",
        b"NATS/1.0\r\n",
        b"NATS/1.0\r\nA: b\r\n",
        b"NATS/1.0\r\nA: b\r\n\r\nextra",
        b"NATS/1.0 50\r\n\r\n",
        b"NATS/1.0 5033\r\n\r\n",
        b"NATS/1.0 abc\r\n\r\n",
        b"NATS/1.0 5x3 Bad\r\n\r\n",
        b"NATS/1.0\r\nno colon\r\n\r\n",
        b"NATS/1.0\r\n: empty key\r\n\r\n",
        b"NATS/1.0\r\nA: b\r\n\r\nC: d\r\n\r\n",
        b"NATS/1.0\r\nA: b\nC: d\r\n\r\n",
        b"NATS/1.0\r\nA: b\rC: d\r\n\r\n",
        b"NATS/1.0\r\nA: b\r\r\n\r\n",
        b"NATS/1.0\r\n\r\n\r\n",
    ],
)
def test_invalid_header_blocks(proto, block):
    """Bad prefix, status, lines, keys, stray CR/LF or a missing blank line raise ProtocolError."""
    with pytest.raises(ProtocolError):
        proto.parse_headers(block)


# --------------------------------------------------------------------------
# encoders


def test_encode_headers(proto):
    """Pairs become a NATS/1.0 block, UTF-8 encoded, in order."""
    block = proto.encode_headers([("Nats-Msg-Id", "a b:c"), ("X", ""), ("K~y", "знач"), ("X", "2")])
    expected = "NATS/1.0\r\nNats-Msg-Id: a b:c\r\nX: \r\nK~y: знач\r\nX: 2\r\n\r\n".encode()
    assert block == expected


def test_encode_no_headers(proto):
    """No pairs still make a valid, minimal block."""
    assert proto.encode_headers([]) == b"NATS/1.0\r\n\r\n"
    assert proto.encode_headers(iter(())) == b"NATS/1.0\r\n\r\n"


def test_encoded_headers_round_trip(proto):
    """parse_headers(encode_headers(pairs)) gives the pairs back (values without edge blanks)."""
    pairs = [("A", "1"), ("a", "two words"), ("K", "x:y"), ("Raw", "\udcff"), ("E", "")]
    assert proto.parse_headers(proto.encode_headers(pairs)) == (None, "", pairs)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "a b",
        "a:b",
        "a\r",
        "a\n",
        "a\tb",
        "\x00",
        "a\x7f",
        "\x1f",
        " ",
        "é\x20",
        "é",
        "Ключ",
        "a\udcff",
        "a\x80",
    ],
)
def test_bad_header_keys(proto, key):
    """Keys that would corrupt the block raise BadHeaderError (a ValueError)."""
    with pytest.raises(BadHeaderError):
        proto.encode_headers([("Good", "v"), (key, "v")])
    with pytest.raises(ValueError):
        proto.encode_headers([(key, "v")])


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "\r\n", "x\r", "a\x00b", "\x00"])
def test_bad_header_values(proto, value):
    """Values holding CR, LF or NUL raise BadHeaderError."""
    with pytest.raises(BadHeaderError):
        proto.encode_headers([("Key", value)])


def test_unencodable_header_text(proto):
    """A lone surrogate that UTF-8 cannot carry is a BadHeaderError."""
    with pytest.raises(BadHeaderError):
        proto.encode_headers([("Key", "\ud800")])


def test_header_keys_and_values_must_be_str(proto):
    """bytes keys or values are a TypeError."""
    with pytest.raises(TypeError):
        proto.encode_headers([(b"Key", "v")])
    with pytest.raises(TypeError):
        proto.encode_headers([("Key", b"v")])


@pytest.mark.parametrize(
    ("args", "frame"),
    [
        ((b"a.b", b"", b"hello"), b"PUB a.b 5\r\nhello\r\n"),
        ((b"a", b"_INBOX.1", b""), b"PUB a _INBOX.1 0\r\n\r\n"),
        ((b"a", b"", bytearray(b"\r\n")), b"PUB a 2\r\n\r\n\r\n"),
        ((b"a", b"r", memoryview(b"xyz")), b"PUB a r 3\r\nxyz\r\n"),
    ],
)
def test_encode_pub(proto, args, frame):
    """PUB frames, with the reply only when given, for any bytes-like payload."""
    assert proto.encode_pub(*args) == frame


def test_encode_hpub(proto):
    """HPUB frames carry header and total sizes."""
    block = b"NATS/1.0\r\nA: b\r\n\r\n"
    assert proto.encode_hpub(b"s", b"", block, b"hi") == b"HPUB s 18 20\r\n" + block + b"hi\r\n"
    assert (
        proto.encode_hpub(b"s", b"r", block, memoryview(b""))
        == b"HPUB s r 18 18\r\n" + block + b"\r\n"
    )


def test_encoded_frames_parse_back_as_messages(proto):
    """A PUB/HPUB frame turned into MSG/HMSG by the server parses to the same parts."""
    block = proto.encode_headers([("K", "v")])
    hpub = proto.encode_hpub(b"s", b"r", block, b"data")
    hmsg = b"HMSG s 9 r" + hpub[len(b"HPUB s r") :]
    assert frames(proto, hmsg)[0] == [(proto.OP_HMSG, b"s", 9, b"r", block, b"data")]


def test_large_payloads_frame_like_small_ones(proto):
    """Payloads on both sides of the %-formatting/join switch give the same frame shape."""
    for size in (proto_py().JOIN_ABOVE, proto_py().JOIN_ABOVE + 1, 3 * MIB):
        payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        for kind in (bytes, bytearray, memoryview):
            assert proto.encode_pub(b"s", b"r", kind(payload)) == b"PUB s r %d\r\n%s\r\n" % (
                size,
                payload,
            )
            block = b"NATS/1.0\r\n\r\n"
            assert proto.encode_hpub(b"s", b"", block, kind(payload)) == (
                b"HPUB s 12 %d\r\n%s%s\r\n" % (size + 12, block, payload)
            )


def test_non_contiguous_payload_views(proto):
    """A strided memoryview is sent as the bytes it shows, small or large."""
    for size in (10, 2 * MIB):
        view = memoryview(b"ab" * size)[::2]
        assert proto.encode_pub(b"s", b"", view) == b"PUB s %d\r\n%s\r\n" % (size, b"a" * size)
        frame = proto.encode_hpub_pairs(b"s", b"", [("K", "v")], view)
        assert frame.endswith(b"\r\n\r\n" + b"a" * size + b"\r\n")


def proto_py():
    """The Python twin (JOIN_ABOVE lives there)."""
    return importlib.import_module("jetstream_sync._protocol._py")


# --------------------------------------------------------------------------
# encode_hpub_pairs

HPUB_PAIRS = [("Nats-Msg-Id", "a b:c"), ("X", ""), ("K~y", "знач"), ("X", "2"), ("Raw", "\udcff")]


@pytest.mark.parametrize("reply", [b"", b"_INBOX.r"])
@pytest.mark.parametrize("payload", [b"", b"data", b"\r\n" * 3000, b"x" * (70 * 1024)])
def test_encode_hpub_pairs_is_encode_hpub_of_encode_headers(proto, reply, payload):
    """One call gives what encode_headers + encode_hpub give, for small and large payloads."""
    block = proto.encode_headers(HPUB_PAIRS)
    assert proto.encode_hpub_pairs(b"s.t", reply, HPUB_PAIRS, payload) == proto.encode_hpub(
        b"s.t", reply, block, payload
    )


def test_encode_hpub_pairs_frame(proto):
    """The frame carries the block's size and the total size, then block and payload."""
    frame = proto.encode_hpub_pairs(b"s", b"r", [("A", "b")], b"hi")
    assert frame == b"HPUB s r 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n"
    assert proto.encode_hpub_pairs(b"s", b"", [], b"") == b"HPUB s 12 12\r\nNATS/1.0\r\n\r\n\r\n"


@pytest.mark.parametrize(
    "make",
    [
        lambda: iter([("A", "1"), ("B", "2")]),
        lambda: (("A", "1"), ("B", "2")),
        lambda: (p for p in [("A", "1"), ("B", "2")]),
        lambda: {"A": "1", "B": "2"}.items(),
    ],
)
def test_encode_hpub_pairs_takes_any_iterable(proto, make):
    """Iterators, tuples, generators and dict items work like lists."""
    expected = b"HPUB s 24 25\r\nNATS/1.0\r\nA: 1\r\nB: 2\r\n\r\nx\r\n"
    assert proto.encode_hpub_pairs(b"s", b"", make(), b"x") == expected
    assert proto.encode_headers(make()) == expected[len(b"HPUB s 24 25\r\n") : -3]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_encode_hpub_pairs_payload_types(proto, kind):
    """Any bytes-like payload."""
    frame = proto.encode_hpub_pairs(b"s", b"", [("K", "v")], kind(b"abc"))
    assert frame == b"HPUB s 18 21\r\nNATS/1.0\r\nK: v\r\n\r\nabc\r\n"


def test_encode_hpub_pairs_parses_back(proto):
    """Turned into HMSG, the frame parses to the subject, reply, block and payload; the
    block to the pairs."""
    frame = proto.encode_hpub_pairs(b"s", b"r", HPUB_PAIRS, b"payload")
    hmsg = b"HMSG s 7 r" + frame[len(b"HPUB s r") :]
    [(kind, subject, sid, reply, block, payload)] = frames(proto, hmsg)[0]
    assert (kind, subject, sid, reply, payload) == (proto.OP_HMSG, b"s", 7, b"r", b"payload")
    assert proto.parse_headers(block) == (None, "", HPUB_PAIRS)


def test_encode_hpub_pairs_big_headers(proto):
    """Header blocks beyond the per-thread buffer (16 KiB) and its 1 MiB cap still encode."""
    for size in (20_000, 2 * MIB):
        pairs = [("Big", "v" * size), ("Small", "s")]
        frame = proto.encode_hpub_pairs(b"s", b"", pairs, b"p")
        assert frame == proto.encode_hpub(b"s", b"", proto.encode_headers(pairs), b"p")
        assert proto.encode_headers(pairs) == b"NATS/1.0\r\nBig: %s\r\nSmall: s\r\n\r\n" % (
            b"v" * size
        )
    assert proto.encode_hpub_pairs(b"s", b"", [("A", "1")], b"x") == (
        b"HPUB s 18 19\r\nNATS/1.0\r\nA: 1\r\n\r\nx\r\n"
    )


@pytest.mark.parametrize(
    ("pairs", "error"),
    [
        ([("Good", "v"), ("a b", "v")], BadHeaderError),
        ([("", "v")], BadHeaderError),
        ([("K", "a\rb")], BadHeaderError),
        ([("K", "a\x00b")], BadHeaderError),
        ([("K\x00", "v")], BadHeaderError),
        ([("K", "\ud800")], BadHeaderError),
        ([(b"K", "v")], TypeError),
        ([("K", 1)], TypeError),
        ([("K", "v", "w")], ValueError),
        # the first bad pair decides, as in encode_headers
        ([("a b", "v"), (1, "v")], BadHeaderError),
        ([(1, "v"), ("a b", "v")], TypeError),
    ],
)
def test_encode_hpub_pairs_errors(proto, pairs, error):
    """Bad pairs raise what encode_headers raises, with the same message."""
    with pytest.raises(error) as raised:
        proto.encode_hpub_pairs(b"s", b"", pairs, b"x")
    with pytest.raises(error) as expected:
        proto_py().encode_headers(pairs)
    assert str(raised.value) == str(expected.value)
    with pytest.raises(error):
        proto.encode_hpub_pairs(b"s", b"", pairs, b"x" * (100 * 1024))
    with pytest.raises(error):
        proto.encode_headers(iter(pairs))


def test_encode_hpub_pairs_in_parallel_threads(proto):
    """Threads encoding at once each get their own frames (the C side's buffers are per thread)."""
    errors = []

    def work(n: int) -> None:
        try:
            for i in range(300):
                payload = b"%d-%d" % (n, i) * (1 + i % 50) * (1 + 1000 * (i % 7 == 0))
                pairs = [("Nats-Msg-Id", f"{n}-{i}"), ("Pad", "p" * (i * 60))]
                frame = proto.encode_hpub_pairs(b"s", b"", pairs, payload)
                block = proto_py().encode_headers(pairs)
                assert frame == proto_py().encode_hpub(b"s", b"", block, payload)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_encode_hpub_pairs_is_exported():
    """The package exports encode_hpub_pairs from the chosen implementation."""
    import jetstream_sync._protocol as protocol

    assert protocol.encode_hpub_pairs is protocol._impl.encode_hpub_pairs
    assert "encode_hpub_pairs" in protocol.__all__


# --------------------------------------------------------------------------
# valid_subject


@pytest.mark.parametrize(
    ("subject", "plain", "wild"),
    [
        (b"a", True, True),
        (b"orders.new.eu", True, True),
        (b"_INBOX.abc.1", True, True),
        (b"a*b.c>d", True, True),
        (b"\xc3\xa9t\xc3\xa9", True, True),
        (b"a.*", False, True),
        (b"*.b", False, True),
        (b"a.>", False, True),
        (b">", False, True),
        (b"*", False, True),
        (b"a.>.b", False, False),
        (b">.>", False, False),
        (b"", False, False),
        (b".", False, False),
        (b"a.", False, False),
        (b".a", False, False),
        (b"a..b", False, False),
        (b"a b", False, False),
        (b"a\tb", False, False),
        (b"a\rb", False, False),
        (b"a\nb", False, False),
        (b"a\x00b", False, False),
        (b"a\x0bb", False, False),
        (b"a\x0cb", False, False),
        (b"a.\x0c", False, False),
        (b"\x00", False, False),
        (b" a", False, False),
        (b"ev.*.x", False, True),
        (b"ev.*.>", False, True),
        (b"*.*", False, True),
        (b"ev.>x", True, True),
        (b"ev.x>", True, True),
        (b"ev.**", True, True),
        (b"ev.>>", True, True),
        (b"$JS.API.CONSUMER.CREATE.EV.c.ev.>", False, True),
        (b"a\x7fb", True, True),
        (b"a\x1fb", True, True),
    ],
)
def test_valid_subject(proto, subject, plain, wild):
    """Tokens must be non-empty and blank-free; * and > tokens only with wildcards."""
    assert proto.valid_subject(subject, False) is plain
    assert proto.valid_subject(subject, True) is wild


# --------------------------------------------------------------------------
# parse_puback


@pytest.mark.parametrize(
    ("body", "result"),
    [
        (b'{"stream":"ORDERS","seq":12}', ("ORDERS", 12, False, None)),
        (b'{"stream":"S","seq":3,"duplicate":true}', ("S", 3, True, None)),
        (b'{"stream":"S","domain":"hub","seq":3}', ("S", 3, False, "hub")),
        (b' {\n "seq" : 0 ,\t"stream" : "S" , "duplicate" : false }\r\n', ("S", 0, False, None)),
        (b'{"stream":"S","seq":9223372036854775807}', ("S", 2**63 - 1, False, None)),
        (
            b'{"stream":"S","seq":5,"batch":"b1","count":3,"val":null,"x":-1.5e+3,"y":"z"}',
            ("S", 5, False, None),
        ),
        (b'{"stream":"","seq":1}', ("", 1, False, None)),
    ],
)
def test_puback_fast_path(proto, body, result):
    """Flat PubAck bodies are read without json.loads."""
    assert proto.parse_puback(body) == result


@pytest.mark.parametrize(
    "body",
    [
        b'{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}',
        b'{"stream":"S","seq":1,"error":"x"}',
        b'{"stream":"S\\u0041","seq":1}',
        b'{"stream":"S","seq":1,"nested":{"a":1}}',
        b'{"stream":"S","seq":1,"list":[1]}',
        b'{"stream":"S"}',
        b'{"seq":1}',
        b"{}",
        b"",
        b"[]",
        b'{"stream":"S","seq":1',
        b'{"stream":"S","seq":1,}',
        b'{"stream":"S","seq":1}x',
        b'{"stream":"S","seq":-1}',
        b'{"stream":"S","seq":-0}',
        b'{"stream":"S","seq":1.0}',
        b'{"stream":"S","seq":1e3}',
        b'{"stream":"S","seq":01}',
        b'{"stream":"S","seq":"1"}',
        b'{"stream":"S","seq":9223372036854775808}',
        b'{"stream":1,"seq":1}',
        b'{"stream":null,"seq":1}',
        b'{"stream":"S","seq":1,"duplicate":1}',
        b'{"stream":"S","seq":1,"duplicate":null}',
        b'{"stream":"S","seq":1,"domain":null}',
        b'{"stream":"S","stream":"T","seq":1}',
        b'{"stream":"S","seq":1,"seq":2}',
        b'{"stream":"S","seq":1,"x":NaN}',
        b'{"stream":"S","seq":1,"x":tru}',
        b'{"stream":"\xc3\xa9","seq":1}',
        b'{"stream":"a\tb","seq":1}',
        b"{'stream':'S','seq':1}",
        b'{"stream":"S","seq":1,"x":.5}',
        b'{"stream":"S","seq":1,"x":1.}',
    ],
)
def test_puback_declines_everything_else(proto, body):
    """Errors, nesting, escapes, bad or duplicate fields and malformed JSON return None."""
    assert proto.parse_puback(body) is None


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_puback_buffer_types(proto, kind):
    """Any bytes-like body works."""
    assert proto.parse_puback(kind(b'{"stream":"S","seq":2}')) == ("S", 2, False, None)


# --------------------------------------------------------------------------
# puback_batch

PREFIX = b"_INBOX.p."


def ack(token: bytes, body: bytes, sid: int = 7, headers: bytes | None = None) -> bytes:
    """An async-publish ack frame to ``_INBOX.p.<token>``."""
    if headers is None:
        return b"MSG %s%s %d %d\r\n%s\r\n" % (PREFIX, token, sid, len(body), body)
    size = len(headers) + len(body)
    return b"HMSG %s%s %d %d %d\r\n%s%s\r\n" % (
        PREFIX, token, sid, len(headers), size, headers, body,
    )  # fmt: skip


def test_puback_batch_reads_every_kind_of_ack(proto):
    """Plain acks, a duplicate, an error, a status, counters and other sids, in order."""
    data = b"".join(
        [
            ack(b"1", b'{"stream":"S","seq":1}'),
            ack(b"2", b'{"stream":"S","seq":2}'),
            ack(b"3", b'{"stream":"S","seq":2,"duplicate":true}'),
            ack(b"4", b'{"error":{"code":400,"err_code":10071,"description":"wrong last"}}'),
            b"PING\r\n",
            ack(b"5", b"", headers=b"NATS/1.0 503\r\n\r\n"),
            ack(b"6", b'{"stream":"S","seq":3}', sid=9),
            ack(b"7", b'{"stream":"T","domain":"hub","seq":3}'),
            ack(b"8", b'{"stream":"S","seq":4}'),
            ack(b"9", b'{"stream":"S","seq":5,"val":"7"}'),
            ack(b"1x", b'{"stream":"S","seq":6}'),
            b"MSG _INBOX.p.11 7 3\r\nab",
        ]
    )
    batch = proto.puback_batch(data, 0, len(data), 7, len(PREFIX))
    same, new, other = proto.ACK_SAME, proto.ACK_NEW, proto.ACK_OTHER
    assert batch.tokens == [1, 2, 3, 4, 5, 7, 8, 9, -1]
    assert list(batch.kinds) == [new, same, other, other, other, new, new, other, same]
    assert batch.seqs == [1, 2, 0, 0, 0, 3, 4, 0, 6]
    assert batch.streams == [("S", None), ("T", "hub"), ("S", None)]
    assert batch.others == [
        (b'{"stream":"S","seq":2,"duplicate":true}', None),
        (b'{"error":{"code":400,"err_code":10071,"description":"wrong last"}}', None),
        (b"", b"NATS/1.0 503\r\n\r\n"),
        (b'{"stream":"S","seq":5,"val":"7"}', None),
    ]


def test_puback_batch_of_thousands_compares_streams_across_the_whole_buffer(proto):
    """3,000 acks of one stream: one NEW, then SAME throughout (also past C's chunks)."""
    data = b"".join(ack(b"%d" % i, b'{"stream":"S","seq":%d}' % i) for i in range(3000))
    batch = proto.puback_batch(memoryview(data), 0, len(data), 7, len(PREFIX))
    assert batch.tokens == batch.seqs == list(range(3000))
    assert batch.kinds == bytes([proto.ACK_NEW]) + bytes(2999)
    assert batch.streams == [("S", None)] and batch.others == []


def test_puback_batch_raises_on_bytes_that_are_not_protocol(proto):
    """The parser's ProtocolError, as parse() raises it."""
    with pytest.raises(ProtocolError):
        proto.puback_batch(b"BOGUS\r\n", 0, 7, 7, len(PREFIX))


# --------------------------------------------------------------------------
# parse_direct_meta

STAMP = b"2026-11-22T20:25:26.757624894Z"
STAMP_NS = 1795379126757624894


def direct_block(*lines: bytes) -> bytes:
    """A header block without a status line holding ``lines``."""
    return b"NATS/1.0\r\n" + b"".join(line + b"\r\n" for line in lines) + b"\r\n"


DIRECT = direct_block(
    b"Nats-Stream: KV_B", b"Nats-Subject: $KV.B.k1", b"Nats-Sequence: 7",
    b"Nats-Time-Stamp: " + STAMP,
)  # fmt: skip


def meta_block(subject: bytes, seq: bytes, stamp: bytes, *more: bytes) -> bytes:
    """A direct-get-like block: the three required headers, then ``more`` lines."""
    return direct_block(
        b"Nats-Subject: " + subject, b"Nats-Sequence: " + seq, b"Nats-Time-Stamp: " + stamp, *more
    )


@pytest.mark.parametrize(
    ("block", "result"),
    [
        (DIRECT, ("$KV.B.k1", 7, STAMP_NS, None, None)),
        (
            direct_block(
                b"KV-Operation: DEL", b"Nats-Time-Stamp:" + STAMP,
                b"Nats-Sequence:\t9223372036854775807 ", b"Nats-Subject:  a.b",
                b"Nats-Marker-Reason: MaxAge", b"X: y",
            ),
            ("a.b", 2**63 - 1, STAMP_NS, "DEL", "MaxAge"),
        ),
        # the first value of a repeated key wins, as Headers[key] says
        (meta_block(b"s1", b"1", STAMP, b"Nats-Subject: s2"), ("s1", 1, STAMP_NS, None, None)),
        (meta_block(b"s", b"01", b"1970-01-01T00:00:00Z", b"KV-Operation:"), ("s", 1, 0, "", None)),
        (meta_block(b"s", b"0", b"2024-02-29T23:59:59.5Z"), ("s", 0, 1709251199.5e9, None, None)),
        (
            meta_block(b"s", b"0", b"2261-12-31T23:59:59.999999999Z"),
            ("s", 0, 9214646399999999999, None, None),
        ),
        (meta_block(b"\xc3\xa9\xff", b"3", STAMP), ("\xe9\udcff", 3, STAMP_NS, None, None)),
    ],
)  # fmt: skip
def test_direct_meta_fast_path(proto, block, result):
    """Subject, sequence, time stamp (ns) and the operation headers come from one pass."""
    assert proto.parse_direct_meta(block) == result


@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"NATS/1.0\r\n\r\n",
        b"NATS/1.0 404 Message Not Found\r\n\r\n",
        b"NATS/1.0 \r\n" + DIRECT[10:],  # a blank after the version: the generic parser's job
        DIRECT[:-2],  # no blank line at the end
        DIRECT.replace(b"Nats-Stream: KV_B\r\n", b"Nats-Stream KV_B\r\n"),  # a line without ':'
        DIRECT.replace(b"Nats-Stream: KV_B\r\n", b": KV_B\r\n"),  # an empty key
        DIRECT.replace(b"Nats-Stream: KV_B\r\n", b"Nats-Stream: K\rV\r\n"),  # a stray CR
        DIRECT.replace(b"Nats-Stream: KV_B\r\n", b"Nats-Stream: K\nV\r\n"),  # a stray LF
        DIRECT.replace(b"Nats-Stream: KV_B\r\n", b"\r\n"),  # an empty line
        DIRECT.replace(b"Nats-Subject", b"nats-subject"),  # keys are case-sensitive
        DIRECT.replace(b"Nats-Sequence: 7", b"X: 7"),
        DIRECT.replace(b"Nats-Time-Stamp", b"X"),
        DIRECT.replace(b": 7", b": "),
        DIRECT.replace(b": 7", b": -7"),
        DIRECT.replace(b": 7", b": 7a"),
        DIRECT.replace(b": 7", b": 9223372036854775808"),
        DIRECT.replace(STAMP, b"2026-11-22T20:25:26.757624894+01:00"),
        DIRECT.replace(STAMP, b"2026-11-22t20:25:26Z"),
        DIRECT.replace(STAMP, b"2026-11-22T20:25:26z"),
        DIRECT.replace(STAMP, b"2026-11-22T20:25:26.Z"),
        DIRECT.replace(STAMP, b"2026-11-22T20:25:26.1234567890Z"),
        DIRECT.replace(STAMP, b"2026-11-22T20:25:26,5Z"),
        DIRECT.replace(STAMP, b"2026-11-22 20:25:26Z"),
        DIRECT.replace(STAMP, b"2026-13-22T20:25:26Z"),
        DIRECT.replace(STAMP, b"2026-00-22T20:25:26Z"),
        DIRECT.replace(STAMP, b"2026-02-29T20:25:26Z"),
        DIRECT.replace(STAMP, b"2100-02-29T20:25:26Z"),
        DIRECT.replace(STAMP, b"2026-04-31T20:25:26Z"),
        DIRECT.replace(STAMP, b"2026-11-00T20:25:26Z"),
        DIRECT.replace(STAMP, b"2026-11-22T24:00:00Z"),
        DIRECT.replace(STAMP, b"2026-11-22T20:60:26Z"),
        DIRECT.replace(STAMP, b"2016-12-31T23:59:60Z"),
        DIRECT.replace(STAMP, b"1969-12-31T23:59:59Z"),
        DIRECT.replace(STAMP, b"2262-01-01T00:00:00Z"),
        DIRECT.replace(STAMP, b"+026-11-22T20:25:26Z"),
        DIRECT.replace(STAMP, b"2026-11-22T20:25:2"),
    ],
)
def test_direct_meta_declines(proto, block):
    """Statuses, invalid blocks, missing headers and unusual values return None."""
    assert proto.parse_direct_meta(block) is None


def test_direct_meta_time_stamps_agree_with_datetime(proto):
    """The nanoseconds of every day of a leap and a common year match datetime's."""
    import datetime

    day = datetime.datetime(2023, 1, 1, 13, 14, 15, tzinfo=datetime.UTC)
    while day.year < 2025:
        stamp = day.strftime("%Y-%m-%dT%H:%M:%S").encode() + b".000123Z"
        block = meta_block(b"s", b"1", stamp)
        expected = int(day.timestamp()) * 1_000_000_000 + 123_000
        assert proto.parse_direct_meta(block) == ("s", 1, expected, None, None), stamp
        day += datetime.timedelta(days=1)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_direct_meta_buffer_types(proto, kind):
    """Any bytes-like block works."""
    assert proto.parse_direct_meta(kind(DIRECT)) == ("$KV.B.k1", 7, STAMP_NS, None, None)


# --------------------------------------------------------------------------
# implementation selection


def test_select_python():
    """JETSTREAM_SYNC_IMPL=python picks the pure-Python twin."""
    from jetstream_sync import _protocol

    assert _protocol.select("python").IMPL == "python"


def test_select_c_when_built():
    """JETSTREAM_SYNC_IMPL=c picks the C core, and so does leaving it unset."""
    from jetstream_sync import _protocol

    assert _protocol.select("c").IMPL == "c"
    assert _protocol.select(None).IMPL == "c"
    assert _protocol.select("").IMPL == "c"


def test_select_without_the_extension(monkeypatch):
    """Without _ffi: unset falls back to Python, c fails loudly."""
    from jetstream_sync import _protocol

    monkeypatch.setitem(sys.modules, "jetstream_sync._ffi", None)
    assert _protocol.select(None).IMPL == "python"
    with pytest.raises(ImportError, match="JETSTREAM_SYNC_IMPL=c but the C extension"):
        _protocol.select("c")


@pytest.mark.parametrize("value", ["C", "cffi", "py", "auto"])
def test_select_rejects_other_values(value):
    """Any other value is an ImportError naming the allowed ones."""
    from jetstream_sync import _protocol

    with pytest.raises(ImportError, match="c, python"):
        _protocol.select(value)


@pytest.mark.parametrize(("value", "impl"), [("c", "c"), ("python", "python"), (None, "c")])
def test_environment_variable_picks_at_import(value, impl):
    """The package reads JETSTREAM_SYNC_IMPL once, at import, and says what it chose."""
    env = {k: v for k, v in os.environ.items() if k != "JETSTREAM_SYNC_IMPL"}
    if value is not None:
        env["JETSTREAM_SYNC_IMPL"] = value
    code = "import jetstream_sync._protocol as p; print(p.IMPL, p.__impl__, p.parse.__module__)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    module = {"c": "_c", "python": "_py.parser"}[impl]  # the twin's parse lives in its parser
    assert out == [impl, impl, f"jetstream_sync._protocol.{module}"]


def test_bad_environment_variable_fails_the_import():
    """An unknown JETSTREAM_SYNC_IMPL makes importing the package fail loudly."""
    env = dict(os.environ, JETSTREAM_SYNC_IMPL="fast")
    result = subprocess.run(
        [sys.executable, "-c", "import jetstream_sync._protocol"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "JETSTREAM_SYNC_IMPL='fast' is not one of c, python" in result.stderr
