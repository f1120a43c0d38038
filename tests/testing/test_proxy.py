"""The fault proxy itself (tests/fixtures/proxy.py), against a plain echo server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.fixtures.polling import wait_for
from tests.fixtures.proxy import LOOPBACK, TO_CLIENT, TO_SERVER, FaultProxy
from tests.fixtures.sockets import accepted, shutdown


class EchoServer:
    """Echoes every byte back; remembers how many bytes it received. Joined by ``close()``."""

    def __init__(self) -> None:
        """Listen on a free loopback port and start accepting."""
        self.received = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port = self._listener.getsockname()[1]
        self._socks: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, name="echo-accept")]
        self._threads[0].start()

    def _accept(self) -> None:
        for sock in accepted(self._listener):
            thread = threading.Thread(target=self._echo, args=(sock,), name="echo-conn")
            with self._lock:
                self._socks.append(sock)
                self._threads.append(thread)
            thread.start()

    def _echo(self, sock: socket.socket) -> None:
        while True:
            try:
                data = sock.recv(65536)
                if not data:
                    return
                with self._lock:
                    self.received += len(data)
                sock.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        """Stop listening, close every connection and join every thread."""
        shutdown(self._listener)
        self._listener.close()
        with self._lock:
            socks = list(self._socks)
        for sock in socks:
            shutdown(sock)
        for thread in list(self._threads):
            thread.join()
        for sock in socks:
            sock.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    """An echo server, closed (threads joined) afterwards."""
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[FaultProxy]:
    """A fault proxy in front of the echo server."""
    with FaultProxy(echo.port) as fault_proxy:
        yield fault_proxy


def dial(proxy: FaultProxy) -> socket.socket:
    """A client socket connected through the proxy (5 s timeout on every call)."""
    return socket.create_connection((LOOPBACK, proxy.port), timeout=5)


def read_exactly(sock: socket.socket, size: int) -> bytes:
    """Read ``size`` bytes (fails on end of stream)."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"end of stream after {len(data)} of {size} bytes"
        data += chunk
    return data


def read_to_end(sock: socket.socket) -> bytes:
    """Read until the peer closes; return everything read."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def test_passes_bytes_both_ways_and_counts_them(proxy):
    """In pass mode every byte reaches the server and comes back; the counters add up."""
    with dial(proxy) as sock:
        sock.sendall(b"hello" * 1000)
        assert read_exactly(sock, 5000) == b"hello" * 1000
    proxy.wait(lambda p: p.to_server == 5000 and p.to_client == 5000)
    assert proxy.accepted == 1


def test_cut_closes_every_live_link_and_new_links_work(proxy):
    """cut() ends both live links at once; a new connection passes again."""
    first, second = dial(proxy), dial(proxy)
    with first, second:
        proxy.wait(lambda p: p.live == 2)
        assert proxy.cut() == 2
        assert read_to_end(first) == b"" and read_to_end(second) == b""
        proxy.wait(lambda p: p.live == 0)
    assert proxy.cuts == 2
    with dial(proxy) as third:
        third.sendall(b"again")
        assert read_exactly(third, 5) == b"again"


@pytest.mark.parametrize("direction", [TO_CLIENT, TO_SERVER])
def test_cut_after_forwards_exactly_n_bytes_then_cuts(proxy, echo, direction):
    """cut_after(n) forwards n bytes in its direction, then the link is gone."""
    with dial(proxy) as sock:
        proxy.wait(lambda p: p.live == 1)
        proxy.cut_after(7, direction)
        sock.sendall(b"0123456789" * 10)
        got = read_to_end(sock)
    proxy.wait(lambda p: p.live == 0)
    if direction == TO_CLIENT:
        assert got == b"0123456"
    else:
        wait_for(lambda: echo.received == 7)
        assert got == b"0123456"[: len(got)]
    assert proxy.cuts == 1


def test_a_chunk_of_a_cut_link_does_not_spend_the_next_links_budget(proxy, echo):
    """A pump that sent its chunk just before a cut reports it after the cut: that report
    must leave a ``cut_after`` set meanwhile for the next link (the race a reconnect test
    met). The late report is made by hand, the pump's own call in the same order."""
    with dial(proxy) as sock:
        proxy.wait(lambda p: p.live == 1)
        with proxy._cond:
            (old,) = proxy._open_links()
        proxy.cut()
        assert read_to_end(sock) == b""
    proxy.cut_after(7, TO_CLIENT)
    with proxy._cond:
        proxy._forwarded(old, TO_CLIENT, 100, 1)  # the cut link's late report
    with dial(proxy) as sock:
        sock.sendall(b"0123456789")
        assert read_to_end(sock) == b"0123456"
    proxy.wait(lambda p: p.cuts == 2)  # counted just after the shutdown the client saw


