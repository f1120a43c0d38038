"""A hostile server: -ERR of every kind, malformed and endless frames, lies, silence.

The fake server (tests/fixtures/fake_server.py) says what a real one never
would. Whatever it sends, the client reports a typed error to ``error_cb``,
drops the connection when it cannot go on with it, reconnects, and works
again; its memory stays bounded. One test uses a real server for the one
``-ERR`` that leaves the connection up in everyday use: a permission violation.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import pytest

import jetstream_sync as js
from jetstream_sync import _protocol
from jetstream_sync._connection.writer import Writer
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.faults import Events, assert_works
from tests.fixtures.polling import wait_for
from tests.fixtures.reader import reader_failure
from tests.fixtures.server import NatsServer
from tests.fixtures.socket_transport import SocketTransport

# Stale after two unanswered PINGs 0.1 s apart; reconnect 20 ms after a loss.
QUICK = {
    "ping_interval": 0.1,
    "max_outstanding_pings": 2,
    "reconnect_time_wait": 0.02,
    "reconnect_jitter": 0.0,
    "max_reconnect_attempts": -1,
    "connect_timeout": 2.0,
}


@pytest.fixture
def client(fake, events):
    """A client of the fake server."""
    with js.connect(fake.url, **QUICK, **events.callbacks()) as nc:
        yield nc


def wait_error(events: Events, kind: type[BaseException], *words: str) -> BaseException:
    """Wait until error_cb got an error of exactly ``kind`` whose text has ``words``."""
    found: list[BaseException] = []

    def seen(e: Events) -> bool:
        found[:] = [x for x in e.errors if type(x) is kind and all(w in str(x) for w in words)]
        return bool(found)

    events.wait(seen, timeout=5)
    return found[0]


def reconnected(fake: FakeServer, client: js.Client, index: int) -> None:
    """The client made connection ``index`` to the fake and works on it."""
    fake.connection(index)
    wait_for(lambda: client.is_connected and client.stats.reconnects >= index)
    assert_works(client)
    assert client.stats.reconnects == index


# --------------------------------------------------------------------------
# -ERR: each text, its typed error; then the server goes silent


ERRORS = [
    ("Authorization Violation", js.AuthorizationError, False),
    ("Authorization Timeout", js.AuthorizationError, False),
    ("User Authentication Expired", js.AuthorizationError, False),
    ("User Authentication Revoked", js.AuthorizationError, False),
    ("Account Authentication Expired", js.AuthorizationError, False),
    ("Stale Connection", js.StaleConnectionError, False),
    ("Maximum Connections Exceeded", js.MaxConnectionsExceededError, False),
    ('Permissions Violation for Publish to "orders.new"', js.PermissionViolationError, True),
    ('Permissions Violation for Subscription to "a.>"', js.PermissionViolationError, True),
    ("Maximum Subscriptions Exceeded", js.MaxSubscriptionsExceededError, True),
    ("Invalid Publish Subject", js.BadSubjectError, True),
    ("Slow Consumer", js.ServerSlowConsumerError, False),
    ("Unknown Protocol Operation", js.ProtocolError, False),
    ("Maximum Control Line Exceeded", js.ProtocolError, False),
    ("Maximum Payload Violation", js.MaxPayloadError, False),
    ("Secure Connection - TLS Required", js.ServerError, False),
    ("Something No Server Says Yet", js.ServerError, False),
]


@pytest.mark.parametrize(("text", "kind", "keeps"), ERRORS, ids=[e[0][:32] for e in ERRORS])
def test_each_err_is_typed_then_silence_is_stale_and_the_client_reconnects(
    fake, client, events, text, kind, keeps
):
    """An -ERR reaches error_cb as its typed error; a server that then goes silent is
    declared stale and the client reconnects and works."""
    first = fake.connection(0)
    first.err(text)
    error = wait_error(events, kind)
    assert text in str(error)
    if keeps:  # a permission violation and the like keep the connection up
        assert_works(client)
        assert fake.connection_count == 1 and events.disconnects == 0
    first.answer_pings = False
    wait_error(events, js.StaleConnectionError, "PINGs went unanswered")
    reconnected(fake, client, 1)


def test_a_permission_violation_names_the_operation_subject_and_queue(fake, client, events):
    """The PermissionViolationError says what was refused."""
    fake.connection(0).err('Permissions Violation for Subscription to "jobs.>" using queue "q1"')
    error = wait_error(events, js.PermissionViolationError)
    assert (error.operation, error.subject, error.queue) == ("subscription", "jobs.>", "q1")
    assert isinstance(error, js.AuthorizationError)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Authorization Violation", js.AuthorizationError),
        ("Maximum Connections Exceeded", js.MaxConnectionsExceededError),
    ],
)
def test_err_during_the_handshake(fake, text, kind):
    """An -ERR instead of the handshake's PONG of the pool's one server: credentials
    refused raise AuthorizationError; anything else makes it unusable (NoServersError)."""
    for _ in range(3):
        fake.infos.append(fake.default_info() + b"-ERR '%s'\r\n" % text.encode())
    if kind is js.AuthorizationError:
        with pytest.raises(js.AuthorizationError, match=text):
            js.connect(fake.url, **QUICK)
    else:
        with pytest.raises(js.NoServersError) as caught:
            js.connect(fake.url, **QUICK)
        assert isinstance(caught.value.__cause__, kind)


def test_a_real_permission_violation_keeps_the_connection(tmp_path: Path):
    """A real server refusing a publish and a subscription: PermissionViolationError for
    each, and the connection stays up."""
    config = """
