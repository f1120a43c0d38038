"""Every status a pull request can get back, provoked against a real server and handled."""

from __future__ import annotations

import time
import uuid

import pytest

import jetstream_sync
from jetstream_sync.errors import (
    ConsumerDeletedError,
    ConsumerPushBasedError,
    NoHeartbeatError,
    NoRespondersError,
    PullBadRequestError,
    PullRequestLimitError,
    ServerShutdownError,
)
from jetstream_sync.jetstream._pull import DONE, HEARTBEAT, TERMINAL, WARNING, classify
from jetstream_sync.jetstream.compat import PullSubscription
from jetstream_sync.jetstream.consumer import Consumer
from jetstream_sync.jetstream.enums import PriorityPolicy
from jetstream_sync.msg import Msg
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for
from tests.fixtures.threads import in_thread


def _status(text: bytes) -> Msg:
    return Msg("inbox", "", b"", b"NATS/1.0 " + text + b"\r\n\r\n")


def test_classification_table():
    """Each server status text maps to its kind (unit check of the matrix)."""
    assert classify(_status(b"100 Idle Heartbeat"))[0] == HEARTBEAT
    for done in (b"404 No Messages", b"408 Request Timeout", b"408 Interest Expired",
                 b"409 Message Size Exceeds MaxBytes", b"409 Batch Completed"):  # fmt: skip
        assert classify(_status(done))[0] == DONE
    for warn in (b"409 Exceeded MaxWaiting", b"409 Leadership Change",
                 b"409 Server Shutdown", b"423 Nats-Pin-Id mismatch",
                 b"400 Bad Request - Not a Pinned Client Priority consumer"):  # fmt: skip
        assert classify(_status(warn))[0] == WARNING
    for term in (b"409 Consumer Deleted", b"409 Consumer is push based", b"400 Bad Request"):
        assert classify(_status(term))[0] == TERMINAL


def test_100_heartbeat_keeps_a_fetch_alive(stream):
    """Heartbeats during an idle fetch are absorbed; the fetch ends empty at its timeout."""
    cons = stream.create_consumer()
    assert cons.fetch(1, timeout=3, heartbeat=0.5) == []


def test_404_no_messages(stream):
    """fetch_no_wait on an empty consumer: 404 ends it at once with []."""
    cons = stream.create_consumer()
    start = time.monotonic()
    assert cons.fetch_no_wait(10) == []
    assert time.monotonic() - start < 1.0


def test_408_request_timeout(stream):
    """The server expires the request (408); fetch returns [] within its timeout."""
    cons = stream.create_consumer()
    start = time.monotonic()
    assert cons.fetch(5, timeout=0.5) == []
    assert time.monotonic() - start < 1.5


def test_409_message_size_exceeds_max_bytes(js, stream):
    """A message larger than max_bytes ends the fetch at once, empty."""
    js.publish(f"{stream.name}.x", b"x" * 500)
    cons = stream.create_consumer()
    start = time.monotonic()
    assert cons.fetch_bytes(100, timeout=5) == []
    assert time.monotonic() - start < 2.0


def test_409_exceeded_max_waiting(stream):
    """Past max_waiting pending pulls, a fetch raises PullRequestLimitError."""
    cons = stream.create_consumer(durable_name="mw", max_waiting=1)
    with cons.messages(expires=5):
        wait_for(lambda: cons.info().num_waiting == 1)
        with pytest.raises(PullRequestLimitError, match="MaxWaiting"):
            cons.fetch(1, timeout=2)


@pytest.mark.parametrize(
    ("fields", "call", "match"),
    [
        ({"max_batch": 2}, lambda c: c.fetch(5, timeout=1), "MaxRequestBatch"),
        ({"max_bytes": 100}, lambda c: c.fetch_bytes(1000, timeout=1), "MaxRequestMaxBytes"),
        ({"max_batch": 2}, lambda c: PullSubscription(c, False).fetch(5), "MaxRequestBatch"),
    ],
)
def test_409_exceeded_request_limits(stream, fields, call, match):
    """Requests over max_batch / max_bytes raise PullRequestLimitError, from the
    nats.py-style PullSubscription.fetch as from Consumer.fetch."""
    cons = stream.create_consumer(**fields)
    with pytest.raises(PullRequestLimitError, match=match):
        call(cons)


