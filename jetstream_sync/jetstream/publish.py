"""JetStream publishing: the headers of a publish, PubAck parsing and ``PubAckFuture``.

The async-publish machinery (the shared ack multiplexer and each context's
window) is in ``_ack_mux.py``.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, cast

from .. import _protocol
from .._deadline import check_at_most_max, check_callback
from .._reply import PUBACK_FIELDS
from ..errors import ForkedClientError, InlineCallbackError, NoRespondersError, api_error
from ..headers import Headers, header_pairs
from ._checks import sequence
from .info import PubAck

if TYPE_CHECKING:
    from ..client import Client
    from ..msg import Msg

HeadersIn = Mapping[str, str | Sequence[str]]

MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
MSG_TTL = "Nats-TTL"

RETRY_WAIT = 0.25


def ttl_header_value(ttl: float | str) -> str:
    """The ``Nats-TTL`` value for a TTL in seconds (``"never"`` passes through).

    Raises:
        ValueError: the TTL is not at least one second (the server's minimum).
    """
    if ttl == "never":
        return "never"
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
        raise ValueError(f"ttl must be a finite number of seconds or 'never', got {ttl!r}")
    if ttl < 1:
        raise ValueError(f"ttl must be at least 1 second, got {ttl!r}")
    check_at_most_max("ttl", ttl)
    if float(ttl).is_integer():
        return f"{int(ttl)}s"
    return f"{round(ttl * 1000)}ms"


# A publish's header options, in this order: msg_id, expected_stream,
# expected_last_seq, expected_last_subject_seq, expected_last_msg_id, ttl.
PublishOptions = tuple[
    str | None, str | None, int | None, int | None, str | None, float | str | None
]
NO_OPTIONS: PublishOptions = (None,) * 6  # a publish that sets none of them


def publish_headers(
    headers: HeadersIn | None, options: PublishOptions = NO_OPTIONS
) -> Headers | None:
    """The headers of a JetStream publish, or None when there are none.

    The one place ``publish``, ``publish_async`` and ``publish_batch`` build the
    ``Nats-*`` headers of their options. An option that is set replaces a header
    of the same name in ``headers``. A publish without headers or options
    (the common case) returns at the first comparison.

    Args:
        headers: the caller's own headers, or None.
        options: ``(msg_id, expected_stream, expected_last_seq,
            expected_last_subject_seq, expected_last_msg_id, ttl)``, each None
            when not set.

    Raises:
        TypeError, ValueError: a sequence that is not an int of at least 0, or
            a TTL that is not a number of seconds of at least 1 (or ``"never"``).
        BadHeaderError: a header key or value cannot be sent.
    """
    if not headers and options == NO_OPTIONS:
        return None
    msg_id, expected_stream, last_seq, last_subject_seq, last_msg_id, ttl = options
    pairs: list[tuple[str, str]] = []
    if msg_id is not None:
        pairs.append((MSG_ID, str(msg_id)))
    if expected_stream is not None:
        pairs.append((EXPECTED_STREAM, expected_stream))
    if last_seq is not None:
        pairs.append((EXPECTED_LAST_SEQ, str(sequence(last_seq, "expected_last_seq", 0))))
    if last_subject_seq is not None:
        last = sequence(last_subject_seq, "expected_last_subject_seq", 0)
        pairs.append((EXPECTED_LAST_SUBJECT_SEQ, str(last)))
    if last_msg_id is not None:
        pairs.append((EXPECTED_LAST_MSG_ID, last_msg_id))
    if ttl is not None:
        pairs.append((MSG_TTL, ttl_header_value(ttl)))
    if headers:
        # An option replaces the caller's header of the same name, as in nats.go and
        # nats.py (the server reads the first one: the copied headers would win).
        own = header_pairs(headers)
        if pairs:
            replaced = {key for key, _ in pairs}
            own = [pair for pair in own if pair[0] not in replaced]
        pairs = own + pairs
    return Headers.from_pairs(pairs) if pairs else None


class _AckPrefixes:
    """Recognises the server's usual PubAck quickly.

    A stream answers every stored message with the same prefix
    (``{"stream":"S","seq":`` or with a domain) then the sequence and ``}``.
    The first ack of each prefix is checked by the protocol core's parser;
    afterwards a match on the prefix is enough.
    """

    _MAX = 256

    def __init__(self) -> None:
        self._known: dict[bytes, tuple[str, str | None]] = {}

    def parse(self, data: bytes) -> tuple[str, int, bool, str | None] | None:
        """``(stream, seq, duplicate, domain)``, or None when the body needs full JSON."""
        cut = data.rfind(b":") + 1
        digits = data[cut:-1]
        if cut and data[-1:] == b"}" and digits.isdigit():
            known = self._known.get(data[:cut])
            if known is not None:
                return known[0], int(digits), False, known[1]
        if b'"batch"' in data or b'"val"' in data:
            return None  # batch acks and counter values need every key
        parsed = _protocol.parse_puback(data)
        if parsed is not None and not parsed[2] and digits.isdigit():
            if len(self._known) >= self._MAX:
                self._known.clear()
            self._known[data[:cut]] = (parsed[0], parsed[3])
        return parsed


_ACK_PREFIXES = _AckPrefixes()


def _fast_ack(msg: Msg) -> tuple[str, int, bool, str | None] | None:
    """The PubAck fields of a plain success reply, or None (status, error, batch...)."""
    if msg.header_size:
        return None
    return _ACK_PREFIXES.parse(msg.data)


def _pub_ack(fields: tuple[str, int, bool, str | None]) -> PubAck:
    stream, seq, duplicate, domain = fields
    return PubAck(stream=stream, seq=seq, duplicate=duplicate, domain=domain)


def _pub_ack_from_body(data: bytes) -> PubAck:
    """The ``PubAck`` of a success reply's body (one without an ``error``)."""
    fast = _ACK_PREFIXES.parse(data)
    if fast is not None:
        return _pub_ack(fast)
    return PubAck.from_api(json.loads(data))


def no_stream_error(subject: str | None) -> NoRespondersError:
    """The error of a JetStream publish that no stream answered: it names the subject.

    Args:
        subject: the subject published to, or None when the caller does not know it.
    """
    if subject is None:
        return NoRespondersError("no stream captures the subject published to (no responders)")
    return NoRespondersError(f"no stream captures subject {subject!r} (no responders)", subject)


def parse_pub_ack(msg: Msg, subject: str | None = None) -> PubAck:
    """Turn a PubAck reply into a :class:`PubAck`, or raise its error.

    The error check comes first: a failed PubAck still carries ``stream`` and
    ``"seq": 0``.

    Args:
        msg: the reply.
        subject: the subject the message was published to, named by the errors
            (the reply's own subject is an inbox).

    Raises:
        NoRespondersError: no stream captures the subject (status 503).
        APIError (a subclass by err_code): the stream refused the message.
    """
    fast = _fast_ack(msg)
    if fast is not None:
        return _pub_ack(fast)
    if msg.status == 503:
        raise no_stream_error(subject)
    body: dict[str, Any] = json.loads(msg.data)
    error = body.get("error")
    if error:
        raise api_error(
            int(error.get("code", 0)),
            int(error.get("err_code", 0)),
            error.get("description", ""),
            stream=body.get("stream") or None,
            subject=subject,
        )
    return PubAck.from_api(body)


def request_pub_ack(
    client: Client, subject: str, data: bytes | str, headers: Headers | None, timeout: float
) -> PubAck:
    """A blocking publish's round trip: send, wait for the PubAck, return it or raise its error.

    The common reply (a plain PubAck, read by the protocol core in the
    caller's round trip: ``Client.request`` with ``decode=PUBACK_FIELDS``) becomes a
    :class:`PubAck` without a :class:`Msg`; a body that holds more (a batch,
    a counter's value) or anything else goes through :func:`parse_pub_ack`.

    Raises:
        NoRespondersError: no stream captures ``subject`` (status 503).
        APIError (a subclass by err_code): the stream refused the message.
        TimeoutError, ConnectionLostError, ConnectionClosedError: as ``Client.request``.
    """
    got = client.request(subject, data, timeout, headers, decode=PUBACK_FIELDS)
    if isinstance(got, tuple):
        (stream, seq, duplicate, domain), body = got
        if b'"batch"' not in body and b'"val"' not in body:  # as _AckPrefixes
            return PubAck(stream=stream, seq=seq, duplicate=duplicate, domain=domain)
        return _pub_ack_from_body(body)
    return parse_pub_ack(got, subject)


def pub_ack_seq(msg: Msg) -> int:
    """The stream sequence of a PubAck reply, or its error raised as :func:`parse_pub_ack` does.

    For callers that need only the sequence (``KeyValue.put``): the server's
    usual reply is read by the prefix fast path without building a ``PubAck``.
    """
    fast = _fast_ack(msg)
    if fast is not None:
        return fast[1]
    return parse_pub_ack(msg).seq


class _AckThread(threading.local):
    """Per thread: on an ack thread, the lock its futures share (it settles those)."""

    lock: object = None


ACK_THREAD = _AckThread()


def _refuse_wait_on_ack_thread(future: PubAckFuture, call: str) -> None:
    """Raise when an ack thread (a done-callback) would wait for a future it must settle."""
    if ACK_THREAD.lock is not None and ACK_THREAD.lock is future._ack_lock:
        raise InlineCallbackError(
            f"PubAckFuture.{call}() of a publish not yet acknowledged, from a done-callback: "
            "the callback runs on the thread that settles the futures, so it would wait for "
            "itself; publish from the callback, or wait on a thread of your own"
        )


# The locks of the ack muxes this process inherited through os.fork() (added in
# the child by jetstream_sync.jetstream._ack_mux): a future made with one is
# settled only in the parent, which kept the connection and the ack threads.
INHERITED_LOCKS: weakref.WeakSet[Any] = weakref.WeakSet()


def _refuse_wait_in_forked_child(future: PubAckFuture, call: str) -> None:
    """Raise when a forked child would wait for a future that only its parent settles."""
    if future._ack_lock in INHERITED_LOCKS:
        raise ForkedClientError(
            f"PubAckFuture.{call}() of a publish made before os.fork(): its ack goes to the "
            "parent process; connect again in the child process"
        )


# Orders a future's resolution against making its Future state; the async
# publisher gives each future its ack mux's lock instead, under which the reader
# thread settles futures without a call per future.
_LAZY = threading.Lock()


class PubAckFuture(concurrent.futures.Future[PubAck]):
    """The future of one :meth:`JetStreamContext.publish_async`: a ``PubAck`` or an error.

    A ``concurrent.futures.Future``: ``concurrent.futures.wait``,
    ``as_completed``, ``add_done_callback``, ``result`` and ``exception``
    work as with any future. Done-callbacks run on the client's ack thread
    (or its ack-timer thread, or the thread that closes the client); a
    callback added after completion runs at once on the caller's thread. A
    callback may publish, or close the client.

    The message is on its way when the future is made and cannot be
    recalled: :meth:`cancel` always returns False, :meth:`running` is True
    until the future is done, and the future always resolves — with the
    ``PubAck``, the stream's error, ``TimeoutError`` (no ack within
    ``ack_timeout``), ``ConnectionLostError`` or ``ConnectionClosedError``.

    Cost: a ``Future``'s own state (a ``Condition`` with its lock and lists)
    made for every message would triple the client's CPU per async publish
    (the allocations and the garbage collector's work over thousands of live
    futures, measured). So the future keeps its outcome in three fields of
    its own, and the ``Future`` state is made only when some ``Future`` machinery
    is first needed — a wait, a callback, ``concurrent.futures.wait`` — after
    which the outcome is handed over with the public ``set_result`` /
    ``set_exception``. Nothing of ``Future``'s private state is named here.
    A successful reply is parsed into its ``PubAck`` when the result is
    first read.

    Attributes:
        subject: where the message was published.
    """

    # This class's own state; class defaults keep the constructor to one store.
    _ack_real = False  # the Future state is made: Future's methods hold the outcome
    _ack_done = False  # resolved while not real: the outcome is in the two fields below
    # A PubAck, or what stands for it until result() makes it: a success reply's
    # body (bytes), or a plain ack's seq (int) with _ack_stream. Any, so Future's
    # setters take it.
    _ack_value: Any = None
    _ack_stream: tuple[str, str | None] = ("", None)  # a plain ack's stream and domain
    _ack_error: BaseException | None = None
    _ack_parsed: PubAck | None = None
    _ack_expires = 0.0  # when the ack is overdue (monotonic seconds); set by its window
    _ack_window: Any = None  # the window that handed it to another thread to settle

    def __init__(self, subject: str, lock: AbstractContextManager[Any] = _LAZY) -> None:  # noqa: D107
        # The Future state is made on first need (see above).
        self.subject = subject
        self._ack_lock = lock

    def __getattr__(self, name: str) -> Any:
        # Reached only for attributes this object lacks: the Future state that
        # Future's methods and concurrent.futures.wait()/as_completed() read. Another
        # thread may have made that state since this lookup missed it: look again.
        if name.startswith("__"):
            raise AttributeError(name)
        if not self._ack_real:
            self._ack_make_real()
        return object.__getattribute__(self, name)

    def _ack_make_real(self) -> None:
        """Make the ``Future`` state and hand it the outcome, if there is one yet."""
        with self._ack_lock:
            if self._ack_real:
                return
            # Made apart and installed in one step: a thread reading the state meanwhile
            # finds all of it or none, so it never holds the Future's condition while
            # it waits here for the lock (set_result below takes that condition).
            vars(self).update(vars(concurrent.futures.Future()))
            if self._ack_done:  # nobody can wait or listen yet: nothing runs here
                if self._ack_error is not None:
                    concurrent.futures.Future.set_exception(self, self._ack_error)
                else:
                    concurrent.futures.Future.set_result(self, self._ack_value)
            self._ack_real = True

    def _resolve(self, value: Any = None, error: BaseException | None = None) -> None:
        """Settle the future (the client's threads): with a reply body, a ``PubAck`` or an error."""
        with self._ack_lock:
            if not self._ack_real:  # nobody waits or listens: keep the outcome
                self._ack_value, self._ack_error = value, error
                self._ack_done = True
                return
        try:
            if error is not None:
                self.set_exception(error)
            else:
                self.set_result(value)
        except concurrent.futures.InvalidStateError:
            pass  # someone else already called the public setters

    def cancel(self) -> bool:
        """Always False: a published message cannot be recalled (the future still resolves)."""
        return False

    def cancelled(self) -> bool:
        """Always False (see :meth:`cancel`)."""
        return False

    def running(self) -> bool:
        """True until the ack (or the error) has come: the publish is in progress."""
        return not self.done()

    def done(self) -> bool:
        """True once the ack or the error has come."""
        if self._ack_real:
            return super().done()
        return self._ack_done

    def result(self, timeout: float | None = None) -> PubAck:
        """The ``PubAck``, waiting up to ``timeout`` seconds.

        Raises:
            TimeoutError: not resolved in time (the builtin ``TimeoutError``).
            The publish's error: ``WrongLastSequenceError``, ``NoRespondersError``,
                ``ConnectionLostError``, ``TimeoutError`` (no ack in ``ack_timeout``)...
            InlineCallbackError: called from a done-callback on the ack thread
                before this future resolved: that thread settles it, so the wait
                could only time out (raised at once instead).
            ForkedClientError: called, before the future resolved, in a process
                forked after the publish (the ack goes to the parent).
        """
        if self._ack_done and not self._ack_real:
            if self._ack_error is not None:
                raise self._ack_error
            value = self._ack_value
        else:
            if not self.done():
                _refuse_wait_on_ack_thread(self, "result")
                _refuse_wait_in_forked_child(self, "result")
            value = super().result(timeout)
        kind = type(value)
        if kind is int or kind is bytes:  # made on first read
            ack = self._ack_parsed
            if ack is None:
                if kind is int:
                    stream, domain = self._ack_stream
                    ack = PubAck(stream=stream, seq=value, domain=domain)
                else:
                    ack = _pub_ack_from_body(value)
                self._ack_parsed = ack
            return ack
        return cast("PubAck", value)  # set_result() is only given PubAcks, seqs and bodies

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The publish's error, or None once it succeeded, waiting up to ``timeout`` seconds.

        Raises:
            TimeoutError: not resolved in time (the builtin ``TimeoutError``).
            InlineCallbackError: called from a done-callback before the future
                resolved (see :meth:`result`).
            ForkedClientError: called, before the future resolved, in a process
                forked after the publish (see :meth:`result`).
        """
        if self._ack_done and not self._ack_real:
            return self._ack_error
        if not self.done():
            _refuse_wait_on_ack_thread(self, "exception")
            _refuse_wait_in_forked_child(self, "exception")
        return super().exception(timeout)

    def add_done_callback(self, fn: Callable[[concurrent.futures.Future[PubAck]], object]) -> None:
        """Call ``fn(future)`` once the future resolves (at once if it has).

        Raises:
            TypeError: ``fn`` is not callable or is an ``async def`` (nothing
                would await its coroutine); it is not kept.
        """
        super().add_done_callback(check_callback("fn", fn))
