"""The columnar publisher (``jetstream/arrow_publish.py``) that ``publish_arrow`` and the Spark
sink run on, against a real server, as the Spark sink drives it (``where`` names the partition)."""

from __future__ import annotations

import hashlib
import time

import pytest

import jetstream_sync
from jetstream_sync._routes import ReplyRoute
from jetstream_sync.errors import RowPublishError
from jetstream_sync.jetstream import arrow_publish
from jetstream_sync.jetstream.arrow_publish import ROW_TOKENS, ArrowPublisher
from tests.fixtures.polling import wait_for

pa = pytest.importorskip("pyarrow")


@pytest.fixture(autouse=True, params=["c-decoded", "tuples"])
def ack_path(request, monkeypatch) -> str:
    """Each test runs twice: with a buffer of nothing but acks decoded in one C call (the
    usual way), and with every ack handed over as a reply tuple (the way of acks that arrive
    in a buffer with other messages)."""
    if request.param == "tuples":

        def tuples_only(self, client) -> None:
            self.route = ReplyRoute(client)
            self._prefix_len = 0

        monkeypatch.setattr(arrow_publish._AckRoute, "__init__", tuples_only)
    return request.param


def _batch_of(data, subject=None, headers=None, msg_id=None, data_type=None):
    columns = {"data": pa.array(data, data_type or pa.binary())}
    if subject is not None:
        columns["subject"] = pa.array(subject, pa.string())
    if headers is not None:
        columns["headers"] = pa.array(headers, pa.map_(pa.string(), pa.list_(pa.string())))
    if msg_id is not None:
        columns["msgId"] = pa.array(msg_id, pa.string())
    return pa.RecordBatch.from_pydict(columns)


def _publisher(client, prefix, default, partition=0, **options) -> ArrowPublisher:
    return ArrowPublisher(client, prefix, default, where=f" of partition {partition}", **options)


def _publish(client, batches, default=None, prefix="w:0:", **options) -> ArrowPublisher:
    publisher = _publisher(client, prefix, default, **options)
    publisher.publish_all(batches)
    return publisher


def _all(stream) -> list:
    info = stream.info()
    return [stream.get_msg(seq) for seq in range(info.state.first_seq, info.state.last_seq + 1)]


def test_rows_land_with_the_message_ids_of_the_row_scheme(nc, stream):
    """Each row is stored once under ``<prefix><index>:<blake2b of data keyed by subject>``."""
    subject = f"{stream.name}.a"
    rows = [b"row-%d" % i for i in range(10)]
    first = _batch_of(rows[:6], [subject] * 6)
    second = _batch_of(rows[6:], [None, "", subject, subject])  # null and "": the default
    publisher = _publish(nc, [first, second], default=subject, prefix="job:3:")
    assert (publisher.sent, publisher.duplicates, publisher.stream) == (10, 0, stream.name)
    stored = _all(stream)
    assert [m.data for m in stored] == rows
    for index, msg in enumerate(stored):
        digest = hashlib.blake2b(rows[index], digest_size=6, key=subject.encode()).hexdigest()
        assert msg.headers["Nats-Msg-Id"] == f"job:3:{index}:{digest}"
        assert msg.subject == subject


def test_added_headers_reach_every_row_unless_the_row_has_one_of_the_name(nc, stream):
    """``added_headers`` (the instrumentation's trace context) go on every message, with a
    headers column or without one; a row's own header of the same name wins."""
    subject = f"{stream.name}.t"
    added = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    plain = _batch_of([b"a", b"b"], [subject] * 2)
    own = [[("traceparent", ["mine"]), ("k", ["v"])], None, [("k", ["w"])]]
    with_column = _batch_of([b"c", b"d", b"e"], [subject] * 3, own)
    publisher = _publisher(nc, "t:0:", None, added_headers=added)
    publisher.publish_all([plain, with_column])
    stored = _all(stream)
    assert [m.headers.get_all("traceparent") for m in stored] == [
        [added["traceparent"]], [added["traceparent"]], ["mine"],
        [added["traceparent"]], [added["traceparent"]],
    ]  # fmt: skip
    assert [m.headers.get("k") for m in stored] == [None, None, "v", None, "w"]
    assert all(m.headers["Nats-Msg-Id"].startswith("t:0:") for m in stored)


def test_a_rewrite_is_deduplicated_and_counted(nc, stream):
    """Publishing the same rows under the same prefix again stores nothing new."""
    batch = _batch_of([b"x%d" % i for i in range(5000)])
    subject = f"{stream.name}.d"
    _publish(nc, [batch], default=subject)
    again = _publish(nc, [batch], default=subject)
    assert (again.sent, again.duplicates) == (5000, 5000)
    state = stream.info().state
    assert (state.messages, state.last_seq) == (5000, 5000)


