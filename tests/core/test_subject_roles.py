"""Subjects by role: publish subjects take no wildcards, filters take ``*`` and a last ``>``.

Issue 8 A: API subjects built from a filter (``$JS.API.CONSUMER.CREATE.<stream>.
<consumer>.<filter>``, ``$JS.API.DIRECT.GET.<stream>.<subject>``) carry the
filter's wildcards; each row of the issue's table is a test here, against the
real server. Publishing to a wildcard subject stays refused before anything is
sent.
"""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import _subjects
from jetstream_sync.errors import BadSubjectError
from jetstream_sync.jetstream.consumer_config import ConsumerConfig, OrderedConsumerConfig
from jetstream_sync.jetstream.enums import DeliverPolicy
from jetstream_sync.jetstream.stream import Stream

# subject, valid to publish to, valid to filter on
ROLE_TABLE = [
    ("orders", True, True),
    ("orders.eu.created", True, True),
    ("a*b.c>d", True, True),
    ("ev.*", False, True),
    ("ev.*.x", False, True),
    ("*.*.x", False, True),
    ("ev.>", False, True),
    (">", False, True),
    ("ev.*.>", False, True),
    ("ev.>.x", False, False),
    ("", False, False),
    ("ev..x", False, False),
    (".ev", False, False),
    ("ev.", False, False),
    ("ev x", False, False),
    ("ev\tx", False, False),
    ("ev\rx", False, False),
    ("ev\nx", False, False),
    ("ev\fx", False, False),
    ("ev\vx", False, False),
    ("ev\x00x", False, False),
    ("\u00e9v\u00e9nements.cr\u00e9\u00e9s", True, True),
]


@pytest.mark.parametrize(("subject", "publish", "filter_"), ROLE_TABLE)
def test_role_rules(subject, publish, filter_):
    """Each subject is valid for exactly the roles the table gives it."""
    assert _subjects.is_publish_subject(subject) is publish
    assert _subjects.is_filter_subject(subject) is filter_
    if publish:
        assert _subjects.publish_subject(subject) == subject.encode()
    else:
        with pytest.raises(BadSubjectError):
            _subjects.publish_subject(subject)
    if filter_:
        assert _subjects.filter_subject(subject) == subject
    else:
        with pytest.raises(BadSubjectError):
            _subjects.filter_subject(subject)


@pytest.mark.parametrize(
    ("name", "valid"),
    [("ORDERS", True), ("a-b_c", True), ("a.b", False), ("*", False), (">", False),
     ("", False), ("a b", False), ("a\fb", False), ("a\x00b", False)],
)  # fmt: skip
def test_name_token_rule(name, valid):
    """A name that becomes one subject token has no dot, wildcard, whitespace or NUL."""
    assert _subjects.is_name_token(name) is valid
    if not valid:
        with pytest.raises(BadSubjectError):
            _subjects.name_token(name, "stream name")


@pytest.mark.parametrize("value", [None, 5, b"ev.>"])
def test_non_strings_are_bad_subjects(value):
    """A subject that is not a str is a BadSubjectError (also a ValueError), not a TypeError."""
    for check in (_subjects.publish_subject, _subjects.filter_subject, _subjects.name_token):
        with pytest.raises(BadSubjectError):
            check(value)
    assert not _subjects.is_filter_subject(value)


def test_unencodable_subject_is_a_bad_subject():
    """A lone surrogate cannot go on the wire: BadSubjectError, not UnicodeEncodeError."""
    with pytest.raises(BadSubjectError):
        _subjects.filter_subject("ev.\ud800")


def test_filter_subjects_refuses_a_bare_string():
    """Several filters are a sequence; one string is not taken character by character."""
    with pytest.raises(BadSubjectError):
        _subjects.filter_subjects("ev.>")
    assert _subjects.filter_subjects(["ev.*", "ev.>"]) == ["ev.*", "ev.>"]


# --------------------------------------------------------------------------
# Publishing to a wildcard subject is refused before anything is sent.


def _server_in_msgs(server, nc) -> int:
    """The messages the server received from ``nc``'s connection (its connz)."""
    cid = nc.server_info["client_id"]
    conns = server.monitor("connz", cid=cid)["connections"]
    assert len(conns) == 1
    return int(conns[0]["in_msgs"])


