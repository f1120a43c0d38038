"""The wrappers the instrumentor puts in place of the public methods, one factory per kind.

Each factory takes the :class:`Telemetry` and the original function and
returns a function to set on the class in its place (``functools.wraps``
keeps its name, docstring and signature). A wrapper finds its arguments by
position or keyword, as the original takes them, and passes them on
unchanged but for the headers it adds the trace context to.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind

from .._seam import ApiSubject
from ..errors import APIError, api_error
from ..msg import Msg
from ._telemetry import (
    A_BATCH,
    A_BODY_SIZE,
    A_CONSUMER,
    A_DESTINATION,
    A_MSG_ID,
    A_OP_NAME,
    A_OP_TYPE,
    A_SEQUENCE,
    A_STREAM,
    A_SYSTEM,
    A_TEMPORARY,
    SYSTEM,
    Operation,
    Telemetry,
    busy,
    enter,
    inject,
    leave,
    message_attributes,
    message_id,
    producer_context,
    span_context_of,
    trace_headers,
    valid_attributes,
    valid_text,
)

Fn = Callable[..., Any]
_MISSING = object()

# The tokens that name a JetStream API call ($JS.API.STREAM.INFO.<stream> is
# STREAM.INFO), and those of the other subjects JetStream answers on ($JS.ACK, $JS.FC).
_API_VERBS = frozenset(
    "ACCOUNT ACK BATCH CONSUMER CREATE DELETE DIRECT DURABLE FC GET INFO LEADER LIST MSG "
    "NAMES NEXT PAUSE PEER PURGE REMOVE RESET RESTORE SERVER SNAPSHOT STEPDOWN STREAM "
    "UNPIN UPDATE".split()
)


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    """Argument ``name`` (``index`` when positional, ``self`` excluded), or ``_MISSING``."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name, _MISSING)


def _with(
    args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str, value: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with argument ``name`` (position ``index``) set to ``value``."""
    if len(args) > index:
        return (*args[:index], value, *args[index + 1 :]), kwargs
    return args, {**kwargs, name: value}


def _value(found: Any) -> Any:
    return None if found is _MISSING else found


def is_internal(subject: str) -> bool:
    """Whether ``subject`` is JetStream's own (an API call, an ack, a flow-control reply).

    The library builds API subjects as :class:`ApiSubject`; acks and flow-control
    replies go to ``$JS.`` subjects the server made. They get no publish span,
    and no trace context is added to them.
    """
    return type(subject) is ApiSubject or subject.startswith("$JS.")


def api_operation(subject: str) -> str:
    """The name of the JetStream call a subject makes: ``STREAM.INFO``, ``DIRECT.GET``, ``ACK``.

    The stream, consumer and subject parts are left out: a span name must not
    grow with every stream.
    """
    tokens = subject.split(".")
    start = tokens.index("API") + 1 if "API" in tokens[:3] else 0
    while start < len(tokens) and tokens[start] not in _API_VERBS:
        start += 1
    end = start
    while end < len(tokens) and tokens[end] in _API_VERBS:
        end += 1
    return ".".join(tokens[start:end]) or "API"


# ------------------------------------------------------------------ publishing


def _send_attributes(
    operation: str, subject: str, data: Any, msg_id: Any = None, kind: str = "send"
) -> dict[str, Any]:
    """The attributes of a message sent (``kind``: ``send``, or ``create`` in a batch)."""
    attributes: dict[str, Any] = {
        A_SYSTEM: SYSTEM,
        A_DESTINATION: subject,
        A_OP_TYPE: kind,
        A_OP_NAME: operation,
        A_BODY_SIZE: len(data or b""),
    }
    if msg_id:
        attributes[A_MSG_ID] = msg_id
    return attributes


def publish(tel: Telemetry, original: Fn, operation: str, headers_at: int) -> Fn:
    """A PRODUCER span around a publish; its trace context goes in the message headers.

    Args:
        operation: ``messaging.operation.name`` (``publish``).
        headers_at: where the headers argument is when given by position
            (``self`` excluded); -1 when it is keyword-only.
    """

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        subject = _arg(args, kwargs, 0, "subject")
        if busy() or not isinstance(subject, str) or is_internal(subject):
            return original(self, *args, **kwargs)
        data = _value(_arg(args, kwargs, 1, "data"))
        index = headers_at if headers_at >= 0 else len(args) + 1
        headers = _value(_arg(args, kwargs, index, "headers"))
        msg_id = kwargs.get("msg_id") or message_id(headers)
        attributes = _send_attributes(operation, subject, data, msg_id)
        op = Operation(tel, f"{operation} {subject}", SpanKind.PRODUCER, attributes)
        args, kwargs = _with(args, kwargs, index, "headers", inject(headers, op.context()))
        with op:
            result = original(self, *args, **kwargs)
            _describe_ack(op, result)
        tel.sent.add(1, tel.metric_attributes(attributes))
        return result

    return wrapper


def respond(tel: Telemetry, original: Fn) -> Fn:
    """``Msg.respond``: a PRODUCER span to the message's reply subject (a temporary
    destination, so the span is named ``publish (temporary)``), its trace context in the
    response's headers: the requester's trace continues through the reply."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        subject = getattr(self, "reply", "")
        if busy() or not subject:
            return original(self, *args, **kwargs)
        data = _value(_arg(args, kwargs, 0, "data"))
        headers = _value(_arg(args, kwargs, 1, "headers"))
        attributes = _send_attributes("publish", subject, data)
        attributes[A_TEMPORARY] = True
        op = Operation(tel, "publish (temporary)", SpanKind.PRODUCER, attributes)
        args, kwargs = _with(args, kwargs, 1, "headers", inject(headers, op.context()))
        with op:
            result = original(self, *args, **kwargs)
        tel.sent.add(1, tel.metric_attributes(attributes))
        return result

    return wrapper


