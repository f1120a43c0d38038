"""``round_trip`` (csrc/jss_round_trip.c and its Python twin) over a socketpair.

The test plays the server on the other end of the pair: it sends what the
reply read should find before (or while) the call waits. Every case runs
against both implementations; ``TestRoundTrip`` calls the C function directly
on exactly-sized buffers, so the ASan build (``csrc/asan.sh``) catches any
access past them.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import socket
from collections.abc import Iterator
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream_sync._ffi import ffi, lib
from jetstream_sync._protocol import _c, _py
from tests.fixtures.signals import alarm_after, interrupted_after

REPLY = b"_INBOX.abc.7"
REQUEST = b"PUB req 2\r\nhi\r\n"
_py_round_trip = importlib.import_module("jetstream_sync._protocol._py.round_trip")


def msg(subject: bytes, payload: bytes, sid: int = 1, reply: bytes = b"") -> bytes:
    """A MSG frame."""
    middle = b" " + reply if reply else b""
    return b"MSG %s %d%s %d\r\n%s\r\n" % (subject, sid, middle, len(payload), payload)


def hmsg(subject: bytes, block: bytes, payload: bytes, sid: int = 1) -> bytes:
    """An HMSG frame."""
    total = len(block) + len(payload)
    return b"HMSG %s %d %d %d\r\n%s%s\r\n" % (subject, sid, len(block), total, block, payload)


@pytest.fixture(params=["c", "python"])
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """Each implementation of round_trip."""
    return _c if request.param == "c" else _py


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(the client's end, the server's end)."""
    client, server = socket.socketpair()
    yield client, server
    client.close()
    server.close()


def call(impl: ModuleType, client: socket.socket, buf: bytearray, have: int = 0, **kw):
    """round_trip with the defaults of these tests."""
    return impl.round_trip(
        client,
        buf,
        have,
        kw.get("reply", REPLY),
        kw.get("timeout_ms", 2000),
        kw.get("decode", _py.DECODE_NONE),
    )


def test_constants_match_the_python_twin():
    """Statuses and out slots in jss_proto.h equal the twin's."""
    names = [n[len("JSS_RT_") :] for n in dir(lib) if n.startswith("JSS_RT_")]
    assert names
    for name in names:
        assert getattr(lib, f"JSS_RT_{name}") == getattr(_py, f"RT_{name}"), name
    assert lib.JSS_RT_PUBACK - lib.JSS_RT_OP == lib.JSS_OP_FIELDS
    assert lib.JSS_RT_FIELDS - lib.JSS_RT_PUBACK == lib.JSS_PUBACK_FIELDS
    assert (lib.JSS_DECODE_NONE, lib.JSS_DECODE_PUBACK) == (_py.DECODE_NONE, _py.DECODE_PUBACK)
    assert (lib.JSS_SEND_SENT, lib.JSS_SEND_ERRNO, lib.JSS_SEND_FIELDS) == (
        _py.SEND_SENT,
        _py.SEND_ERRNO,
        _py.SEND_FIELDS,
    )


def test_the_reply_alone_is_found_with_its_fields(impl, pair):
    """A reply waiting whole: received, parsed, its fields found."""
    client, server = pair
    frame = msg(REPLY, b"pong", sid=9, reply=b"back.1")
    server.sendall(frame)
    buf = bytearray(1024)
    status, out, puback = call(impl, client, buf)
    assert status == _py.RT_REPLY
    assert out[_py.RT_RECEIVED] == len(frame)
    assert out[_py.RT_CONSUMED] == len(frame)
    assert out[_py.RT_NEED] == 0
    op = out[_py.RT_OP : _py.RT_OP + _py.OP_FIELDS]
    assert op == _py.parse(frame, 0, len(frame))[0]
    kind, so, sl, sid, ro, rl, _, _, po, pl = op
    assert (kind, sid) == (_py.OP_MSG, 9)
    assert buf[so : so + sl] == REPLY and buf[ro : ro + rl] == b"back.1"
    assert buf[po : po + pl] == b"pong"
    assert puback is None


def test_bytes_held_before_the_call_are_parsed_with_what_arrives(impl, pair):
    """A reply split across reads: the first part is OTHER (routed by the caller, which
    keeps it), the second call completes it from ``have`` on."""
    client, server = pair
    frame = msg(REPLY, b"x" * 300)
    server.sendall(frame[:100])
    buf = bytearray(1024)
    status, out, _ = call(impl, client, buf)
    assert (status, out[_py.RT_RECEIVED]) == (_py.RT_OTHER, 100)
    server.sendall(frame[100:])
    status, out, _ = call(impl, client, buf, have=100)
    assert status == _py.RT_REPLY
    assert out[_py.RT_RECEIVED] == len(frame) - 100
    assert out[_py.RT_CONSUMED] == len(frame)


