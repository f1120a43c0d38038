"""Fast-ingest batches (ADR-50) and the atomic batch's errors, against a real nats-server."""

from __future__ import annotations

import contextlib
import json
import pickle
import re
import threading
import time
from collections.abc import Iterator

import pytest

import jetstream_sync
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.proxy import TO_SERVER, FaultProxy
from tests.fixtures.server import NatsServer


@pytest.fixture
def stream_options() -> dict[str, object]:
    """The module's streams allow fast-ingest batches and batched direct gets."""
    return {"allow_batched": True, "allow_direct": True}


def stored(stream: jetstream_sync.Stream) -> list[bytes]:
    """Every payload the stream holds, in sequence order."""
    out: list[bytes] = []
    while True:
        msgs = stream.get_msgs(start_seq=len(out) + 1, batch=1000)
        if not msgs:
            return out
        out += [m.data for m in msgs]


def test_ten_thousand_messages_commit_in_order(js, stream):
    """A 10,000-message fast batch commits; the stream holds exactly them, in order."""
    with js.fast_batch() as batch:
        for i in range(10_000):
            batch.add(f"{stream.name}.a", b"%d" % i)
        ack = batch.commit()
    assert (ack.stream, ack.batch_id, ack.batch_size, ack.seq) == (
        stream.name, batch.batch_id, 10_000, 10_000,
    )  # fmt: skip
    assert stored(stream) == [b"%d" % i for i in range(10_000)]


def test_one_message_batch(js, stream):
    """A batch of one message commits with count 1."""
    with js.fast_batch(flow=1) as batch:
        batch.add(f"{stream.name}.a", "only", headers={"K": "v"})
        ack = batch.commit()
    assert (ack.seq, ack.batch_size) == (1, 1)
    assert stream.get_msg(1).headers["K"] == "v"


def test_add_asks_to_send_itself_every_send_every_messages(js, stream, monkeypatch):
    """Every SEND_EVERY-th message add() asks to write what is buffered on its own thread
    (publish_frames(send_now=True)), instead of leaving it all to the flusher thread, which
    waits for the GIL while add() runs in a loop; the other messages only queue."""
    from jetstream_sync.jetstream import fast_batch

    client = js.client
    asked: list[int] = []
    publish_frames = client.publish_frames

    def spy(frames: bytes, msgs: int, *, timeout: float, send_now: bool = False) -> None:
        if send_now:
            asked.append(int(frames.split(b" ")[2].split(b".")[-3]))  # the batch sequence
        publish_frames(frames, msgs, timeout=timeout, send_now=send_now)

    monkeypatch.setattr(client, "publish_frames", spy)
    with js.fast_batch() as batch:
        for i in range(5 * fast_batch.SEND_EVERY + 7):
            batch.add(f"{stream.name}.a", b"%d" % i)
        assert batch.commit().batch_size == 5 * fast_batch.SEND_EVERY + 7
    assert asked == [n * fast_batch.SEND_EVERY for n in range(1, 6)]


def test_publish_frames_send_now_writes_on_the_callers_thread_when_the_socket_is_idle(nc):
    """publish_frames(send_now=True) on an idle socket sends on the calling thread without
    waking the flusher; without send_now the frames are left to the flusher thread."""
    writer = nc._connection._writer  # the one place to see which thread sends
    senders: list[str] = []
    send_now = writer._send_now

    def spy() -> None:
        senders.append(threading.current_thread().name)
        send_now()

    writer._send_now = spy
    try:
        nc.flush(timeout=5)
        wait_for(lambda: not writer._sending)  # the flusher has finished its last send
        senders.clear()
        nc.publish_frames(b"PUB idle.now 1\r\nx\r\n", 1, timeout=5.0, send_now=True)
        assert senders == [threading.current_thread().name]
        nc.publish_frames(b"PUB idle.later 1\r\ny\r\n", 1, timeout=5.0)
        assert senders == [threading.current_thread().name]  # left to the flusher
        nc.flush(timeout=5)
    finally:
        del writer._send_now