authorization {
  users = [
    {user: "limited", password: "pw", permissions: {
      publish: {deny: ["secret.>"]}, subscribe: {deny: ["secret.>"]}}}
  ]
}
"""
    events = Events()
    with NatsServer(directory=tmp_path / "srv", jetstream=False, extra_config=config) as server:
        url = f"nats://limited:pw@127.0.0.1:{server.port}"
        with js.connect(url, **QUICK, **events.callbacks()) as nc:
            nc.publish("secret.plans", b"x")
            published = wait_error(events, js.PermissionViolationError, "Publish")
            nc.subscribe("secret.>")
            subscribed = wait_error(events, js.PermissionViolationError, "Subscription")
            assert (published.operation, published.subject) == ("publish", "secret.plans")
            assert (subscribed.operation, subscribed.subject) == ("subscription", "secret.>")
            assert_works(nc, "open.check")
            assert nc.stats.reconnects == 0 and events.disconnects == 0


# --------------------------------------------------------------------------
# Frames that are not protocol, and frames that lie


@pytest.mark.parametrize(
    "hostile",
    [
        b"PING\n",  # bare LF
        b"MSG a\r1 1\r\nx\r\n",  # CR inside the control line
        b"PONG extra\r\n",
        b"+OK junk\r\n",
        b"INFO\r\n",
        b"MSG a 1 -5\r\n",
        b"MSG a 99999999999999999999 1\r\nx\r\n",
        b"MSG a 1 %d\r\n" % (_protocol.MAX_PAYLOAD + 1),  # more than any payload may be
        b"HMSG a 1 20 10\r\nNATS/1.0\r\n\r\n\r\n",  # headers larger than the whole
        b"\x00\xff\xfe garbage\r\n",
    ],
    ids=[
        "bare-lf", "stray-cr", "pong-args", "ok-args", "info-empty", "negative-size",
        "huge-sid", "oversized-payload", "hmsg-sizes", "binary",
    ],
)  # fmt: skip
def test_malformed_frame_is_a_protocol_error_then_a_reconnect(fake, client, events, hostile):
    """Each malformed frame reaches error_cb as a ProtocolError; the client reconnects."""
    fake.connection(0).send(hostile)
    wait_error(events, js.ProtocolError)
    reconnected(fake, client, 1)


def test_a_protocol_error_quotes_no_earlier_message(fake, client, events, caplog):
    """After a MSG carrying a secret, garbage in the reused read buffer: neither the error
    given to error_cb nor the log quotes any byte of the earlier frame."""
    caplog.set_level(logging.DEBUG, logger="jetstream_sync")
    secret = b"TOPSECRET-password=correct-horse-battery-staple"
    sub = client.subscribe("secret.subject")
    first = fake.connection(0)
    first.sid_of(b"secret.subject")
    first.msg(b"secret.subject", secret)
    assert sub.next_msg(timeout=5).data == secret  # parsed: its bytes stay in the buffer
    first.send(b"BAD\r\n")
    error = wait_error(events, js.ProtocolError, "unknown protocol operation")
    assert str(error).endswith(": b'BAD\\r\\n'"), str(error)
    logged = [r.getMessage() for r in caplog.records if "BAD" in r.getMessage()]
    assert logged
    for text in [str(error), *logged, *(r.getMessage() for r in caplog.records)]:
        assert "secret" not in text.lower(), text
    reconnected(fake, client, 1)


def test_whole_frames_before_garbage_in_the_same_read_are_delivered(fake, client, events):
    """Messages parsed before a bad frame of the same write reach their subscription,
    in order, before the ProtocolError ends the connection."""
    sub = client.subscribe("s.x")
    first = fake.connection(0)
    sid = first.sid_of(b"s.x")
    frames = b"".join(b"MSG s.x %d 5\r\nhell%d\r\n" % (sid, i) for i in range(3))
    first.send(frames + b"GARBAGE\r\n")  # one write: the client reads it at once
    assert [sub.next_msg(timeout=5).data for _ in range(3)] == [b"hell0", b"hell1", b"hell2"]
    wait_error(events, js.ProtocolError, "unknown protocol operation", "GARBAGE")
    reconnected(fake, client, 1)


def test_a_malformed_frame_quotes_its_control_line_not_its_payload(fake, client, events, caplog):
    """A MSG whose payload is not followed by CRLF: the error and the log quote its control
    line only, never the payload bytes that came with it."""
    caplog.set_level(logging.DEBUG, logger="jetstream_sync")
    client.subscribe("s.x")
    first = fake.connection(0)
    sid = first.sid_of(b"s.x")
    first.send(b"MSG s.x %d 5\r\nSECRET-PAYLOAD-BYTES\r\n" % sid)
    error = wait_error(events, js.ProtocolError, "payload not followed by CRLF")
    assert str(error).endswith(repr(b"MSG s.x %d 5\r\n" % sid)), str(error)
    for text in [str(error), *(r.getMessage() for r in caplog.records)]:
        assert "SECRET" not in text and "SECRE" not in text, text
    reconnected(fake, client, 1)


def test_msg_that_claims_more_bytes_than_come_then_silence(fake, client, events):
    """A MSG whose size promises bytes that never come: the client waits, notices the
    silence (stale), reconnects, and the subscription works again."""
    sub = client.subscribe("lies")
    first = fake.connection(0)
    sid = first.sid_of(b"lies")
    first.answer_pings = False
    first.send(b"MSG lies %d 1000\r\nonly a few bytes" % sid)
    wait_error(events, js.StaleConnectionError)
    second = fake.connection(1)
    second.sid_of(b"lies")
    second.msg(b"lies", b"true this time")
    assert sub.next_msg(timeout=5).data == b"true this time"
    assert client.stats.reconnects == 1


def test_info_that_is_not_json_at_connect(fake):
    """An INFO that is not JSON at connect: NoServersError caused by a ProtocolError."""
    fake.infos.append(b"INFO {this is not json\r\n")
    with pytest.raises(js.NoServersError) as caught:
        js.connect(fake.url, **QUICK)
    assert isinstance(caught.value.__cause__, js.ProtocolError)


# --------------------------------------------------------------------------
# Endless control lines: the parser's limit caps the memory


@pytest.mark.parametrize("head", [b"MSG a 1 ", b"INFO ", b"-ERR '", b"+OK "])
def test_endless_control_line_is_cut_at_the_parsers_limit(fake, client, events, head):
    """A control line that never ends is refused once it passes the parser's limit; the
    client drops the connection instead of buffering more."""
    sent = fake.connection(0).flood(head, b"a" * 65536, limit=256 << 20)
    assert sent < 256 << 20  # the client hung up long before
    wait_error(events, js.ProtocolError, "control line longer")
    reconnected(fake, client, 1)


def rss_bytes() -> int:
    """The resident set size of this process."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def big_buffers_held_by(error: BaseException) -> list[int]:
    """Sizes of the buffers over 64 KiB that frames in the tracebacks of ``error`` (and
    of its causes and contexts) still hold."""
    sizes = []
    chain = [error]
    while chain:
        exc = chain.pop()
        tb = exc.__traceback__
        while tb is not None:
            for value in tb.tb_frame.f_locals.values():
                if isinstance(value, (bytes, bytearray, memoryview)) and len(value) > 65536:
                    sizes.append(len(value))
            tb = tb.tb_next
        chain += [e for e in (exc.__cause__, exc.__context__) if e is not None]
    return sizes


