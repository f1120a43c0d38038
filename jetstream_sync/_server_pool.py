"""Server URLs: parsing, the pool of known servers and the reconnect order."""

from __future__ import annotations

import ipaddress
import random
import time
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

DEFAULT_PORT = 4222
_SCHEMES = {"nats": False, "tls": True}


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` or ``token@`` replaced by ``***@`` (for messages)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    if "@" in rest:  # the last @ ends the credentials, even one a raw "/" or "#" split
        rest = "***@" + rest.rpartition("@")[2]
    return f"{scheme}{sep}{rest}"


def split_servers(servers: str | Iterable[str]) -> list[str]:
    """The URLs ``servers`` names: a list as given, a string split at its commas.

    A comma-separated string is how nats.go, the NATS CLI and ``NATS_URL`` name
    several servers; a comma inside credentials must be percent-encoded (``%2C``).

    Raises:
        TypeError: ``servers`` is not a str or an iterable of strs.
    """
    if isinstance(servers, str):
        return [url.strip() for url in servers.split(",") if url.strip()]
    if isinstance(servers, bytes) or not isinstance(servers, Iterable):
        raise TypeError(
            f"servers must be a URL str or a list of them, not {type(servers).__name__}"
        )
    urls = list(servers)
    for url in urls:  # the type only: a URL may hold credentials
        if not isinstance(url, str):
            raise TypeError(f"servers must hold URL strs, not {type(url).__name__}")
    return urls


class ServerAddress:
    """One server: host, port, whether it wants TLS, and credentials from its URL.

    ``tls_name`` is the host name a TLS certificate is checked against: the
    host itself, except for a discovered server announced by IP address (see
    :meth:`ServerPool.add_discovered`).
    """

    __slots__ = ("host", "port", "tls", "user", "password", "token", "implicit", "tls_name")

    def __init__(self, url: str, implicit: bool = False) -> None:
        if "://" not in url:
            url = "nats://" + url
        try:
            parts = urlsplit(url)
        except ValueError as exc:  # an unclosed IPv6 bracket
            raise ValueError(f"server URL {redact_url(url)!r}: {exc}") from None
        if parts.scheme not in _SCHEMES:
            raise ValueError(f"server URL {redact_url(url)!r}: scheme must be nats:// or tls://")
        if "@" in parts.path + parts.query + parts.fragment:
            raise ValueError(
                f"server URL {redact_url(url)!r}: a / ? # or @ in its credentials "
                "must be percent-encoded"
            )
        if not parts.hostname:
            raise ValueError(f"server URL {redact_url(url)!r} has no host")
        self.host = parts.hostname
        try:
            port = parts.port
        except ValueError:
            port = 0
        if port == 0:  # 0 names no server: it is not the default port
            raise ValueError(f"server URL {redact_url(url)!r}: the port is not a number in 1-65535")
        self.port = port or DEFAULT_PORT
        self.tls = _SCHEMES[parts.scheme]
        self.user = self.password = self.token = None
        if parts.username is not None and parts.password is not None:
            self.user = unquote(parts.username)
            self.password = unquote(parts.password)
        elif parts.username:
            self.token = unquote(parts.username)
        self.implicit = implicit
        self.tls_name = self.host

    @property
    def key(self) -> tuple[str, int]:
        """What makes two addresses the same server."""
        return (self.host, self.port)

    def url(self) -> str:
        """The URL without credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'tls' if self.tls else 'nats'}://{host}:{self.port}"

    def __repr__(self) -> str:
        return f"ServerAddress({self.url()!r})"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class _Entry:
    __slots__ = ("address", "attempts", "last_attempt")

    def __init__(self, address: ServerAddress) -> None:
        self.address = address
        self.attempts = 0
        self.last_attempt = 0.0


class ServerPool:
    """The servers to try, in order, with per-server attempt counts.

    Shuffled by default, as ADR-40 asks of every client: clients given the
    same list then spread over the servers instead of all landing on the
    first, and one server's fault does not hit all of them at once.

    Args:
        urls: the configured servers.
        max_attempts: attempts per server before it is dropped during
            reconnects (negative: never dropped).
        randomize: shuffle the configured servers once, and the servers each
            INFO announces among themselves; False keeps the given order.
            Announced servers are tried after the known ones either way.
    """

    def __init__(self, urls: Iterable[str], max_attempts: int, randomize: bool = True) -> None:
        self._entries = [_Entry(ServerAddress(u)) for u in urls]
        if not self._entries:
            raise ValueError("servers must name at least one server URL")
        self._max_attempts = max_attempts
        self._randomize = randomize
        if randomize:
            random.shuffle(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def addresses(self) -> list[ServerAddress]:
        """Every server currently in the pool, in order."""
        return [e.address for e in self._entries]

    def add_discovered(self, urls: Iterable[str], template: ServerAddress) -> list[str]:
        """Take the servers announced by INFO ``connect_urls`` (host:port strings).

        ``template`` is the server that announced them. As in nats.go, a new
        server takes its URL's credentials (a cluster shares its users), and one
        announced by IP address checks TLS certificates against its host name:
        servers advertise IPs, certificates name hosts. A server discovered
        earlier that the list no longer names has left the cluster and leaves
        the pool (unless it is ``template``, the one connected to); configured
        servers always stay.

        Returns:
            The entries that are not a valid ``host:port`` (skipped).
        """
        bad = []
        announced = []
        for hostport in urls:
            try:
                addr = ServerAddress(("tls://" if template.tls else "nats://") + hostport, True)
            except ValueError:
                bad.append(hostport)
                continue
            announced.append(addr)
        named = {addr.key for addr in announced}
        self._entries = [
            e
            for e in self._entries
            if not e.address.implicit or e.address is template or e.address.key in named
        ]
        known = {e.address.key for e in self._entries}
        added = []
        for addr in announced:
            if addr.key not in known:
                if addr.user is None and addr.token is None:
                    addr.user, addr.password = template.user, template.password
                    addr.token = template.token
                if _is_ip(addr.host) and not _is_ip(template.tls_name):
                    addr.tls_name = template.tls_name
                known.add(addr.key)
                added.append(_Entry(addr))
        if self._randomize:
            random.shuffle(added)
        self._entries.extend(added)
        return bad

    def connected(self, address: ServerAddress) -> None:
        """Record a successful connection: its attempt count starts over."""
        for e in self._entries:
            if e.address is address:
                e.attempts = 0

    def next_candidate(
        self, reconnect_time_wait: float, jitter: float
    ) -> tuple[ServerAddress, float]:
        """Pick the next server to try and how long to wait before trying it.

        Servers go round-robin; a server tried less than ``reconnect_time_wait``
        ago is tried again only after the rest of that wait plus random jitter.

        Raises:
            LookupError: every server has used up its attempts.
        """
        self._entries = [
            e for e in self._entries if self._max_attempts < 0 or e.attempts < self._max_attempts
        ]
        if not self._entries:
            raise LookupError("every server used up its reconnect attempts")
        entry = self._entries.pop(0)
        self._entries.append(entry)
        wait = 0.0
        if entry.last_attempt:
            since = time.monotonic() - entry.last_attempt
            wait = max(0.0, reconnect_time_wait - since)
            if wait > 0 and jitter > 0:
                wait += random.uniform(0, jitter)
        entry.attempts += 1
        entry.last_attempt = time.monotonic() + wait
        return entry.address, wait
