"""Spans and instruments of the instrumentation: attributes, trace context in headers.

Attribute names follow the OpenTelemetry semantic conventions for messaging;
what only NATS has (the stream, its sequence) is ``messaging.nats.*``, as the
conventions name a system's own attributes (``messaging.kafka.offset``).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context, get_current
from opentelemetry.metrics import Meter
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from ..errors import NotJetStreamMsgError
from ..headers import Headers
from ..msg import Msg

HeadersIn = Mapping[str, str | Sequence[str]]

SYSTEM = "nats"
MSG_ID = "Nats-Msg-Id"
# Attribute names (messaging semantic conventions, and NATS's own under messaging.nats).
A_SYSTEM = "messaging.system"
A_DESTINATION = "messaging.destination.name"
A_TEMPORARY = "messaging.destination.temporary"
A_OP_TYPE = "messaging.operation.type"
A_OP_NAME = "messaging.operation.name"
A_MSG_ID = "messaging.message.id"
A_BODY_SIZE = "messaging.message.body.size"
A_BATCH = "messaging.batch.message_count"
A_CONSUMER = "messaging.consumer.group.name"
A_STREAM = "messaging.nats.stream.name"
A_SEQUENCE = "messaging.nats.stream.sequence"
A_ERROR = "error.type"

# Set while an instrumented call runs on this thread: the library calls it makes
# (a JetStream publish's request, a fetch's pull requests) make no span of their own.
_busy: contextvars.ContextVar[bool] = contextvars.ContextVar("jetstream_sync_otel", default=False)


def busy() -> bool:
    """Whether an instrumented call of this thread (or context) is running."""
    return _busy.get()


def enter() -> contextvars.Token[bool]:
    """Mark an instrumented call as running; give the token to :func:`leave`."""
    return _busy.set(True)


def leave(token: contextvars.Token[bool]) -> None:
    """End what :func:`enter` began."""
    _busy.reset(token)


def trace_headers(context: Context | None = None) -> dict[str, str]:
    """The trace context of ``context`` (default: the current one) as headers, by the
    propagators configured globally (W3C ``traceparent`` and ``tracestate`` by default)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return carrier


def inject(headers: HeadersIn | None, context: Context | None = None) -> HeadersIn | None:
    """``headers`` with the trace context of ``context`` (default: the current one) added.

    The propagators configured globally decide the keys (W3C ``traceparent``
    and ``tracestate`` by default); they replace keys of the same name in any
    case (``Traceparent``: trace header names are case-insensitive, and a stale
    one left beside would be what a Go ``http.Header`` carrier reads).
    The caller's mapping is never changed: a new one is returned.
    """
    carrier = trace_headers(context)
    if not carrier or not (headers is None or isinstance(headers, Mapping)):
        return headers  # not a mapping: the call it goes to raises its TypeError
    if headers is None:
        return carrier
    replaced = {key.lower() for key in carrier}
    if isinstance(headers, Headers):
        kept = [(k, v) for k, v in headers.pairs() if k.lower() not in replaced]
        return Headers.from_pairs([*kept, *carrier.items()])
    merged: dict[str, str | Sequence[str]] = {
        # a key that is not a str is kept: the call it goes to raises its TypeError
        k: v
        for k, v in headers.items()
        if not isinstance(k, str) or k.lower() not in replaced
    }
    merged.update(carrier)
    return merged


class _HeaderGetter(Getter[Headers]):
    """Trace headers as other clients write them, for the propagators to read.

    A name matches in any case (``Traceparent``, as Go's ``http.Header`` carrier
    writes it), the exact name first; each value is valid Unicode (a byte that
    is not UTF-8 becomes U+FFFD), so no propagator meets what it cannot encode.
    """

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        values = carrier.get_all(key)
        if not values:
            folded = key.lower()
            values = [
                v for name in carrier if name.lower() == folded for v in carrier.get_all(name)
            ]
        return [valid_text(v) for v in values] or None

    def keys(self, carrier: Headers) -> list[str]:
        return list(carrier)