@pytest.mark.parametrize("subject", ["ev.*", "ev.*.x", "ev.>", ">", "*"])
@pytest.mark.parametrize("call", ["publish", "request", "validate_publish", "js.publish"])
def test_publishing_to_a_wildcard_is_refused(shared_server, nc, js, subject, call):
    """publish/request/js.publish to a wildcard raise BadSubjectError; the server gets nothing."""
    nc.flush()
    before_server = _server_in_msgs(shared_server, nc)
    before_client = nc.stats.out_msgs
    action = {
        "publish": lambda: nc.publish(subject, b"x"),
        "request": lambda: nc.request(subject, b"x", timeout=1),
        "validate_publish": lambda: nc.validate_publish(subject, b"x"),
        "js.publish": lambda: js.publish(subject, b"x"),
    }[call]
    with pytest.raises(BadSubjectError, match="no wildcards"):
        action()
    nc.flush()
    assert nc.stats.out_msgs == before_client
    assert _server_in_msgs(shared_server, nc) == before_server


def test_a_wildcard_reply_subject_is_refused(nc):
    """A reply subject is published to later, so it takes no wildcards either."""
    with pytest.raises(BadSubjectError, match="reply subject"):
        nc.publish("ev.a", b"x", reply="_INBOX.*")


def test_an_api_lookalike_subject_is_still_checked(nc):
    """A user's own string that looks like an API subject gets the publish check."""
    with pytest.raises(BadSubjectError):
        nc.request("$JS.API.CONSUMER.CREATE.S.c.ev.>", b"{}", timeout=1)


# --------------------------------------------------------------------------
# Issue 8 A, row by row.


@pytest.fixture
def ev(js: jetstream_sync.JetStreamContext, stream_name: str) -> Stream:
    """A stream on ``<name>.>`` with direct get, holding one message on each of four subjects."""
    stream = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], allow_direct=True)
    for tail in ("a.x", "b.x", "a.y", "c"):
        js.publish(f"{stream_name}.{tail}", tail.encode())
    return stream


def _subjects_of(msgs) -> list[str]:
    return [m.subject.split(".", 1)[1] for m in msgs]


@pytest.mark.parametrize(
    ("tail", "expected"), [("*.x", ["a.x", "b.x"]), (">", ["a.x", "b.x", "a.y", "c"])]
)
@pytest.mark.parametrize("durable", [True, False])
def test_create_consumer_with_a_wildcard_filter(ev, tail, expected, durable):
    """create_consumer with ``*`` in the middle or ``>`` at the end, durable or ephemeral."""
    fields = {"durable_name": "d"} if durable else {}
    cons = ev.create_consumer(filter_subject=f"{ev.name}.{tail}", **fields)
    assert cons.cached_info.config.filter_subject == f"{ev.name}.{tail}"
    assert cons.cached_info.num_pending == len(expected)
    assert _subjects_of(cons.fetch(10, timeout=1)) == expected


@pytest.mark.parametrize("tail", ["*.x", ">"])
def test_update_consumer_with_a_wildcard_filter(ev, tail):
    """update_consumer keeps and changes a wildcard filter."""
    ev.create_consumer(durable_name="u", filter_subject=f"{ev.name}.a.x")
    cons = ev.update_consumer(durable_name="u", filter_subject=f"{ev.name}.{tail}")
    assert cons.cached_info.config.filter_subject == f"{ev.name}.{tail}"
    again = ev.update_consumer(
        durable_name="u", filter_subject=f"{ev.name}.{tail}", description="changed"
    )
    assert again.cached_info.config.description == "changed"


@pytest.mark.parametrize("tail", ["*.x", ">"])
@pytest.mark.parametrize("durable", [True, False])
def test_create_or_update_consumer_with_a_wildcard_filter(ev, tail, durable):
    """create_or_update_consumer creates, then updates, with a wildcard filter."""
    fields = {"durable_name": "cu"} if durable else {"name": "cu"}
    first = ev.create_or_update_consumer(filter_subject=f"{ev.name}.{tail}", **fields)
    second = ev.create_or_update_consumer(
        filter_subject=f"{ev.name}.{tail}", description="again", **fields
    )
    assert first.name == second.name == "cu"
    assert second.cached_info.config.description == "again"


