"""Received messages decode subject and reply on first read: they read as eager ones did.

A received :class:`Msg` holds its fields as the bytes received (``msg.received``)
and decodes ``subject`` and ``reply`` when first asked; these tests check it gives
what a message built with ``Msg(...)`` from the same frame gives, for every kind
of frame, and that nothing it holds goes stale (issue 21 item 2).
"""

from __future__ import annotations

import copy
import pickle
import threading

import pytest

import jetstream_sync as js
from jetstream_sync._connection import connection
from jetstream_sync.headers import Headers
from jetstream_sync.msg import Msg, header_block, received
from tests.fixtures.raw_client import RawClient

STATUS_BLOCK = b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\n\r\n"
HEADER_BLOCK = b"NATS/1.0\r\nK: v1\r\nK: v2\r\nOther: x\r\n\r\n"


def _fields(msg: Msg) -> tuple:
    return (
        msg.subject,
        msg.reply,
        msg.data,
        dict((k, msg.headers.get_all(k)) for k in msg.headers),
        msg.status,
        msg.description,
        msg.is_status,
        msg.header_size,
        header_block(msg),
    )


def _eager(subject: bytes, reply: bytes, data: bytes, block: bytes | None) -> tuple:
    """The fields of the message an eager ``Msg(...)`` makes of the same frame."""
    decode = lambda b: str(b, "utf-8", "surrogateescape")  # noqa: E731
    return _fields(Msg(decode(subject), decode(reply), data, block))


def _send(raw: RawClient, subject: bytes, reply: bytes, data: bytes, block: bytes | None) -> None:
    tail = b" " + reply if reply else b""
    if block is None:
        raw.send(b"PUB %s%s %d\r\n%s\r\n" % (subject, tail, len(data), data))
    else:
        total = len(block) + len(data)
        raw.send(b"HPUB %s%s %d %d\r\n%s%s\r\n" % (subject, tail, len(block), total, block, data))


FRAMES = [
    (b"views.lit", b"", b"plain", None),
    (b"views.lit", b"_INBOX.r1", b"", None),  # empty payload, with a reply
    (b"views.a.b", b"reply.to", b"with headers", HEADER_BLOCK),
    (b"views.a.b", b"", b"", STATUS_BLOCK),  # a status line, empty payload
    (b"views.\xff\xfe.x", b"r.\xc3\x28", b"\x00\x01", None),  # bytes that are not UTF-8
    (b"views.big", b"", bytes(range(256)) * 4096, None),  # 1 MiB
]


@pytest.mark.parametrize("pattern", ["views.>", "views.*", "views.lit"])
def test_received_fields_equal_an_eager_msg(shared_server, pattern):
    """Literal, ``*`` and ``>`` subscriptions get the fields Msg(...) gives for each frame."""
    raw = RawClient(shared_server.port)
    try:
        with js.connect(shared_server.url) as nc:
            sub = nc.subscribe(pattern)
            nc.flush()
            sent = [f for f in FRAMES if _matches(pattern, f[0])]
            for frame in sent:
                _send(raw, *frame)
            for frame in sent:
                msg = sub.next_msg(timeout=5)
                assert _fields(msg) == _eager(*frame)
                assert msg.sid == sub.sid
    finally:
        raw.close()


def _matches(pattern: str, subject: bytes) -> bool:
    tokens = subject.split(b".")
    if pattern == "views.>":
        return len(tokens) > 1
    if pattern == "views.*":
        return len(tokens) == 2
    return subject == b"views.lit"


def test_non_utf8_subject_round_trips(shared_server):
    """A subject that is not UTF-8 reads with surrogate escapes and answers to the same bytes."""
    raw = RawClient(shared_server.port)
    try:
        with js.connect(shared_server.url) as nc:
            sub = nc.subscribe("views.*.x")
            back = nc.subscribe("views.reply.*")
            nc.flush()
            _send(raw, b"views.\xff.x", b"views.reply.\xfe", b"hi", None)
            msg = sub.next_msg(timeout=5)
            assert msg.subject == "views.\udcff.x"
            assert msg.subject.encode("utf-8", "surrogateescape") == b"views.\xff.x"
            assert msg.reply.encode("utf-8", "surrogateescape") == b"views.reply.\xfe"
            msg.respond(b"answer")
            answer = back.next_msg(timeout=5)
            assert (answer.subject, answer.data) == ("views.reply.\udcfe", b"answer")
    finally:
        raw.close()