def _describe_ack(op: Operation, ack: Any) -> None:
    """Put a PubAck's stream, sequence and batch size on the operation's span."""
    stream = getattr(ack, "stream", None)
    if stream is None:
        return
    found = {A_STREAM: stream, A_SEQUENCE: ack.seq}
    if getattr(ack, "batch_size", None):
        found[A_BATCH] = ack.batch_size
    op.span.set_attributes(found)
    op.attributes.update(found)


def publish_async(tel: Telemetry, original: Fn) -> Fn:
    """A PRODUCER span from the publish to its PubAck (or error); pending acks counted."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        subject = _arg(args, kwargs, 0, "subject")
        if busy() or not isinstance(subject, str):
            return original(self, *args, **kwargs)
        data = _value(_arg(args, kwargs, 1, "data"))
        attributes = _send_attributes("publish_async", subject, data, kwargs.get("msg_id"))
        # Not a with-block: the span ends when the future resolves, on another thread.
        op = Operation(tel, f"publish_async {subject}", SpanKind.PRODUCER, attributes)
        kwargs["headers"] = inject(kwargs.get("headers"), op.context())
        token = enter()
        try:
            future = original(self, *args, **kwargs)
        except BaseException as exc:
            tel.finish(op.span, attributes, op.start, exc)
            raise
        finally:
            leave(token)
        pending = tel.metric_attributes(attributes)
        tel.pending.add(1, pending)

        def settled(done: Any) -> None:
            tel.pending.add(-1, pending)
            error = done.exception()
            if error is None:
                _describe_ack(op, done.result())
                tel.sent.add(1, tel.metric_attributes(attributes))
            tel.finish(op.span, attributes, op.start, error)

        future.add_done_callback(settled)
        return future

    return wrapper


def _create(
    tel: Telemetry, operation: str, subject: str, data: Any, headers: Any
) -> tuple[trace.Span, Any]:
    """A ``create`` PRODUCER span for one message of a batch, and its headers with its context."""
    attributes = _send_attributes(operation, subject, data, message_id(headers), "create")
    span = tel.tracer.start_span(
        valid_text(f"{operation} {subject}"),
        kind=SpanKind.PRODUCER,
        attributes=valid_attributes(attributes),
    )
    headers = inject(headers, trace.set_span_in_context(span))
    span.end()
    return span, headers


def publish_batch(tel: Telemetry, original: Fn) -> Fn:
    """An atomic batch: a ``create`` span per message (its context in the message's
    headers), then one ``send`` span for the batch, linked to them."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        messages = _arg(args, kwargs, 0, "messages")
        if busy() or not isinstance(messages, Sequence) or not messages:
            return original(self, *args, **kwargs)
        created = []
        traced = []
        for item in messages:
            subject, data = item[0], item[1]
            headers = item[2] if len(item) > 2 else None
            span, headers = _create(tel, "publish_batch", subject, data, headers)
            created.append(Link(span.get_span_context()))
            traced.append((subject, data, headers))
        args, kwargs = _with(args, kwargs, 0, "messages", traced)
        destination = traced[0][0]
        attributes: dict[str, Any] = {
            **_send_attributes("publish_batch", destination, b""),
            A_BATCH: len(created),
        }
        del attributes[A_BODY_SIZE]
        name = f"publish_batch {destination}"
        with Operation(tel, name, SpanKind.PRODUCER, attributes, links=created) as op:
            result = original(self, *args, **kwargs)
            _describe_ack(op, result)
        tel.sent.add(len(created), tel.metric_attributes(attributes))
        return result

    return wrapper