def valid_text(value: str) -> str:
    """``value`` with each byte that is not UTF-8 (a surrogate escape) as U+FFFD."""
    if value.isascii():
        return value
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no decoder made (the call refuses it)
        raw = value.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def valid_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` with every str value made :func:`valid_text`, in place.

    A subject or a message id another client wrote may hold bytes that are
    not UTF-8; exporters encode strings as UTF-8, and OTLP's fails the whole
    batch on one it cannot encode.
    """
    for key, value in attributes.items():
        if type(value) is str and not value.isascii():
            attributes[key] = valid_text(value)
    return attributes


_GETTER = _HeaderGetter()


def producer_context(msg: Msg) -> Context:
    """The current context with the trace context the message's headers carry, if any.

    Headers another client wrote may hold anything: a propagator that cannot
    read them leaves the current context, it never costs the consumer its message.
    """
    current = get_current()
    if not msg.header_size:
        return current
    try:
        return propagate.extract(msg.headers, context=current, getter=_GETTER)
    except Exception:  # a third-party propagator's error on a malformed value
        return current


def span_context_of(context: Context) -> trace.SpanContext:
    """The span context a context holds (invalid when it holds none)."""
    return trace.get_current_span(context).get_span_context()


def message_id(headers: object) -> Any:
    """The ``Nats-Msg-Id`` of headers a caller passed (None without one, or for what is
    not a mapping: the call raises its own TypeError)."""
    return headers.get(MSG_ID) if isinstance(headers, Mapping) else None


def message_attributes(msg: Msg) -> dict[str, Any]:
    """What a received message tells about itself: subject, size, id, stream and sequence."""
    attributes: dict[str, Any] = {
        A_SYSTEM: SYSTEM,
        A_DESTINATION: msg.subject,
        A_BODY_SIZE: len(msg.data),
    }
    if msg.header_size:
        msg_id = msg.headers.get(MSG_ID)
        if msg_id is not None:
            attributes[A_MSG_ID] = msg_id
    if msg.reply.startswith("$JS.ACK."):
        try:
            meta = msg.metadata
        except NotJetStreamMsgError:  # an ack subject of another shape: no stream attributes
            return attributes
        attributes[A_STREAM] = meta.stream
        attributes[A_SEQUENCE] = meta.sequence.stream
        attributes[A_CONSUMER] = meta.consumer
    return attributes


class Telemetry:
    """The tracer and the instruments every wrapper records with.

    Args:
        tracer: spans come from it.
        meter: the instruments are made on it.
    """

    def __init__(self, tracer: Tracer, meter: Meter) -> None:
        self.tracer = tracer
        self.sent = meter.create_counter(
            "messaging.client.sent.messages",
            unit="{message}",
            description="Messages the instrumented calls published.",
        )
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Messages the instrumented calls received or handed to a callback.",
        )
        self.duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of a publish, request, receive or JetStream API call.",
        )
        self.process_duration = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="Duration of a callback handling one message.",
        )
        self.pending = meter.create_up_down_counter(
            "nats.jetstream.publish.pending",
            unit="{message}",
            description="Asynchronous JetStream publishes waiting for their acknowledgement.",
        )

    def metric_attributes(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """The low-cardinality part of span attributes, for the instruments (a temporary
        destination, a reply subject, is left out)."""
        keys = (A_SYSTEM, A_DESTINATION, A_OP_TYPE, A_OP_NAME, A_ERROR)
        found = {key: attributes[key] for key in keys if key in attributes}
        if attributes.get(A_TEMPORARY):
            found.pop(A_DESTINATION, None)
        return found

    def finish(
        self,
        span: Span,
        attributes: dict[str, Any],
        start_ns: int,
        error: BaseException | None,
        histogram: Any = None,
    ) -> None:
        """End ``span``: its status from ``error``, its duration into a histogram."""
        if error is not None:
            attributes[A_ERROR] = type(error).__qualname__
            span.set_attribute(A_ERROR, type(error).__qualname__)
            message = valid_text(str(error))  # it may quote a subject's bytes
            span.record_exception(error, attributes={"exception.message": message})
            span.set_status(Status(StatusCode.ERROR, message))
        end_ns = time.time_ns()
        span.end(end_time=end_ns)
        (histogram or self.duration).record(
            (end_ns - start_ns) / 1e9, self.metric_attributes(attributes)
        )

    def record_receive(
        self,
        name: str,
        operation: str,
        msgs: Sequence[Msg],
        start_ns: int,
        error: BaseException | None = None,
        **extra: Any,
    ) -> None:
        """A CONSUMER span (``receive``) from ``start_ns`` to now, for messages received.

        Made once the messages are in, so that it can belong to the producer's
        trace: with one message and no span current, the producer's span is
        its parent; otherwise the current span is, and it links to the
        producer of each message.
        """
        attributes: dict[str, Any] = {
            A_SYSTEM: SYSTEM,
            A_OP_TYPE: "receive",
            A_OP_NAME: operation,
            **extra,
        }
        parent: Context | None = None
        links: list[Link] = []
        if len(msgs) == 1:
            attributes.update(message_attributes(msgs[0]))
        elif msgs:
            attributes[A_BATCH] = len(msgs)
        if msgs:
            contexts = [producer_context(msg) for msg in msgs]
            ambient = trace.get_current_span().get_span_context().is_valid
            if len(msgs) == 1 and not ambient and span_context_of(contexts[0]).is_valid:
                parent = contexts[0]
            else:
                links = [Link(sc) for sc in map(span_context_of, contexts) if sc.is_valid]
        valid_attributes(attributes)
        span = self.tracer.start_span(
            valid_text(name),
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
            start_time=start_ns,
        )
        self.finish(span, attributes, start_ns, error)
        if msgs:
            self.consumed.add(len(msgs), self.metric_attributes(attributes))


class Operation:
    """One traced call: its span starts now; ``with`` it around the call.

    Leaving the block ends the span (its status from the exception, if one
    escaped, else from :attr:`failure`) and records the duration. Inside it,
    the library's own calls make no span (see :func:`busy`); with ``quiet``
    False (a user callback runs inside, or calls that should be traced), they
    do, and the span is the current one so that theirs nest under it.

    Args:
        telemetry: the tracer and instruments.
        name: the span's name.
        kind: the span's kind.
        attributes: its attributes (kept: metrics read them at the end).
        context: the parent's context (default: the current one).
        links: links to other spans.
        histogram: where the duration goes (default: the operation duration).
        quiet: whether the library's calls inside are silenced.
    """

    __slots__ = (
        "telemetry", "span", "attributes", "start", "failure", "_histogram", "_quiet", "_marked",
        "_attached",
    )  # fmt: skip

    def __init__(
        self,
        telemetry: Telemetry,
        name: str,
        kind: SpanKind,
        attributes: dict[str, Any],
        *,
        context: Context | None = None,
        links: Sequence[Link] = (),
        histogram: Any = None,
        quiet: bool = True,
    ) -> None:
        self.telemetry = telemetry
        self.attributes = valid_attributes(attributes)
        self.start = time.time_ns()
        self.span = telemetry.tracer.start_span(
            valid_text(name), context=context, kind=kind, attributes=attributes, links=links,
            start_time=self.start,
        )  # fmt: skip
        self.failure: BaseException | None = None
        """An error the call returned rather than raised (a JetStream API error reply)."""
        self._histogram = histogram
        self._quiet = quiet
        self._marked: contextvars.Token[bool] | None = None
        self._attached: contextvars.Token[Context] | None = None

    def context(self) -> Context:
        """A context holding the span (for the headers of the message it sends)."""
        return trace.set_span_in_context(self.span)

    def __enter__(self) -> Operation:
        if self._quiet:
            self._marked = enter()
        else:
            self._attached = otel_context.attach(self.context())
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._marked is not None:
            leave(self._marked)
        if self._attached is not None:
            otel_context.detach(self._attached)
        failed = error if error is not None else self.failure
        self.telemetry.finish(self.span, self.attributes, self.start, failed, self._histogram)
