"""A new ordered consumer link whose first pull meets no responders pulls it again first.

On a cluster the server the client talks to may not yet know the new consumer's
leader, so the first pull right after the creation gets "503 No Responders"
(2-7 of 150 ``kv.keys()`` on an R3 bucket did). That is transient: the link is
pulled again after a short pause, a few times, before it is replaced.

To make it happen on demand, a second connection spies on the pull requests
(``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``) and answers the ones of the
first link with a 503 status on their reply subject, as the server would.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jetstream_sync as nats_sync
from jetstream_sync.jetstream.ordered import _FRESH_PAUSES
from tests.fixtures.raw_client import RawClient
from tests.fixtures.server import NatsServer
from tests.fixtures.threads import in_thread


class _Spy:
    """A second connection that sees the stream's consumer creations and pull requests."""

    def __init__(self, server: NatsServer, stream: str) -> None:
        self.nc = nats_sync.connect(server.url)
        self.creates = self.nc.subscribe(f"$JS.API.CONSUMER.CREATE.{stream}.>")
        self.pulls = self.nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>")
        self.nc.flush()
        self.raw = RawClient(server.port)

    def next_pull(self) -> nats_sync.Msg:
        """The next pull request the client sent."""
        return self.pulls.next_msg(timeout=10)

    def no_responders(self, pull: nats_sync.Msg) -> None:
        """Answer ``pull`` as the server does when nothing serves its subject."""
        status = b"NATS/1.0 503\r\n\r\n"
        size = len(status)
        self.raw.send(b"HPUB %s %d %d\r\n%s\r\n" % (pull.reply.encode(), size, size, status))

    def close(self) -> None:
        self.raw.close()
        self.nc.close()


@pytest.fixture
def spy(shared_server: NatsServer, stream: nats_sync.Stream) -> Iterator[_Spy]:
    s = _Spy(shared_server, stream.name)
    yield s
    s.close()


def _consumer(pull: nats_sync.Msg) -> str:
    return pull.subject.rsplit(".", 1)[1]


def test_a_first_pull_meeting_no_responders_pulls_the_same_link_again(js, stream, spy):
    """messages(): a 503 on the first pull of a new link: the same consumer is pulled
    again, nothing is recreated, and what the stream holds next arrives."""
    oc = stream.ordered_consumer()
    with oc, oc.messages(max_messages=10, expires=5) as it:
        first = spy.next_pull()
        spy.no_responders(first)
        t, result = in_thread(lambda: it.next(timeout=30))
        again = spy.next_pull()
        assert _consumer(again) == _consumer(first)
        js.publish(f"{stream.name}.x", b"1")
        t.join(30)
    assert [m.data for m in result] == [b"1"]
    assert spy.creates.pending_msgs == 1  # one consumer made; any other came before `again`
    assert not oc.resumed


def test_a_link_whose_pulls_keep_meeting_no_responders_is_replaced(js, stream, spy):
    """messages(): after a few pulls again that all meet no responders, the link is
    replaced, and the new link delivers what the stream holds."""
    oc = stream.ordered_consumer()
    with oc, oc.messages(max_messages=10, expires=5) as it:
        first = spy.next_pull()
        t, result = in_thread(lambda: it.next(timeout=30))
        pull, answered = first, 0
        while _consumer(pull) == _consumer(first):
            spy.no_responders(pull)
            answered += 1
            pull = spy.next_pull()
        js.publish(f"{stream.name}.x", b"1")
        t.join(30)
    assert [m.data for m in result] == [b"1"]
    assert answered == 1 + len(_FRESH_PAUSES)
    assert spy.creates.pending_msgs == 2
    assert oc.resumed


def test_a_fetch_meeting_no_responders_on_a_new_link_pulls_it_again(stream, spy):
    """fetch(): a 503 on the first pull of a new link: the same consumer is pulled again."""
    oc = stream.ordered_consumer()
    with oc:
        t, result = in_thread(lambda: oc.fetch(1, timeout=3))
        first = spy.next_pull()
        spy.no_responders(first)
        again = spy.next_pull()
        t.join(30)
    assert _consumer(again) == _consumer(first)
    assert result == [[]]  # nothing stored: the pull again ran out of time
    assert spy.creates.pending_msgs == 1