def test_string_data_headers_and_explicit_ids(nc, stream):
    """String data is UTF-8; header values (one or several) go before the given msg id."""
    subject = f"{stream.name}.h"
    batch = _batch_of(
        ["é1", "é2", "é3"],
        [subject] * 3,
        [[("k", ["v"])], None, [("k", ["a", "b"]), ("z", ["1"])]],
        ["id-1", None, "id-3"],
        data_type=pa.string(),
    )
    _publish(nc, [batch], prefix="p:0:")
    one, two, three = _all(stream)
    assert (one.data, one.headers["k"], one.headers["Nats-Msg-Id"]) == ("é1".encode(), "v", "id-1")
    assert two.headers["Nats-Msg-Id"].startswith("p:0:1:")
    assert three.headers.get_all("k") == ["a", "b"] and three.headers["z"] == "1"


def test_a_bad_subject_fails_its_row_after_the_rows_before_it(nc, stream):
    """A row with a wildcard subject names the row; the row before it (in its chunk) is
    stored, the one after it is not sent."""
    good = f"{stream.name}.ok"
    batch = _batch_of([b"a", b"b", b"c"], [good, f"{stream.name}.*", good])
    with pytest.raises(RowPublishError, match=r"row 1 of partition 0 .*\.\*'\) was not sent"):
        _publish(nc, [batch])
    assert [m.data for m in _all(stream)] == [b"a"]


def test_null_data_and_a_missing_subject_name_the_row(nc, stream):
    """Null data, and a row with neither subject nor default, fail naming the row."""
    with pytest.raises(RowPublishError, match="row 2 of partition 0 .*null data"):
        _publish(nc, [_batch_of([b"a", b"b", None])], default=f"{stream.name}.n")
    with pytest.raises(RowPublishError, match="row 0 of partition 0 .*no subject"):
        _publish(nc, [_batch_of([b"a"], [None])])


def test_a_null_header_value_names_the_row_after_sending_the_rows_before(nc, stream):
    """Rows before the bad header row are stored; the bad row fails the task."""
    headers = [[("k", ["v"])], [("k", ["v"])], [("k", [None])]]
    batch = _batch_of([b"a", b"b", b"c"], headers=headers)
    with pytest.raises(RowPublishError, match="row 2 of partition 0 .*header 'k' is null"):
        _publish(nc, [batch], default=f"{stream.name}.h")
    assert stream.info().state.messages == 2


def test_a_rejected_row_names_its_subject_index_and_the_server_error(nc, js, stream_name):
    """The stream refuses an oversized row: the error names it and the server's reason."""
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], max_msg_size=256)
    rows = [b"x" * (1024 if i == 3 else 4) for i in range(6)]
    with pytest.raises(RowPublishError) as caught:
        _publish(nc, [_batch_of(rows)], default=f"{stream_name}.big")
    text = str(caught.value)
    assert "row 3 of partition 0" in text and f"{stream_name}.big" in text, text
    assert "maximum" in text.lower(), text


def test_no_stream_for_the_subject_fails_the_first_row(nc, stream):
    """Without a stream the server answers 503 (no responders): the task fails, naming row 0."""
    with pytest.raises(RowPublishError, match="row 0 of partition 0 .*NoResponders"):
        _publish(nc, [_batch_of([b"a"])], default=f"{stream.name}X.nowhere")


def test_max_rows_sends_that_many_rows_then_fails(nc, stream):
    """The retry-test hook stops after its count of stored rows."""
    with pytest.raises(RuntimeError, match="after 7 stored rows"):
        rows = [_batch_of([b"%d" % i for i in range(10)])]
        _publish(nc, rows, f"{stream.name}.m", max_rows=7)
    assert stream.info().state.messages == 7


def test_a_missing_ack_fails_the_oldest_waiting_row(nc):
    """A subject whose subscriber never answers: after the ack wait the first row fails."""
    silent = nc.subscribe("silent.sink")
    try:
        with pytest.raises(RowPublishError, match=r"row 0 of partition 0 .*no PubAck within 0.5"):
            _publish(nc, [_batch_of([b"a", b"b"])], default="silent.sink", ack_wait=0.5)
    finally:
        silent.unsubscribe()


def test_a_lost_connection_fails_the_waiting_rows(fault_proxy, js, stream):
    """Acks stalled, then the link cut: the task fails with ConnectionLostError at once."""
    with jetstream_sync.connect(fault_proxy.url, max_reconnect_attempts=-1) as client:
        publisher = _publisher(client, "lost:0:", f"{stream.name}.l")
        try:
            fault_proxy.stall(directions=("to_client",))
            publisher.publish(_batch_of([b"a", b"b"]))
            fault_proxy.cut()
            with pytest.raises(RowPublishError, match="ConnectionLostError"):
                publisher.wait_all()
        finally:
            publisher.close()


