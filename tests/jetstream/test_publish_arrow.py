"""``JetStreamContext.publish_arrow``: a pyarrow table's rows published, every one acknowledged,
against a real server (the engine's own cases are in test_arrow_publisher.py)."""

from __future__ import annotations

import pickle
import threading

import pytest

import jetstream_sync
from jetstream_sync import ArrowPubAck, BadSubjectError, RowPublishError
from tests.fixtures.arrow_tables import stored, table_of
from tests.fixtures.threads import run_in_threads

pa = pytest.importorskip("pyarrow")


def test_a_table_and_a_record_batch_are_stored_in_order(js, stream):
    """Every row lands once, in order, on its subject; the ack names the stream and count."""
    subjects = [f"{stream.name}.a", f"{stream.name}.b", f"{stream.name}.a"]
    table = table_of([b"1", b"2", b"3"], subjects)
    assert js.publish_arrow(table) == ArrowPubAck(stream=stream.name, rows=3, duplicates=0)
    batch = table.to_batches()[0]
    assert js.publish_arrow(batch).rows == 3
    msgs = stored(stream)
    assert [(m.subject, m.data) for m in msgs] == list(
        zip(subjects, [b"1", b"2", b"3"], strict=True)
    ) * 2


def test_a_buffer_of_nothing_but_acks_is_settled_from_one_c_decode(js, stream, monkeypatch):
    """20,000 rows: the acks come in buffers of nothing but acks, which the reading thread
    decodes in one C call each and hands over per publisher; every row is settled once."""
    from jetstream_sync.jetstream.arrow_publish import ArrowPublisher

    groups: list[int] = []
    deliver_group = ArrowPublisher.deliver_group

    def counting(self, group) -> None:
        groups.append(len(group.tokens) + len(group.others))
        deliver_group(self, group)

    monkeypatch.setattr(ArrowPublisher, "deliver_group", counting)
    ack = js.publish_arrow(table_of([b"%d" % i for i in range(20_000)]), f"{stream.name}.c")
    assert (ack.rows, ack.duplicates) == (20_000, 0)
    assert groups and sum(groups) <= 20_000


def test_subject_is_the_subject_of_rows_without_one(js, stream):
    """``subject=`` serves a table without a subject column and the null or empty rows."""
    default = f"{stream.name}.default"
    js.publish_arrow(table_of([b"a", b"b"]), f"{stream.name}.all")
    js.publish_arrow(table_of([b"c", b"d", b"e"], [None, "", f"{stream.name}.own"]), default)
    assert [m.subject for m in stored(stream)] == [
        f"{stream.name}.all", f"{stream.name}.all", default, default, f"{stream.name}.own"
    ]  # fmt: skip


def test_many_rows_over_several_batches_pass_the_window(js, stream):
    """40,000 rows in three record batches (more than the 16,384 waiting at most): all
    stored, in order."""
    rows = [b"r%d" % i for i in range(40_000)]
    parts = [table_of(rows[a:b]) for a, b in ((0, 15_000), (15_000, 15_001), (15_001, 40_000))]
    table = pa.concat_tables(parts)
    assert len(table.to_batches()) == 3
    ack = js.publish_arrow(table, f"{stream.name}.many", timeout=30)
    assert (ack.rows, ack.duplicates) == (40_000, 0)
    state = stream.info().state
    assert (state.messages, state.last_seq) == (40_000, 40_000)
    assert [stream.get_msg(seq).data for seq in (1, 15_001, 15_002, 40_000)] == [
        b"r0", b"r15000", b"r15001", b"r39999"
    ]  # fmt: skip


def test_a_retry_under_the_same_prefix_stores_nothing_twice(js, stream):
    """With ``msg_id_prefix`` a second call is counted as duplicates; without one each call
    gets a fresh prefix and stores its rows."""
    table = table_of([b"x", b"y", b"z"])
    subject = f"{stream.name}.d"
    first = js.publish_arrow(table, subject, msg_id_prefix="load-7:")
    again = js.publish_arrow(table, subject, msg_id_prefix="load-7:")
    assert (first.duplicates, again.rows, again.duplicates) == (0, 3, 3)
    assert stream.info().state.messages == 3
    assert stored(stream)[0].headers["Nats-Msg-Id"].startswith("load-7:0:")
    js.publish_arrow(table, subject)
    js.publish_arrow(table, subject)
    assert stream.info().state.messages == 9


