"""What OpenTelemetry instrumentation costs per operation, against no instrumentation.

``python -m benchmarks.otel_cost`` starts a dev server and times, per call,
a core ``publish`` (no subscriber), a blocking ``js.publish`` and a request
(an echo responder on a second client): not instrumented, instrumented
(SDK tracer with a batch span processor over an exporter that drops, SDK
meter), and not instrumented again, alternating rounds in one sitting so the
host's load falls on every mode alike. It prints the best round of each mode
and the ratio to the uninstrumented time, and beside them what the SDK itself
takes to start and end one span with the same processor (most of the cost).
Needs the ``otel`` extra and ``opentelemetry-sdk``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import jetstream_sync
from jetstream_sync.opentelemetry import JetStreamSyncInstrumentor
from jetstream_sync.testing import NatsServer

ROUNDS = 5
_ATTRS = {"messaging.system": "nats", "messaging.destination.name": "bench.core"}


class _Drop(SpanExporter):
    """An exporter that sends nowhere: the cost measured is the client's, not a network's."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _per_call(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    """Run the comparison and print a table (microseconds per call, best round)."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(_Drop()))
    meter_provider = MeterProvider()
    instrumentor = JetStreamSyncInstrumentor()
    with NatsServer(jetstream=True) as server:
        nc = jetstream_sync.connect(server.url)
        responder = jetstream_sync.connect(server.url)
        responder.subscribe("bench.svc", cb=lambda msg: msg.respond(msg.data))
        responder.flush()
        js = nc.jetstream()
        js.create_stream(name="OTEL", subjects=["otel.>"], storage="memory", max_msgs=10_000)
        tracer = tracer_provider.get_tracer("bench")
        cases = {
            "SDK span alone": (lambda: tracer.start_span("x", attributes=_ATTRS).end(), 5_000),
            "core publish (128 B)": (lambda: nc.publish("bench.core", b"x" * 128), 20_000),
            "js.publish (128 B)": (lambda: js.publish("otel.x", b"x" * 128), 1_000),
            "request (echo)": (lambda: nc.request("bench.svc", b"ping", timeout=5), 1_000),
        }
        best: dict[tuple[str, str], float] = {}
        for _ in range(ROUNDS):
            for mode in ("off", "on", "off again"):
                if mode == "on":
                    instrumentor.instrument(
                        tracer_provider=tracer_provider, meter_provider=meter_provider
                    )
                for name, (fn, n) in cases.items():
                    took = _per_call(fn, n)
                    best[name, mode] = min(best.get((name, mode), took), took)
                nc.flush()
                if mode == "on":
                    instrumentor.uninstrument()
        nc.close()
        responder.close()
    tracer_provider.shutdown()
    title = f"µs per call (best of {ROUNDS})"
    print(f"{title:28} {'off':>8} {'on':>8} {'off again':>10} ratio")
    for name in cases:
        off = min(best[name, "off"], best[name, "off again"])
        on = best[name, "on"]
        print(
            f"{name:28} {best[name, 'off']:8.2f} {on:8.2f} {best[name, 'off again']:10.2f}"
            f" {on / off:5.2f}x (+{on - off:.1f} µs)"
        )


if __name__ == "__main__":
    sys.exit(main())
