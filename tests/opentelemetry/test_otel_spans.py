"""Spans and metrics of an instrumented client against the real server (in-memory exporters)."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

import jetstream_sync
from jetstream_sync.jetstream.config import ConsumerConfig
from tests.fixtures.polling import wait_for

NATS = {"messaging.system": "nats"}


def _same_trace(child, parent) -> bool:
    return child.context.trace_id == parent.context.trace_id


def test_core_publish_is_a_producer_span_and_the_callback_a_child_process_span(otel, nc):
    """publish: PRODUCER span, traceparent in the headers; the callback's span is its child."""
    got = []
    nc.subscribe("otel.core", cb=got.append)
    nc.publish("otel.core", b"hello", headers={"k": "v", "Nats-Msg-Id": "id-1"})
    wait_for(lambda: otel.spans("process otel.core"))
    publish = otel.span("publish otel.core", SpanKind.PRODUCER)
    assert publish.attributes == {
        **NATS,
        "messaging.destination.name": "otel.core",
        "messaging.operation.type": "send",
        "messaging.operation.name": "publish",
        "messaging.message.body.size": 5,
        "messaging.message.id": "id-1",
    }
    process = otel.span("process otel.core", SpanKind.CONSUMER)
    assert process.attributes["messaging.message.id"] == "id-1"
    assert process.parent.span_id == publish.context.span_id and _same_trace(process, publish)
    assert process.attributes["messaging.operation.type"] == "process"
    assert got[0].headers["k"] == "v" and got[0].headers["traceparent"].startswith("00-")


def test_next_msg_and_iteration_are_receive_spans_in_the_producers_trace(otel, nc):
    """Subscription.next_msg and ``for msg in sub``: one CONSUMER receive span per message."""
    sub = nc.subscribe("otel.pull")
    nc.publish("otel.pull", b"1")
    nc.publish("otel.pull", b"2")
    sub.next_msg()
    assert next(iter(sub)).data == b"2"
    first, second = otel.spans("publish otel.pull")
    receives = otel.spans("receive otel.pull", SpanKind.CONSUMER)
    assert [r.parent.span_id for r in receives] == [first.context.span_id, second.context.span_id]


def test_a_receive_inside_a_span_of_the_application_links_to_the_producer(otel, nc):
    """With a span current, the receive span is its child and links to the producer's span."""
    sub = nc.subscribe("otel.linked")
    nc.publish("otel.linked", b"x")
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("handler") as handler:
        sub.next_msg()
    receive = otel.span("receive otel.linked")
    publish = otel.span("publish otel.linked")
    assert receive.parent.span_id == handler.get_span_context().span_id
    assert [link.context.span_id for link in receive.links] == [publish.context.span_id]


def test_request_is_a_client_span_and_the_responder_continues_its_trace(otel, nc):
    """request: CLIENT span with traceparent; the responder's process span is in its trace."""
    nc.subscribe("otel.svc", cb=lambda msg: msg.respond(b"pong"))
    assert nc.request("otel.svc", b"ping", timeout=5).data == b"pong"
    wait_for(lambda: otel.spans("process otel.svc"))
    request = otel.span("request otel.svc", SpanKind.CLIENT)
    assert request.attributes["messaging.operation.name"] == "request"
    assert _same_trace(otel.span("process otel.svc"), request)


def test_a_response_is_a_producer_span_in_the_requesters_trace_and_carries_it(otel, nc):
    """Msg.respond: a PRODUCER span, child of the responder's process span, to a temporary
    destination; the reply's headers carry its trace context; the reply subject is no
    metric attribute."""
    nc.subscribe("otel.resp", cb=lambda msg: msg.respond(b"pong", headers={"k": "v"}))
    reply = nc.request("otel.resp", b"ping", timeout=5)
    # The process span ends when the callback returns, after its response went out.
    wait_for(lambda: otel.spans("publish (temporary)") and otel.spans("process otel.resp"))
    request = otel.span("request otel.resp", SpanKind.CLIENT)
    process = otel.span("process otel.resp")
    response = otel.span("publish (temporary)", SpanKind.PRODUCER)
    assert response.parent.span_id == process.context.span_id and _same_trace(response, request)
    assert response.attributes["messaging.destination.temporary"] is True
    assert response.attributes["messaging.destination.name"].startswith("_INBOX.")
    assert reply.headers["k"] == "v"
    assert reply.headers["traceparent"].split("-")[1] == f"{request.context.trace_id:032x}"
    points = otel.points("messaging.client.sent.messages")
    points += otel.points("messaging.client.operation.duration")
    responses = [p for p in points if p.attributes["messaging.operation.name"] == "publish"]
    assert responses and all("_INBOX" not in str(p.attributes) for p in points)