def test_without_dedupe_rows_carry_no_derived_id_and_a_retry_stores_them_again(js, stream):
    """``dedupe=False``: a row with neither id nor headers is stored without headers, a row
    with headers keeps them without an id, a ``msgId`` is still sent and deduplicated on;
    publishing the table again stores the rows without an id again."""
    headers = pa.array([None, [("k", "v")], None], pa.map_(pa.string(), pa.string()))
    ids = pa.array([None, None, "own-1"], pa.string())
    table = table_of([b"plain", b"with-headers", b"own-id"], headers=headers, msgId=ids)
    subject = f"{stream.name}.n"
    first = js.publish_arrow(table, subject, msg_id_prefix="p:", dedupe=False)
    again = js.publish_arrow(table, subject, msg_id_prefix="p:", dedupe=False)
    assert (first.rows, first.duplicates, again.rows, again.duplicates) == (3, 0, 3, 1)
    msgs = stored(stream)
    first_call = [b"plain", b"with-headers", b"own-id"]
    assert [m.data for m in msgs] == first_call + first_call[:2]
    assert not msgs[0].headers
    assert dict(msgs[1].headers) == {"k": "v"}
    assert msgs[2].headers["Nats-Msg-Id"] == "own-1"


def test_msgid_and_headers_columns(js, stream):
    """``msgId`` becomes Nats-Msg-Id; ``headers`` as map<string, string> or map<string,
    list<string>> reach the messages."""
    one = pa.array([[("k", "v")], None], pa.map_(pa.string(), pa.string()))
    many = pa.array(
        [[("k", ["a", "b"])], [("z", ["1"])]], pa.map_(pa.string(), pa.list_(pa.string()))
    )
    ids = pa.array(["id-1", None], pa.string())
    js.publish_arrow(table_of([b"1", b"2"], headers=one, msgId=ids), f"{stream.name}.h")
    js.publish_arrow(table_of([b"3", b"4"], headers=many), f"{stream.name}.h")
    first, second, third, fourth = stored(stream)
    assert (first.headers["k"], first.headers["Nats-Msg-Id"]) == ("v", "id-1")
    assert second.headers.get("k") is None and second.headers["Nats-Msg-Id"] != "id-1"
    assert third.headers.get_all("k") == ["a", "b"] and fourth.headers["z"] == "1"


def test_a_msgid_column_takes_the_place_of_a_nats_msg_id_header(js, stream):
    """A row with a ``msgId`` and a ``Nats-Msg-Id`` in its headers (say the headers a read of
    another stream gave) carries only the column's id, as nats.go's WithMsgID sets the header:
    the server deduplicates on it. Both used to go out, and the server took the header's."""
    headers = pa.array(
        [[("Nats-Msg-Id", "from-source"), ("k", "v")], [("Nats-Msg-Id", "kept")]],
        pa.map_(pa.string(), pa.string()),
    )
    ids = pa.array(["mine", None], pa.string())
    table = table_of([b"1", b"2"], headers=headers, msgId=ids)
    js.publish_arrow(table, f"{stream.name}.h", msg_id_prefix="p:", dedupe=False)
    again = table_of([b"3"], headers=headers.slice(0, 1), msgId=pa.array(["other"], pa.string()))
    assert js.publish_arrow(again, f"{stream.name}.h").duplicates == 0
    first, second, third = stored(stream)
    assert first.headers.get_all("Nats-Msg-Id") == ["mine"] and first.headers["k"] == "v"
    assert second.headers.get_all("Nats-Msg-Id") == ["kept"]
    assert third.headers.get_all("Nats-Msg-Id") == ["other"]