def test_409_warnings_do_not_end_consume(js, stream):
    """consume() reports a refused pull to error_handler and keeps going."""
    cons = stream.create_consumer(durable_name="w")
    stream.update_consumer(durable_name="w", max_batch=5)  # cons's cached config is stale
    errors, seen = [], []
    ctx = cons.consume(seen.append, error_handler=errors.append, max_messages=10)
    wait_for(lambda: any(isinstance(e, PullRequestLimitError) for e in errors))
    assert not ctx.closed
    ctx.stop()


def test_409_consumer_deleted(stream):
    """Deleting the consumer under a waiting fetch raises ConsumerDeletedError."""
    cons = stream.create_consumer(durable_name="del")
    t, result = in_thread(lambda: cons.fetch(1, timeout=10))
    wait_for(lambda: cons.info().num_waiting == 1)
    stream.delete_consumer("del")
    t.join(10)
    assert isinstance(result[0], ConsumerDeletedError)


def test_409_consumer_is_push_based(stream):
    """Pulling from a push consumer raises ConsumerPushBasedError."""
    cons = stream.create_consumer(durable_name="push", deliver_subject="push.deliver")
    with pytest.raises(ConsumerPushBasedError):
        cons.fetch(1, timeout=1)
    with pytest.raises(ConsumerPushBasedError), cons.messages() as it:
        it.next(timeout=5)


def test_400_bad_request(stream):
    """An invalid priority-group pull raises PullBadRequestError (terminal for messages())."""
    cons = stream.create_consumer(
        durable_name="bad", priority_policy=PriorityPolicy.PINNED_CLIENT, priority_groups=["g"]
    )
    with pytest.raises(PullBadRequestError):
        cons.fetch(1, timeout=1, group="nope")
    with pytest.raises(PullBadRequestError), cons.messages(group="nope") as it:
        it.next(timeout=5)


def test_423_pin_id_mismatch(js, stream):
    """After an unpin, the old pin id is refused with 423: fetch clears it and pulls again."""
    cons = stream.create_consumer(
        durable_name="pin", priority_policy=PriorityPolicy.PINNED_CLIENT, priority_groups=["g"]
    )
    js.publish(f"{stream.name}.x", b"1")
    assert len(cons.fetch(1, timeout=2, group="g")) == 1
    old = cons.pin_id("g")
    other = stream.consumer("pin")
    t, result = in_thread(lambda: other.fetch(1, timeout=5, group="g"))
    wait_for(lambda: cons.info().num_waiting == 1)
    other.unpin("g")  # cons still holds the old pin
    js.publish(f"{stream.name}.x", b"2")
    t.join(10)
    assert result[0] and other.pin_id("g") != old
    assert cons.fetch(1, timeout=1, group="g") == []  # a candidate while the other is pinned
    assert cons.pin_id("g") is None


def test_503_no_responders(js, stream):
    """Pulling from a consumer that does not exist raises NoRespondersError."""
    ghost = Consumer(js.client, js._api, stream.name, "ghost")
    with pytest.raises(NoRespondersError):
        ghost.fetch(1, timeout=1)


def test_a_consumer_whose_stream_was_deleted_is_gone_not_unreachable(js):
    """The stream (and with it the consumer) deleted before the first pull reached the
    server: the pull gets a 503, the info call "stream not found". messages() ends with
    ConsumerDeletedError and fetch raises NoRespondersError, as for a deleted consumer;
    before, both pulled again every half second until their timeout."""
    name = unique_stream_name("GONE")
    st = js.create_stream(name=name, subjects=[f"{name}.>"])
    cons = st.create_consumer(durable_name="d")
    js.delete_stream(name)
    it = cons.messages()
    with pytest.raises(ConsumerDeletedError):
        it.next(timeout=10)
    it.stop()
    with pytest.raises(NoRespondersError):
        cons.fetch(1, timeout=10)