def test_payload_kinds_and_subjects_on_the_fast_path(js, stream):
    """Past the first message, str, bytearray and memoryview payloads are stored as their
    bytes, a message with headers keeps its place, and each new subject is checked."""
    with js.fast_batch(flow=2) as batch:
        batch.add(f"{stream.name}.a", b"0")
        batch.add(f"{stream.name}.a", "été")
        batch.add(f"{stream.name}.b", bytearray(b"ba"))
        batch.add(f"{stream.name}.a", memoryview(b"mv"))
        batch.add(f"{stream.name}.b", b"h", headers={"K": "v"})
        with pytest.raises(jetstream_sync.BadSubjectError):
            batch.add(f"{stream.name}.>", b"x")
        with pytest.raises(jetstream_sync.MaxPayloadError):
            batch.add(f"{stream.name}.a", b"x" * (js.client.max_payload + 1))
        batch.add(f"{stream.name}.b", b"5")
        ack = batch.commit()
    assert ack.batch_size == 6
    assert stored(stream) == [b"0", "été".encode(), b"ba", b"mv", b"h", b"5"]
    assert stream.get_msg(5).headers["K"] == "v"


def test_abandon_keeps_what_was_stored_and_closes(js, stream):
    """Leaving the block without commit sends nothing more: the batch takes no more
    messages, and the stream keeps only what it stored before (fast batches are not atomic)."""
    with js.fast_batch() as batch:
        for i in range(5):
            batch.add(f"{stream.name}.a", b"%d" % i)
    with pytest.raises(jetstream_sync.FastBatchClosedError):
        batch.add(f"{stream.name}.a", b"late")
    with pytest.raises(jetstream_sync.FastBatchClosedError):
        batch.commit()
    assert stored(stream) == [b"%d" % i for i in range(5)]