def test_a_derived_id_takes_the_place_of_a_nats_msg_id_header(js, stream):
    """Rows exploded from one read message all carry its ``Nats-Msg-Id`` header: each is
    stored under its derived id, not dropped as a duplicate of the first (which the
    server did when both ids went out, the header's first)."""
    headers = pa.array(
        [[("Nats-Msg-Id", "source-7"), ("k", "v")]] * 3, pa.map_(pa.string(), pa.string())
    )
    ack = js.publish_arrow(table_of([b"a", b"b", b"c"], headers=headers), f"{stream.name}.x")
    assert (ack.rows, ack.duplicates) == (3, 0)
    msgs = stored(stream)
    assert [m.data for m in msgs] == [b"a", b"b", b"c"]
    assert all(len(m.headers.get_all("Nats-Msg-Id")) == 1 and m.headers["k"] == "v" for m in msgs)
    assert "source-7" not in {m.headers["Nats-Msg-Id"] for m in msgs}


def test_string_data_is_utf_8(js, stream):
    """A string ``data`` column is sent as its UTF-8 bytes."""
    table = pa.table({"data": pa.array(["é", "ü"], pa.string())})
    js.publish_arrow(table, f"{stream.name}.s")
    assert [m.data for m in stored(stream)] == ["é".encode(), "ü".encode()]


BAD_CALLS = {
    "not a table": ([(b"a",)], {}, TypeError),
    "no data column": (pa.table({"subject": ["x.y"]}), {}, ValueError),
    "an unknown column": (
        pa.table({"data": [b"a"], "msg_id": ["1"]}),
        {"subject": "x.y"},
        ValueError,
    ),
    "data of ints": (pa.table({"data": [1]}), {"subject": "x.y"}, TypeError),
    "subjects of bytes": (pa.table({"data": [b"a"], "subject": [b"x.y"]}), {}, TypeError),
    "headers of ints": (
        pa.table(
            {"data": [b"a"], "headers": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))}
        ),
        {"subject": "x.y"},
        TypeError,
    ),
    "no subject at all": (table_of([b"a"]), {}, ValueError),
    "a wildcard subject=": (table_of([b"a"]), {"subject": "x.*"}, BadSubjectError),
    "a negative timeout": (table_of([b"a"]), {"subject": "x.y", "timeout": -1}, ValueError),
    "CR in the prefix": (table_of([b"a"]), {"subject": "x.y", "msg_id_prefix": "a\r"}, ValueError),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_is_refused_before_anything_is_sent(nc, js, case):
    """A call that cannot be sent as asked raises a typed error and sends nothing."""
    table, options, error = BAD_CALLS[case]
    sub = nc.subscribe("x.>")
    nc.flush()
    with pytest.raises(error, match="publish_arrow|timeout"):
        js.publish_arrow(table, **options)
    nc.flush()
    assert sub.pending_msgs == 0


def test_an_unsendable_row_is_named_and_the_rows_before_it_are_stored(js, stream):
    """Null data at row 5: rows 0-4 are acknowledged, the error names row 5 (also once
    pickled, as a Spark executor's would be), nothing after it is sent."""
    data = [b"%d" % i for i in range(5)] + [None] + [b"late"]
    subject = f"{stream.name}.n"
    with pytest.raises(RowPublishError, match="row 5 .*null data") as caught:
        js.publish_arrow(pa.table({"data": pa.array(data, pa.binary())}), subject)
    assert (caught.value.row, caught.value.subject) == (5, subject)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (str(copy), copy.row, copy.subject) == (str(caught.value), 5, subject)
    assert [m.data for m in stored(stream)] == data[:5]


@pytest.mark.parametrize("bad", ["*", ">", "a b", "a..b"])
def test_a_row_subject_no_one_can_publish_to_is_named(js, stream, bad):
    """A wildcard or malformed subject in the column fails its row: the row before it is
    stored, the one after it not sent."""
    subjects = [f"{stream.name}.ok", f"{stream.name}.{bad}"]
    with pytest.raises(RowPublishError, match="row 1 .*was not sent") as caught:
        js.publish_arrow(table_of([b"a", b"b", b"c"], [*subjects, subjects[0]]))
    assert caught.value.row == 1
    assert [m.data for m in stored(stream)] == [b"a"]


