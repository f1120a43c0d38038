"""One cached connection per Python process: what executors, UDFs and the data source use.

Spark runs Python code in worker processes forked from a daemon and reuses
them for task after task. Connecting once per process (not once per task or
per row) is what makes NATS cheap inside Spark; checking ``os.getpid()`` on
every call makes the cache safe across fork: a child never touches the
socket it inherited, it connects again.
"""

from __future__ import annotations

import atexit
import os
import ssl
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..client import Client
    from ..jetstream.context import JetStreamContext

_TLS_FILES = ("tls_ca_file", "tls_cert_file", "tls_key_file")


class _Cache:
    """The clients (and one JetStream context each) of the current process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.clients: dict[tuple[Any, ...], Client] = {}
        self.contexts: dict[tuple[Any, ...], JetStreamContext] = {}


_cache = _Cache()


def _after_fork_in_child() -> None:
    """A child starts with an empty cache and a fresh lock (the parent's may be held)."""
    global _cache
    _cache = _Cache()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _current() -> _Cache:
    global _cache
    cache = _cache
    if cache.pid != os.getpid():  # forked without the at-fork hook (e.g. by a C library)
        cache = _cache = _Cache()
    return cache


def _key(servers: str | Sequence[str], opts: dict[str, Any]) -> tuple[Any, ...]:
    urls = (servers,) if isinstance(servers, str) else tuple(servers)
    return (urls, tuple(sorted((k, repr(v)) for k, v in opts.items())))


def _ssl_context(opts: dict[str, Any]) -> dict[str, Any]:
    """Replace the ``tls_*_file`` options by an ``ssl.SSLContext`` in ``tls``."""
    ca, cert, key = (opts.pop(name, None) for name in _TLS_FILES)
    if ca is None and cert is None:
        if key is not None:
            raise ValueError("tls_key_file needs tls_cert_file")
        return opts
    if isinstance(opts.get("tls"), ssl.SSLContext):
        raise ValueError("give either tls=SSLContext or the tls_*_file options, not both")
    context = ssl.create_default_context(cafile=ca)
    if cert is not None:
        context.load_cert_chain(cert, key)
    opts["tls"] = context
    return opts


def client(servers: str | Sequence[str], **opts: Any) -> Client:
    """This process's connection for these servers and options, connecting on first use.

    Every call with the same arguments in the same process returns the same
    :class:`~jetstream_sync.Client`; a forked child gets its own (it never
    uses its parent's socket). A cached client that was closed is replaced.
    Clients are closed when the interpreter exits. Do not close the returned
    client yourself: other code in the process shares it.

    Args:
        servers: a URL, a comma-separated list of URLs, or a list of URLs.
        **opts: the options of :func:`jetstream_sync.connect`, plus
            ``tls_ca_file``, ``tls_cert_file`` and ``tls_key_file`` (paths;
            they build the ``ssl.SSLContext``, which itself cannot be shipped
            to executors).

    Returns:
        The shared, connected client.

    Raises:
        NoServersError: no server could be reached (blocks up to
            ``connect_timeout`` per server).
        AuthorizationError: the credentials were refused.
    """
    if isinstance(servers, str):
        servers = [url.strip() for url in servers.split(",") if url.strip()]
    key = _key(servers, opts)
    cache = _current()
    with cache.lock:
        found = cache.clients.get(key)
        if found is not None and not found.is_closed:
            return found
        from ..client import connect

        made = connect(list(servers), **_ssl_context(dict(opts)))
        cache.clients[key] = made
        cache.contexts.pop(key, None)
        return made


def jetstream(servers: str | Sequence[str], **opts: Any) -> JetStreamContext:
    """The JetStream context of :func:`client`'s connection, also cached per process.

    One context per connection means one async-publish window (and its
    threads) per process, however many tasks publish through it.
    """
    conn = client(servers, **opts)
    if isinstance(servers, str):
        servers = [url.strip() for url in servers.split(",") if url.strip()]
    key = _key(servers, opts)
    cache = _current()
    with cache.lock:
        ctx = cache.contexts.get(key)
        if ctx is None or ctx.client is not conn:
            ctx = cache.contexts[key] = conn.jetstream()
        return ctx


def close_all() -> None:
    """Close every client this process cached (registered with ``atexit``)."""
    cache = _current()
    with cache.lock:
        clients, cache.clients = list(cache.clients.values()), {}
        cache.contexts = {}
    for made in clients:
        made.close()


atexit.register(close_all)
