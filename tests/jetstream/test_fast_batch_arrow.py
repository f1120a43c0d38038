"""``FastBatch.add_arrow``: a pyarrow table's rows as messages of a fast-ingest batch, against a
real nats-server (``add``'s own cases are in test_fast_batch.py)."""

from __future__ import annotations

import hashlib

import pytest

import jetstream_sync
from jetstream_sync import BadSubjectError, RowPublishError
from tests.fixtures.arrow_tables import stored, table_of
from tests.fixtures.threads import run_in_threads

pa = pytest.importorskip("pyarrow")


@pytest.fixture
def stream_options() -> dict[str, object]:
    """The module's streams allow fast-ingest batches (and direct gets, to read one thread's
    messages back by subject)."""
    return {"allow_batched": True, "allow_direct": True}


def _derived(prefix: str, index: int, subject: str, data: bytes) -> str:
    digest = hashlib.blake2b(data, digest_size=6, key=subject.encode()[:64]).hexdigest()
    return f"{prefix}{index}:{digest}"


def test_ten_thousand_rows_in_one_call_commit_in_order(js, stream):
    """10,000 rows, more than the window lets the batch run ahead: all stored once, in order,
    each with the id derived from the batch id, its row and its data."""
    subject = f"{stream.name}.a"
    rows = [b"%d" % i for i in range(10_000)]
    with js.fast_batch(flow=100) as batch:
        batch.add_arrow(table_of(rows), subject)
        assert batch.added == 10_000
        ack = batch.commit()
    assert (ack.stream, ack.batch_size, ack.seq) == (stream.name, 10_000, 10_000)
    msgs = stored(stream)
    assert [m.data for m in msgs] == rows
    assert msgs[7].headers["Nats-Msg-Id"] == _derived(f"{batch.batch_id}:", 7, subject, b"7")


def test_columns_subjects_headers_and_ids_land_as_with_publish_arrow(js, stream):
    """The subject column (a null or empty one takes subject=), a headers map and a msgId
    column are stored as publish_arrow stores them; derived ids use the prefix and index."""
    own, default = f"{stream.name}.own", f"{stream.name}.default"
    headers = pa.array(
        [[("K", "v")], None, [("K", "w"), ("L", "x")]], pa.map_(pa.string(), pa.string())
    )
    table = table_of(
        [b"a", b"b", b"c"], [own, None, ""], headers=headers, msgId=pa.array(["given", None, None])
    )
    with js.fast_batch() as batch:
        batch.add_arrow(table, default, msg_id_prefix="p:", first_index=40)
        batch.commit()
    msgs = stored(stream)
    assert [m.subject for m in msgs] == [own, default, default]
    assert [m.headers.get("K") for m in msgs] == ["v", None, "w"]
    assert msgs[2].headers["L"] == "x"
    assert [m.headers["Nats-Msg-Id"] for m in msgs] == [
        "given", _derived("p:", 41, default, b"b"), _derived("p:", 42, default, b"c"),
    ]  # fmt: skip


def test_add_and_add_arrow_continue_one_sequence(js, stream):
    """add() then add_arrow() then add(): one batch, its messages in the order sent."""
    subject = f"{stream.name}.m"
    with js.fast_batch(flow=2) as batch:
        batch.add(subject, b"first")
        batch.add_arrow(pa.concat_tables([table_of([b"x1", b"x2"]), table_of([b"x3"])]), subject)
        batch.add(subject, b"last")
        assert batch.added == 5
        assert batch.commit().batch_size == 5
    assert [m.data for m in stored(stream)] == [b"first", b"x1", b"x2", b"x3", b"last"]


def test_the_same_rows_again_under_the_same_ids_are_stored_once(js, stream):
    """A second batch sending the same rows under the same prefix and indexes adds nothing:
    the stream drops the duplicates without ending the batch."""
    subject = f"{stream.name}.d"
    table = table_of([b"%d" % i for i in range(50)])
    for _ in range(2):
        with js.fast_batch() as batch:
            batch.add_arrow(table, subject, msg_id_prefix="retry:")
            batch.commit()
    assert stream.info().state.messages == 50


def test_without_dedupe_the_same_rows_again_are_stored_again(js, stream):
    """``dedupe=False``: rows without a ``msgId`` carry no id (no headers at all here), so a
    second batch of the same rows under the same prefix stores them again."""
    subject = f"{stream.name}.n"
    table = table_of([b"%d" % i for i in range(50)])
    for _ in range(2):
        with js.fast_batch() as batch:
            batch.add_arrow(table, subject, msg_id_prefix="retry:", dedupe=False)
            batch.commit()
    msgs = stored(stream)
    assert len(msgs) == 100 and not any(m.headers for m in msgs)