def test_an_error_sets_the_span_status(otel, nc, js):
    """A JetStream publish nobody stores, and a callback that raises: spans with ERROR status."""
    with pytest.raises(jetstream_sync.NoRespondersError):
        js.publish("otel.nowhere", b"x", timeout=1, retry_attempts=0)
    span = otel.span("publish otel.nowhere")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "NoRespondersError"
    errors = []
    with jetstream_sync.connect(nc.connected_url, error_cb=errors.append) as other:
        other.subscribe("otel.bad", cb=lambda msg: 1 / 0)
        other.publish("otel.bad", b"x")
        wait_for(lambda: errors)
    assert otel.span("process otel.bad").status.status_code == StatusCode.ERROR


def test_jetstream_publish_and_fetch(otel, js, stream):
    """js.publish: PRODUCER span with stream, sequence and message id; fetch(1) continues
    its trace, a fetch of several links to each producer."""
    subject = f"{stream.name}.a"
    js.publish(subject, b"one", msg_id="m-1")
    js.publish(subject, b"two")
    js.publish(subject, b"three")
    publish = otel.spans(f"publish {subject}")
    assert publish[0].attributes["messaging.nats.stream.name"] == stream.name
    assert publish[0].attributes["messaging.nats.stream.sequence"] == 1
    assert publish[0].attributes["messaging.message.id"] == "m-1"
    consumer = js.create_consumer(stream.name, ConsumerConfig(durable_name="otel"))
    (msg,) = consumer.fetch(1, timeout=5)
    one = otel.spans(f"fetch {stream.name}")[-1]
    assert one.parent.span_id == publish[0].context.span_id
    assert one.attributes["messaging.nats.stream.sequence"] == 1
    assert one.attributes["messaging.consumer.group.name"] == "otel"
    msg.ack()
    msgs = consumer.fetch(5, timeout=1)
    assert len(msgs) == 2
    batch = otel.spans(f"fetch {stream.name}")[-1]
    assert batch.attributes["messaging.batch.message_count"] == 2
    assert {link.context.span_id for link in batch.links} == {
        p.context.span_id for p in publish[1:]
    }
    assert otel.span("CONSUMER.CREATE", SpanKind.CLIENT).attributes == {
        **NATS,
        "messaging.operation.name": "CONSUMER.CREATE",
    }


def test_next_messages_and_consume(otel, js, stream):
    """Consumer.next and messages() make receive spans; consume() a process span per message."""
    subject = f"{stream.name}.b"
    js.publish(subject, b"x")
    publish = otel.span(f"publish {subject}")

    def consumer(name):
        return js.create_consumer(stream.name, ConsumerConfig(durable_name=name))

    consumer("next").next(timeout=5).ack()
    with consumer("messages").messages(max_messages=10) as it:
        next(it).ack()
    got = []
    ctx = consumer("consume").consume(lambda msg: (got.append(msg), msg.ack()))
    try:
        wait_for(lambda: got)
    finally:
        ctx.stop()
    nexts = otel.spans(f"next {subject}", SpanKind.CONSUMER)
    assert [n.parent.span_id for n in nexts] == [publish.context.span_id] * 2
    assert otel.span(f"process {subject}").parent.span_id == publish.context.span_id


def test_push_subscription_callback_and_next_msg(otel, js, stream):
    """A push consumer's callback runs in a process span; its next_msg makes receive spans."""
    subject = f"{stream.name}.push"
    got = []
    sub = js.subscribe(subject, cb=got.append)
    js.publish(subject, b"x")
    wait_for(lambda: otel.spans(f"process {subject}"))  # ends when the callback returned
    sub.unsubscribe()
    assert len(got) == 1
    publish = otel.span(f"publish {subject}")
    assert otel.span(f"process {subject}").parent.span_id == publish.context.span_id
    pull = js.subscribe(subject, durable=None)
    assert pull.next_msg(timeout=5).data == b"x"
    receive = otel.span(f"receive {subject}")
    assert receive.parent.span_id == publish.context.span_id
    pull.unsubscribe()


def test_publish_async_span_ends_with_its_ack_and_pending_returns_to_zero(otel, js, stream):
    """publish_async: the span holds the PubAck's sequence; the pending gauge counts down."""
    subject = f"{stream.name}.async"
    futures = [js.publish_async(subject, b"%d" % n) for n in range(3)]
    js.publish_async_completed(timeout=5)
    assert [f.result().seq for f in futures] == [1, 2, 3]
    wait_for(lambda: len(otel.spans(f"publish_async {subject}")) == 3)
    seqs = sorted(
        s.attributes["messaging.nats.stream.sequence"]
        for s in otel.spans(f"publish_async {subject}")
    )
    assert seqs == [1, 2, 3]
    (pending,) = otel.points("nats.jetstream.publish.pending")
    assert pending.value == 0


@pytest.fixture
def stream_options():
    return {"allow_atomic": True}


