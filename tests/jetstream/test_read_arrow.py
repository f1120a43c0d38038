"""``Stream.read_arrow``: a stream's messages as Arrow record batches, on both read paths."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from jetstream_sync.errors import ProtocolError
from jetstream_sync.jetstream._arrow_decode import read_schema
from jetstream_sync.jetstream._arrow_read import ROWS_PER_BATCH
from tests.fixtures.polling import wait_for
from tests.fixtures.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=[True, False], ids=["direct", "consumer"])
def stream_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Every test runs on a stream with direct get and on one without (the consumer path)."""
    return {"allow_direct": request.param}


def _fill(js, name: str, n: int) -> None:
    """n messages ``m1``..: odd sequences on ``<name>.a``, even ones on ``<name>.b.x``."""
    for i in range(1, n + 1):
        js.publish_async(f"{name}.a" if i % 2 else f"{name}.b.x", b"m%d" % i)
    js.publish_async_completed(30)


def _rows(batches) -> list[dict[str, Any]]:
    return pa.Table.from_batches(list(batches), schema=read_schema()).to_pylist()


def _seqs(batches) -> list[int]:
    return [row["seq"] for row in _rows(batches)]


def _raw_publish(server, data: bytes) -> None:
    """Send ``data`` (PUB/HPUB frames) through a plain socket, as another client might."""
    raw = RawClient(server.port)
    try:
        raw.send(data)
    finally:
        raw.close()


def test_every_column(js, stream):
    """stream, subject, seq, timestamp (µs, UTC), data (binary) and headers (a map of lists)."""
    before = datetime.now(UTC).replace(microsecond=0)
    js.publish(f"{stream.name}.a", b"\x00\xffone", headers={"k": ["x", "y"], "n": "1"})
    js.publish(f"{stream.name}.b.x", b"")
    batches = list(stream.read_arrow())
    assert all(b.schema == read_schema() for b in batches)
    rows = _rows(batches)
    assert [row["timestamp"] for row in rows] == [stream.get_msg(s).time for s in (1, 2)]
    assert rows[0]["timestamp"] >= before
    for row in rows:
        del row["timestamp"]
    assert rows == [
        {
            "stream": stream.name,
            "subject": f"{stream.name}.a",
            "seq": 1,
            "data": b"\x00\xffone",
            "headers": [("k", ["x", "y"]), ("n", ["1"])],
        },
        {
            "stream": stream.name,
            "subject": f"{stream.name}.b.x",
            "seq": 2,
            "data": b"",
            "headers": None,
        },
    ]


def test_ranges(js, stream):
    """start_seq and end_seq are inclusive; a range past the stream's end stops at its last."""
    _fill(js, stream.name, 20)
    assert _seqs(stream.read_arrow()) == list(range(1, 21))
    assert _seqs(stream.read_arrow(start_seq=5, end_seq=9)) == [5, 6, 7, 8, 9]
    assert _seqs(stream.read_arrow(start_seq=18)) == [18, 19, 20]
    assert _seqs(stream.read_arrow(end_seq=3)) == [1, 2, 3]
    assert _seqs(stream.read_arrow(start_seq=19, end_seq=500)) == [19, 20]
    assert _seqs(stream.read_arrow(start_seq=21)) == []
    assert _seqs(stream.read_arrow(start_seq=7, end_seq=6)) == []


@pytest.mark.parametrize(
    ("suffix", "expected"),
    [("a", list(range(1, 13, 2))), ("*.x", list(range(2, 13, 2))), (">", list(range(1, 13)))],
    ids=["literal", "star", "gt"],
)
def test_subject_filters(js, stream, suffix, expected):
    """A subject filter: a literal, a ``*`` and a ``>``, also combined with a range."""
    _fill(js, stream.name, 12)
    assert _seqs(stream.read_arrow(subject=f"{stream.name}.{suffix}")) == expected
    inside = [s for s in expected if 4 <= s <= 9]
    assert _seqs(stream.read_arrow(4, 9, subject=f"{stream.name}.{suffix}")) == inside


def test_an_empty_stream_yields_no_batch(stream):
    """Nothing stored: no record batch, and no error."""
    assert list(stream.read_arrow()) == []


def test_a_purged_range_and_deleted_messages_are_skipped(js, stream):
    """Sequences purged or deleted are gaps: the rest is read, nothing fails."""
    _fill(js, stream.name, 30)
    stream.purge(seq=11)
    for seq in (15, 16, 30):
        stream.delete_msg(seq)
    expected = [s for s in range(11, 30) if s not in (15, 16)]
    assert _seqs(stream.read_arrow()) == expected
    assert _seqs(stream.read_arrow(start_seq=1, end_seq=14)) == [11, 12, 13, 14]