def test_a_partial_frame_after_the_reply_is_left_with_its_need(impl, pair):
    """The reply then the start of a large message: the reply is taken, the rest stays."""
    client, server = pair
    frame = msg(REPLY, b"ok")
    big = msg(b"other", b"y" * 5000, sid=2)
    server.sendall(frame + big[:50])
    buf = bytearray(1024)
    status, out, _ = call(impl, client, buf)
    assert status == _py.RT_REPLY
    assert out[_py.RT_CONSUMED] == len(frame)
    assert out[_py.RT_NEED] == len(big)


@pytest.mark.parametrize(
    "received",
    [
        msg(b"other", b"a", sid=2) + msg(REPLY, b"ok"),  # another sid's MSG before it
        msg(REPLY, b"ok") + msg(b"other", b"a", sid=2),  # and after it
        msg(REPLY, b"ok") + b"PING\r\n",  # a PING in the same read
        b"PING\r\n",
        msg(b"_INBOX.abc.8", b"ok"),  # another request's reply
        msg(REPLY + b"0", b"ok"),  # a longer subject with our reply as prefix
        b"-ERR 'Unknown Protocol Operation'\r\n",
        b"BOGUS\r\n",  # not protocol: the caller's parse reports it
        msg(REPLY, b"ok")[:10],  # a partial frame
    ],
)
def test_anything_but_the_reply_alone_is_handed_back(impl, pair, received):
    """OTHER: the bytes are in the buffer for the caller to route, nothing consumed."""
    client, server = pair
    server.sendall(received)
    buf = bytearray(1024)
    status, out, puback = call(impl, client, buf, decode=_py.DECODE_PUBACK)
    assert status == _py.RT_OTHER
    assert out[_py.RT_RECEIVED] == len(received)
    assert buf[: len(received)] == received
    assert out[_py.RT_CONSUMED] == 0 and puback is None


def test_nothing_arrives_before_the_timeout(impl, pair):
    """IDLE after the poll's timeout."""
    client, _ = pair
    status, out, _ = call(impl, client, bytearray(64), timeout_ms=30)
    assert status == _py.RT_IDLE
    assert out[_py.RT_RECEIVED] == 0


def test_the_peer_closing_is_eof(impl, pair):
    """EOF when the server closed the connection."""
    client, server = pair
    server.close()
    status, _, _ = call(impl, client, bytearray(64))
    assert status == _py.RT_EOF


def test_a_plain_puback_is_read(impl, pair):
    """With DECODE_PUBACK, the PubAck fields of a MSG reply (as parse_puback gives them)."""
    client, server = pair
    body = b'{"stream":"ORDERS","domain":"hub","seq":42,"duplicate":true}'
    server.sendall(msg(REPLY, body))
    status, out, puback = call(impl, client, bytearray(256), decode=_py.DECODE_PUBACK)
    assert status == _py.RT_REPLY
    assert out[_py.RT_PUBACK_OK] == 1
    assert puback == ("ORDERS", 42, True, "hub") == _py.parse_puback(body)


def test_without_a_decoder_a_puback_body_is_not_read(impl, pair):
    """DECODE_NONE: the reply is found and nothing reads its body."""
    client, server = pair
    server.sendall(msg(REPLY, b'{"stream":"ORDERS","seq":42}'))
    status, out, decoded = call(impl, client, bytearray(256))
    assert status == _py.RT_REPLY
    assert out[_py.RT_PUBACK_OK] == 0 and decoded is None


@pytest.mark.parametrize(
    "body", [b'{"error":{"code":503}}', b"not json", b'{"stream":"S","seq":-1}', b""]
)
def test_a_body_that_is_not_a_plain_puback_is_left_to_the_caller(impl, pair, body):
    """The reply is found; its body is not a PubAck the fast reader takes."""
    client, server = pair
    server.sendall(msg(REPLY, body))
    status, out, puback = call(impl, client, bytearray(256), decode=_py.DECODE_PUBACK)
    assert status == _py.RT_REPLY
    assert out[_py.RT_PUBACK_OK] == 0 and puback is None


def test_a_status_reply_with_headers_is_found_without_puback(impl, pair):
    """An HMSG reply (no responders): found, its header block located, no PubAck read."""
    client, server = pair
    block = b"NATS/1.0 503\r\n\r\n"
    frame = hmsg(REPLY, block, b"")
    server.sendall(frame)
    buf = bytearray(256)
    status, out, puback = call(impl, client, buf, decode=_py.DECODE_PUBACK)
    assert status == _py.RT_REPLY and puback is None
    _, _, _, _, _, _, ho, hl, _, pl = out[_py.RT_OP : _py.RT_OP + _py.OP_FIELDS]
    assert buf[ho : ho + hl] == block and pl == 0