def test_stream_without_allow_batched_refuses(js, stream_name):
    """A stream without allow_batched refuses the first message and stores nothing."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    with js.fast_batch() as batch, pytest.raises(jetstream_sync.BatchPublishDisabledError) as info:
        batch.add(f"{stream_name}.a", b"x")
    assert isinstance(info.value, jetstream_sync.JetStreamError)
    assert stream.info().state.messages == 0


def test_no_stream_listening(js):
    """The first message to a subject no stream captures raises NoRespondersError."""
    with js.fast_batch() as batch, pytest.raises(jetstream_sync.NoRespondersError):
        batch.add("fastbatch.nobody.listens", b"x")


def test_refused_message_stops_the_batch_naming_it(js, stream):
    """With on_gap="fail" a refused message ends the batch with an error naming its sequence."""
    subject = f"{stream.name}.a"

    with (
        js.fast_batch(flow=1) as batch,
        pytest.raises(jetstream_sync.FastBatchMessageError) as info,
    ):
        for i in range(1, 6):
            headers = {"Nats-Expected-Last-Subject-Sequence": "99"} if i == 3 else None
            batch.add(subject, b"%d" % i, headers=headers)
        batch.commit()
    assert info.value.sequence == 3
    assert isinstance(info.value.error, jetstream_sync.WrongLastSequenceError)
    assert stored(stream)[:2] == [b"1", b"2"]
    assert b"3" not in stored(stream)


def test_refusal_seen_within_the_window_stores_nothing_after_it(js, stream):
    """The stream's refusal of message 3 is raised by a later add() within two acks' worth
    of messages (or by commit()), naming message 3; nothing sent after it is stored."""
    subject = f"{stream.name}.a"
    raised_at = None
    with js.fast_batch(flow=20) as batch:
        with pytest.raises(jetstream_sync.FastBatchMessageError) as info:
            for i in range(1, 200):
                headers = {"Nats-Expected-Last-Subject-Sequence": "99"} if i == 3 else None
                raised_at = i
                batch.add(subject, b"%d" % i, headers=headers)
            raised_at = None
            batch.commit()
    assert info.value.sequence == 3
    assert raised_at is not None and raised_at <= 3 + 2 * 20 + 1
    assert stored(stream) == [b"1", b"2"]


def test_continue_lists_refused_messages(js, stream):
    """With on_gap="continue" a refused message is listed and the rest is stored."""
    subject = f"{stream.name}.a"
    with js.fast_batch(on_gap="continue", flow=1) as batch:
        for i in range(1, 6):
            headers = {"Nats-Expected-Last-Subject-Sequence": "99"} if i == 3 else None
            batch.add(subject, b"%d" % i, headers=headers)
        ack = batch.commit()
    assert [seq for seq, _ in batch.errors] == [3]
    assert isinstance(batch.errors[0][1], jetstream_sync.WrongLastSequenceError)
    assert batch.gaps == []
    assert ack.batch_size == 5
    assert stored(stream) == [b"1", b"2", b"4", b"5"]


def test_continue_lists_gaps(js, stream):
    """With on_gap="continue" a message no stream takes shows as a gap; the rest is stored."""
    with js.fast_batch(on_gap="continue", flow=1) as batch:
        batch.add(f"{stream.name}.a", b"1")
        batch.add("fastbatch.nobody.listens", b"2")
        batch.add(f"{stream.name}.a", b"3")
        batch.add("fastbatch.nobody.listens", b"4")  # the commit still reaches the stream
        ack = batch.commit()
    assert batch.gaps == [(2, 3), (4, 5)]
    assert ack.batch_size == 4
    assert stored(stream) == [b"1", b"3"]


def test_lost_message_stops_a_failing_batch(js, stream):
    """With on_gap="fail" a message no stream takes ends the batch naming its sequence."""
    with js.fast_batch(flow=1) as batch:
        batch.add(f"{stream.name}.a", b"1")
        batch.add("fastbatch.nobody.listens", b"2")
        with pytest.raises(jetstream_sync.FastBatchGapError) as info:
            batch.add(f"{stream.name}.a", b"3")
            batch.commit()
    assert (info.value.first_lost, info.value.sequence) in ((2, 2), (2, 3))
    assert stored(stream) == [b"1"]


@pytest.mark.parametrize("on_gap", ["continue", "fail"])
def test_a_message_over_max_msg_size_is_refused_with_its_sequence(js, stream_name, on_gap):
    """10054 for one message mid-batch goes to the handler with its sequence: listed in
    .errors with "continue" (the batch commits), FastBatchMessageError with "fail"."""
    big = js.create_stream(
        name=stream_name, subjects=[f"{stream_name}.>"], allow_batched=True, allow_direct=True,
        max_msg_size=100,
    )  # fmt: skip
    with js.fast_batch(on_gap=on_gap) as batch:
        batch.add(f"{stream_name}.a", b"1")
        batch.add(f"{stream_name}.a", b"x" * 200)
        if on_gap == "continue":
            batch.add(f"{stream_name}.a", b"3")
            assert batch.commit().batch_size == 3
            [(seq, error)] = batch.errors
            assert (seq, type(error)) == (2, jetstream_sync.MessageTooLargeError)
            assert stored(big) == [b"1", b"3"]
            return
        with pytest.raises(jetstream_sync.FastBatchMessageError) as info:
            batch.add(f"{stream_name}.a", b"3")
            batch.commit()
    assert info.value.sequence == 2
    assert type(info.value.error) is jetstream_sync.MessageTooLargeError
    assert stored(big)[0] == b"1"


def test_a_message_another_stream_captures_is_refused_with_its_sequence(js, nc, stream):
    """A message of the batch captured by another batching stream (10208 from it) is
    listed with its sequence; the batch commits."""
    other = js.create_stream(
        name=stream.name + "B", subjects=[f"{stream.name}b.>"], allow_batched=True
    )
    try:
        with js.fast_batch(on_gap="continue") as batch:
            batch.add(f"{stream.name}.a", b"1")
            # the other stream's answer to message 2, seen by a second subscription first
            with nc.subscribe(f"_INBOX.{batch.batch_id}.*.*.2.1.$FI") as spy:
                batch.add(f"{stream.name}b.x", b"2")
                assert b"10208" in spy.next_msg(timeout=5).data
            batch.add(f"{stream.name}.a", b"3")
            batch.commit()
        [(seq, error)] = batch.errors
        assert (seq, type(error)) == (2, jetstream_sync.BatchPublishUnknownBatchIdError)
        assert other.info().state.messages == 0
    finally:
        js.delete_stream(other.name)


def test_bad_input_is_refused_before_sending(js, stream):
    """Bad arguments and bad messages raise before anything is sent."""

    for kwargs in ({"flow": 0}, {"flow": 70_000}, {"on_gap": "skip"}, {"timeout": -1}):
        with pytest.raises(ValueError):
            js.fast_batch(**kwargs)
    with js.fast_batch() as batch:
        with pytest.raises(ValueError):
            batch.commit()
        with pytest.raises(jetstream_sync.BadSubjectError):
            batch.add(f"{stream.name}.*", b"x")
        with pytest.raises(jetstream_sync.MaxPayloadError):
            batch.add(f"{stream.name}.a", b"x" * (js.client.max_payload + 1))
    assert stream.info().state.messages == 0


def test_frozen_server_times_out_at_the_deadline(nats_server):
    """With the server frozen, add() and commit() raise TimeoutError at their deadline;
    thawed, the commit reports exactly the messages that were sent."""
    with jetstream_sync.connect(nats_server.url) as nc:
        ctx = nc.jetstream()
        name = unique_stream_name("FASTFREEZE")
        ctx.create_stream(name=name, subjects=[f"{name}.>"], allow_batched=True)
        with ctx.fast_batch(flow=1, timeout=0.5) as batch:
            batch.add(f"{name}.a", b"0")
            with nats_server.freeze():
                start = time.monotonic()
                sent = 1
                with pytest.raises(jetstream_sync.TimeoutError):
                    for i in range(1, 100):
                        batch.add(f"{name}.a", b"%d" % i)
                        sent += 1
                assert 0.4 < time.monotonic() - start < 1.5
                start = time.monotonic()
                with pytest.raises(jetstream_sync.TimeoutError):
                    batch.commit()
                assert 0.4 < time.monotonic() - start < 1.5
            # thawed: the batch holds exactly what add() sent (a server catching up may
            # take longer than the batch's 0.5 s: commit() again keeps waiting)
            ack = wait_for(batch.commit, timeout=10, ignore=jetstream_sync.TimeoutError)
        assert ack.batch_size == sent
        assert ctx.stream(name).info().state.messages == ack.batch_size


def test_four_threads_batch_concurrently_on_one_client(js, stream):
    """Four threads each commit their own fast batch on one client; every message is stored."""
    acks: dict[int, jetstream_sync.PubAck] = {}

    def run(n: int) -> None:
        with js.fast_batch() as batch:
            for i in range(2000):
                batch.add(f"{stream.name}.t{n}", b"%d" % i)
            acks[n] = batch.commit()

    threads = [threading.Thread(target=run, args=(n,), name=f"fast-{n}") for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.batch_size for a in acks.values()) == [2000] * 4
    for n in range(4):
        got = [m.data for m in stream.get_msgs(subject=f"{stream.name}.t{n}", batch=3000)]
        assert got == [b"%d" % i for i in range(2000)]


# ------------------------------------------------------------------ atomic batches


def test_atomic_batch_duplicate_msg_id_refused_before_sending(js, stream_name):
    """Two messages of one atomic batch with the same Nats-Msg-Id: ValueError, nothing sent."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_atomic=True)
    subject = f"{stream_name}.a"
    with pytest.raises(ValueError, match="share Nats-Msg-Id"):
        js.publish_batch(
            [(subject, b"1", {"Nats-Msg-Id": "x"}), (subject, b"2", {"Nats-Msg-Id": "x"})]
        )
    assert stream.info().state.messages == 0


