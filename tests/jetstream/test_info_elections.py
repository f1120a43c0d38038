"""stream.info() and consumer.info() right after a kill -9 of the leader's node.

A request the stream (or consumer) gets while its replicas still wait for the dead
leader is dropped, not answered; the new leader answers 4 to 20 s after the kill.
An info call with a timeout longer than that answers once the new leader does;
so does one the server answers "temporarily unavailable" meanwhile. A stream's
replica that is itself standing for election answers a stream info with its own
state and no leader.
"""

from __future__ import annotations

import uuid

import pytest

import jetstream_sync
from jetstream_sync._deadline import Deadline
from jetstream_sync.jetstream import _api
from tests.fixtures.polling import wait_for


def _once_led(handle):
    """The handle's info if it names a leader, else None."""
    info = handle.info(timeout=60)
    return info if info.cluster.leader else None


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("of", ["stream", "consumer"])
def test_info_answers_once_a_killed_leader_is_replaced(cluster, of):
    """info(timeout=60) sent at once after the leader's kill answers; then the new leader does."""
    name = "IE" + uuid.uuid4().hex[:6].upper()
    with jetstream_sync.connect(cluster.urls) as admin:
        js = admin.jetstream(timeout=10)
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], num_replicas=3)
        try:
            consumer = stream.create_consumer(durable_name="c", num_replicas=3)
            target = stream if of == "stream" else consumer
            leader = wait_for(lambda: target.info().cluster.leader, ignore=jetstream_sync.NatsError)
            victim = cluster.server_named(leader)
            index = cluster.servers.index(victim)
            others = [s.url for s in cluster.servers if s is not victim]
            with jetstream_sync.connect(others) as nc:
                ctx = nc.jetstream()
                handle = ctx.stream(name) if of == "stream" else ctx.consumer(name, "c")
                cluster.kill(index)
                info = handle.info(timeout=60)
                if of == "stream" and info.cluster.leader is None:
                    # A replica still electing answers a stream info itself, naming no
                    # leader (a consumer's replicas answer 10008, which info() asks again).
                    info = wait_for(lambda: _once_led(handle), timeout=60)
            assert info.cluster.leader not in (None, leader)
            cluster.restart(index)
        finally:
            wait_for(lambda: _deleted(js, name), timeout=30, ignore=jetstream_sync.NatsError)


@pytest.mark.parametrize("of", ["stream", "consumer"])
def test_info_asks_again_while_answered_temporarily_unavailable(shared_server, of):
    """An info answered 10008 (no leader yet, as during an election) is asked again.

    A relay stands for the cluster: requests under the prefix ``relay`` get the
    server's 10008 reply twice, then go on to the real API.
    """
    name = "IU" + uuid.uuid4().hex[:6].upper()
    unavailable = b'{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}'  # noqa: E501
    asked: list[str] = []

    with jetstream_sync.connect(shared_server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
        stream.create_consumer(durable_name="c")

        def relay(msg):
            asked.append(msg.subject)
            if len(asked) <= 2:
                msg.respond(unavailable)
            else:
                real = "$JS.API." + msg.subject.removeprefix("relay.")
                msg.respond(nc.request(real, msg.data, timeout=5).data)

        nc.subscribe("relay.>", cb=relay)
        try:
            ctx = nc.jetstream(prefix="relay", timeout=10)
            handle = ctx.stream(name) if of == "stream" else ctx.consumer(name, "c")
            asked.clear()
            info = handle.info()
            # Two 10008s, then the real answer; a try the relay (itself asking the API)
            # leaves unanswered past ASK_AGAIN_AFTER on a busy machine is sent again.
            assert len(asked) >= 3
            assert (info.config.name if of == "stream" else info.name) == (
                name if of == "stream" else "c"
            )
        finally:
            js.delete_stream(name)


def test_info_timing_out_after_unavailable_answers_names_its_whole_timeout(shared_server):
    """An info answered 10008 once and then never again times out naming its own timeout.

    The error said "within 0 s" (or whatever was left after the 10008 answers) before.
    """
    name = "IT" + uuid.uuid4().hex[:6].upper()
    unavailable = b'{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}'  # noqa: E501
    asked: list[str] = []

    with jetstream_sync.connect(shared_server.url) as nc:

        def relay(msg):
            asked.append(msg.subject)
            if len(asked) == 1:
                msg.respond(unavailable)

        nc.subscribe("relay.>", cb=relay)
        ctx = nc.jetstream(prefix="relay")
        with pytest.raises(jetstream_sync.TimeoutError, match=r"within 1\.5 s"):
            ctx.stream(name, timeout=1.5)
        # The second ask went out ~0.25 s in; the relay's callback thread may see it only
        # after the caller's timeout on a busy machine.
        wait_for(lambda: len(asked) >= 2, timeout=5)


def test_a_read_only_request_timing_out_names_the_callers_timeout(shared_server):
    """The TimeoutError names the caller's timeout even when the API request began a
    while after the caller's deadline was set (a busy machine, or work before it): it
    named what was left then ("within 1.499 s")."""
    with jetstream_sync.connect(shared_server.url) as nc:
        nc.subscribe("relay.>", cb=lambda msg: None)  # takes every request, answers none
        nc.flush()
        api = nc.jetstream(prefix="relay")._api
        deadline = Deadline(1.5)
        wait_for(lambda: deadline.remaining() < 1.4)  # the request begins 0.1 s in
        with pytest.raises(jetstream_sync.TimeoutError, match=r"within 1\.5 s"):
            api.request_json(_api.STREAM_INFO, None, deadline, read_only=True, stream="LATE")


def _deleted(js, name):
    """Delete stream ``name``; True once it is gone (a try that timed out may have deleted it)."""
    try:
        return js.delete_stream(name)
    except jetstream_sync.StreamNotFoundError:
        return True
