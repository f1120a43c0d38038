"""One NATS client per process, made on first use and closed at exit.

Nothing connects at import time: Django imports settings, URLconfs and views
in the parent of a prefork server (gunicorn, uWSGI) and in every management
command, and a connection made there would be shared by every forked worker.
:func:`get_client` connects when a request or a command first needs NATS; a
process forked after that (a worker, a ``multiprocessing`` child) notices the
new pid and connects again instead of using its parent's socket.
"""

from __future__ import annotations

import atexit
import os
import threading

from django.conf import settings

import jetstream_sync as js

_lock = threading.Lock()
_client: js.Client | None = None
_pid = 0


def get_client() -> js.Client:
    """The process's client, connected to ``settings.NATS_URL`` on the first call.

    Thread-safe: one client serves every thread of the process.

    Raises:
        jetstream_sync.NoServersError: the server cannot be reached.
    """
    global _client, _pid
    client = _client
    if client is not None and _pid == os.getpid() and not client.is_closed:
        return client
    with _lock:
        if _client is None or _pid != os.getpid() or _client.is_closed:
            if _client is not None and _pid != os.getpid():
                _client.close()  # inherited through fork(): closes only this process's fd
            _client = js.connect(
                settings.NATS_URL,
                name=f"django-orders-{os.getpid()}",
                connect_timeout=settings.NATS_TIMEOUT,
            )
            _pid = os.getpid()
        return _client


def get_jetstream() -> js.JetStreamContext:
    """A JetStream context on the process's client (contexts are cheap)."""
    return get_client().jetstream(timeout=settings.NATS_TIMEOUT)


def close_client() -> None:
    """Close this process's client, if it made one (registered with ``atexit``)."""
    global _client
    with _lock:
        client, _client = _client, None
    if client is not None and _pid == os.getpid():
        client.close()


def _after_fork_in_child() -> None:
    # The parent's lock may have been held by another thread at the fork.
    global _lock
    _lock = threading.Lock()


atexit.register(close_client)
os.register_at_fork(after_in_child=_after_fork_in_child)
