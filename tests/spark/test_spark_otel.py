"""A Spark write traced in Spark's Python workers, where the instrumentor wraps the writer."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from tests.fixtures.spark_otel import TracedJetStream  # noqa: E402

# 420 s, as a Spark block of the docs: the session may start here, and a worker daemon
# with the new environment starts for the traced source.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(420)]

# What the workers run first (Python's sitecustomize hook, as opentelemetry-instrument
# does it): a tracer writing each span as a JSON line, and the instrumentor on.
SITECUSTOMIZE = """
import os
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from jetstream_sync.opentelemetry import JetStreamSyncInstrumentor

_out = open(os.environ["JSS_OTEL_SPANS"], "a", buffering=1)
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
    out=_out, formatter=lambda span: span.to_json(indent=None) + "\\n")))
JetStreamSyncInstrumentor().instrument(tracer_provider=_provider)
"""


def test_a_spark_write_makes_a_producer_span_per_task_in_the_workers(
    spark, shared_server, stream, tmp_path: Path
):
    """Each task's write is a PRODUCER span made in its Python worker, with the rows it
    stored; every message it sent carries that span's trace context."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE))
    spans = tmp_path / "spans.jsonl"
    environment = spark.sparkContext.environment
    saved = dict(environment)
    # A data source's workers get the SparkContext's environment of when it was
    # registered: a new daemon with these variables serves this source only.
    environment["JSS_OTEL_SPANS"] = str(spans)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(hook), environment.get("PYTHONPATH"), os.environ["PYTHONPATH"]])
    )
    try:
        spark.dataSource.register(TracedJetStream)
    finally:
        environment.clear()
        environment.update(saved)
    df = spark.createDataFrame([(b"r%d" % i,) for i in range(20)], "data BINARY").repartition(2)
    (
        df.write.format("jetstream-traced").mode("append")
        .option("servers", shared_server.url).option("subject", f"{stream.name}.s")
        .save()
    )  # fmt: skip
    assert stream.info().state.messages == 20
    written = [
        span
        for span in map(json.loads, spans.read_text().splitlines())
        if span["name"] == f"spark.write {stream.name}.s"
    ]
    assert {span["kind"] for span in written} == {"SpanKind.PRODUCER"}
    assert sum(span["attributes"]["messaging.batch.message_count"] for span in written) == 20
    assert written[0]["attributes"]["messaging.system"] == "nats"
    # each message carries the trace context of the span of the task that sent it
    traces = {span["context"]["trace_id"][2:] for span in written}
    carried = {stream.get_msg(seq).headers["traceparent"].split("-")[1] for seq in range(1, 21)}
    assert carried == traces