def test_409_server_shutdown(restartable_server):
    """A server shutting down under a waiting fetch answers 409 Server Shutdown."""
    with jetstream_sync.connect(restartable_server.url, allow_reconnect=False) as nc:
        js = nc.jetstream()
        st = js.create_stream(name="SD", subjects=["sd"])
        cons = st.create_consumer(durable_name="sd")
        t, result = in_thread(lambda: cons.fetch(1, timeout=10))
        wait_for(lambda: cons.info().num_waiting == 1)
        restartable_server.stop()
        t.join(10)
        assert isinstance(result[0], ServerShutdownError)


def test_missed_heartbeats_raise_no_heartbeat_error(restartable_server):
    """When heartbeats stop (server gone), fetch raises NoHeartbeatError well before its timeout."""
    with jetstream_sync.connect(restartable_server.url, reconnect_time_wait=5) as nc:
        js = nc.jetstream()
        st = js.create_stream(name="HB", subjects=["hb"])
        cons = st.create_consumer(durable_name="hb")
        t, result = in_thread(lambda: cons.fetch(1, timeout=20, heartbeat=0.3))
        wait_for(lambda: cons.info().num_waiting == 1)
        start = time.monotonic()
        restartable_server.kill()
        t.join(20)
        assert isinstance(result[0], NoHeartbeatError)
        assert time.monotonic() - start < 5


def test_409_leadership_change(cluster):
    """A consumer leader step-down answers waiting pulls with 409 Leadership Change: fetch()
    pulls again from the new leader, messages() reports it as a warning."""
    from jetstream_sync.errors import LeadershipChangedError

    with jetstream_sync.connect(cluster.urls) as nc:
        js = nc.jetstream(timeout=10)
        name = "LC" + uuid.uuid4().hex[:6].upper()
        st = js.create_stream(name=name, subjects=[f"{name}.>"], num_replicas=3)
        try:
            cons = st.create_consumer(durable_name="lc", num_replicas=3)
            wait_for(lambda: cons.info().cluster.leader, 30, ignore=Exception,
                     message="the R3 consumer elected no leader")  # fmt: skip
            t, result = in_thread(lambda: cons.fetch(1, timeout=20))
            wait_for(lambda: cons.info().num_waiting == 1, 15, message="the pull never waited")
            leader = cons.info().cluster.leader
            nc.request(f"$JS.API.CONSUMER.LEADER.STEPDOWN.{name}.lc", b"", timeout=5)
            wait_for(lambda: cons.info().cluster.leader not in (None, leader), 30,
                     ignore=Exception, message="no new consumer leader")  # fmt: skip
            wait_for(lambda: cons.info().num_waiting == 1, 15, ignore=Exception,
                     message="fetch() did not pull again after the election")  # fmt: skip
            js.publish(f"{name}.x", b"during")
            t.join(25)
            assert [m.data for m in result[0]] == [b"during"], result
            result[0][0].ack_sync()
            # messages() treats it as a warning and keeps delivering
            errors = []
            ctx = cons.consume(lambda m: m.ack(), error_handler=errors.append, expires=5)
            wait_for(lambda: cons.info().num_waiting >= 1, ignore=Exception)
            nc.request(f"$JS.API.CONSUMER.LEADER.STEPDOWN.{name}.lc", b"", timeout=5)
            wait_for(lambda: any(isinstance(e, LeadershipChangedError) for e in errors), 15)
            js.publish(f"{name}.x", b"after")
            wait_for(lambda: cons.info().ack_floor.stream_seq == 2, 15, ignore=Exception)
            ctx.stop()
        finally:
            js.delete_stream(name)