def test_publish_batch_has_a_create_span_per_message_and_one_linked_send(otel, js, stream):
    """publish_batch: each message carries its own create span's context; send links them."""
    subject = f"{stream.name}.batch"
    js.publish_batch([(subject, b"1"), (subject, b"2", {"k": "v"})])
    created = otel.spans(f"publish_batch {subject}")
    send = [s for s in created if s.attributes["messaging.operation.type"] == "send"]
    create = [s for s in created if s.attributes["messaging.operation.type"] == "create"]
    assert len(send) == 1 and len(create) == 2
    assert send[0].attributes["messaging.batch.message_count"] == 2
    assert {link.context.span_id for link in send[0].links} == {s.context.span_id for s in create}
    stored = stream.get_msg(2)
    assert stored.headers["k"] == "v"
    assert format(create[1].context.span_id, "016x") in stored.headers["traceparent"]


def test_publish_arrow_is_one_send_span_whose_context_every_row_carries(otel, js, stream):
    """publish_arrow: one PRODUCER span with the rows and the stream; each stored row carries
    its trace context, but a row that brought its own traceparent keeps it."""
    pa = pytest.importorskip("pyarrow")
    subject = f"{stream.name}.arrow"
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    headers = pa.array([None, [("traceparent", own)], None], pa.map_(pa.string(), pa.string()))
    table = pa.table({"data": [b"1", b"2", b"3"], "headers": headers})
    ack = js.publish_arrow(table, subject)
    span = otel.span(f"publish_arrow {subject}", SpanKind.PRODUCER)
    assert span.attributes["messaging.operation.type"] == "send"
    assert span.attributes["messaging.batch.message_count"] == ack.rows == 3
    assert span.attributes["messaging.nats.stream.name"] == stream.name
    mine = format(span.context.span_id, "016x")
    carried = [stream.get_msg(seq).headers["traceparent"] for seq in (1, 2, 3)]
    assert mine in carried[0] and mine in carried[2] and carried[1] == own
    assert not otel.spans(f"publish {subject}")  # the rows make no spans of their own


def test_key_value_put_carries_the_trace_and_get_links_to_it(otel, js):
    """A Key-Value put stores the trace context; a get's span links to the put's span."""
    kv = js.create_key_value(bucket="OTEL_KV")
    try:
        kv.put("k", b"v")
        assert kv.get("k").value == b"v"
    finally:
        js.delete_key_value("OTEL_KV")
    put = otel.span("request $KV.OTEL_KV.k", SpanKind.CLIENT)
    get = otel.span("DIRECT.GET", SpanKind.CLIENT)
    assert [link.context.span_id for link in get.links] == [put.context.span_id]


def test_metrics_count_messages_and_durations_and_read_client_stats(otel, shared_server):
    """Sent and consumed counters, duration histograms, and each client's stats."""
    with jetstream_sync.connect(shared_server.url) as client:
        sub = client.subscribe("otel.metrics")
        for _ in range(3):
            client.publish("otel.metrics", b"abcd")
        for _ in range(3):
            sub.next_msg()
        (sent,) = [
            p
            for p in otel.points("messaging.client.sent.messages")
            if p.attributes["messaging.destination.name"] == "otel.metrics"
        ]
        assert sent.value == 3
        (consumed,) = otel.points("messaging.client.consumed.messages")
        assert consumed.value == 3
        durations = otel.points("messaging.client.operation.duration")
        assert sum(p.count for p in durations) == 6
        (out_msgs,) = otel.points("nats.client.sent.messages")
        assert out_msgs.value == client.stats.out_msgs >= 3
        (out_bytes,) = otel.points("nats.client.sent.bytes")
        assert out_bytes.value >= 3 * 4
        (reconnects,) = otel.points("nats.client.reconnects")
        assert reconnects.value == 0


def test_an_api_subject_gets_no_trace_context_and_a_named_span(otel, js, stream):
    """A JetStream API call is a CLIENT span named by its call, with no stream name in it."""
    stream.info()
    span = otel.span("STREAM.INFO", SpanKind.CLIENT)
    assert "messaging.destination.name" not in span.attributes
    assert not trace.get_current_span().get_span_context().is_valid


def test_an_api_call_the_server_refuses_is_an_error_span(otel, js, stream):
    """The server's API error (a stream that does not exist, a bad config) marks the call's
    span ERROR with the error the library raises; a call that succeeds stays unset."""
    with pytest.raises(jetstream_sync.StreamNotFoundError):
        js.stream(f"{stream.name}X")
    with pytest.raises(jetstream_sync.APIError) as refused:
        js.update_stream(name=stream.name, subjects=[f"{stream.name}.>"], storage="memory")
    stream.info()
    infos = otel.spans("STREAM.INFO")
    missing, found = infos[0], infos[-1]
    assert missing.status.status_code == StatusCode.ERROR
    assert missing.attributes["error.type"] == "StreamNotFoundError"
    update = otel.span("STREAM.UPDATE")
    assert update.status.status_code == StatusCode.ERROR
    assert update.attributes["error.type"] == type(refused.value).__qualname__
    assert found.status.status_code == StatusCode.UNSET


