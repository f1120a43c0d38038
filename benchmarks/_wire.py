"""A minimal NATS wire connection over a plain blocking socket (measuring tool only).

Used by the raw limit driver, the prefill and the server readiness check. No library
code: frames are written by hand and the incoming buffer is walked with ``find``, so
what it costs is close to the least any Python client can spend.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable

CONNECT = (
    b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
    b'"lang":"python-raw","version":"0","name":"jetstream_sync-bench"}\r\n'
)
INBOX = b"_INBOX.bench"
REPLY = INBOX + b".r"

# handler(subject, reply or None, payload) for each MSG/HMSG; payload includes headers
Handler = Callable[[bytes, "bytes | None", bytes], None]


class RawConn:
    """One connection; ``send`` may be called from any thread, ``pump`` from one."""

    def __init__(self, port: int, timeout: float = 30.0, inbox: bytes = INBOX) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        self.buf = bytearray()
        self.lock = threading.Lock()  # whole frames only: PONGs never land inside a PUB
        self.info = json.loads(self._line().split(b" ", 1)[1])
        self.reply = inbox + b".r"  # where this connection's replies arrive
        self.sock.sendall(CONNECT + b"SUB " + inbox + b".> 1\r\nPING\r\n")
        while True:
            line = self._line()
            if line == b"PONG":
                break
            if line.startswith(b"-ERR"):
                raise ConnectionError(line.decode())

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return line
            self._recv()

    def _recv(self) -> None:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def send(self, data: bytes | memoryview) -> None:
        """Write whole frames."""
        with self.lock:
            self.sock.sendall(data)

    def pump(self, handler: Handler | None = None) -> int:
        """Receive once and walk every complete frame; return how many MSG/HMSG it held."""
        self._recv()
        buf = self.buf
        size = len(buf)
        find = buf.find
        pos = 0
        count = 0
        while True:
            eol = find(b"\r\n", pos)
            if eol < 0:
                break
            head = buf[pos]
            if head == 77 or head == 72:  # MSG / HMSG
                fields = bytes(buf[pos:eol]).split()
                end = eol + 2 + int(fields[-1])
                if end + 2 > size:
                    break
                if handler is not None:
                    has_reply = len(fields) == (5 if head == 77 else 6)
                    handler(fields[1], fields[3] if has_reply else None, bytes(buf[eol + 2 : end]))
                count += 1
                pos = end + 2
            else:
                if buf[pos : pos + 4] == b"PING":
                    self.send(b"PONG\r\n")
                elif buf[pos : pos + 4] == b"-ERR":
                    raise ConnectionError(bytes(buf[pos:eol]).decode())
                pos = eol + 2
        if pos:
            del buf[:pos]
        return count

    def request(self, subject: str | bytes, payload: bytes = b"") -> bytes:
        """Send a request and wait for the first reply on the connection's inbox.

        Messages on other subjects that arrive meanwhile are dropped.
        Raises ``LookupError`` on a no-responders status.
        """
        if isinstance(subject, str):
            subject = subject.encode()
        got: list[bytes] = []

        def on_msg(subj: bytes, reply: bytes | None, data: bytes) -> None:
            if subj == REPLY:
                got.append(data)

        self.send(b"PUB %s %s %d\r\n%s\r\n" % (subject, REPLY, len(payload), payload))
        while not got:
            self.pump(on_msg)
        data = got[0]
        if data.startswith(b"NATS/1.0 503"):
            raise LookupError(f"no responders on {subject.decode()}")
        return data

    def api(self, subject: str, body: dict[str, object] | None = None) -> dict[str, object]:
        """A JetStream API call; raises ``RuntimeError`` on an API error."""
        reply = json.loads(self.request(subject, json.dumps(body or {}).encode()))
        if "error" in reply:
            raise RuntimeError(f"{subject}: {reply['error']}")
        return reply

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def create_stream(conn: RawConn, storage: str = "file", name: str = "S") -> None:
    """Create the benchmark stream (``bench.>``) unless it exists."""
    cfg = {"name": name, "subjects": ["bench.>"], "storage": storage, "num_replicas": 1}
    try:
        conn.api(f"$JS.API.STREAM.CREATE.{name}", cfg)
    except RuntimeError as e:
        if "already in use" not in str(e):
            raise


def durable_body(durable: str, ack_policy: str, stream: str = "S") -> dict[str, object]:
    """The CONSUMER.CREATE request of a durable pull consumer delivering everything."""
    return {
        "stream_name": stream,
        "config": {
            "durable_name": durable,
            "ack_policy": ack_policy,
            "deliver_policy": "all",
            "replay_policy": "instant",
        },
    }


def create_durable(conn: RawConn, durable: str, ack_policy: str, stream: str = "S") -> None:
    """Create a durable pull consumer on ``stream`` delivering everything."""
    body = durable_body(durable, ack_policy, stream)
    conn.api(f"$JS.API.CONSUMER.CREATE.{stream}.{durable}", body)