def test_frames_of_a_buffer_sliced_in_place(shared_server, monkeypatch):
    """Past the copy limit (every buffer, here) the fields read the same, copied once each."""
    monkeypatch.setattr(connection, "_COPY_LIMIT", 0)
    raw = RawClient(shared_server.port)
    try:
        with js.connect(shared_server.url) as nc:
            sub = nc.subscribe("views.>")
            nc.flush()
            for frame in FRAMES:
                _send(raw, *frame)
            for frame in FRAMES:
                msg = sub.next_msg(timeout=5)
                assert _fields(msg) == _eager(*frame)
                assert type(msg.data) is bytes
    finally:
        raw.close()


def _frame_to(sid: int, subject: bytes, reply: bytes, data: bytes, block: bytes | None) -> bytes:
    """The MSG or HMSG a server sends for ``sid``."""
    tail = b" " + reply if reply else b""
    if block is None:
        return b"MSG %s %d%s %d\r\n%s\r\n" % (subject, sid, tail, len(data), data)
    total = len(block) + len(data)
    return b"HMSG %s %d%s %d %d\r\n%s%s\r\n" % (subject, sid, tail, len(block), total, block, data)


def test_a_read_of_one_subscriptions_messages_reads_as_a_mixed_one(fake, monkeypatch):
    """A read holding only one subscription's messages is queued in one pass; its messages
    read as those of a read that mixes subscriptions and control lines, frame for frame."""
    one_pass: list[bool] = []
    original = connection.Connection._route_one_subscription

    def recorded(self, ops, whole):
        one_pass.append(original(self, ops, whole))
        return one_pass[-1]

    monkeypatch.setattr(connection.Connection, "_route_one_subscription", recorded)
    with js.connect(fake.url) as nc:
        sub = nc.subscribe("views.>")
        other = nc.subscribe("elsewhere")
        nc.flush()
        server = fake.connection(0)
        sid, other_sid = server.sid_of(b"views.>"), server.sid_of(b"elsewhere")
        sent = FRAMES[:-1] * 3 + FRAMES[-1:]  # enough messages for the one-pass path
        server.send(b"".join(_frame_to(sid, *frame) for frame in sent))
        for frame in sent:
            msg = sub.next_msg(timeout=5)
            assert _fields(msg) == _eager(*frame)
            assert msg.sid == sub.sid
        assert True in one_pass
        one_pass.clear()
        mixed = [_frame_to(sid, *frame) + b"PING\r\n" for frame in FRAMES[:-1]]
        mixed.insert(2, _frame_to(other_sid, b"elsewhere", b"", b"between", None))
        server.send(b"".join(mixed))
        for frame in FRAMES[:-1]:
            assert _fields(sub.next_msg(timeout=5)) == _eager(*frame)
        assert other.next_msg(timeout=5).data == b"between"
        assert one_pass and True not in one_pass


def test_messages_kept_across_fetches_read_right(js, stream):
    """Messages of a fetch kept while the next fetches run still read their own fields."""
    for i in range(30):
        js.publish(f"{stream.name}.k.{i}", f"payload {i}".encode(), headers={"N": str(i)})
    consumer = stream.create_consumer()
    first = consumer.fetch(10, timeout=2)
    later = consumer.fetch(20, timeout=2)
    for i, msg in enumerate(first + later):
        assert (msg.subject, msg.data, msg.headers["N"]) == (
            f"{stream.name}.k.{i}",
            f"payload {i}".encode(),
            str(i),
        )
        assert msg.metadata.sequence.stream == i + 1


