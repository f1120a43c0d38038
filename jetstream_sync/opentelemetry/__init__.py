"""OpenTelemetry tracing and metrics: :class:`JetStreamSyncInstrumentor`.

Install with the ``otel`` extra (``opentelemetry-api`` and
``opentelemetry-instrumentation``). Nothing in the rest of the package imports
this one: a client that is not instrumented runs exactly the code it runs
without OpenTelemetry installed. ``opentelemetry-instrument python app.py``
finds the instrumentor through the ``opentelemetry_instrumentor`` entry point.
See ``docs/observability.md``.

It wraps the public methods of the client, the subscriptions, JetStream's
context and consumers (and the Spark writers once Spark's workers import them).
Of the core's internals it uses only the core's seam, ``jetstream_sync._seam``
(``ApiSubject``, to tell a JetStream API call from a publish).
"""

from __future__ import annotations

try:
    from ._instrumentor import JetStreamSyncInstrumentor
except ModuleNotFoundError as missing:
    if (missing.name or "").split(".")[0] not in ("opentelemetry", "wrapt"):
        raise
    raise ModuleNotFoundError(
        f"{missing}: jetstream_sync.opentelemetry needs the otel extra "
        "(pip install 'jetstream_sync[otel]')",
        name=missing.name,
    ) from missing

__all__ = ["JetStreamSyncInstrumentor"]