def test_atomic_batch_with_stored_msg_id_is_refused_whole(js, stream_name):
    """A batch holding a message id the stream already stored fails with 10201; none is stored."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_atomic=True)
    subject = f"{stream_name}.a"
    js.publish(subject, b"0", msg_id="seen")
    ack = js.publish_batch(
        [(subject, b"1", {"Nats-Msg-Id": "a"}), (subject, b"2", {"Nats-Msg-Id": "b"})]
    )
    assert ack.batch_size == 2
    with pytest.raises(jetstream_sync.AtomicPublishDuplicateMsgIdError):
        js.publish_batch(
            [(subject, b"3", {"Nats-Msg-Id": "c"}), (subject, b"4", {"Nats-Msg-Id": "seen"})]
        )
    assert stream.info().state.messages == 3


def test_atomic_batch_error_codes(js, stream):
    """atomic publish disabled (10174) and an unsupported header (10177) map to their types."""

    subject = f"{stream.name}.a"
    with pytest.raises(jetstream_sync.AtomicPublishDisabledError):
        js.publish_batch([(subject, b"1")])
    name = unique_stream_name("ATOMICHDR")
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_atomic=True)
    try:
        with pytest.raises(jetstream_sync.AtomicPublishUnsupportedHeaderError):
            js.publish_batch([(f"{name}.a", b"1", {"Nats-Expected-Last-Msg-Id": "x"})])
    finally:
        js.delete_stream(name)


def test_older_server_is_refused_before_sending(fake):
    """A server older than 2.14 (by its INFO) raises FastBatchUnsupportedError; nothing is sent."""
    info = json.loads(fake.default_info()[5:])
    info["version"] = "2.12.3"
    fake.infos.append(b"INFO " + json.dumps(info).encode() + b"\r\n")
    with jetstream_sync.connect(fake.url) as nc:
        conn = fake.connection(0)
        with nc.jetstream().fast_batch() as batch:
            with pytest.raises(jetstream_sync.FastBatchUnsupportedError, match="2.14"):
                batch.add("orders.new", b"x")
        nc.flush(timeout=5)
        assert conn.pubs == []


@contextlib.contextmanager
def _first_message_stored_plainly(fake) -> Iterator[tuple[jetstream_sync.Client, object]]:
    """A client of ``fake`` and its connection there, which answers the first message
    published with a plain PubAck at sequence 7 (a server that stored it without a batch)."""
    with jetstream_sync.connect(fake.url) as nc:
        conn = fake.connection(0)

        def answer() -> None:
            wait_for(lambda: conn.pubs, timeout=5)
            conn.msg(conn.pubs[0][1], b'{"stream":"S","seq":7}')

        replier = threading.Thread(target=answer, name="fake-replier")
        replier.start()
        try:
            yield nc, conn
        finally:
            replier.join()


def test_plain_puback_to_the_first_message_is_reported(fake):
    """A server that stores the first message as a plain publish (no batch in its PubAck)
    raises FastBatchUnsupportedError naming the stored sequence."""
    with _first_message_stored_plainly(fake) as (nc, _):
        with nc.jetstream().fast_batch(timeout=5) as batch:
            with pytest.raises(jetstream_sync.FastBatchUnsupportedError, match="sequence 7"):
                batch.add("orders.new", b"x")


def test_batch_errors_pickle():
    """The batch errors survive pickling with their fields (Spark ships errors)."""
    inner = jetstream_sync.errors.api_error(400, 10071, "wrong last sequence")
    for err in (
        jetstream_sync.FastBatchGapError("gap", 9, 4),
        jetstream_sync.FastBatchMessageError("refused", 3, inner),
        jetstream_sync.errors.api_error(400, 10201, "duplicate"),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert (type(back), str(back)) == (type(err), str(err))
        assert vars(back).keys() == vars(err).keys()
    back = pickle.loads(pickle.dumps(jetstream_sync.FastBatchMessageError("refused", 3, inner)))
    assert (back.sequence, type(back.error)) == (3, jetstream_sync.WrongLastSequenceError)
    assert pickle.loads(pickle.dumps(jetstream_sync.FastBatchGapError("g", 9, 4))).first_lost == 4
    assert type(jetstream_sync.errors.api_error(400, 10201, "d")) is (
        jetstream_sync.AtomicPublishDuplicateMsgIdError
    )


def test_lost_acks_are_recovered_by_a_ping(fake):
    """When acks stop coming, the batch pings (op 4, the highest sequence sent) and goes on
    with the ack the ping brings back (fake stream that drops every ack but the first)."""
    with jetstream_sync.connect(fake.url) as nc:
        conn = fake.connection(0)
        stop = threading.Event()

        def stream() -> None:
            answered = 0
            while not stop.is_set():
                wait_for(lambda n=answered: len(conn.pubs) > n or stop.is_set(), timeout=10)
                for _subject, reply, _body in conn.pubs[answered:]:
                    seq, op = reply.split(b".")[-3:-1]
                    if op == b"0":
                        conn.msg(reply, b'{"type":"ack","seq":0,"msgs":1}')
                    elif op == b"4":
                        conn.msg(reply, b'{"type":"ack","seq":%s,"msgs":1}' % seq)
                    elif op == b"3":
                        conn.msg(reply, b'{"stream":"S","seq":3,"batch":"b","count":3}')
                    answered += 1

        thread = threading.Thread(target=stream, name="fake-stream")
        thread.start()
        try:
            with nc.jetstream().fast_batch(timeout=10) as batch:
                batch.add("orders.new", b"1")
                batch.add("orders.new", b"2")  # the window (2 x 1 message) is full
                start = time.monotonic()
                batch.add("orders.new", b"3")  # waits for an ack that never comes: pings
                assert time.monotonic() - start >= 0.9
                batch.add("orders.new", b"4")
                assert batch.commit().batch_size == 3  # the fake stream's answer
            pings = [reply for _s, reply, _b in conn.pubs if reply.endswith(b".4.$FI")]
            assert pings[0].split(b".")[-3] == b"2"
        finally:
            stop.set()
            thread.join()


@pytest.fixture
def small_batch_server(tmp_path):
    """A server allowing 5 messages per atomic batch and one open batch per stream."""
    limits = "limits { batch { max_msgs: 5, max_inflight_per_stream: 1 } }"
    server = NatsServer(directory=tmp_path / "nats-server", jetstream_config=[limits]).start()
    yield server
    server.stop()


def test_batch_limits_map_to_their_errors(small_batch_server):
    """Past the server's batch limits: too large (10199), too many open atomic (10210) and
    fast (10211) batches each raise their own type."""
    with jetstream_sync.connect(small_batch_server.url) as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="LIM", subjects=["lim.>"], allow_atomic=True, allow_batched=True)
        with pytest.raises(jetstream_sync.AtomicPublishTooLargeBatchError):
            ctx.publish_batch([("lim.a", b"%d" % i) for i in range(6)])
        # An atomic batch left open (its first message, no commit) takes the one slot.
        open_batch = {"Nats-Batch-Id": "open1", "Nats-Batch-Sequence": "1"}
        nc.publish("lim.a", b"open", headers=open_batch)
        nc.flush(timeout=5)
        with pytest.raises(jetstream_sync.AtomicPublishTooManyInflightError):
            ctx.publish_batch([("lim.a", b"1")])
        with ctx.fast_batch() as first:
            first.add("lim.a", b"f1")
            with (
                ctx.fast_batch() as second,
                pytest.raises(jetstream_sync.BatchPublishTooManyInflightError),
            ):
                second.add("lim.a", b"f2")


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({"Nats-Batch-Id": "b1", "Nats-Batch-Commit": "1"}, "AtomicPublishMissingSeqError"),
        (
            {"Nats-Batch-Id": "x" * 65, "Nats-Batch-Sequence": "1", "Nats-Batch-Commit": "1"},
            "AtomicPublishInvalidBatchIdError",
        ),
        (
            {"Nats-Batch-Id": "b2", "Nats-Batch-Sequence": "1", "Nats-Batch-Commit": "x"},
            "AtomicPublishInvalidCommitError",
        ),
        (
            {"Nats-Batch-Id": "b3", "Nats-Batch-Sequence": "2", "Nats-Batch-Commit": "1"},
            "AtomicPublishIncompleteBatchError",
        ),
    ],
    ids=["missing-seq-10175", "invalid-id-10179", "invalid-commit-10200", "incomplete-10176"],
)
def test_malformed_atomic_batch_codes_map_to_types(js, stream_name, headers, error):
    """Batch headers the server refuses raise the type registered for its err_code."""
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_atomic=True)
    with pytest.raises(getattr(jetstream_sync, error)):
        js.publish(f"{stream_name}.a", b"x", headers=headers)


def test_batches_from_an_inline_callback_are_refused_before_sending(js, nc, stream_name):
    """A fast batch's first add() and publish_batch() in an inline callback raise
    InlineCallbackError before publishing anything (the fast batch's first message used to
    be stored while add() raised; the atomic batch's first messages went out uncommitted)."""
    stream = js.create_stream(
        name=stream_name, subjects=[f"{stream_name}.>"], allow_batched=True, allow_atomic=True
    )
    outcome: dict[str, object] = {}

    def callback(msg: jetstream_sync.Msg) -> None:
        before = nc.stats.out_msgs
        try:
            with js.fast_batch(timeout=2) as batch:
                batch.add(f"{stream_name}.fast", b"x")
        except Exception as exc:
            outcome["fast"] = exc
        try:
            js.publish_batch([(f"{stream_name}.a", b"1"), (f"{stream_name}.a", b"2")], timeout=2)
        except Exception as exc:
            outcome["atomic"] = exc
        outcome["sent"] = nc.stats.out_msgs - before
        msg.respond(b"done")

    with nc.subscribe(f"inline.{stream_name}", cb=callback, inline=True):
        assert nc.request(f"inline.{stream_name}", b"", timeout=10).data == b"done"
    assert isinstance(outcome["fast"], jetstream_sync.InlineCallbackError)
    assert isinstance(outcome["atomic"], jetstream_sync.InlineCallbackError)
    assert outcome["sent"] == 0
    assert stream.info().state.messages == 0


@pytest.mark.parametrize("header", ["Nats-Batch-Id", "nats-batch-sequence", "Nats-Batch-Commit"])
def test_atomic_batch_refuses_its_own_headers_before_sending(js, nc, stream_name, header):
    """publish_batch() sets the Nats-Batch-* headers itself: a message carrying one is a
    ValueError naming it, and nothing is sent (a Nats-Batch-Commit on message 1 used to
    commit it alone while the call raised AtomicPublishIncompleteBatchError)."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_atomic=True)
    subject = f"{stream_name}.a"
    before = nc.stats.out_msgs
    with pytest.raises(ValueError, match=f"message 1: header {header!r}"):
        js.publish_batch([(subject, b"1", {header: "1"}), (subject, b"2")])
    assert nc.stats.out_msgs == before
    assert stream.info().state.messages == 0


@pytest.mark.parametrize("item", [("x",), ("x", b"1", None, "extra"), "xy", None])
def test_atomic_batch_items_of_another_shape_are_refused_before_sending(js, nc, stream_name, item):
    """An item that is not (subject, data) or (subject, data, headers) raises TypeError
    naming its position before anything is sent (a fourth element was silently dropped)."""
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_atomic=True)
    before = nc.stats.out_msgs
    with pytest.raises(TypeError, match="message 2"):
        js.publish_batch([(f"{stream_name}.a", b"1"), item])
    assert nc.stats.out_msgs == before


def test_atomic_batch_expected_last_sequence_after_the_first_message_is_refused(
    js, nc, stream_name
):
    """Only an atomic batch's first message may carry Nats-Expected-Last-Sequence (ADR-50):
    on a later one it is a ValueError before sending (the server refused the batch with a
    WrongLastSequenceError, as if the stream had moved on)."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_atomic=True)
    subject, before = f"{stream_name}.a", nc.stats.out_msgs
    with pytest.raises(ValueError, match="message 2: only the first message"):
        js.publish_batch([(subject, b"1"), (subject, b"2", {"Nats-Expected-Last-Sequence": "0"})])
    assert nc.stats.out_msgs == before
    ack = js.publish_batch([(subject, b"1", {"Nats-Expected-Last-Sequence": "0"}), (subject, b"2")])
    assert ack.batch_size == 2 and stream.info().state.messages == 2


def test_a_refused_first_message_raises_its_own_error(small_batch_server):
    """publish_batch() sends its first message as a request (ADR-50) and waits for the
    stream's answer: a first message refused raises its own error and nothing after it is
    sent (too many open batches, no stream for its subject and a message over max_msg_size
    used to send the whole batch and raise AtomicPublishIncompleteBatchError)."""
    with jetstream_sync.connect(small_batch_server.url) as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="BIG", subjects=["big.>"], allow_atomic=True, max_msg_size=300)
        ctx.create_stream(name="LIM", subjects=["lim.>"], allow_atomic=True)
        nc.publish("lim.a", b"open", headers={"Nats-Batch-Id": "open1", "Nats-Batch-Sequence": "1"})
        nc.flush(timeout=5)
        cases = [
            ([("lim.a", b"1"), ("lim.a", b"2")], jetstream_sync.AtomicPublishTooManyInflightError),
            ([("none.a", b"1"), ("big.a", b"2")], jetstream_sync.NoRespondersError),
            ([("big.a", b"x" * 400), ("big.a", b"2")], jetstream_sync.MessageTooLargeError),
        ]
        for messages, error in cases:
            before = nc.stats.out_msgs
            with pytest.raises(error):
                ctx.publish_batch(messages, timeout=5)
            assert nc.stats.out_msgs - before == 1
        assert ctx.stream("BIG").info().state.messages == 0
        assert ctx.publish_batch([("big.a", b"1"), ("big.a", b"2")]).batch_size == 2