def test_open_ended_stall_holds_bytes_until_resume(proxy):
    """stall() keeps the link open and forwards nothing until resume(); nothing is lost."""
    with dial(proxy) as sock:
        proxy.wait(lambda p: p.live == 1)
        proxy.stall()
        sock.sendall(b"held back")
        proxy.wait(lambda p: p.held == 9)
        assert proxy.to_server == 0 and proxy.live == 1
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            sock.recv(100)
        sock.settimeout(5)
        proxy.resume()
        assert read_exactly(sock, 9) == b"held back"
    proxy.wait(lambda p: p.held == 0)


def test_timed_stall_ends_by_itself(proxy):
    """stall(t) forwards nothing for t seconds, then carries on without help."""
    with dial(proxy) as sock:
        proxy.wait(lambda p: p.live == 1)
        started = time.monotonic()
        proxy.stall(0.3)
        sock.sendall(b"later")
        assert read_exactly(sock, 5) == b"later"
        assert time.monotonic() - started >= 0.3


def test_stall_after_forwards_n_bytes_then_holds_the_rest(proxy):
    """stall_after(n) lets n client-bound bytes through, then holds everything until resume()."""
    with dial(proxy) as sock:
        proxy.wait(lambda p: p.live == 1)
        proxy.stall_after(4, TO_CLIENT)
        sock.sendall(b"0123456789")
        assert read_exactly(sock, 4) == b"0123"
        proxy.wait(lambda p: p.held == 6)
        proxy.resume()
        assert read_exactly(sock, 6) == b"456789"
    assert proxy.cuts == 0


def test_trickle_sends_client_bound_bytes_one_at_a_time(proxy):
    """While trickling, every client-bound byte is a send of its own; data is intact."""
    proxy.trickle()
    payload = bytes(range(200))
    with dial(proxy) as sock:
        sock.sendall(payload)
        assert read_exactly(sock, 200) == payload
    proxy.wait(lambda p: p.to_client == 200)
    assert proxy.sends_to_client == 200


def test_refuse_accepts_and_closes_until_accept(proxy):
    """refuse() takes each new connection and closes it; live links stay; accept() ends it."""
    with dial(proxy) as kept:
        proxy.wait(lambda p: p.live == 1)
        proxy.refuse()
        with dial(proxy) as refused:
            assert read_to_end(refused) == b""
        assert proxy.refused == 1
        kept.sendall(b"still")
        assert read_exactly(kept, 5) == b"still"
    proxy.accept()
    with dial(proxy) as sock:
        sock.sendall(b"ok")
        assert read_exactly(sock, 2) == b"ok"


def test_refuse_by_not_listening_then_listens_again_on_the_same_port(proxy):
    """refuse(t, unlisten=True) makes connects fail; after t the same port accepts again."""
    port = proxy.port
    proxy.refuse(0.3, unlisten=True)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((LOOPBACK, port), timeout=5).close()
    sock = wait_for(lambda: dial(proxy), ignore=ConnectionRefusedError)
    with sock:
        sock.sendall(b"back")
        assert read_exactly(sock, 4) == b"back"
    assert proxy.port == port


def test_close_joins_every_thread(echo):
    """close() cuts live links and joins the acceptor and every pump."""
    proxy = FaultProxy(echo.port).start()
    socks = [dial(proxy) for _ in range(3)]
    proxy.wait(lambda p: p.live == 3)
    proxy.stall()
    proxy.close()
    for sock in socks:
        sock.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("fault-proxy")]