def test_fast_batch_has_a_create_span_per_add_and_a_send_span_for_the_commit(otel, js, stream_name):
    """FastBatch: each added message carries its create span's context; commit is a send."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_batched=True)
    subject = f"{stream_name}.fast"
    with js.fast_batch() as batch:
        for n in range(3):
            batch.add(subject, b"%d" % n)
        ack = batch.commit()
    created = otel.spans(f"fast_batch {subject}", SpanKind.PRODUCER)
    assert [s.attributes["messaging.operation.type"] for s in created] == ["create"] * 3
    commit = otel.span("fast_batch.commit", SpanKind.PRODUCER)
    assert commit.attributes["messaging.batch.message_count"] == ack.batch_size == 3
    assert commit.attributes["messaging.nats.stream.sequence"] == 3
    traceparent = stream.get_msg(2).headers["traceparent"]
    assert format(created[1].context.span_id, "016x") in traceparent


def test_fast_batch_add_arrow_is_one_create_span_whose_context_every_row_carries(
    otel, js, stream_name
):
    """FastBatch.add_arrow: one create span with the rows it added; each stored row carries
    its context, but a row that brought its own traceparent keeps it."""
    pa = pytest.importorskip("pyarrow")
    stream = js.create_stream(
        name=stream_name, subjects=[f"{stream_name}.>"], allow_batched=True, allow_direct=True
    )
    subject = f"{stream_name}.fastarrow"
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    headers = pa.array([None, [("traceparent", own)], None], pa.map_(pa.string(), pa.string()))
    with js.fast_batch() as batch:
        batch.add_arrow(pa.table({"data": [b"1", b"2", b"3"], "headers": headers}), subject)
        batch.commit()
    (span,) = otel.spans(f"fast_batch {subject}", SpanKind.PRODUCER)
    assert span.attributes["messaging.operation.type"] == "create"
    assert span.attributes["messaging.batch.message_count"] == 3
    mine = format(span.context.span_id, "016x")
    carried = [stream.get_msg(seq).headers["traceparent"] for seq in (1, 2, 3)]
    assert mine in carried[0] and mine in carried[2] and carried[1] == own


def test_ordered_consumer_fetch_and_next(otel, js, stream):
    """The ordered consumer's fetch and next make receive spans in the producer's trace."""
    subject = f"{stream.name}.ordered"
    js.publish(subject, b"1")
    js.publish(subject, b"2")
    first, second = otel.spans(f"publish {subject}")
    ordered = stream.ordered_consumer()
    (msg,) = ordered.fetch(1, timeout=5)
    assert otel.span(f"fetch {stream.name}").parent.span_id == first.context.span_id
    assert ordered.next(timeout=5).data == b"2"
    assert otel.span(f"next {subject}").parent.span_id == second.context.span_id


def test_a_status_message_received_makes_no_span(otel, nc):
    """A status (here the server's 503: nobody listens) taken with next_msg is no message."""
    inbox = nc.new_inbox()
    sub = nc.subscribe(inbox)
    nc.publish("otel.nobody", b"", reply=inbox)
    assert sub.next_msg(timeout=5).status == 503
    assert otel.names() == ["publish otel.nobody"]


def test_api_operation_names_leave_streams_and_consumers_out():
    """A JetStream API span is named by its call, whatever the prefix, stream or consumer."""
    from jetstream_sync.opentelemetry._wrappers import api_operation

    assert api_operation("$JS.API.STREAM.INFO.ORDERS") == "STREAM.INFO"
    assert api_operation("$JS.hub.API.CONSUMER.CREATE.S.c.f.>") == "CONSUMER.CREATE"
    assert api_operation("$JS.API.DIRECT.GET.KV_b.$KV.b.k") == "DIRECT.GET"
    assert api_operation("imported.js.CONSUMER.MSG.NEXT.S.c") == "CONSUMER.MSG.NEXT"
    assert api_operation("$JS.ACK.S.c.1.2.3.4.5") == "ACK"
    assert api_operation("$JS.API.INFO") == "INFO"


def test_the_reconnects_metric_counts_a_server_restart(otel, restartable_server):
    """nats.client.reconnects reads Client.stats: one restart, one reconnect."""
    with jetstream_sync.connect(restartable_server.url, reconnect_time_wait=0.1) as client:
        restartable_server.restart()
        wait_for(lambda: client.stats.reconnects == 1 and client.is_connected, timeout=15)
        (reconnects,) = otel.points("nats.client.reconnects")
        assert reconnects.value == 1
