"""Nothing a server or another client sends may end the reader thread (issue 8, part B)."""

from __future__ import annotations

import socket
import threading

import pytest

import jetstream_sync as js
from jetstream_sync._connection.reader import Reader
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.faults import assert_works
from tests.fixtures.polling import wait_for
from tests.fixtures.raw_client import RawClient
from tests.fixtures.reader import reader_failure
from tests.fixtures.server import LOOPBACK

# --------------------------------------------------------------------------
# helpers


class Errors:
    """An ``error_cb`` that keeps what it is given."""

    def __init__(self) -> None:
        """Start empty."""
        self.seen: list[BaseException] = []

    def __call__(self, exc: BaseException) -> None:
        """Record ``exc``."""
        self.seen.append(exc)

    def wait_protocol_error(self, *words: str) -> js.ProtocolError:
        """Wait for a ProtocolError whose text has every one of ``words``."""
        return wait_for(
            lambda: next(
                (
                    e
                    for e in self.seen
                    if isinstance(e, js.ProtocolError) and all(w in str(e) for w in words)
                ),
                None,
            ),
            message=lambda: f"no ProtocolError with {words}; error_cb saw {self.seen!r}",
        )


@pytest.fixture
def raw(shared_server):
    """A raw-socket client of the shared server."""
    client = RawClient(shared_server.port)
    yield client
    client.close()


# --------------------------------------------------------------------------
# B1: subjects that are not UTF-8, from a real server


def test_non_utf8_subject_is_delivered_with_its_neighbours(shared_server, raw):
    """A subject with a byte that is not UTF-8 arrives surrogate-escaped, between its neighbours."""
    errors = Errors()
    with js.connect(shared_server.url, error_cb=errors) as nc:
        sub = nc.subscribe("rr1.>")
        nc.flush()
        raw.send(b"PUB rr1.before 1\r\na\r\nPUB rr1.caf\xe9.x 2\r\nhi\r\nPUB rr1.after 1\r\nb\r\n")
        got = [sub.next_msg(timeout=5) for _ in range(3)]
        assert [m.data for m in got] == [b"a", b"hi", b"b"]
        assert got[1].subject == "rr1.caf\udce9.x"
        assert got[1].subject.encode("utf-8", "surrogateescape") == b"rr1.caf\xe9.x"
        assert_works(nc)
        assert errors.seen == []


def test_reply_and_publish_to_a_non_utf8_subject_reach_the_original_bytes(shared_server, raw):
    """respond() to a non-UTF-8 reply, and publish() to a received subject, send the same bytes."""
    with js.connect(shared_server.url) as nc:
        sub = nc.subscribe("rr2.>")
        nc.flush()
        raw.send(b"SUB rr2.r\xe9ply 1\r\nSUB rr2.caf\xe9.x 2\r\n")
        raw.send(b"PUB rr2.caf\xe9.x rr2.r\xe9ply 2\r\nhi\r\n")
        msg = sub.next_msg(timeout=5)
        assert msg.reply == "rr2.r\udce9ply"
        msg.respond(b"answer")
        nc.publish(msg.subject, b"again")
        nc.flush()
        # The raw client is subscribed to both subjects (and got its own "hi" first).
        assert raw.read_until(b"answer\r\n").endswith(b"MSG rr2.r\xe9ply 1 6\r\n")
        assert raw.read_until(b"again\r\n").endswith(b"MSG rr2.caf\xe9.x 2 5\r\n")


def test_bad_surrogates_in_a_subject_are_refused_before_sending(nc):
    """A str subject that cannot be encoded back to bytes is a BadSubjectError."""
    with pytest.raises(js.BadSubjectError):
        nc.publish("rr3.\ud800", b"x")


def test_jetstream_consumer_reads_a_non_utf8_subject(shared_server, js, stream, raw):
    """A pull consumer gets a stored non-UTF-8 subject between its neighbours and can ack it."""
    name = stream.name.encode()
    raw.send(b"PUB %s.one 1\r\n1\r\n" % name)
    raw.send(b"PUB %s.caf\xe9 1\r\n2\r\nPUB %s.three 1\r\n3\r\n" % (name, name))
    wait_for(lambda: stream.info().state.messages == 3)
    msgs = stream.create_consumer().fetch(3, timeout=5)
    assert [m.data for m in msgs] == [b"1", b"2", b"3"]
    assert msgs[1].subject.encode("utf-8", "surrogateescape") == name + b".caf\xe9"
    for m in msgs:
        m.ack_sync(timeout=5)
    assert js.client.is_connected