def test_a_first_atomic_message_stored_as_a_plain_publish_stops_the_batch(fake):
    """A server that answers the first message of an atomic batch with a plain PubAck (it
    stored it without a batch: older than 2.12) raises RequiredApiLevelError naming the
    stored sequence, and the rest of the batch is not sent."""
    with _first_message_stored_plainly(fake) as (nc, conn):
        with pytest.raises(jetstream_sync.RequiredApiLevelError, match="sequence 7"):
            nc.jetstream().publish_batch([("orders.a", b"1"), ("orders.a", b"2")], timeout=5)
        nc.flush(timeout=5)
        assert len(conn.pubs) == 1


def test_atomic_batch_subject_check_on_a_subject_written_before_is_refused(js, nc, stream_name):
    """Nats-Expected-Last-Subject-Sequence on a subject an earlier message of the same
    atomic batch writes (its own, or the one -Subject names) is a ValueError before sending
    (the server refused the batch with a WrongLastSequenceError, as if the stream had moved
    on); on a subject the batch has not written it is checked by the stream."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_atomic=True)
    a, b, c = (f"{stream_name}.{token}" for token in "abc")
    last = "Nats-Expected-Last-Subject-Sequence"
    written = f"{re.escape(repr(a))}.* written by message 1"
    before = nc.stats.out_msgs
    with pytest.raises(ValueError, match=f"message 2: .*{written}"):
        js.publish_batch([(a, b"1"), (a, b"2", {last: "0"})])
    with pytest.raises(ValueError, match=f"message 3: .*{written}"):
        js.publish_batch([(a, b"1"), (b, b"2"), (b, b"3", {last: "0", f"{last}-Subject": a})])
    assert nc.stats.out_msgs == before
    ack = js.publish_batch(
        [(a, b"1"), (b, b"2", {last: "0"}), (a, b"3", {last: "0", f"{last}-Subject": c})]
    )
    assert ack.batch_size == 3 and stream.info().state.messages == 3


@pytest.mark.parametrize("then", ["add", "commit"])
def test_a_batch_the_restarted_stream_forgot_claims_only_what_it_confirmed(
    restartable_server, then
):
    """Messages lost with the connection, then a stream restarted without the batch: the
    next message is refused as of an unknown batch (10208). The error is a
    FastBatchGapError from the first message the stream did not confirm, not a refusal of
    that one message (which said everything before it was stored), nor, for the end of the
    batch, an unknown batch error that says nothing of what was stored."""
    with (
        FaultProxy(restartable_server.port) as proxy,
        jetstream_sync.connect(proxy.url, reconnect_time_wait=0.05) as nc,
    ):
        ctx = nc.jetstream()
        stream = ctx.create_stream(name="RS", subjects=["rs.>"], allow_batched=True)
        with ctx.fast_batch(timeout=10) as batch:
            for i in range(3):
                batch.add("rs.a", b"%d" % i)
            wait_for(lambda: stream.info().state.messages == 3, timeout=10)
            proxy.stall(directions=(TO_SERVER,))
            batch.add("rs.a", b"lost")  # held by the proxy, then dropped with the link
            wait_for(lambda: proxy.held, timeout=10)
            proxy.cut()
            restartable_server.restart()
            proxy.pass_through()
            wait_for(lambda: nc.stats.reconnects == 1 and nc.is_connected, timeout=10)
            with pytest.raises(jetstream_sync.FastBatchGapError) as got:
                for _ in range(50 if then == "add" else 0):  # until the refusal is read
                    batch.add("rs.a", b"after")
                batch.commit()
        assert got.value.first_lost <= 4
        assert stream.info().state.messages == 3
