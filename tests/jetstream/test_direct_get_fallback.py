"""A direct get nobody answers on a stream that allows them is asked of the stream leader.

Nobody answers while no replica is subscribed to the stream's direct gets: in a
cluster, a new replicated stream whose leader's subscription has not reached the
client's server yet (stop 51's CI: an Object Store put right after the store was
made raised ``NoRespondersError``), or followers catching up after an election.
Here the same "no responders" is made deterministic with two accounts: ``APP``
imports the stream and consumer API of account ``JS`` but not its direct gets.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jetstream_sync as js
from tests.fixtures.server import NatsServer

# The API subjects APP imports, each with its export's response type (a pull is answered
# by a stream of messages).
_API = {
    "$JS.API.INFO": "singleton",
    "$JS.API.STREAM.>": "singleton",
    "$JS.API.CONSUMER.CREATE.>": "singleton",
    "$JS.API.CONSUMER.DELETE.>": "singleton",
    "$JS.API.CONSUMER.MSG.NEXT.>": "stream",
}

_ACCOUNTS = f"""
accounts {{
  JS {{
    jetstream: enabled
    users: [{{user: js, password: pw}}]
    exports: [{", ".join(f'{{service: "{s}", response: {r}}}' for s, r in _API.items())}]
  }}
  APP {{
    users: [{{user: app, password: pw}}]
    imports: [{", ".join(f'{{service: {{account: JS, subject: "{s}"}}}}' for s in _API)}]
  }}
}}
"""


@pytest.fixture(scope="module")
def accounts_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    directory = tmp_path_factory.mktemp("direct-fallback")
    with NatsServer(directory=directory, extra_config=_ACCOUNTS) as server:
        with js.connect(f"nats://js:pw@127.0.0.1:{server.port}") as nc:
            ctx = nc.jetstream()
            ctx.create_stream(name="SENSORS", subjects=["sensor.>"], allow_direct=True)
            ctx.create_stream(name="PLAIN", subjects=["plain.>"])
            for n in range(3):
                ctx.publish(f"sensor.t{n}", b"reading %d" % n)
        yield server


@pytest.fixture
def app(accounts_server: NatsServer) -> Iterator[js.JetStreamContext]:
    with js.connect(f"nats://app:pw@127.0.0.1:{accounts_server.port}") as nc:
        with pytest.raises(js.NoRespondersError):  # the premise: nobody takes direct gets
            nc.request("$JS.API.DIRECT.GET.SENSORS", b'{"seq":1}', timeout=5)
        yield nc.jetstream(timeout=5)


def test_a_direct_get_nobody_answers_returns_the_leaders_message(app):
    stream = app.stream("SENSORS")
    msg = stream.direct_get(2)
    assert (msg.seq, msg.subject, msg.data) == (2, "sensor.t1", b"reading 1")
    last = stream.direct_get_last_for_subject("sensor.t2")
    assert (last.seq, last.data) == (3, b"reading 2")
    assert stream.direct_get_last_for_subject("sensor.>").seq == 3  # wildcards too


def test_a_batched_direct_get_nobody_answers_says_so(app):
    """get_msgs has no one-request leader twin: it names the cause, to be asked again."""
    with pytest.raises(js.NoRespondersError, match="batched direct get on stream 'SENSORS'"):
        app.stream("SENSORS").get_msgs(1, batch=3)


def test_an_arrow_read_nobody_answers_reads_through_a_consumer(app):
    """read_arrow (the Spark data source's read) takes the range from the stream leader
    through an ephemeral consumer when no one answers its batched direct gets."""
    pytest.importorskip("pyarrow")
    batches = list(app.stream("SENSORS").read_arrow(2, 3))
    rows = [row for batch in batches for row in batch.to_pylist()]
    assert [(r["seq"], r["subject"], r["data"]) for r in rows] == [
        (2, "sensor.t1", b"reading 1"),
        (3, "sensor.t2", b"reading 2"),
    ]
    assert app.stream("SENSORS").info().state.consumer_count == 0  # deleted at the end


def test_a_direct_get_nobody_answers_keeps_its_errors(app):
    stream = app.stream("SENSORS")
    with pytest.raises(js.MessageNotFoundError):
        stream.direct_get(99)
    with pytest.raises(js.MessageNotFoundError):
        stream.direct_get_last_for_subject("sensor.none")
    with pytest.raises(js.DirectGetNotAllowedError, match="allow_direct"):
        app.stream("PLAIN").direct_get(1)
    with pytest.raises(js.StreamNotFoundError):
        app.stream_no_info("MISSING").direct_get(1)
