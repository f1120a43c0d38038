"""The socket owner: one connection to a server, the threads that serve it, how they wait.

A :class:`~jetstream_sync.client.Client` holds one :class:`Connection`, which
owns the socket alone; every other part of this room is private to it:

* ``connection.py``: :class:`Connection`, which opens the link, routes every
  parsed buffer (messages to subscription queues, replies to the request mux
  and to reply routes, PING/PONG, INFO, ``-ERR``), reconnects and closes.
* ``transport.py``: TCP and TLS: connect with a timeout, read, write; no protocol.
* ``handshake.py``: opening one link: INFO, TLS upgrade, CONNECT, PING/PONG.
* ``reader.py``: the reader thread, the read side across reconnects.
* ``read_role.py``: which thread reads the socket now: the reader thread, or a
  lone requester reading its own reply (one C call per wait); the socket's one role.
* ``read_buffer.py``: the connection's one read buffer and the parse step.
* ``writer.py``: the one write path: a coalescing buffer and its flusher.
* ``pings.py``: the PINGs in flight, the flushes waiting for their PONGs, and the
  check that tells whether the server refused a SUB at its subscription limit.
* ``request_mux.py``: requests over one wildcard inbox, a waiter for each.
* ``sub_table.py``: every subscription by sid: routing and delivery limits.
* ``wait.py``: the wait mode (OS threads, or gevent/eventlet), chosen once at connect.

Who owns which thread (``<tag>`` is ``jetstream_sync-<client id>``): the
:class:`Connection` starts the pinger (``<tag>-pinger``) and, when the reader
fails on a bug, the closer (``<tag>-closer``); the :class:`~.reader.Reader` owns
the reader thread (``<tag>-reader``) and the :class:`Writer` the flusher
(``<tag>-writer``). The read role is held by one thread at a time: the reader
thread, or a caller's thread waiting for its reply. Under gevent or eventlet
these threads are greenlets.

The rest of the package takes from here only the names in ``__all__``, from
this package; the parts import one another directly, never through it. Tests
of a single part import its module.
"""

from __future__ import annotations

from .connection import Connection, ConnectionOptions
from .handshake import HandshakeOptions
from .read_role import Ready
from .request_mux import ReplyWaiter
from .wait import check_choice

__all__ = [
    "Connection",
    "ConnectionOptions",
    "HandshakeOptions",
    "Ready",
    "ReplyWaiter",
    "check_choice",
]