def test_a_client_closed_while_rows_wait_fails_them_at_once(fault_proxy, js, stream):
    """Acks stalled, then the client closed by another thread: the rows fail with
    ConnectionClosedError at once, not when the ack wait (here 60 s) runs out."""
    client = jetstream_sync.connect(fault_proxy.url)
    publisher = _publisher(client, "closed:0:", f"{stream.name}.c", ack_wait=60)
    try:
        fault_proxy.stall(directions=("to_client",))
        publisher.publish(_batch_of([b"a", b"b"]))
        client.close()
        started = time.monotonic()
        with pytest.raises(RowPublishError, match="ConnectionClosedError: client closed while 2"):
            publisher.wait_all()
        assert time.monotonic() - started < 30
    finally:
        publisher.close()
        client.close()


def test_publishers_share_the_route_and_a_late_ack_reaches_nobody(nc, stream):
    """A second publisher on the same client takes the next range of the same route; an ack
    to a publisher that is done (here one sent by hand to its first token) is dropped."""
    subject = f"{stream.name}.r"
    first = _publish(nc, [_batch_of([b"1", b"2"])], default=subject, prefix="a:0:")
    second = _publish(nc, [_batch_of([b"3"])], default=subject, prefix="b:0:")
    assert second._route is first._route
    assert second._base == first._base + ROW_TOKENS
    nc.publish(f"{first._route.prefix}{first._base}", b'{"stream":"S","seq":1}')
    nc.flush(timeout=5)  # the server routes the reply back before it answers the PING
    assert first._acks.empty() and second._acks.empty()
    assert stream.info().state.messages == 3


def test_replies_whose_token_is_not_a_plain_number_reach_nobody(nc, stream):
    """Plain PubAcks sent by hand to the route's inbox with tokens that are not plain ASCII
    decimals (a sign, an underscore, another script's digit, 25 digits) are dropped; the same
    body to the publisher's first token reaches it (so the check can see a delivery)."""
    publisher = _publisher(nc, "f:0:", f"{stream.name}.f")
    try:
        prefix, body = publisher._route.prefix, b'{"stream":"S","seq":1}'
        for token in (f"+{publisher._base}", f"{publisher._base}_0", "\u0663", "9" * 25):
            nc.publish(f"{prefix}{token}", body)
        nc.flush(timeout=5)  # the server routes them back before it answers the PING
        assert publisher._acks.empty()
        nc.publish(f"{prefix}{publisher._base}", body)
        nc.flush(timeout=5)
        assert not publisher._acks.empty()
    finally:
        publisher.close()


def test_publishers_at_once_on_one_client_each_get_their_acks(nc, stream):
    """Two publishers with rows in flight together: each counts its own acks, none is lost."""
    subject = f"{stream.name}.p"
    left = _publisher(nc, "l:0:", subject)
    right = _publisher(nc, "r:0:", subject)
    try:
        for i in range(3):
            left.publish(_batch_of([b"l%d-%d" % (i, j) for j in range(1000)]))
            right.publish(_batch_of([b"r%d-%d" % (i, j) for j in range(700)]))
        left.wait_all()
        right.wait_all()
    finally:
        left.close()
        right.close()
    assert (left.sent, right.sent, left.waiting, right.waiting) == (3000, 2100, 0, 0)
    assert stream.info().state.messages == 5100
    assert left._route._lasting == {}


def test_a_chunk_the_write_buffer_refuses_names_its_first_row(restartable_server):
    """Disconnected with a small reconnect buffer: the chunk is refused, the row is named."""
    server = restartable_server
    with jetstream_sync.connect(server.url) as nc:
        nc.jetstream().create_stream(name="RB", subjects=["rb.>"])
    with jetstream_sync.connect(
        server.url, reconnect_buf_size=256, max_reconnect_attempts=-1, reconnect_time_wait=0.05
    ) as client:
        publisher = _publisher(client, "rb:4:", "rb.x", partition=4)
        try:
            publisher.publish(_batch_of([b"a"]))
            publisher.wait_all()
            server.stop(keep_store=True)
            wait_for(lambda: client.is_reconnecting, timeout=10, message="no disconnect")
            with pytest.raises(RowPublishError, match=r"row 1 of partition 4 .*ReconnectBuffer"):
                publisher.publish(_batch_of([b"b" * 300]))
        finally:
            publisher.close()