def test_a_large_stream_in_several_batches(js, stream):
    """More rows than one record batch: several batches, every message once, in order."""
    total = ROWS_PER_BATCH * 2 + 123
    _fill(js, stream.name, total)
    assert _seqs(stream.read_arrow(batch=None)) == list(range(1, total + 1))
    batches = list(stream.read_arrow(batch=1000))
    assert len(batches) >= 2
    assert all(b.num_rows < ROWS_PER_BATCH + 1000 for b in batches)
    assert _seqs(batches) == list(range(1, total + 1))
    wait_for(lambda: stream.info().state.consumer_count == 0, timeout=10)


def test_subjects_and_headers_that_are_not_utf8_are_read(js, stream, shared_server):
    """Another client's bytes: each invalid byte of a subject or header shows as U+FFFD."""
    name = stream.name.encode()
    block = b"NATS/1.0\r\nk\xe9y: v\xe9l\r\nok: caf\xc3\xa9\r\n\r\n"
    _raw_publish(
        shared_server,
        b"PUB %s.caf\xe9.x 2\r\nhi\r\n" % name
        + b"HPUB %s.h %d %d\r\n%shh\r\n" % (name, len(block), len(block) + 2, block)
        + b"PUB %s.after 1\r\nz\r\n" % name,
    )
    wait_for(lambda: stream.info().state.messages == 3)
    rows = _rows(stream.read_arrow())
    assert [(r["seq"], r["subject"], r["data"]) for r in rows] == [
        (1, f"{stream.name}.caf\ufffd.x", b"hi"),
        (2, f"{stream.name}.h", b"hh"),
        (3, f"{stream.name}.after", b"z"),
    ]
    assert rows[1]["headers"] == [("k\ufffdy", ["v\ufffdl"]), ("ok", ["café"])]
    assert _seqs(stream.read_arrow(subject=f"{stream.name}.*.x")) == [1]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"start_seq": 0}, ValueError),
        ({"end_seq": -1}, ValueError),
        ({"start_seq": "1"}, TypeError),
        ({"batch": 0}, ValueError),
        ({"subject": "a b"}, ValueError),
        ({"timeout": float("nan")}, ValueError),
    ],
    ids=["start", "end", "start-type", "batch", "subject", "timeout"],
)
def test_bad_arguments_are_refused_before_anything_is_sent(stream, kwargs, error):
    """Each bad argument raises at the call, before the stream is asked anything."""
    with pytest.raises(error):
        stream.read_arrow(**kwargs)


