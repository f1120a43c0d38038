"""Opening one connection: TCP, INFO, optional TLS upgrade, CONNECT, PING/PONG."""

from __future__ import annotations

import base64
import json
import os
import ssl
from typing import Any

from .. import _protocol
from .._deadline import Deadline
from .._nkeys import CredsSource, SeedSource
from .._server_errors import server_error
from .._server_pool import ServerAddress
from ..errors import NatsError, NKeyError, ProtocolError
from .transport import Transport

LANG = "python-sync"
VERSION = "0.1.0"


class HandshakeOptions:
    """What CONNECT needs, fixed for the client's lifetime.

    ``name``, ``user``, ``password`` and ``token`` must be strs and ``tls`` an
    ``ssl.SSLContext`` or a bool (else ``TypeError``), never sent to be refused.
    ``nkeys_seed`` (a user seed, or a path to a file holding one) and
    ``user_credentials`` (a ``.creds`` file path) are checked here, so a bad
    seed or an unreadable file raises :class:`NKeyError` before connecting;
    files are read again on every (re)connect, picking up rotated credentials.
    """

    def __init__(
        self,
        *,
        name: str | None,
        user: str | None,
        password: str | None,
        token: str | None,
        tls: ssl.SSLContext | bool | None,
        tls_handshake_first: bool,
        no_echo: bool,
        nkeys_seed: str | os.PathLike[str] | None = None,
        user_credentials: str | os.PathLike[str] | None = None,
    ) -> None:
        texts = {"name": name, "user": user, "password": password, "token": token}
        for option, value in texts.items():
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{option} must be a str, not {type(value).__name__}")
        if tls is not None and not isinstance(tls, bool | ssl.SSLContext):
            raise TypeError(f"tls must be an ssl.SSLContext or a bool, not {type(tls).__name__}")
        self.name = name
        self.user = user
        self.password = password
        self.token = token
        self.tls = tls
        self.tls_handshake_first = tls_handshake_first
        self.no_echo = no_echo
        if nkeys_seed is not None and user_credentials is not None:
            raise NKeyError("nkeys_seed and user_credentials are exclusive: pass one")
        self.nkeys_seed = SeedSource(nkeys_seed) if nkeys_seed is not None else None
        self.user_credentials = (
            CredsSource(user_credentials) if user_credentials is not None else None
        )

    def ssl_context(self) -> ssl.SSLContext:
        """The configured SSL context, or a default verifying one."""
        if isinstance(self.tls, ssl.SSLContext):
            return self.tls
        return ssl.create_default_context()

    def connect_json(self, info: dict[str, Any], address: ServerAddress, tls: bool) -> bytes:
        """The CONNECT frame's JSON for ``address`` (URL credentials win over options)."""
        opts: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "tls_required": tls,
            "lang": LANG,
            "version": VERSION,
            "protocol": 1,
            "headers": True,
            "no_responders": True,
            "echo": not self.no_echo,
        }
        if self.name:
            opts["name"] = self.name
        if address.user is not None or address.token is not None:  # the URL's win, all of them
            user, password, token = address.user, address.password, address.token
        else:
            user, password, token = self.user, self.password, self.token
        # All that is given is sent, as nats.go does: a server reads only the kind it uses.
        if user is not None:
            opts["user"] = user
            opts["pass"] = password or ""
        if token is not None:
            opts["auth_token"] = token
        nonce = info.get("nonce")
        if nonce is not None:
            self._sign_nonce(str(nonce).encode(), opts)
        return json.dumps(opts, separators=(",", ":")).encode()

    def _sign_nonce(self, nonce: bytes, opts: dict[str, Any]) -> None:
        """Add ``jwt`` (creds) or ``nkey`` (seed) and ``sig`` for the server's nonce."""
        if self.user_credentials is not None:
            jwt, pair = self.user_credentials.load()
            opts["jwt"] = jwt
        elif self.nkeys_seed is not None:
            pair = self.nkeys_seed.key_pair()
            opts["nkey"] = pair.public_key
        else:
            return
        opts["sig"] = base64.urlsafe_b64encode(pair.sign(nonce)).rstrip(b"=").decode("ascii")


class Connected:
    """The result of a handshake: the transport, the server's INFO, unread bytes."""

    __slots__ = ("transport", "info", "leftover", "address")

    def __init__(
        self, transport: Transport, info: dict[str, Any], leftover: bytes, address: ServerAddress
    ) -> None:
        self.transport = transport
        self.info = info
        self.leftover = leftover
        self.address = address


