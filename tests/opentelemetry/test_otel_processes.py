"""Across processes: a consumer continues the producer's trace; ``opentelemetry-instrument``
instruments an unchanged script; ``uninstrument()`` and no instrumentation change nothing."""

from __future__ import annotations

import configparser
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import jetstream_sync
from jetstream_sync.jetstream.config import ConsumerConfig
from jetstream_sync.opentelemetry import JetStreamSyncInstrumentor
from tests.fixtures.otel import instrumented
from tests.fixtures.polling import wait_for

REPO = Path(__file__).resolve().parent.parent.parent

# The producer: instrumented with an in-memory exporter, it publishes on core, to a
# stream and to a Key-Value bucket, then prints the trace id of each producer span.
PRODUCER = """
import json, sys
import jetstream_sync
from tests.fixtures.otel import instrumented

url, subject, stream_subject, bucket = sys.argv[1:]
with instrumented() as otel, jetstream_sync.connect(url) as nc:
    js = nc.jetstream()
    nc.publish(subject, b"core")
    nc.flush()
    js.publish(stream_subject, b"stored")
    js.key_value(bucket).put("k", b"v")
    print(json.dumps({span.name: f"{span.context.trace_id:032x}" for span in otel.spans()}))
"""


def _run(script: str, *args: str, env=None, command=None, first: Path | None = None) -> str:
    """Run ``script`` in a new interpreter (this worktree, after ``first``, leads its path);
    its stdout."""
    environment = {**os.environ, **(env or {})}
    paths = [str(REPO), *filter(None, environment.get("PYTHONPATH", "").split(os.pathsep))]
    if first is not None:
        paths.insert(0, str(first))
    environment["PYTHONPATH"] = os.pathsep.join(paths)
    done = subprocess.run(
        [*(command or []), sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True, text=True, timeout=120, env=environment,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def test_a_consumer_in_another_process_continues_the_producers_trace(shared_server, js, stream):
    """Core, JetStream pull and push, and Key-Value: the consumer's span has the trace id
    of the span that published in the other process."""
    stream_subject = f"{stream.name}.x"
    kv = js.create_key_value(bucket="OTEL_2P")
    try:
        with instrumented() as otel:
            nc = js.client
            sub = nc.subscribe("otel.2p")
            pushed = []
            push = js.subscribe(stream_subject, cb=pushed.append)
            consumer = js.create_consumer(stream.name, ConsumerConfig(durable_name="p"))
            out = _run(PRODUCER, shared_server.url, "otel.2p", stream_subject, "OTEL_2P")
            produced = json.loads(out.strip().splitlines()[-1])

            assert sub.next_msg(timeout=5).data == b"core"
            (msg,) = consumer.fetch(1, timeout=5)
            wait_for(lambda: pushed)
            push.unsubscribe()
            assert kv.get("k").value == b"v"
    finally:
        js.delete_key_value("OTEL_2P")

    def trace_of(name: str) -> str:
        return f"{otel.span(name).context.trace_id:032x}"

    assert trace_of("receive otel.2p") == produced["publish otel.2p"]
    assert trace_of(f"fetch {stream.name}") == produced[f"publish {stream_subject}"]
    assert trace_of(f"process {stream_subject}") == produced[f"publish {stream_subject}"]
    (link,) = otel.span("DIRECT.GET").links
    assert f"{link.context.trace_id:032x}" == produced["request $KV.OTEL_2P.k"]


# An application that knows nothing of OpenTelemetry.
APP = """
import sys
import jetstream_sync

with jetstream_sync.connect(sys.argv[1]) as nc:
    sub = nc.subscribe("otel.auto")
    nc.publish("otel.auto", b"hello")
    assert sub.next_msg(timeout=5).headers["traceparent"]
"""


def _entry_points_of_this_tree(directory: Path) -> Path:
    """A distribution's metadata holding this tree's entry points (from setup.cfg).

    The environment may hold an install of the package made before the entry
    point was added (and the tree its ``egg-info``); first on ``PYTHONPATH``,
    this one is found first.
    """
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    found = directory / "jetstream_sync-0.0.dist-info"
    found.mkdir()
    (found / "METADATA").write_text("Metadata-Version: 2.1\nName: jetstream_sync\nVersion: 0.0\n")
    groups = config["options.entry_points"]
    text = "".join(f"[{group}]\n{groups[group].strip()}\n\n" for group in groups)
    (found / "entry_points.txt").write_text(text)
    return directory


def test_opentelemetry_instrument_instruments_an_unchanged_script(shared_server, tmp_path):
    """``opentelemetry-instrument python app.py``: spans of the script's publish and receive
    (console exporter), in one trace."""
    pytest.importorskip("opentelemetry.distro")  # what configures the SDK from OTEL_*
    command = Path(sys.executable).parent / "opentelemetry-instrument"
    metadata = _entry_points_of_this_tree(tmp_path)
    out = _run(
        APP, shared_server.url, command=[str(command)],
        env={
            "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "app",
        },
        first=metadata,
    )  # fmt: skip
    spans = {
        name: trace
        for name, trace in re.findall(
            r'"name": "([^"]+)",\s*"context": \{\s*"trace_id": "(\w+)"', out
        )
    }
    assert spans["publish otel.auto"] == spans["receive otel.auto"], out


def test_uninstrument_puts_every_original_back_and_records_nothing(nc):
    """After uninstrument() the classes hold their own functions again; no span, no header."""
    before = {
        (cls, name): cls.__dict__[name]
        for cls in (jetstream_sync.Client, jetstream_sync.Subscription, jetstream_sync.Consumer)
        for name in cls.__dict__
    }
    with instrumented() as otel:
        assert (
            jetstream_sync.Client.__dict__["publish"]
            is not before[(jetstream_sync.Client, "publish")]
        )
    after = {
        (cls, name): cls.__dict__[name]
        for cls in (jetstream_sync.Client, jetstream_sync.Subscription, jetstream_sync.Consumer)
        for name in cls.__dict__
    }
    assert after == before
    sub = nc.subscribe("otel.off")
    nc.publish("otel.off", b"x")
    assert sub.next_msg(timeout=5).header_size == 0
    assert otel.spans() == []
    assert not JetStreamSyncInstrumentor().is_instrumented_by_opentelemetry


def test_the_package_imports_and_runs_without_opentelemetry(shared_server):
    """With ``opentelemetry`` unimportable, the client works and never tries to import it."""
    script = """
    import sys

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ImportError(f"{name} is not installed here")

    sys.meta_path.insert(0, Refuse())
    import jetstream_sync
    import jetstream_sync.kv, jetstream_sync.object_store
    with jetstream_sync.connect(sys.argv[1]) as nc:
        sub = nc.subscribe("otel.none")
        nc.publish("otel.none", b"x")
        assert sub.next_msg(timeout=5).data == b"x"
    assert not [m for m in sys.modules if m.startswith(("opentelemetry", "jetstream_sync.opentel"))]
    """
    _run(script, shared_server.url)


def test_importing_the_instrumentor_without_the_extra_says_which_extra(shared_server):
    """Without OpenTelemetry installed, importing the instrumentor names the ``otel`` extra."""
    script = """
    import sys

    sys.modules["opentelemetry"] = None  # not installed: importing it fails
    try:
        import jetstream_sync.opentelemetry
    except ModuleNotFoundError as exc:
        assert exc.name == "opentelemetry", exc.name
        assert "pip install 'jetstream_sync[otel]'" in str(exc), exc
    else:
        raise AssertionError("imported without opentelemetry")
    """
    _run(script, shared_server.url)


def test_instrument_from_16_threads_at_once_wraps_once_and_uninstrument_undoes_it(nc):
    """Threads racing to instrument() wrap each method once (one span per publish);
    one uninstrument() then puts every original back."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    original = jetstream_sync.Client.__dict__["publish"]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often: the race has its chance every round
    try:
        for _ in range(10):
            barrier = threading.Barrier(16)

            def instrument(barrier: threading.Barrier) -> None:
                barrier.wait()
                JetStreamSyncInstrumentor().instrument(tracer_provider=provider)

            threads = [threading.Thread(target=instrument, args=(barrier,)) for _ in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            exporter.clear()
            nc.publish("otel.race", b"x")
            assert [span.name for span in exporter.get_finished_spans()] == ["publish otel.race"]
            JetStreamSyncInstrumentor().uninstrument()
            assert jetstream_sync.Client.__dict__["publish"] is original
    finally:
        sys.setswitchinterval(switch)
        if jetstream_sync.Client.__dict__["publish"] is not original:
            JetStreamSyncInstrumentor().uninstrument()
        provider.shutdown()
