"""TCP and TLS sockets: connect with a timeout, read, write, close. No protocol here."""

from __future__ import annotations

import socket
import ssl

from .. import _protocol

_RECV_BUF = 4 << 20
_SEND_BUF = 4 << 20


class Transport:
    """One TCP (optionally TLS) connection to a server."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host = host
        self.port = port
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECV_BUF)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SEND_BUF)
        self.sock: socket.socket = sock
        self.is_tls = False

    def start_tls(self, context: ssl.SSLContext, server_hostname: str, timeout: float) -> None:
        """Wrap the socket in TLS and complete the handshake within ``timeout``."""
        self.sock.settimeout(timeout)
        self.sock = context.wrap_socket(self.sock, server_hostname=server_hostname)
        self.is_tls = True

    def set_blocking(self) -> None:
        """Switch from the connect timeout to plain blocking I/O."""
        self.sock.settimeout(None)

    def set_timeout(self, timeout: float | None) -> None:
        """Set the timeout of socket operations (used during the handshake)."""
        self.sock.settimeout(timeout)

    def recv_into(self, view: memoryview) -> int:
        """Read into ``view``; 0 means the server closed the connection."""
        return self.sock.recv_into(view)

    def recv_nowait(self, view: memoryview) -> int | None:
        """Read what has arrived into ``view`` without blocking (plain TCP only).

        Returns:
            The number of bytes read, 0 when the server closed the connection,
            None when nothing was there.
        """
        try:
            return self.sock.recv_into(view, 0, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return None

    def poll_fd(self) -> int | None:
        """The descriptor to poll for readability, or None for TLS.

        A TLS socket may hold decrypted bytes that polling does not show, and
        a record that arrived in part makes its read block: it is only read
        by a thread that may block (the reader thread).
        """
        return None if self.is_tls else self.sock.fileno()

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        """Write every byte of ``data`` (blocks while the kernel buffer is full)."""
        self.sock.sendall(data)

    def send_nowait(self, data: bytearray, report: list[int]) -> None:
        """Write what the kernel takes at once of ``data``; report it in ``report``.

        Never blocks. ``report`` (from ``_protocol.send_report()``) gets the
        bytes sent and the errno of a failed send (0 if none), written by the
        protocol core before this returns (see ``_protocol.send_nowait``). A
        TLS socket cannot write part of a record this way: it reports 0 bytes
        and leaves the whole write to a thread that may block.
        """
        if self.is_tls:
            report[0] = report[1] = 0
            return
        _protocol.send_nowait(self.sock, data, report)

    def shutdown(self) -> None:
        """Stop both directions so a thread blocked in recv/send wakes up."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        """Release the file descriptor (affects only this process's copy)."""
        try:
            self.sock.close()
        except OSError:
            pass