def test_a_message_kept_across_a_reconnect_reads_right(restartable_server):
    """A message received before the server restarted reads (and answers) right afterwards."""
    reconnected = threading.Event()
    with js.connect(
        restartable_server.url, reconnect_time_wait=0.1, reconnected_cb=reconnected.set
    ) as nc:
        sub = nc.subscribe("views.kept")
        back = nc.subscribe("views.kept.reply")
        nc.publish("views.kept", b"before", reply="views.kept.reply", headers={"K": "v"})
        kept = sub.next_msg(timeout=5)
        restartable_server.restart()
        assert reconnected.wait(15)
        nc.publish("views.kept", b"after")
        assert sub.next_msg(timeout=5).data == b"after"
        want = ("views.kept", "views.kept.reply", b"before")
        assert (kept.subject, kept.reply, kept.data) == want
        assert kept.headers["K"] == "v"
        kept.respond(b"late")
        assert back.next_msg(timeout=5).data == b"late"


def test_sixteen_threads_read_shared_messages(js, stream):
    """16 threads reading the fields of the same fresh messages all see the same values."""
    for i in range(200):
        js.publish(f"{stream.name}.t.{i % 7}", b"%d" % i, headers={"I": str(i)})
    msgs = stream.create_consumer().fetch(200, timeout=3)
    assert len(msgs) == 200
    start = threading.Barrier(16)
    seen: list[list[tuple]] = [[] for _ in range(16)]

    def read(slot: int) -> None:
        start.wait()
        order = msgs if slot % 2 else msgs[::-1]
        for msg in order:
            md = msg.metadata
            seen[slot].append(
                (msg.subject, msg.reply, msg.data, msg.headers["I"], md.sequence.stream)
            )

    threads = [threading.Thread(target=read, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    want = [
        (f"{stream.name}.t.{i % 7}", msgs[i].reply, b"%d" % i, str(i), i + 1) for i in range(200)
    ]
    for slot, got in enumerate(seen):
        assert (got if slot % 2 else got[::-1]) == want


def test_fields_stay_settable():
    """subject, reply and data may be assigned, as on an eager message, and read back."""
    msg = Msg("a", "b", b"c")
    msg.subject, msg.reply, msg.data = "x", "$JS.ACK.not.read", b"z"
    assert (msg.subject, msg.reply, msg.data) == ("x", "$JS.ACK.not.read", b"z")


def test_received_message_set_then_acked_uses_the_new_reply(nc):
    """A reply assigned to a received message is the one its ack goes to."""
    sub = nc.subscribe("views.set")
    acks = nc.subscribe("views.acks")
    nc.publish("views.set", b"x", reply="views.orig")
    msg = sub.next_msg(timeout=5)
    msg.reply = "views.acks"
    msg.respond(b"to the new reply")
    assert acks.next_msg(timeout=5).data == b"to the new reply"


def test_received_messages_pickle_and_copy_as_msg(shared_server):
    """A received message copies into an equal Msg and refuses pickling, saying why;
    one made by hand pickles."""
    with js.connect(shared_server.url) as nc:
        sub = nc.subscribe("views.pickle")
        nc.publish("views.pickle", b"p", reply="r", headers={"K": "v"})
        msg = sub.next_msg(timeout=5)
        clone = copy.copy(msg)
        assert _fields(clone) == _fields(msg) and clone.sid == msg.sid
        for dump in (pickle.dumps, copy.deepcopy):
            with pytest.raises(TypeError, match="a received Msg cannot be pickled: it holds"):
                dump(msg)
    undecoded = received(b"s.\xff", b"r", b"d", None, None, 4)  # nothing read yet
    back = pickle.loads(pickle.dumps(undecoded))
    assert (back.subject, back.reply, back.data, back.sid) == ("s.\udcff", "r", b"d", 4)
    made = Msg("s", "r", b"d", b"NATS/1.0\r\nK: v\r\n\r\n", sid=3)
    back = pickle.loads(pickle.dumps(made))
    assert _fields(back) == _fields(made) and back.sid == 3
    assert back.headers == Headers({"K": "v"})