def parse_info(raw: bytes) -> dict[str, Any]:
    """Decode an INFO's JSON and check the fields the client relies on.

    Entries of ``connect_urls`` are checked where they are used (a bad one is
    skipped and reported, see ``ServerPool.add_discovered``).

    Raises:
        ProtocolError: the INFO is not a JSON object, ``max_payload`` is not a
            positive integer, or ``connect_urls`` is not a list of strings.
    """
    try:
        info = json.loads(raw)
    except ValueError:  # also UnicodeDecodeError
        raise ProtocolError(f"the server sent an INFO that is not JSON: {raw[:200]!r}") from None
    if not isinstance(info, dict):
        raise ProtocolError(f"the server sent an INFO that is not a JSON object: {raw[:200]!r}")
    max_payload = info.get("max_payload")
    if max_payload is not None and (
        type(max_payload) is not int or max_payload <= 0  # bool is no int here
    ):
        raise ProtocolError(f"the server's INFO has a bad max_payload: {max_payload!r}")
    urls = info.get("connect_urls")
    if urls is not None and (
        not isinstance(urls, list) or not all(isinstance(u, str) for u in urls)
    ):
        raise ProtocolError(f"the server's INFO has a bad connect_urls: {urls!r}")
    return info


_SILENT_SERVER = (
    "timed out waiting for the server's INFO: the server accepted the connection but sent "
    "nothing (it is frozen or overloaded, or it is not a NATS server; or it is configured "
    "with TLS handshake_first, and waits for the client to start TLS: connect with "
    "tls_handshake_first=True)"
)


def _read_ops(
    transport: Transport, buf: bytearray, deadline: Deadline, waiting_for: str = "handshake"
) -> tuple[list[int], int]:
    """Read until ``buf`` holds at least one whole op; return (ops, consumed)."""
    chunk = bytearray(65536)
    while True:
        ops, consumed, _need = _protocol.parse(buf, 0, len(buf))
        if ops:
            return ops, consumed
        left = deadline.remaining()
        if left > 0:
            transport.set_timeout(left)
            try:
                n = transport.recv_into(memoryview(chunk))
            except TimeoutError:  # the socket's timeout: the deadline passed
                left = 0
        if left <= 0:
            if waiting_for == "info" and not buf and not transport.is_tls:
                raise TimeoutError(_SILENT_SERVER)
            raise TimeoutError("timed out during the connection handshake")
        if n == 0:
            raise ConnectionError("server closed the connection during the handshake")
        buf += chunk[:n]


def _arg(buf: bytearray, ops: list[int], i: int) -> bytes:
    return bytes(buf[ops[i + 1] : ops[i + 1] + ops[i + 2]])


def _check_ops(buf: bytearray, ops: list[int], start: int, info: dict[str, Any]) -> bool:
    """Handle the handshake's ops from ``start``: raise on an -ERR, merge an INFO.

    Returns:
        True if a PONG was among them.

    Raises:
        The typed error of an -ERR (see ``server_error``), ProtocolError for a bad INFO.
    """
    ponged = False
    for i in range(start, len(ops), _protocol.OP_FIELDS):
        kind = ops[i]
        if kind == _protocol.OP_ERR:
            raise server_error(_arg(buf, ops, i).decode(errors="replace"))
        if kind == _protocol.OP_INFO:
            info.update(parse_info(_arg(buf, ops, i)))
        elif kind == _protocol.OP_PONG:
            ponged = True
    return ponged


def handshake(address: ServerAddress, options: HandshakeOptions, timeout: float) -> Connected:
    """Open a connection to ``address`` and complete the NATS handshake.

    Raises:
        AuthorizationError: the server rejected the credentials.
        OSError, ssl.SSLError, TimeoutError, ProtocolError: the connection failed.
    """
    deadline = Deadline(timeout)
    transport = Transport(address.host, address.port, timeout)
    try:
        # As in nats.go, handshake-first asks for TLS by itself (a default context if tls=None).
        want_tls = address.tls or bool(options.tls) or options.tls_handshake_first
        if want_tls and options.tls_handshake_first:
            transport.start_tls(options.ssl_context(), address.tls_name, deadline.remaining())
        buf = bytearray()
        ops, consumed = _read_ops(transport, buf, deadline, "info")
        if ops[0] != _protocol.OP_INFO:
            raise ProtocolError("server did not start with INFO")
        info = parse_info(_arg(buf, ops, 0))
        _check_ops(buf, ops, _protocol.OP_FIELDS, info)  # e.g. an -ERR right after the INFO
        del buf[:consumed]
        tls_offered = info.get("tls_required") or info.get("tls_available")
        if want_tls and not transport.is_tls and not tls_offered:
            raise NatsError(
                f"the server at {address.url()} does not offer TLS, and the client requires "
                "it (tls=... or a tls:// URL)"
            )
        if (want_tls or info.get("tls_required")) and not transport.is_tls:
            if buf:
                raise ProtocolError("unexpected bytes before the TLS upgrade")
            transport.start_tls(options.ssl_context(), address.tls_name, deadline.remaining())
        frame = (
            b"CONNECT " + options.connect_json(info, address, transport.is_tls) + b"\r\nPING\r\n"
        )
        transport.set_timeout(deadline.remaining() or 0.001)
        transport.sendall(frame)
        ponged = False
        while not ponged:
            ops, consumed = _read_ops(transport, buf, deadline)
            ponged = _check_ops(buf, ops, 0, info)
            del buf[:consumed]
        transport.set_blocking()
        return Connected(transport, info, bytes(buf), address)
    except BaseException:
        transport.close()
        raise