def test_context_create_consumer_with_a_wildcard_filter(js, ev):
    """The context's create_consumer takes a wildcard filter as the stream's does."""
    cons = js.create_consumer(ev.name, ConsumerConfig(filter_subject=f"{ev.name}.*.x"))
    assert _subjects_of(cons.fetch(10, timeout=1)) == ["a.x", "b.x"]


def test_ordered_consumer_with_a_wildcard_filter(js, ev):
    """An ordered consumer with ``filter_subjects=["<s>.>"]`` delivers the matching messages."""
    oc = js.ordered_consumer(ev.name, OrderedConsumerConfig(filter_subjects=(f"{ev.name}.*.x",)))
    try:
        assert _subjects_of(oc.fetch(10, timeout=2)) == ["a.x", "b.x"]
    finally:
        oc.close()
    oc = ev.ordered_consumer(filter_subjects=[f"{ev.name}.>"])
    try:
        assert _subjects_of(oc.fetch(10, timeout=2)) == ["a.x", "b.x", "a.y", "c"]
    finally:
        oc.close()


def test_ordered_consumer_last_per_subject(js, ev):
    """LAST_PER_SUBJECT (which filters on ``>`` itself) gives the newest message per subject."""
    js.publish(f"{ev.name}.a.x", b"a.x again")
    oc = ev.ordered_consumer(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT)
    try:
        msgs = oc.fetch(10, timeout=2)
    finally:
        oc.close()
    assert _subjects_of(msgs) == ["b.x", "a.y", "c", "a.x"]
    assert msgs[-1].data == b"a.x again"


def test_compat_subscribe_with_a_wildcard(js, ev):
    """nats.py's ``js.subscribe("<s>.>", durable=...)`` creates a push consumer on the filter."""
    sub = js.subscribe(f"{ev.name}.*.x", durable="p")
    try:
        got = [sub.next_msg(timeout=2).subject for _ in range(2)]
        assert [s.split(".", 1)[1] for s in got] == ["a.x", "b.x"]
        assert sub.consumer_info().config.filter_subject == f"{ev.name}.*.x"
    finally:
        sub.unsubscribe()
    sub = js.subscribe(f"{ev.name}.>", durable="p2")
    try:
        assert sub.next_msg(timeout=2).subject == f"{ev.name}.a.x"
    finally:
        sub.unsubscribe()


def test_compat_pull_subscribe_with_a_wildcard(js, ev):
    """nats.py's ``js.pull_subscribe("<s>.>", durable=...)`` works and binds again later."""
    psub = js.pull_subscribe(f"{ev.name}.>", durable="ps")
    assert _subjects_of(psub.fetch(10, timeout=1)) == ["a.x", "b.x", "a.y", "c"]
    again = js.pull_subscribe(f"{ev.name}.>", durable="ps")
    assert again.consumer_info().name == "ps"
    narrow = js.pull_subscribe(f"{ev.name}.*.x", durable="px")
    assert _subjects_of(narrow.fetch(10, timeout=1)) == ["a.x", "b.x"]


@pytest.mark.parametrize(
    ("tail", "expected"), [("a.y", "a.y"), ("*.x", "b.x"), (">", "c"), ("a.>", "a.y")]
)
def test_direct_get_last_for_a_wildcard(ev, tail, expected):
    """direct_get_last_for_subject returns the newest message the filter matches."""
    msg = ev.direct_get_last_for_subject(f"{ev.name}.{tail}")
    assert msg.subject == f"{ev.name}.{expected}"
    assert msg.data == expected.encode()


@pytest.mark.parametrize(
    ("tail", "expected"), [("a.y", "a.y"), ("*.x", "b.x"), (">", "c"), ("a.>", "a.y")]
)
def test_get_last_msg_for_a_wildcard(ev, tail, expected):
    """get_last_msg_for_subject (through the leader) does the same."""
    assert ev.get_last_msg_for_subject(f"{ev.name}.{tail}").subject == f"{ev.name}.{expected}"


@pytest.mark.parametrize("tail", ["a.x", "*.x", ">"])
def test_stream_lookup_by_a_wildcard(js, ev, tail):
    """stream_names / streams / stream_name_by_subject take a literal, ``*`` or ``>``."""
    subject = f"{ev.name}.{tail}"
    assert list(js.stream_names(subject=subject)) == [ev.name]
    assert [i.config.name for i in js.streams(subject=subject)] == [ev.name]
    assert js.stream_name_by_subject(subject) == ev.name