@contextlib.contextmanager
def _columnar(
    tel: Telemetry, args: tuple[Any, ...], kwargs: dict[str, Any], op_type: str, op_name: str
) -> Iterator[tuple[Operation, dict[str, Any]]]:
    """A PRODUCER span around a columnar call (``<op_name> <subject>``), its context in the
    headers every row gets; yields the operation and its attributes."""
    from ..jetstream.arrow_publish import ADDED_HEADERS  # imports pyarrow: only when used

    subject = _arg(args, kwargs, 1, "subject")
    destination = subject if isinstance(subject, str) else "jetstream"
    attributes: dict[str, Any] = {
        A_SYSTEM: SYSTEM, A_DESTINATION: destination, A_OP_TYPE: op_type, A_OP_NAME: op_name,
    }  # fmt: skip
    with Operation(tel, f"{op_name} {destination}", SpanKind.PRODUCER, attributes) as op:
        token = ADDED_HEADERS.set(trace_headers(op.context()))
        try:
            yield op, attributes
        finally:
            ADDED_HEADERS.reset(token)


def publish_arrow(tel: Telemetry, original: Fn) -> Fn:
    """A columnar publish: one PRODUCER ``send`` span until every row's PubAck; every row
    carries its trace context (a row's own header of the same name is kept)."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if busy():
            return original(self, *args, **kwargs)
        with _columnar(tel, args, kwargs, "send", "publish_arrow") as (op, attributes):
            ack = original(self, *args, **kwargs)
            found = {A_BATCH: ack.rows, "messaging.nats.duplicates": ack.duplicates}
            if ack.stream is not None:
                found[A_STREAM] = ack.stream
            op.span.set_attributes(found)
            op.attributes.update(found)
        tel.sent.add(ack.rows, tel.metric_attributes(attributes))
        return ack

    return wrapper


def fast_batch_add(tel: Telemetry, original: Fn) -> Fn:
    """``FastBatch.add``: a ``create`` span per message, its context in the headers."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        subject = _arg(args, kwargs, 0, "subject")
        if busy() or not isinstance(subject, str):
            return original(self, *args, **kwargs)
        data = _value(_arg(args, kwargs, 1, "data"))
        headers = _value(_arg(args, kwargs, 2, "headers"))
        span, headers = _create(tel, "fast_batch", subject, data, headers)
        args, kwargs = _with(args, kwargs, 2, "headers", headers)
        token = enter()
        try:
            result = original(self, *args, **kwargs)
        finally:
            leave(token)
        about = {A_SYSTEM: SYSTEM, A_DESTINATION: subject, A_OP_NAME: "fast_batch"}
        tel.sent.add(1, valid_attributes(about))
        return result

    return wrapper