# Header blocks the server forwards as another client wrote them: the frame's sizes
# are right, only the block is not NATS/1.0 ... CRLFCRLF (nats.go delivers these).
_BAD_BLOCKS = [b"", b"NATS/1.0", b"NATS/1.0\r\n", b"NATS/1.0\r\nA: 1\r\n", b"HTTP/1.1 200\r\n\r\n"]


def _hpub(subject: bytes, block: bytes, payload: bytes) -> bytes:
    """An HPUB frame carrying ``block`` as its header block, as it is."""
    return b"HPUB %s %d %d\r\n%s%s\r\n" % (
        subject, len(block), len(block) + len(payload), block, payload
    )  # fmt: skip


def test_a_bad_header_block_from_another_client_is_delivered_not_a_disconnect(shared_server, raw):
    """A message whose header block is malformed arrives between its neighbours; reading its
    headers raises ProtocolError; the connection stays up."""
    errors = Errors()
    with js.connect(shared_server.url, error_cb=errors) as nc:
        sub = nc.subscribe("rr5.>")
        nc.flush()
        frames = b"".join(
            _hpub(b"rr5.bad", block, b"%d" % i) for i, block in enumerate(_BAD_BLOCKS)
        )
        raw.send(b"PUB rr5.before 1\r\na\r\n" + frames + b"PUB rr5.after 1\r\nb\r\n")
        got = [sub.next_msg(timeout=5) for _ in range(len(_BAD_BLOCKS) + 2)]
        assert [m.data for m in got] == [b"a", *(b"%d" % i for i in range(len(_BAD_BLOCKS))), b"b"]
        for msg in got[2:-1]:  # "" is no header block at all
            with pytest.raises(js.ProtocolError):
                msg.headers  # noqa: B018
        assert nc.stats.reconnects == 0 and errors.seen == []
        assert_works(nc)


def test_a_stored_message_with_a_bad_header_block_is_no_poison(shared_server, js, stream, raw):
    """A pull consumer fetches a stored message whose header block is malformed, and acks it,
    without losing its connection (else every redelivery would cut it again)."""
    name = stream.name.encode()
    raw.send(_hpub(name + b".bad", b"NATS/1.0\r\n", b"bad") + b"PUB %s.ok 2\r\nok\r\n" % name)
    wait_for(lambda: stream.info().state.messages == 2)
    msgs = stream.create_consumer().fetch(2, timeout=5)
    assert [m.data for m in msgs] == [b"bad", b"ok"]
    for m in msgs:
        m.ack_sync(timeout=5)
    assert js.client.stats.reconnects == 0


def test_a_stored_header_that_is_not_utf8_reads_back_as_a_subscriber_sees_it(
    shared_server, js, stream, raw
):
    """get_msg() (the JSON API, base64 headers) decodes a header that is not UTF-8 as the
    core does (surrogateescape), and trims only spaces and tabs from values as the core
    does: the same Headers, and its bytes are not replaced."""
    block = b"NATS/1.0\r\nA: caf\xe9\r\nB: 1\r\nB: 2\r\nC: \x0bv\xc2\xa0 \r\n\r\n"
    sub = js.client.subscribe(f"{stream.name}.>")
    js.client.flush()
    raw.send(_hpub(stream.name.encode() + b".h", block, b"x"))
    seen = sub.next_msg(timeout=5).headers
    stored = stream.get_msg(1)
    assert stored.headers == seen
    assert stored.headers["A"].encode("utf-8", "surrogateescape") == b"caf\xe9"
    assert stored.headers["C"] == "\x0bv\u00a0"  # only spaces and tabs are trimmed
    assert type(stored).from_api(stored.to_api()).headers == seen


# --------------------------------------------------------------------------
# B2: INFO the client cannot use, from a fake server


def _connect(fake: FakeServer, errors: Errors, **options) -> js.Client:
    return js.connect(
        fake.url, error_cb=errors, reconnect_time_wait=0.05, connect_timeout=2, **options
    )


@pytest.mark.parametrize(
    ("info", "words"),
    [
        (b"INFO this is not json\r\n", ("not JSON",)),
        (b"INFO [1, 2]\r\n", ("not a JSON object",)),
        (b'INFO {"max_payload": "lots"}\r\n', ("max_payload", "lots")),
        (b'INFO {"max_payload": -1}\r\n', ("max_payload",)),
        (b'INFO {"connect_urls": "127.0.0.1:4222"}\r\n', ("connect_urls",)),
    ],
    ids=["not-json", "array", "max_payload-str", "max_payload-negative", "connect_urls-str"],
)
def test_bad_async_info_is_a_connection_error(fake, info, words):
    """An INFO the client cannot use is reported as a ProtocolError, then the client reconnects."""
    errors = Errors()
    with _connect(fake, errors) as nc:
        fake.connection(0).send(info)
        errors.wait_protocol_error(*words)
        fake.connection(1)
        wait_for(lambda: nc.is_connected)
        assert nc.max_payload == 1 << 20
        assert_works(nc)