def test_a_signal_ends_the_c_wait(pair):
    """EINTR: the C call returns INTERRUPTED, so the caller runs the signal handlers."""
    client, _ = pair
    seen: list[int] = []
    with alarm_after(0.05, lambda signum, frame: seen.append(signum)):
        status, _, _ = call(_c, client, bytearray(64), timeout_ms=5000)
    assert status == _py.RT_INTERRUPTED
    assert seen == [signal.SIGALRM]


def test_the_twin_retries_after_a_signal_as_python_does(pair):
    """The twin's poll is retried after the handler ran (PEP 475): IDLE at the timeout."""
    client, _ = pair
    seen: list[int] = []
    with alarm_after(0.05, lambda signum, frame: seen.append(signum)):
        status, _, _ = call(_py, client, bytearray(64), timeout_ms=300)
    assert status == _py.RT_IDLE and seen == [signal.SIGALRM]


def exact(data: bytes, size: int | None = None):
    """A cdata char array of exactly ``size`` bytes (default len(data)) starting with data."""
    array = ffi.new(f"char[{max(size or len(data), 1)}]")
    ffi.memmove(array, data, len(data))
    return array


class TestRoundTrip:
    """jss_round_trip.c, called directly on exactly-sized buffers."""

    C_FILE = "jss_round_trip.c"

    def test_jss_round_trip_reads_a_reply_that_fills_the_buffer_exactly(self, pair):
        """The buffer ends where the reply ends; every out slot is written."""
        client, server = pair
        held = msg(REPLY, b'{"stream":"S","seq":1}')[:7]
        rest = msg(REPLY, b'{"stream":"S","seq":1}')[7:]
        server.sendall(rest)
        size = len(held) + len(rest)
        buf = exact(held, size)
        out = ffi.new(f"int64_t[{lib.JSS_RT_FIELDS}]", [-7] * lib.JSS_RT_FIELDS)
        status = lib.jss_round_trip(
            client.fileno(), buf, len(held), size,
            exact(REPLY), len(REPLY), 2000, lib.JSS_DECODE_PUBACK, out,
        )  # fmt: skip
        assert status == lib.JSS_RT_REPLY
        got = list(ffi.unpack(out, lib.JSS_RT_FIELDS))
        assert got[lib.JSS_RT_CONSUMED] == size and got[lib.JSS_RT_PUBACK_OK] == 1
        assert got[lib.JSS_RT_PUBACK + 2] == 1  # seq
        assert -7 not in got

    def test_jss_round_trip_with_a_full_buffer_receives_nothing(self, pair):
        """have == cap: IDLE, nothing read past the buffer."""
        client, server = pair
        server.sendall(msg(REPLY, b"ok"))
        out = ffi.new(f"int64_t[{lib.JSS_RT_FIELDS}]")
        status = lib.jss_round_trip(
            client.fileno(), exact(b"MSG"), 3, 3,
            exact(REPLY), len(REPLY), 100, lib.JSS_DECODE_NONE, out,
        )  # fmt: skip
        assert status == lib.JSS_RT_IDLE

    def test_jss_round_trip_on_a_closed_descriptor_is_an_error(self):
        """A bad fd: RECV_ERROR with EBADF (nothing else touched)."""
        fd = os.open(os.devnull, os.O_RDONLY)
        os.close(fd)
        out = ffi.new(f"int64_t[{lib.JSS_RT_FIELDS}]")
        status = lib.jss_round_trip(
            fd, exact(b"", 16), 0, 16, exact(REPLY), len(REPLY), 100, lib.JSS_DECODE_NONE, out
        )
        assert status == lib.JSS_RT_RECV_ERROR
        assert out[lib.JSS_RT_ERRNO] == errno.EBADF

    def test_jss_send_nowait_sends_everything_the_socket_takes(self, pair):
        """All of an exactly-sized buffer goes out; the report says so, no errno."""
        client, server = pair
        out = ffi.new(f"int64_t[{lib.JSS_SEND_FIELDS}]", [-7, -7])
        assert lib.jss_send_nowait(client.fileno(), exact(REQUEST), len(REQUEST), out) == len(
            REQUEST
        )
        assert list(out) == [len(REQUEST), 0]
        assert server.recv(64) == REQUEST

    def test_jss_send_nowait_stops_where_the_socket_is_full(self, pair):
        """A peer that reads nothing: part is sent, the rest is left, and that is no error."""
        client, _ = pair
        data = b"x" * (8 << 20)
        out = ffi.new(f"int64_t[{lib.JSS_SEND_FIELDS}]")
        sent = lib.jss_send_nowait(client.fileno(), exact(data), len(data), out)
        assert 0 < sent < len(data) and list(out) == [sent, 0]
        assert lib.jss_send_nowait(client.fileno(), exact(data), len(data), out) == 0
        assert list(out) == [0, 0]

    def test_jss_send_nowait_on_a_closed_descriptor_reports_its_errno(self):
        """A bad fd: nothing sent, EBADF in the report."""
        fd = os.open(os.devnull, os.O_RDONLY)
        os.close(fd)
        out = ffi.new(f"int64_t[{lib.JSS_SEND_FIELDS}]")
        assert lib.jss_send_nowait(fd, exact(REQUEST), len(REQUEST), out) == 0
        assert list(out) == [0, errno.EBADF]