@pytest.mark.parametrize("bad", ["ev.>.x", "ev..x", "ev x", "ev\fx", ""])
def test_bad_filters_are_refused_where_they_enter(js, ev, bad):
    """A malformed filter raises BadSubjectError at the call, before anything is sent."""
    calls = [
        lambda: ev.create_consumer(filter_subject=bad),
        lambda: ConsumerConfig(filter_subjects=[bad]),
        lambda: ev.direct_get_last_for_subject(bad),
        lambda: ev.get_last_msg_for_subject(bad),
        lambda: ev.purge(subject=bad or "x..y"),
        lambda: ev.get_msgs(subject=bad or "x..y"),
        lambda: ev.get_last_msgs_for([bad]),
        lambda: js.stream_names(subject=bad),
        lambda: js.stream_name_by_subject(bad),
        lambda: js.subscribe(bad, durable="x"),
        lambda: js.pull_subscribe(bad, durable="x"),
    ]
    before = js.client.stats.out_msgs
    for call in calls:
        with pytest.raises(BadSubjectError):
            call()
    assert js.client.stats.out_msgs == before


# --------------------------------------------------------------------------
# Every other API that takes a subject: a literal, '*' in the middle, '>' at the end.

# tail -> the tails of the ev fixture's messages it matches, in stream order
SHAPES = {"a.x": ["a.x"], "*.x": ["a.x", "b.x"], "a.>": ["a.x", "a.y"]}


@pytest.mark.parametrize(("tail", "expected"), SHAPES.items(), ids=SHAPES)
def test_core_subscribe_by_shape(nc, ev, tail, expected):
    """Client.subscribe takes each shape and receives exactly the matching subjects."""
    prefix = f"core.{ev.name}"
    with nc.subscribe(f"{prefix}.{tail}") as sub:
        nc.flush()
        for t in ("a.x", "b.x", "a.y", "c"):
            nc.publish(f"{prefix}.{t}", t)
        nc.flush()
        got = [sub.next_msg(timeout=2).data.decode() for _ in expected]
        assert got == expected
        nc.flush()
        assert sub.pending_msgs == 0


@pytest.mark.parametrize(("tail", "expected"), SHAPES.items(), ids=SHAPES)
def test_stream_subjects_by_shape(nc, js, stream_name, tail, expected):
    """A stream's subjects take each shape and store exactly the matching messages."""
    stream = js.create_stream(
        name=stream_name, subjects=[f"{stream_name}.{tail}"], allow_direct=True
    )
    assert stream.cached_info.config.subjects == (f"{stream_name}.{tail}",)
    for t in ("a.x", "b.x", "a.y", "c"):
        nc.publish(f"{stream_name}.{t}", t)
    js.publish(f"{stream_name}.a.x", b"barrier")  # acked after the plain publishes were stored
    stored = stream.get_msgs(batch=10)
    assert [m.data.decode() for m in stored] == [*expected, "barrier"]


@pytest.mark.parametrize(("tail", "expected"), SHAPES.items(), ids=SHAPES)
def test_stream_reads_by_shape(ev, tail, expected):
    """get_msgs, get_last_msgs_for and info(subjects_filter) take each shape."""
    subject = f"{ev.name}.{tail}"
    assert _subjects_of(ev.get_msgs(subject=subject)) == expected
    assert _subjects_of(ev.get_last_msgs_for([subject])) == expected
    counts = ev.info(subjects_filter=subject).state.subjects
    assert counts == {f"{ev.name}.{t}": 1 for t in expected}


@pytest.mark.parametrize(("tail", "expected"), SHAPES.items(), ids=SHAPES)
def test_purge_by_shape(ev, tail, expected):
    """purge(subject=) takes each shape and removes exactly the matching messages."""
    assert ev.purge(subject=f"{ev.name}.{tail}") == len(expected)
    left = [t for t in ("a.x", "b.x", "a.y", "c") if t not in expected]
    assert _subjects_of(ev.get_msgs()) == left