def fast_batch_add_arrow(tel: Telemetry, original: Fn) -> Fn:
    """``FastBatch.add_arrow``: one ``create`` span for the call's rows; every row carries its
    context (a row's own header of the same name is kept)."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if busy():
            return original(self, *args, **kwargs)
        before = self.added
        with _columnar(tel, args, kwargs, "create", "fast_batch") as (op, attributes):
            try:
                original(self, *args, **kwargs)
            finally:
                op.span.set_attribute(A_BATCH, self.added - before)
        tel.sent.add(self.added - before, tel.metric_attributes(attributes))

    return wrapper


def fast_batch_commit(tel: Telemetry, original: Fn) -> Fn:
    """``FastBatch.commit``: a PRODUCER ``send`` span until the batch's PubAck."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if busy():
            return original(self, *args, **kwargs)
        attributes: dict[str, Any] = {
            A_SYSTEM: SYSTEM, A_OP_TYPE: "send", A_OP_NAME: "fast_batch.commit",
        }  # fmt: skip
        with Operation(tel, "fast_batch.commit", SpanKind.PRODUCER, attributes) as op:
            ack = original(self, *args, **kwargs)
            _describe_ack(op, ack)
        return ack

    return wrapper


# ------------------------------------------------------------------ requests


def request(tel: Telemetry, original: Fn) -> Fn:
    """A CLIENT span around a request: a JetStream API call, or a plain request
    (whose trace context goes in its headers)."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        subject = _arg(args, kwargs, 0, "subject")
        if busy() or not isinstance(subject, str):
            return original(self, *args, **kwargs)
        internal = is_internal(subject)
        operation = api_operation(subject) if internal else "request"
        attributes: dict[str, Any] = {A_SYSTEM: SYSTEM, A_OP_NAME: operation}
        if not internal:  # an API subject names streams and consumers: not a destination
            attributes[A_DESTINATION] = subject
            attributes[A_OP_TYPE] = "send"
        name = operation if internal else f"request {subject}"
        op = Operation(tel, name, SpanKind.CLIENT, attributes)
        if not internal:
            headers = inject(_value(_arg(args, kwargs, 3, "headers")), op.context())
            args, kwargs = _with(args, kwargs, 3, "headers", headers)
        with op:
            reply = original(self, *args, **kwargs)
            _link_stored(op.span, reply)
            if internal:
                op.failure = _api_failure(reply)
        return reply

    return wrapper


def _api_failure(reply: Any) -> APIError | None:
    """The error a JetStream API reply carries, as the library raises it once it reads the
    reply (``{"error": {"code": 404, "err_code": 10059, ...}}``); None for any other reply."""
    if not isinstance(reply, Msg) or b'"error"' not in reply.data:
        return None
    try:
        error = json.loads(reply.data)["error"]
        return api_error(int(error["code"]), int(error.get("err_code", 0)), error["description"])
    except (ValueError, LookupError, TypeError):  # not an API error reply after all
        return None


def _link_stored(span: trace.Span, reply: Any) -> None:
    """Link a reply that carries a trace context (a direct get's stored message) to the span."""
    if isinstance(reply, Msg) and reply.header_size:
        found = span_context_of(producer_context(reply))
        if found.is_valid:
            span.add_link(found)


# ------------------------------------------------------------------ receiving


def receive_one(tel: Telemetry, original: Fn, operation: str) -> Fn:
    """A CONSUMER ``receive`` span for a call that returns one :class:`Msg`."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if busy():
            return original(self, *args, **kwargs)
        start = time.time_ns()
        token = enter()
        try:
            msg = original(self, *args, **kwargs)
        except TimeoutError:  # nothing received: no span, as for an empty fetch
            raise
        except BaseException as exc:
            tel.record_receive(
                f"{operation} {_source(self)}", operation, [], start, exc, **_about(self)
            )
            raise
        finally:
            leave(token)
        if not msg.is_status:  # a status (a batched get's end, 404...) is no message received
            name = f"{operation} {msg.subject}"
            tel.record_receive(name, operation, [msg], start, **_about(self))
        return msg

    return wrapper


def receive_many(tel: Telemetry, original: Fn, operation: str) -> Fn:
    """A CONSUMER ``receive`` span for a call that returns a list of messages (a fetch)."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if busy():
            return original(self, *args, **kwargs)
        start = time.time_ns()
        name = f"{operation} {_source(self)}"
        token = enter()
        try:
            msgs = original(self, *args, **kwargs)
        except TimeoutError:
            raise
        except BaseException as exc:
            tel.record_receive(name, operation, [], start, exc, **_about(self))
            raise
        finally:
            leave(token)
        if not msgs:  # an empty fetch received nothing: no span (polling would flood)
            return msgs
        about = _about(self)
        if len(msgs) != 1:  # one message names its own destination
            about[A_BATCH] = len(msgs)
        tel.record_receive(name, operation, msgs, start, **about)
        return msgs

    return wrapper


def receive_iterator(tel: Telemetry, original: Fn, operation: str) -> Fn:
    """A CONSUMER ``receive`` span for each message a generator yields (``for msg in sub``)."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Iterator[Msg]:
        messages = original(self, *args, **kwargs)
        while True:
            start = time.time_ns()
            try:
                msg = next(messages)
            except StopIteration:
                return
            if not msg.is_status:
                tel.record_receive(f"{operation} {msg.subject}", operation, [msg], start)
            yield msg

    return wrapper


def _source(owner: Any) -> str:
    """What a receiving object reads: a consumer's stream, a subscription's subject."""
    return str(getattr(owner, "stream_name", None) or getattr(owner, "subject", "") or "")


def _about(owner: Any) -> dict[str, Any]:
    """A consumer's stream and name, as span attributes (none for a subscription)."""
    stream = getattr(owner, "stream_name", None)
    if not isinstance(stream, str):
        return {}
    about: dict[str, Any] = {A_STREAM: stream}
    name = getattr(owner, "name", None)
    if isinstance(name, str):
        about[A_CONSUMER] = name
    return about


# ------------------------------------------------------------------ callbacks


def process(tel: Telemetry, callback: Callable[[Msg], object]) -> Callable[[Msg], object]:
    """``callback`` run inside a CONSUMER ``process`` span, child of the producer's.

    A status message (a heartbeat, flow control) is handed on without a
    span; what the library answers to it is not traced either.
    """

    def traced(msg: Msg) -> object:
        if msg.is_status:
            token = enter()
            try:
                return callback(msg)
            finally:
                leave(token)
        attributes = message_attributes(msg)
        attributes[A_OP_TYPE] = "process"
        attributes[A_OP_NAME] = "process"
        with Operation(
            tel, f"process {msg.subject}", SpanKind.CONSUMER, attributes,
            context=producer_context(msg), histogram=tel.process_duration, quiet=False,
        ):  # fmt: skip
            try:
                return callback(msg)
            finally:
                tel.consumed.add(1, tel.metric_attributes(attributes))

    traced.__wrapped__ = callback  # type: ignore[attr-defined]
    return traced


def with_callback(tel: Telemetry, original: Fn, index: int, name: str) -> Fn:
    """A method taking a message callback (``subscribe``, ``consume``): the callback traced."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        callback = _arg(args, kwargs, index, name)
        if callable(callback):
            args, kwargs = _with(args, kwargs, index, name, process(tel, callback))
        return original(self, *args, **kwargs)

    return wrapper


# ------------------------------------------------------------------ Spark


def spark_write(tel: Telemetry, original: Fn) -> Fn:
    """A Spark task's write: one PRODUCER span with the rows it stored."""

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        destination = getattr(self, "subject", None) or "jetstream"
        attributes: dict[str, Any] = {
            A_SYSTEM: SYSTEM, A_DESTINATION: destination, A_OP_TYPE: "send",
            A_OP_NAME: "spark.write",
        }  # fmt: skip
        name = f"spark.write {destination}"
        with Operation(tel, name, SpanKind.PRODUCER, attributes, quiet=False) as op:
            # every message the task sends carries this span's trace context
            self.added_headers = trace_headers(op.context())
            try:
                commit = original(self, *args, **kwargs)
            finally:
                del self.added_headers
            found = {A_BATCH: commit.rows, "messaging.nats.duplicates": commit.duplicates}
            op.span.set_attributes(found)
        tel.sent.add(commit.rows, tel.metric_attributes(attributes))
        return commit

    return wrapper