def test_an_unsendable_row_is_named_and_the_batch_stays_open(js, stream):
    """Null data at row 3: rows 0-2 are in the batch, the error names row 3 and its subject,
    nothing after it is sent, and the batch goes on."""
    subject = f"{stream.name}.n"
    with js.fast_batch() as batch:
        with pytest.raises(RowPublishError, match="row 3 .*null data") as caught:
            batch.add_arrow(table_of([b"0", b"1", b"2", None, b"4"]), subject)
        assert (caught.value.row, caught.value.subject, batch.added) == (3, subject, 3)
        batch.add(subject, b"after")
        assert batch.commit().batch_size == 4
    assert [m.data for m in stored(stream)] == [b"0", b"1", b"2", b"after"]


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        ({"subjects": ["{s}.>"]}, "subject"),
        ({"subjects": ["{s}.a b"]}, "subject"),
        ({"data": [b"x" * (1 << 20 + 1)]}, "payload"),
        ({"headers": [[("K", "a\0b")]]}, "NUL"),
        ({"subjects": ["{s}." + "k" * 4100]}, "max_control_line"),
    ],
)
def test_a_bad_first_row_sends_nothing(js, stream, rows, why):
    """A first row that cannot be sent (a wildcard or malformed subject, too large, a NUL in a
    header, a subject past the server's max_control_line): RowPublishError for row 0, nothing
    sent (the connection stays up), the batch still usable."""
    subjects = [s.format(s=stream.name) for s in rows.get("subjects", [f"{stream.name}.a"])]
    columns = {}
    if "headers" in rows:
        columns["headers"] = pa.array(rows["headers"], pa.map_(pa.string(), pa.string()))
    table = table_of(rows.get("data", [b"v"]), subjects, **columns)
    with js.fast_batch() as batch:
        with pytest.raises(RowPublishError, match=f"row 0 .*{why}") as caught:
            batch.add_arrow(table)
        assert (caught.value.row, batch.added, js.client.stats.reconnects) == (0, 0, 0)
        batch.add_arrow(table_of([b"ok"]), f"{stream.name}.a")
        assert batch.commit().batch_size == 1
    assert [m.data for m in stored(stream)] == [b"ok"]


BAD_CALLS = {
    "not a table": ([(b"a",)], {}, TypeError),
    "an unknown column": (
        pa.table({"data": [b"a"], "msg_id": ["1"]}),
        {"subject": "x.y"},
        ValueError,
    ),
    "no subject at all": (table_of([b"a"]), {}, ValueError),
    "a wildcard subject=": (table_of([b"a"]), {"subject": "x.*"}, BadSubjectError),
    "CR in the prefix": (table_of([b"a"]), {"subject": "x.y", "msg_id_prefix": "a\r"}, ValueError),
    "a negative first_index": (table_of([b"a"]), {"subject": "x.y", "first_index": -1}, ValueError),
    "a float first_index": (table_of([b"a"]), {"subject": "x.y", "first_index": 1.0}, ValueError),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_is_refused_before_anything_is_sent(nc, js, case):
    """A call that cannot be sent as asked raises a typed error and sends nothing."""
    table, options, error = BAD_CALLS[case]
    sub = nc.subscribe("x.>")
    nc.flush()
    with js.fast_batch() as batch, pytest.raises(error, match="add_arrow|first_index"):
        batch.add_arrow(table, **options)
    assert batch.added == 0
    nc.flush()
    assert sub.pending_msgs == 0


def test_a_stream_without_allow_batched_refuses_the_first_row(js, stream_name):
    """On a stream without allow_batched the first row is refused and nothing is stored."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    with js.fast_batch() as batch, pytest.raises(jetstream_sync.BatchPublishDisabledError):
        batch.add_arrow(table_of([b"a", b"b"]), f"{stream_name}.a")
    assert stream.info().state.messages == 0


def test_a_row_the_stream_refuses_stops_the_batch_at_its_sequence(js, stream_name):
    """A row over the stream's max_msg_size: with on_gap="fail" the batch stops at its batch
    sequence (table row + 1); the rows before it are stored."""
    stream = js.create_stream(
        name=stream_name,
        subjects=[f"{stream_name}.>"],
        allow_batched=True,
        max_msg_size=256,
    )
    rows = [b"x" * (1024 if i == 6 else 8) for i in range(40)]
    with (
        js.fast_batch(flow=4) as batch,
        pytest.raises(jetstream_sync.FastBatchMessageError) as caught,
    ):
        batch.add_arrow(table_of(rows), f"{stream_name}.big")
        batch.commit()
    assert caught.value.sequence == 7
    assert [m.data for m in stored(stream)] == rows[:6]


def test_after_commit_the_batch_is_closed(js, stream):
    """add_arrow() on a committed batch raises FastBatchClosedError and sends nothing."""
    with js.fast_batch() as batch:
        batch.add_arrow(table_of([b"a"]), f"{stream.name}.c")
        batch.commit()
        with pytest.raises(jetstream_sync.FastBatchClosedError):
            batch.add_arrow(table_of([b"b"]), f"{stream.name}.c")
    assert stream.info().state.messages == 1


def test_four_threads_add_tables_to_their_own_batches_on_one_client(js, stream):
    """Four threads, each its own batch of 5,000 rows in 5 calls, on one client: all stored."""
    sizes: dict[int, int] = {}

    def run(n: int) -> None:
        with js.fast_batch() as batch:
            for part in range(5):
                rows = [b"%d-%d" % (n, part * 1000 + i) for i in range(1000)]
                batch.add_arrow(table_of(rows), f"{stream.name}.t{n}", first_index=part * 1000)
            sizes[n] = batch.commit().batch_size

    errors = run_in_threads(run, 4)
    assert not errors and sizes == {n: 5000 for n in range(4)}
    for n in range(4):
        got = [m.data for m in stream.get_msgs(subject=f"{stream.name}.t{n}", batch=6000)]
        assert got == [b"%d-%d" % (n, i) for i in range(5000)]