@pytest.mark.parametrize(("tail", "expected"), SHAPES.items(), ids=SHAPES)
def test_consumers_by_shape(ev, tail, expected):
    """create/update/create_or_update and the ordered consumer take each shape."""
    subject = f"{ev.name}.{tail}"
    made = ev.create_consumer(durable_name="c", filter_subject=subject)
    assert _subjects_of(made.fetch_no_wait(10)) == expected
    ev.create_consumer(durable_name="u", filter_subject=f"{ev.name}.c")
    updated = ev.update_consumer(durable_name="u", filter_subject=subject)
    assert _subjects_of(updated.fetch_no_wait(10)) == expected
    upserted = ev.create_or_update_consumer(durable_name="cu", filter_subject=subject)
    assert _subjects_of(upserted.fetch_no_wait(10)) == expected
    with ev.ordered_consumer(filter_subjects=[subject]) as oc:
        assert _subjects_of(oc.fetch(10, timeout=1)) == expected


@pytest.mark.parametrize("bad", ["inbox.*", "inbox.>", "inbox..x"])
def test_deliver_subject_is_a_publish_subject(ev, bad):
    """A push consumer's deliver subject is published to by the server: no wildcards."""
    with pytest.raises(BadSubjectError, match="deliver_subject"):
        ConsumerConfig(deliver_subject=bad)
    with pytest.raises(BadSubjectError):
        ev.create_consumer(durable_name="push", deliver_subject=bad)


@pytest.mark.parametrize("name", ["a\vb", "a\x00b", "a\fb", "a.b", "a>b"])
def test_bad_asset_names_are_refused_before_sending(js, name):
    """Stream and consumer names refuse every byte the subject rules refuse (and more)."""
    before = js.client.stats.out_msgs
    with pytest.raises(ValueError, match="name"):
        js.create_stream(name=name, subjects=["never.sent"])
    with pytest.raises(ValueError, match="name"):
        js.consumer_info("S", name)
    assert js.client.stats.out_msgs == before


@pytest.mark.parametrize(
    "options", [{"domain": "a b"}, {"domain": "hub.eu"}, {"domain": "*"}, {"prefix": "$JS.X.>"}]
)
def test_api_prefix_parts_are_checked(nc, options):
    """A domain is one name token and a custom API prefix a publish subject."""
    with pytest.raises(BadSubjectError):
        nc.jetstream(**options)


def test_api_subjects_come_from_checked_parts(nc):
    """Names and tails are checked by their roles; the result skips the publish check."""
    api = nc.jetstream(domain="hub")._api
    subject = api.subject("CONSUMER.CREATE.{stream}.{consumer}.{filter}",
                          stream="S", consumer="c", filter="ev.*.>")  # fmt: skip
    assert subject == "$JS.hub.API.CONSUMER.CREATE.S.c.ev.*.>"
    assert isinstance(subject, _subjects.ApiSubject)
    with pytest.raises(BadSubjectError, match="stream name"):
        api.subject("STREAM.INFO.{stream}", stream="S.x")
    with pytest.raises(BadSubjectError, match="filter subject"):
        api.subject("CONSUMER.CREATE.{stream}.{consumer}.{filter}",
                    stream="S", consumer="c", filter="ev.>.x")  # fmt: skip


def test_compat_ordered_subscribe_with_a_wildcard(js, ev):
    """``js.subscribe("<s>.*.x", ordered_consumer=True)`` delivers the matching ones in order."""
    sub = js.subscribe(f"{ev.name}.*.x", ordered_consumer=True)
    try:
        assert _subjects_of([sub.next_msg(timeout=2) for _ in range(2)]) == ["a.x", "b.x"]
    finally:
        sub.unsubscribe()


@pytest.mark.parametrize(("tail", "ok"), [("7", True), ("*", True), (">", True), ("", False),
                                          (" x", False), (".x", False)])  # fmt: skip
def test_subscribing_under_a_published_subject_still_checks_the_filter(nc, tail, ok):
    """A subscription <already published subject>.<tail> is checked by its role like any other."""
    nc.publish("roles.head", b"x")  # "roles.head" is now a known publish subject
    subject = f"roles.head.{tail}"
    if not ok:
        with pytest.raises(BadSubjectError):
            nc.subscribe(subject)
        return
    sub = nc.subscribe(subject)
    nc.flush()
    nc.publish("roles.head.7", b"y")
    assert sub.next_msg(timeout=5).data == b"y"