def test_a_reported_protocol_error_does_not_hold_the_read_buffer(fake, client, events):
    """The ProtocolError given to error_cb does not keep the reader's buffer alive (an
    error_cb that stores errors would otherwise keep megabytes per reconnect)."""
    fake.connection(0).flood(b"MSG a 1 ", b"a" * 65536, limit=256 << 20)
    error = wait_error(events, js.ProtocolError, "control line longer")
    assert big_buffers_held_by(error) == []


def test_an_error_while_routing_keeps_its_traceback_but_not_the_data(fake):
    """A routing failure's cause keeps its traceback (to debug) with the frames' locals
    (which hold the data) cleared."""

    def route(ops, view, consumed):
        data = bytes(view[:consumed]) * 1000  # noqa: F841 - a big local the frame holds
        raise RuntimeError("routing failed")

    error = reader_failure(fake.port, route)
    assert isinstance(error.__cause__, RuntimeError)
    assert error.__cause__.__traceback__ is not None
    assert big_buffers_held_by(error) == []


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc")
def test_a_hundred_megabytes_of_endless_lines_leave_memory_bounded(fake, client, events):
    """100 MB of control lines without an end, over many connections: every one is
    cut at the limit, the client reconnects each time, and RSS grows by little even
    though error_cb keeps every error."""
    fake.connection(0).flood(b"MSG a 1 ", b"a" * 65536, limit=256 << 20)
    fake.connection(1)  # warm up: the first cycle's allocations are not growth
    baseline = rss_bytes()
    total = 0
    index = 1
    while total < 100_000_000:
        total += fake.connection(index).flood(b"INFO ", b"{" * 65536, limit=256 << 20)
        index += 1
    reconnected(fake, client, index)
    growth = rss_bytes() - baseline
    assert growth < 16 << 20, f"RSS grew by {growth / 2**20:.1f} MiB over {total} bytes"
    assert len(events.errors_of(js.ProtocolError)) >= index - 1