def test_send_nowait_reports_what_the_socket_took(impl, pair):
    """Both twins: everything, then part of what a full socket takes, then a closed peer."""
    client, server = pair
    report = impl.send_report()
    impl.send_nowait(client, bytearray(REQUEST), report)
    assert list(report) == [len(REQUEST), 0] and server.recv(64) == REQUEST
    big = bytearray(b"y" * (8 << 20))
    impl.send_nowait(client, big, report)
    assert 0 < report[0] < len(big) and report[1] == 0
    server.close()
    impl.send_nowait(client, bytearray(REQUEST), report)
    assert report[1] in (errno.EPIPE, errno.ECONNRESET)


PIECES = [
    msg(REPLY, b'{"stream":"S","seq":3}'),
    msg(REPLY, b'{"stream":"S","seq":3,"duplicate":true,"domain":"d"}', reply=b"r.1"),
    msg(REPLY, b'{"error":{"code":400}}'),
    hmsg(REPLY, b"NATS/1.0 503\r\n\r\n", b""),
    hmsg(REPLY, b"NATS/1.0\r\nK: v\r\n\r\n", b'{"stream":"S","seq":1}'),
    msg(b"_INBOX.abc.70", b"x"),
    msg(b"other", b"payload", sid=5),
    b"PING\r\n",
    b"PONG\r\n",
    b"+OK\r\n",
    b"-ERR 'x'\r\n",
    b"MSG bad\r\n",
]


@settings(max_examples=300, deadline=None, derandomize=False)
@given(
    pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=4),
    held=st.integers(min_value=0, max_value=200),
    cut=st.integers(min_value=0, max_value=200),
    decode=st.sampled_from([_py.DECODE_NONE, _py.DECODE_PUBACK]),
)
def test_fuzz_the_twins_agree(pieces, held, cut, decode):
    """Random mixes of frames, part held in the buffer before the call and part never
    sent: C and Python give the same status, out and PubAck fields."""
    data = b"".join(pieces)
    held = min(held, len(data))
    arrived = data[held : max(held, len(data) - cut)]
    results = []
    for impl in (_c, _py):
        client, server = socket.socketpair()
        try:
            if arrived:
                server.sendall(arrived)
            buf = bytearray(data[:held]) + bytearray(1024)
            status, out, fields = call(impl, client, buf, have=held, timeout_ms=0, decode=decode)
            results.append((status, list(out), fields, bytes(buf[: held + out[_py.RT_RECEIVED]])))
        finally:
            client.close()
            server.close()
    assert results[0] == results[1]


def test_last_round_trip_tells_an_interrupted_caller_what_the_call_received(
    impl, pair, monkeypatch
):
    """Interrupted after the call received (a signal handler's exception as the C call
    returns; in the twin, on entry to its parse): the bytes received are known. Interrupted
    inside the wait, the next call received nothing; once a call returns, nothing is pending."""
    client, server = pair
    server.sendall(b"PING\r\n")
    if impl is _c:  # the C call wrote this thread's slots; its wrapper did not return
        with ffi.from_buffer(bytearray(64)) as cbuf:
            lib.jss_round_trip(
                client.fileno(), cbuf, 0, 64, REPLY, len(REPLY), 2000, 0, _c._arrays().round_trip
            )
    else:

        def interrupted(*args: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(_py_round_trip, "_parse_reply", interrupted)
        with pytest.raises(KeyboardInterrupt):
            call(impl, client, bytearray(64))
        monkeypatch.undo()
    assert impl.last_round_trip() == len(b"PING\r\n")
    with interrupted_after(0.05) as interrupted, pytest.raises(interrupted):
        call(impl, client, bytearray(64), timeout_ms=5000)
    assert impl.last_round_trip() == 0
    server.sendall(msg(REPLY, b"ok"))
    assert call(impl, client, bytearray(64))[0] == _py.RT_REPLY
    assert impl.last_round_trip() == 0