def test_a_subject_too_long_for_the_servers_control_line_is_refused_before_sending(nc, js, stream):
    """A row whose subject would pass the server's max_control_line is refused (the server
    would drop the connection, and every call on it): the row before it, whose subject is
    long but fits, is stored; the connection stays up."""
    fits = f"{stream.name}." + "k" * 3900
    too_long = f"{stream.name}." + "k" * (nc.max_control_line + 10)
    with pytest.raises(RowPublishError, match="row 1 .*max_control_line") as caught:
        js.publish_arrow(table_of([b"a", b"b", b"c"], [fits, too_long, fits]))
    assert caught.value.row == 1
    assert [m.subject for m in stored(stream)] == [fits]
    assert nc.stats.reconnects == 0


def test_a_row_the_stream_refuses_is_named_with_the_servers_reason(js, stream_name):
    """A row over the stream's max_msg_size: its index, subject and the server's error."""
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], max_msg_size=256)
    rows = [b"x" * (1024 if i == 3 else 4) for i in range(6)]
    with pytest.raises(RowPublishError, match="row 3 .*not stored") as caught:
        js.publish_arrow(table_of(rows), f"{stream_name}.big")
    assert (caught.value.row, caught.value.subject) == (3, f"{stream_name}.big")
    assert "maximum" in str(caught.value).lower()


def test_no_stream_for_the_subject_names_the_first_row(js, stream):
    """No stream captures the subject: NoResponders, row 0."""
    with pytest.raises(RowPublishError, match="row 0 .*NoResponders"):
        js.publish_arrow(table_of([b"a"]), f"{stream.name}X.nowhere")


def test_an_empty_table_publishes_nothing(js, stream):
    """No rows: nothing sent, nothing stored, no stream named."""
    empty = pa.table({"data": pa.array([], pa.binary())})
    assert js.publish_arrow(empty, f"{stream.name}.e") == ArrowPubAck(
        stream=None, rows=0, duplicates=0
    )
    assert stream.info().state.messages == 0


def test_sixteen_threads_publish_tables_on_one_client(js, stream):
    """16 threads at once, 2,000 rows each: every row of every call acknowledged once."""
    acks: list[ArrowPubAck] = []

    def publish(n: int) -> None:
        rows = [b"%d-%d" % (n, i) for i in range(2000)]
        acks.append(js.publish_arrow(table_of(rows), f"{stream.name}.t{n}", timeout=30))

    errors = run_in_threads(publish, 16)
    assert not errors and len(acks) == 16
    assert all((a.rows, a.duplicates) == (2000, 0) for a in acks)
    assert stream.info().state.messages == 32_000


def test_from_a_subscription_callback(nc, js, stream):
    """Called from a message callback (the subscription's own thread), it completes."""
    done: list[object] = []
    finished = threading.Event()

    def on_message(msg: jetstream_sync.Msg) -> None:
        try:
            done.append(js.publish_arrow(table_of([msg.data] * 3), f"{stream.name}.cb"))
        except BaseException as exc:
            done.append(exc)
        finished.set()

    nc.subscribe(f"trigger.{stream.name}", cb=on_message)
    nc.publish(f"trigger.{stream.name}", b"go")
    assert finished.wait(30)
    assert done == [ArrowPubAck(stream=stream.name, rows=3, duplicates=0)]


def test_what_read_arrow_reads_publish_arrow_writes_back(js, stream, stream_name):
    """The mirror: a stream read with read_arrow, its data and subject columns published
    into a second stream, holds the same messages."""
    js.publish_arrow(table_of([b"a", b"b", b"c"], [f"{stream.name}.x"] * 3))
    copy_name = f"{stream_name}COPY"
    copy = js.create_stream(name=copy_name, subjects=[f"{copy_name}.>"])
    try:
        table = pa.Table.from_batches(stream.read_arrow())
        subjects = [s.replace(stream.name, copy_name) for s in table.column("subject").to_pylist()]
        renamed = pa.table({"data": table.column("data"), "subject": pa.array(subjects)})
        assert js.publish_arrow(renamed).rows == 3
        assert [m.data for m in stored(copy)] == [b"a", b"b", b"c"]
    finally:
        js.delete_stream(copy_name)
