"""``JetStreamSyncInstrumentor``: puts the wrappers on the public methods, and takes them off."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Collection
from typing import Any

import wrapt
from opentelemetry import metrics, trace

# instrumentor.py opens with a file-wide "# type: ignore": mypy sees an empty module
# (no override reaches into it), so BaseInstrumentor is Any to the checker.
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from .. import __version__
from ..client import Client
from ..jetstream.consumer import Consumer
from ..jetstream.context import JetStreamContext
from ..jetstream.fast_batch import FastBatch
from ..jetstream.ordered import OrderedConsumer, OrderedMessageIterator
from ..jetstream.push import JetStreamSubscription, OrderedPushSubscription
from ..msg import Msg
from ..subscription import Subscription
from . import _wrappers as w
from ._stats import ClientStatsObserver, tracking_init
from ._telemetry import Telemetry

_SCOPE = "jetstream_sync.opentelemetry"
_SPARK_WRITE = "jetstream_sync.spark._write"

Patch = tuple[type, str, Callable[[Telemetry, Callable[..., Any]], Callable[..., Any]]]


def _patches() -> list[Patch]:
    """Every method the instrumentor replaces, with the factory of its wrapper."""
    patches: list[Patch] = [
        (Client, "publish", lambda t, f: w.publish(t, f, "publish", 3)),
        (Client, "request", w.request),
        (Client, "subscribe", lambda t, f: w.with_callback(t, f, 2, "cb")),
        (Msg, "respond", w.respond),
        (Subscription, "next_msg", lambda t, f: w.receive_one(t, f, "receive")),
        (Subscription, "__iter__", lambda t, f: w.receive_iterator(t, f, "receive")),
        (JetStreamContext, "publish", lambda t, f: w.publish(t, f, "publish", -1)),
        (JetStreamContext, "publish_async", w.publish_async),
        (JetStreamContext, "publish_batch", w.publish_batch),
        (JetStreamContext, "publish_arrow", w.publish_arrow),
        (FastBatch, "add", w.fast_batch_add),
        (FastBatch, "add_arrow", w.fast_batch_add_arrow),
        (FastBatch, "commit", w.fast_batch_commit),
        (JetStreamSubscription, "next_msg", lambda t, f: w.receive_one(t, f, "receive")),
        (OrderedPushSubscription, "next_msg", lambda t, f: w.receive_one(t, f, "receive")),
        (OrderedMessageIterator, "next", lambda t, f: w.receive_one(t, f, "next")),
    ]
    from .. import MessageIterator  # the pull iterator of Consumer.messages()

    patches.append((MessageIterator, "next", lambda t, f: w.receive_one(t, f, "next")))
    for consumer in (Consumer, OrderedConsumer):
        patches += [
            (consumer, "fetch", lambda t, f: w.receive_many(t, f, "fetch")),
            (consumer, "fetch_no_wait", lambda t, f: w.receive_many(t, f, "fetch")),
            (consumer, "next", lambda t, f: w.receive_one(t, f, "next")),
            (consumer, "consume", lambda t, f: w.with_callback(t, f, 0, "callback")),
        ]
    patches.append((Consumer, "fetch_bytes", lambda t, f: w.receive_many(t, f, "fetch")))
    return patches


class JetStreamSyncInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """OpenTelemetry tracing and metrics for every ``jetstream_sync`` client of the process.

    ``instrument()`` replaces public methods of :class:`Client`,
    :class:`Subscription`, :class:`JetStreamContext`, the consumers and
    their iterators with wrappers that make spans (messaging semantic
    conventions), add the trace context to published headers and record
    metrics; ``uninstrument()`` puts the originals back. Until then, nothing
    of the client differs. ``opentelemetry-instrument`` finds it under the
    ``opentelemetry_instrumentor`` entry point ``jetstream_sync``.
    See ``docs/observability.md``.

    Example::

        JetStreamSyncInstrumentor().instrument(tracer_provider=provider)
    """

    _lock = threading.Lock()
    _originals: list[tuple[type, str, Any]] = []
    _telemetry: Telemetry | None = None
    _hooked = False  # the Spark writers' import hook is registered once per process

    def instrumentation_dependencies(self) -> Collection[str]:
        """None: the instrumentation ships inside the package it instruments."""
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        """Wrap the methods.

        Args:
            **kwargs: ``tracer_provider`` and ``meter_provider`` (default:
                the global ones).
        """
        tracer = trace.get_tracer(
            _SCOPE, __version__, kwargs.get("tracer_provider"),
            schema_url="https://opentelemetry.io/schemas/1.26.0",
        )  # fmt: skip
        meter = metrics.get_meter(
            _SCOPE, __version__, kwargs.get("meter_provider"),
            schema_url="https://opentelemetry.io/schemas/1.26.0",
        )  # fmt: skip
        telemetry = Telemetry(tracer, meter)
        observer = ClientStatsObserver(meter)
        with self._lock:
            if type(self)._originals:  # another thread's instrument() won the race
                return
            type(self)._telemetry = telemetry
            originals = []
            for owner, name, factory in _patches():
                original = owner.__dict__[name]
                originals.append((owner, name, original))
                setattr(owner, name, factory(telemetry, original))
            init = Client.__dict__["__init__"]
            originals.append((Client, "__init__", init))
            Client.__init__ = tracking_init(observer, init)  # type: ignore[method-assign]
            type(self)._originals = originals
            # The Spark writers run in Spark's Python workers, which import them when a
            # task starts: wrapped then (or now, if imported already), not imported here.
            hooked, JetStreamSyncInstrumentor._hooked = JetStreamSyncInstrumentor._hooked, True
        if not hooked:
            wrapt.register_post_import_hook(self._wrap_spark, _SPARK_WRITE)
        elif _SPARK_WRITE in sys.modules:
            self._wrap_spark(sys.modules[_SPARK_WRITE])

    def _wrap_spark(self, module: Any) -> None:
        with self._lock:
            telemetry = type(self)._telemetry
            if telemetry is None:  # uninstrumented since the hook was registered
                return
            if any(owner is module.JetStreamWriter for owner, _, _ in type(self)._originals):
                return  # wrapped already: the import hook and instrument() both got here
            for writer in (module.JetStreamWriter, module.JetStreamStreamWriter):
                original = writer.__dict__["write"]
                type(self)._originals.append((writer, "write", original))
                writer.write = w.spark_write(telemetry, original)

    def _uninstrument(self, **kwargs: Any) -> None:
        """Put every original method back."""
        with self._lock:
            for owner, name, original in reversed(type(self)._originals):
                setattr(owner, name, original)
            type(self)._originals = []
            type(self)._telemetry = None