def test_without_pyarrow_the_error_names_the_extra(stream, monkeypatch):
    """pyarrow missing: an ImportError that says what to install."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"pip install 'jetstream_sync\[spark\]'"):
        stream.read_arrow()


@pytest.mark.parametrize("stream_options", [{"allow_direct": True}], ids=["direct"])
def test_a_garbled_reply_names_the_stream_and_the_sequence(js, stream, monkeypatch):
    """An error about what the server sent says which stream and which message."""
    from jetstream_sync.jetstream import _direct_batch

    _fill(js, stream.name, 3)
    real = _direct_batch.PendingBatch.replies

    def garbled(self):
        replies = real(self)
        token, data, block = replies[1]
        replies[1] = (token, data, block.replace(b"Nats-Time-Stamp: ", b"Nats-Time-Stamp: x"))
        return replies

    monkeypatch.setattr(_direct_batch.PendingBatch, "replies", garbled)
    with pytest.raises(ProtocolError, match=rf"stream '{stream.name}', sequence 2: .*Time-Stamp"):
        list(stream.read_arrow())


@pytest.mark.parametrize("stream_options", [{"allow_direct": False}], ids=["consumer"])
def test_the_consumer_read_keeps_several_pull_requests_in_flight(js, stream, monkeypatch):
    """Without direct get, IN_FLIGHT pull requests go out before the read waits for a message."""
    from jetstream_sync.jetstream._arrow_read import IN_FLIGHT
    from jetstream_sync.subscription import Subscription

    _fill(js, stream.name, 1000)
    events: list[str] = []
    client = type(js.client)
    publish, next_msgs = client.publish, Subscription.next_msgs

    def spy_publish(self, subject, *args, **kwargs):
        if ".CONSUMER.MSG.NEXT." in subject:
            events.append("pull")
        return publish(self, subject, *args, **kwargs)

    def spy_next_msgs(self, *args, **kwargs):
        events.append("wait")
        return next_msgs(self, *args, **kwargs)

    monkeypatch.setattr(client, "publish", spy_publish)
    monkeypatch.setattr(Subscription, "next_msgs", spy_next_msgs)
    assert _seqs(stream.read_arrow(batch=50)) == list(range(1, 1001))
    assert IN_FLIGHT > 1
    assert events[: IN_FLIGHT + 1] == ["pull"] * IN_FLIGHT + ["wait"]
    assert events.count("pull") >= 1000 // 50
    wait_for(lambda: stream.info().state.consumer_count == 0, timeout=10)


@pytest.mark.parametrize("stream_options", [{"allow_direct": False}], ids=["consumer"])
def test_a_message_lost_on_the_way_fails_the_consumer_read(js, stream, monkeypatch):
    """A delivered message that never reaches the read (a slow consumer's drop: the server's,
    past max_pending, or the client's, past its pending limits; seen reading 4 MB messages)
    leaves a hole in the consumer's delivery sequence: the read fails instead of returning
    the range with the hole, which a Spark task would take for deleted messages."""
    from jetstream_sync.errors import JetStreamError
    from jetstream_sync.subscription import Subscription

    _fill(js, stream.name, 20)
    next_msgs = Subscription.next_msgs
    dropped: list[int] = []

    def dropping(self, *args, **kwargs):
        got = next_msgs(self, *args, **kwargs)
        for i, msg in enumerate(got):
            if not dropped and msg.reply and msg.data == b"m7":
                dropped.append(7)
                return got[:i] + got[i + 1 :]
        return got

    monkeypatch.setattr(Subscription, "next_msgs", dropping)
    with pytest.raises(JetStreamError, match=rf"'{stream.name}'.* lost .*delivery 7"):
        list(stream.read_arrow())
    assert dropped == [7]


def test_a_read_stopped_early_leaves_nothing_on_the_server(js, stream):
    """Closing the iterator after one batch deletes the read's consumer (or drops its request)."""
    _fill(js, stream.name, ROWS_PER_BATCH * 3)
    batches = stream.read_arrow(batch=500)
    assert next(batches).num_rows > 0
    batches.close()
    wait_for(lambda: stream.info().state.consumer_count == 0, timeout=10)


def _delivered(subject: str, reply: str, data: bytes = b"x") -> Any:
    from jetstream_sync.msg import Msg

    return Msg(subject, reply, data)


def test_consumed_messages_decode_from_either_ack_subject_layout():
    """v1 and v2 ack subjects (also mixed in one batch) give the same seq and timestamp columns."""
    from jetstream_sync.jetstream._arrow_decode import decode_msgs

    ns = 1_700_000_000_123_456_789
    v1 = [_delivered("S.a", f"$JS.ACK.S.C.1.{seq}.{seq}.{ns + seq * 1000}.0") for seq in (7, 8)]
    v2 = [
        _delivered("S.a", f"$JS.ACK.dom.ACC.S.C.1.{seq}.{seq}.{ns + seq * 1000}.0.r{seq}")
        for seq in (7, 8)
    ]
    expected = decode_msgs(v1, "S", 100).to_pylist()
    assert [r["seq"] for r in expected] == [7, 8]
    assert expected[0]["timestamp"] == datetime(2023, 11, 14, 22, 13, 20, 123463, tzinfo=UTC)
    assert decode_msgs(v2, "S", 100).to_pylist() == expected
    assert decode_msgs([v1[0], v2[1]], "S", 100).to_pylist() == expected
    assert [r["seq"] for r in decode_msgs(v1, "S", 7).to_pylist()] == [7]


def test_a_consumed_message_without_an_ack_subject_names_the_stream():
    """A delivered message whose reply is no ack subject: a ProtocolError naming the stream."""
    from jetstream_sync.jetstream._arrow_decode import decode_msgs

    good = _delivered("S.a", "$JS.ACK.S.C.1.1.1.1700000000000000000.1")
    for reply in ("_INBOX.x", "$JS.ACK.S.C.1.x.2.1700000000000000000.0", ""):
        with pytest.raises(ProtocolError, match=r"stream 'S': .*not an ack subject"):
            decode_msgs([good, _delivered("S.a", reply)], "S", 100)


def test_a_read_leaves_pandas_unimported(js, stream):
    """Columns are built from buffers: pandas (0.5 s or more per Spark worker) stays unimported."""
    _fill(js, stream.name, 10)
    js.publish(f"{stream.name}.a", b"h", headers={"k": "v"})
    code = textwrap.dedent(f"""
        import sys
        import jetstream_sync
        with jetstream_sync.connect({js.client.connected_url!r}) as nc:
            batches = list(nc.jetstream().stream_no_info({stream.name!r}).read_arrow(end_seq=10))
        assert sum(b.num_rows for b in batches) == 10
        assert "pandas" not in sys.modules, "pandas was imported"
    """)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
