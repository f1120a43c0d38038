"""The functions that do IO: a lone caller's wait for its reply, and the writer's non-blocking
send (mirrors ``csrc/jss_round_trip.c``)."""

from __future__ import annotations

import errno
import select
import socket
import threading
from typing import TypeAlias

from jetstream_sync.errors import ProtocolError

from .parser import parse
from .proto import OP_FIELDS, OP_HMSG, OP_MSG
from .puback import parse_puback

__all__ = [
    "DECODE_NONE",
    "DECODE_PUBACK",
    "RT_CONSUMED",
    "RT_EOF",
    "RT_ERRNO",
    "RT_FIELDS",
    "RT_IDLE",
    "RT_INTERRUPTED",
    "RT_NEED",
    "RT_OP",
    "RT_OTHER",
    "RT_PUBACK",
    "RT_PUBACK_OK",
    "RT_RECEIVED",
    "RT_RECV_ERROR",
    "RT_REPLY",
    "SEND_ERRNO",
    "SEND_FIELDS",
    "SEND_SENT",
    "RoundTrip",
    "last_round_trip",
    "round_trip",
    "send_nowait",
    "send_report",
]


RT_REPLY = 1
RT_OTHER = 2
RT_IDLE = 3
RT_INTERRUPTED = 4
RT_EOF = 5
RT_RECV_ERROR = 6
# Slots of round_trip's out list (see jss_proto.h; the Python list stops before RT_PUBACK).
RT_RECEIVED = 0
RT_CONSUMED = 1
RT_NEED = 2
RT_ERRNO = 3
RT_PUBACK_OK = 4
RT_OP = 5
RT_PUBACK = 15
RT_FIELDS = 21
# The readers round_trip can run on the reply's body (see jss_proto.h).
DECODE_NONE = 0
DECODE_PUBACK = 1
RoundTrip: TypeAlias = tuple[int, list[int], tuple[str, int, bool, str | None] | None]
"""What :func:`round_trip` returns: status, out, the decoded body (PubAck fields)."""
_RT_POLL_IN = select.POLLIN
_RT_AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK)


def round_trip(
    sock: socket.socket,
    buf: bytearray,
    have: int,
    reply: bytes,
    timeout_ms: int,
    decode: int,
) -> RoundTrip:
    """Wait for ``sock``, receive once into ``buf`` and look for the reply to ``reply``.

    The waiting half of a lone caller's round trip, in one call (in C, with
    the GIL released; the request went out through the caller's writer): see
    ``jss_round_trip`` in ``csrc/jss_proto.h`` for every status. ``sock`` is
    borrowed (never closed, its mode unchanged: only non-blocking calls);
    ``buf[:have]`` holds bytes received earlier and not yet parsed; what is
    received lands in ``buf[have:]``.

    EINTR: Python retries an interrupted system call after running the
    signal handlers (PEP 475), and a handler's exception propagates, so this
    twin never returns :data:`RT_INTERRUPTED`.

    Returns:
        ``(status, out, puback)``: an ``RT_*`` status; :data:`RT_PUBACK` ints
        (bytes received, bytes consumed and the next op's need
        for :data:`RT_REPLY`, errno, 1 when ``puback`` is set, then the
        reply's :data:`OP_FIELDS`); and what the reader ``decode`` names
        (``DECODE_*``) read from the reply's body: with :data:`DECODE_PUBACK`,
        what :func:`parse_puback` reads from a reply without headers; else None.
    """
    result = _round_trip(sock, buf, have, reply, timeout_ms, decode)
    _last.out = None  # returned: nothing is pending for last_round_trip
    return result


def _round_trip(
    sock: socket.socket,
    buf: bytearray,
    have: int,
    reply: bytes,
    timeout_ms: int,
    decode: int,
) -> RoundTrip:
    """round_trip's system calls and parse; ``_last.out`` holds its out list meanwhile."""
    out = _last.out = [0] * RT_PUBACK
    if have >= len(buf):
        return RT_IDLE, out, None
    poller = select.poll()
    poller.register(sock.fileno(), _RT_POLL_IN)
    try:
        ready = poller.poll(timeout_ms)
    except OSError as exc:
        out[RT_ERRNO] = exc.errno or 0
        return RT_RECV_ERROR, out, None
    if not ready:
        return RT_IDLE, out, None
    try:
        out[RT_RECEIVED] = got = sock.recv_into(memoryview(buf)[have:], 0, socket.MSG_DONTWAIT)
    except OSError as exc:
        out[RT_ERRNO] = exc.errno or 0
        return (RT_IDLE if exc.errno in _RT_AGAIN else RT_RECV_ERROR), out, None
    if got == 0:
        return RT_EOF, out, None
    return _parse_reply(buf, have + got, reply, decode, out)


# Slots of send_nowait's report (see jss_proto.h).
SEND_SENT = 0
SEND_ERRNO = 1
SEND_FIELDS = 2


def send_report() -> list[int]:
    """Where :func:`send_nowait` reports: ``[bytes sent, errno]``, owned by the caller."""
    return [0] * SEND_FIELDS


def send_nowait(sock: socket.socket, data: bytearray, report: list[int]) -> None:
    """Send what ``sock`` takes at once of ``data``, without blocking; report it in ``report``.

    Non-blocking sends until all of ``data`` is sent or the socket takes no
    more (not a failure). ``report[SEND_SENT]`` is the bytes sent so far,
    updated after each send, and ``report[SEND_ERRNO]`` the errno of a send
    that failed (0 when none did). The C function writes the report in C
    memory, so that a caller interrupted right after the call (a signal
    handler's exception on the main thread) still knows what went out; this
    twin is not interruptible that way (a handler may run between its steps).
    """
    report[SEND_SENT] = report[SEND_ERRNO] = 0
    sent, size = 0, len(data)
    with memoryview(data) as view:
        while sent < size:
            try:
                sent += sock.send(view[sent:], socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                report[SEND_ERRNO] = exc.errno or 0
                return
            report[SEND_SENT] = sent


_last = threading.local()  # each thread's last round_trip out list


def last_round_trip() -> int:
    """The bytes received by this thread's :func:`round_trip` call that did not return.

    For a caller interrupted (Ctrl-C) inside the call; 0 once a call
    returned (the caller has them) or before any call.
    """
    out = getattr(_last, "out", None)
    return 0 if out is None else out[RT_RECEIVED]


def _parse_reply(buf: bytearray, end: int, reply: bytes, decode: int, out: list[int]) -> RoundTrip:
    """round_trip's last step: whether ``buf[:end]`` holds exactly the reply (fills ``out``)."""
    try:
        ops, consumed, need = parse(buf, 0, end)
    except ProtocolError:
        return RT_OTHER, out, None
    if len(ops) != OP_FIELDS or ops[0] not in (OP_MSG, OP_HMSG):
        return RT_OTHER, out, None
    if buf[ops[1] : ops[1] + ops[2]] != reply:
        return RT_OTHER, out, None
    out[RT_CONSUMED], out[RT_NEED] = consumed, need
    out[RT_OP : RT_OP + OP_FIELDS] = ops
    puback = None
    if decode == DECODE_PUBACK and ops[0] == OP_MSG:
        puback = parse_puback(buf[ops[8] : ops[8] + ops[9]])
        out[RT_PUBACK_OK] = int(puback is not None)
    return RT_REPLY, out, puback