def test_bad_connect_urls_entry_is_skipped_and_reported(fake):
    """A connect_urls entry that is not host:port is reported and skipped; the rest is used."""
    errors = Errors()
    with _connect(fake, errors) as nc:
        fake.connection(0).send(b'INFO {"connect_urls": ["::::", "127.0.0.1:1"]}\r\n')
        errors.wait_protocol_error("::::")
        assert nc.discovered_servers == ["nats://127.0.0.1:1"]
        assert fake.connection_count == 1
        assert_works(nc)


def test_bad_info_during_reconnect_does_not_leave_the_client_reconnecting(fake):
    """A reconnect meeting a bad INFO reports it and tries again; the next good server wins."""
    errors = Errors()
    with _connect(fake, errors) as nc:
        fake.infos.extend([b'INFO ["x"]\r\n', b'INFO {"max_payload": "lots"}\r\n'])
        fake.connection(0).close()
        errors.wait_protocol_error("not a JSON object")
        errors.wait_protocol_error("max_payload")
        fake.connection(3)
        wait_for(lambda: nc.is_connected and not nc.is_reconnecting)
        assert_works(nc)


# --------------------------------------------------------------------------
# B3: protocol errors disconnect, reach error_cb, and the client reconnects


@pytest.mark.parametrize(
    ("hostile", "words"),
    [
        (b"MSG works.x 1 5\r\nhello, I lied about my size\r\n", ("MSG",)),
        (b"GARBAGE FROM THE SERVER\r\n", ("GARBAGE",)),
        (b"MSG works.x notasid 1\r\nx\r\n", ("MSG",)),
        (b"HMSG works.x 1 10 2\r\nxx\r\n", ("HMSG",)),
    ],
    ids=["msg-size-lies", "garbage", "bad-sid", "hmsg-sizes"],
)
def test_protocol_error_is_reported_then_reconnects(fake, hostile, words):
    """Bytes that are not protocol reach error_cb as a ProtocolError; the client works again."""
    errors = Errors()
    with _connect(fake, errors) as nc:
        sub = nc.subscribe("works.x")
        first = fake.connection(0)
        first.sid_of(b"works.x")
        first.send(hostile)
        errors.wait_protocol_error(*words)
        second = fake.connection(1)
        second.sid_of(b"works.x")  # the subscription was restored
        second.msg(b"works.x", b"after")
        assert sub.next_msg(timeout=5).data == b"after"
        assert_works(nc)
        assert nc.stats.reconnects == 1


def test_an_exception_while_routing_ends_the_connection_not_the_thread(fake):
    """The reader turns any exception of its route into a ProtocolError for connection_lost;
    its text names the exception's type, never its message (which may quote received data)."""

    def route(ops, view, consumed):
        raise RuntimeError("routing failed on b'secret-token'")

    error = reader_failure(fake.port, route)
    assert isinstance(error, js.ProtocolError)
    assert "RuntimeError" in str(error) and "secret-token" not in str(error)
    assert isinstance(error.__cause__, RuntimeError) and "secret-token" in str(error.__cause__)


def test_a_failing_reconnect_ends_the_reader_through_crashed(fake):
    """If connection_lost itself raises, the reader hands the exception to crashed and ends."""
    crashed: list[BaseException] = []

    def connection_lost(exc):
        raise RuntimeError("reconnect bug")

    sock = socket.create_connection((LOOPBACK, fake.port))

    class Conn:
        transport = sock
        leftover = b""

    try:
        reader = Reader(Conn, lambda *a: None, connection_lost, "test-reader", crashed.append)
        wait_for(lambda: fake.connection_count == 1)
        sock.shutdown(socket.SHUT_RDWR)  # the end of the stream: connection_lost is called
        reader.join()
    finally:
        sock.close()
    [error] = crashed
    assert isinstance(error, RuntimeError) and "reconnect bug" in str(error)


def test_a_reconnect_bug_closes_the_client_and_reports_it(fake, monkeypatch):
    """A client whose reconnect raised is closed, with the error reported: never deaf."""
    errors = Errors()
    closed = threading.Event()
    with _connect(fake, errors, closed_cb=closed.set) as nc:
        fake.connection(0)

        def broken(exc):
            raise RuntimeError("reconnect bug")

        monkeypatch.setattr(nc._connection._reader, "_connection_lost", broken)  # inject the bug
        fake.connection(0).close()
        assert closed.wait(10)
        assert nc.is_closed and not nc.is_connected
        wait_for(lambda: any("reconnect bug" in str(e) for e in errors.seen))
