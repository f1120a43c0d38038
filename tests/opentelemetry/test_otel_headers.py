"""Subjects and trace headers other clients wrote: read back whatever their bytes, never fatal."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jetstream_sync
from tests.fixtures.polling import wait_for
from tests.fixtures.raw_client import RawClient

TRACE_ID, SPAN_ID = "a" * 32, "b" * 16
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01".encode()

# Header lines no instrumented client would write, each one message.
ODD_TRACE_HEADERS = [
    b"baggage: \xff=\xfe",  # not UTF-8
    b"tracestate: k=\xe9",
    b"traceparent: \xff\xfe",
    b"traceparent: garbage",
    b"traceparent: 00-" + b"0" * 32 + b"-" + b"0" * 16 + b"-01",  # the invalid all-zero ids
    b"traceparent:",
    b"traceparent: " + TRACEPARENT + b"\r\nbaggage: =;;,\xff",
]


@pytest.fixture
def raw(shared_server) -> Iterator[RawClient]:
    """A plain socket on the shared server (not instrumented: it writes what it is given)."""
    client = RawClient(shared_server.port)
    yield client
    client.close()


def hpub(raw: RawClient, subject: str | bytes, *header_lines: bytes) -> None:
    """Publish ``x`` with these header lines, as another client may."""
    head = b"NATS/1.0\r\n" + b"".join(line + b"\r\n" for line in header_lines) + b"\r\n"
    subject = subject if isinstance(subject, bytes) else subject.encode()
    raw.send(b"HPUB %s %d %d\r\n%sx\r\n" % (subject, len(head), len(head) + 1, head))


def test_odd_trace_headers_never_keep_a_message_from_its_consumer(otel, nc, js, stream, raw):
    """Malformed or non-UTF-8 trace headers: next_msg, a callback and a fetch all get the
    message (a receive span in a new trace), never an error."""
    sub = nc.subscribe("otel.odd")
    nc.flush(timeout=5)
    called = []
    errors = []
    with jetstream_sync.connect(nc.connected_url, error_cb=errors.append) as other:
        other.subscribe("otel.odd", cb=called.append)
        other.flush(timeout=5)
        for line in ODD_TRACE_HEADERS:
            hpub(raw, "otel.odd", line)
            hpub(raw, f"{stream.name}.odd", line)
        got = [sub.next_msg(timeout=5) for _ in ODD_TRACE_HEADERS]
        wait_for(lambda: len(called) == len(ODD_TRACE_HEADERS) or errors)
    assert errors == [] and len(got) == len(called) == len(ODD_TRACE_HEADERS)
    consumer = js.create_consumer(stream.name, jetstream_sync.ConsumerConfig())
    assert len(consumer.fetch(len(ODD_TRACE_HEADERS), timeout=5)) == len(ODD_TRACE_HEADERS)
    receives = otel.spans("receive otel.odd")
    assert len(receives) == len(ODD_TRACE_HEADERS)
    assert format(receives[-1].context.trace_id, "032x") == TRACE_ID  # the valid one is kept


@pytest.mark.parametrize("name", [b"Traceparent", b"TRACEPARENT"])
def test_a_traceparent_in_another_case_continues_its_trace(otel, nc, raw, name):
    """``Traceparent`` (Go's http.Header carrier writes it so) is read as ``traceparent``."""
    sub = nc.subscribe("otel.case")
    nc.flush(timeout=5)
    hpub(raw, "otel.case", name + b": " + TRACEPARENT)
    sub.next_msg(timeout=5)
    receive = otel.span("receive otel.case")
    assert format(receive.context.trace_id, "032x") == TRACE_ID
    assert format(receive.parent.span_id, "016x") == SPAN_ID


def test_a_publish_replaces_trace_headers_in_any_case_and_leaves_the_callers_alone(otel, nc):
    """A stale ``Traceparent`` the caller passes is replaced, not sent beside the new one;
    the caller's mapping and Headers are not changed."""
    sub = nc.subscribe("otel.stale")
    stale = f"00-{TRACE_ID}-{SPAN_ID}-01"
    given = {"Traceparent": stale, "k": "v"}
    headers = jetstream_sync.Headers({"TraceParent": [stale], "k": ["v"]})
    nc.publish("otel.stale", b"x", headers=given)
    nc.publish("otel.stale", b"x", headers=headers)
    for _ in range(2):
        got = sub.next_msg(timeout=5).headers
        assert sorted(got) == ["k", "traceparent"] and TRACE_ID not in got["traceparent"]
    assert given == {"Traceparent": stale, "k": "v"}
    assert headers == {"TraceParent": [stale], "k": ["v"]}


@pytest.mark.parametrize("bad", [[("k", "v")], "k:v"], ids=["pairs", "str"])
def test_headers_that_are_not_a_mapping_raise_the_same_typeerror_when_instrumented(
    otel, nc, js, bad
):
    """The TypeError of an uninstrumented client, and every span started is ended (ERROR)."""
    calls = [
        lambda: nc.publish("otel.bad", b"x", headers=bad),
        lambda: nc.request("otel.bad", b"x", timeout=1, headers=bad),
        lambda: js.publish("otel.bad", b"x", headers=bad),
        lambda: js.publish_async("otel.bad", b"x", headers=bad),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="headers must be a mapping"):
            call()
    ended = otel.spans()
    assert len(ended) == len(calls) and all(
        s.attributes["error.type"] == "TypeError" for s in ended
    )


def _encodes(text: object) -> bool:
    """Whether an exporter can write ``text`` (OTLP encodes every string as UTF-8)."""
    if isinstance(text, str):
        text.encode("utf-8")  # raises on a surrogate escape
    elif isinstance(text, tuple):
        return all(map(_encodes, text))
    return True


def test_subjects_and_ids_that_are_not_utf8_reach_spans_and_metrics_as_valid_text(otel, nc, raw):
    """A subject or Nats-Msg-Id with bytes that are not UTF-8 (U+FFFD in names, attributes
    and metric attributes): an exporter encoding UTF-8 can write every span."""
    sub = nc.subscribe("otel.bytes.>")
    nc.flush(timeout=5)
    hpub(raw, b"otel.bytes.caf\xe9", b"Nats-Msg-Id: \xff")
    assert sub.next_msg(timeout=5).subject == "otel.bytes.caf\udce9"
    nc.publish("otel.bytes.caf\udce9", b"x", headers={"Nats-Msg-Id": "\udcff"})
    sub.next_msg(timeout=5)
    spans = otel.spans()
    names = ["receive otel.bytes.caf\ufffd", "publish otel.bytes.caf\ufffd"]
    assert [s.name for s in spans] == [*names, names[0]]
    for span in spans:
        assert span.attributes["messaging.destination.name"] == "otel.bytes.caf\ufffd"
        assert span.attributes["messaging.message.id"] == "\ufffd"
    points = otel.points("messaging.client.consumed.messages")
    assert points and all(_encodes(v) for p in points for v in p.attributes.values())
    with pytest.raises(jetstream_sync.BadHeaderError):  # as uninstrumented, in an ended span
        nc.publish("otel.bytes.x", b"x", headers={"Nats-Msg-Id": "\ud800"})
    assert otel.spans()[-1].attributes["error.type"] == "BadHeaderError"