# --------------------------------------------------------------------------
# A server that sends PINGs and reads nothing


def test_pongs_to_a_server_that_reads_nothing_do_not_pile_up():
    """100,000 PINGs from a server that reads nothing leave one PONG waiting, not 600 KB;
    once the server reads again, PONGs flow again."""
    client_end, server_end = socket.socketpair()
    writer = Writer(lambda exc, transport: None, 1 << 20, "test-writer")
    writer.attach(SocketTransport(client_end))
    try:
        for _ in range(100_000):
            writer.write_control(b"PONG\r\n")
        assert len(writer._buf) <= len(b"PONG\r\n")
        server_end.setblocking(False)
        received = bytearray()

        def drained() -> bool:
            try:
                received.extend(server_end.recv(1 << 20))
            except BlockingIOError:
                return not writer._buf and received.endswith(b"PONG\r\n")
            return False

        wait_for(drained)
        assert received and received == b"PONG\r\n" * (len(received) // 6)
        writer.write_control(b"PONG\r\n")  # the next PING is answered
        wait_for(lambda: server_end.recv(64) == b"PONG\r\n", ignore=BlockingIOError)
    finally:
        client_end.shutdown(socket.SHUT_RDWR)
        writer.close()
        client_end.close()
        server_end.close()


def test_a_real_server_pinging_every_100_ms_keeps_an_idle_client(tmp_path: Path):
    """The server's own keep-alive (every 100 ms, two out at most) gets its PONGs: an
    idle client answers ten of them and stays on its first connection."""
    config = ['ping_interval: "100ms"', "ping_max: 2"]
    with NatsServer(directory=tmp_path / "srv", jetstream=False, extra_config=config) as server:
        with js.connect(server.url, name="idle") as nc:
            start = nc.stats.out_bytes
            wait_for(lambda: nc.stats.out_bytes >= start + 10 * len(b"PONG\r\n"), timeout=10)
            [conn] = server.monitor("connz")["connections"]
            assert conn["name"] == "idle" and nc.stats.reconnects == 0
            assert_works(nc)
