"""The nats.py compat layer: nats.py's README JetStream example, translated line by line."""

from __future__ import annotations

import threading

import pytest

import jetstream_sync
from jetstream_sync.errors import ConsumerNotFoundError, TimeoutError
from tests.fixtures.polling import wait_for


def test_readme_jetstream_example(nats_server):
    """nats.py's README JetStream walkthrough runs unchanged but for await/async.

    And for explicit timeouts where the README relies on nats.py's 1 s default for
    something that must arrive: a loaded test machine can take longer.
    """
    nc = jetstream_sync.connect(nats_server.url)
    js = nc.jetstream()
    js.create_stream(name="sample-stream", subjects=["foo"])
    for i in range(0, 10):
        ack = js.publish("foo", f"hello world: {i}".encode())
        assert ack.seq == i + 1

    # Create pull based consumer on 'foo'.
    psub = js.pull_subscribe("foo", "psub")
    # Fetch and ack messages from consumer.
    for i in range(0, 10):
        msgs = psub.fetch(1)
        for msg in msgs:
            msg.ack()
            assert msg.data == f"hello world: {i}".encode()

    # Create single ephemeral push based subscriber.
    sub = js.subscribe("foo")
    msg = sub.next_msg(timeout=5)
    msg.ack()

    # Create single push based subscriber that is durable across restarts.
    sub = js.subscribe("foo", durable="myapp")
    msg = sub.next_msg(timeout=5)
    msg.ack()

    # Create deliver group that will be have load balanced messages.
    seen_a, seen_b = [], []

    def qsub_a(msg):
        seen_a.append(msg)
        msg.ack()

    def qsub_b(msg):
        seen_b.append(msg)
        msg.ack()

    js.subscribe("foo", "workers", cb=qsub_a)
    js.subscribe("foo", "workers", cb=qsub_b)
    for i in range(0, 10):
        js.publish("foo", f"hello world: {i}".encode())
    wait_for(lambda: len(seen_a) + len(seen_b) == 20)

    # Create ordered consumer with flow control and heartbeats
    # that auto resumes on failures.
    osub = js.subscribe("foo", ordered_consumer=True)
    data = bytearray()
    while len(data) < 20 * len(b"hello world: 0"):
        data.extend(osub.next_msg(timeout=5).data)
    with pytest.raises(TimeoutError):
        osub.next_msg(timeout=0.5)
    assert len(data) == 20 * len(b"hello world: 0")
    nc.close()


def test_pull_subscribe_fetch_raises_timeout_when_empty(shared_server):
    """PullSubscription.fetch raises TimeoutError (builtin too) when nothing arrives."""
    with jetstream_sync.connect(shared_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="COMPAT1", subjects=["compat1"])
        try:
            psub = js.pull_subscribe("compat1", durable="d")
            with pytest.raises(TimeoutError):
                psub.fetch(1, timeout=0.5)
            with pytest.raises(builtins_timeout()):
                psub.fetch(1, timeout=0.5)
            js.publish("compat1", b"x")
            assert [m.data for m in psub.fetch(5, timeout=1)] == [b"x"]
            # binding again to the same durable reuses it
            again = js.pull_subscribe("compat1", durable="d")
            assert again.consumer.name == "d"
            bound = js.pull_subscribe_bind("COMPAT1", "d")
            assert bound.consumer_info().name == "d"
            with pytest.raises(ConsumerNotFoundError):
                js.pull_subscribe_bind("COMPAT1", "nope")
        finally:
            js.delete_stream("COMPAT1")


def builtins_timeout():
    """The builtin TimeoutError (ours subclasses it)."""
    import builtins

    return builtins.TimeoutError


def test_ephemeral_pull_subscription_deleted_on_unsubscribe(shared_server):
    """An ephemeral pull_subscribe consumer goes away with unsubscribe() / the with block."""
    with jetstream_sync.connect(shared_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="COMPAT2", subjects=["compat2"])
        try:
            with js.pull_subscribe("compat2") as psub:
                name = psub.consumer.name
                assert name in list(js.consumer_names("COMPAT2"))
            assert name not in list(js.consumer_names("COMPAT2"))
        finally:
            js.delete_stream("COMPAT2")


@pytest.mark.interop
def test_interop_push_nats_py_publishes(shared_server):
    """nats-py publishes to a stream; our push subscription receives every message."""
    import asyncio

    import nats

    with jetstream_sync.connect(shared_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="COMPAT3", subjects=["compat3"])
        try:
            got = []
            done = threading.Event()

            def cb(msg):
                got.append(msg.data)
                if len(got) == 10:
                    done.set()

            sub = js.subscribe("compat3", cb=cb)

            async def pub():
                pnc = await nats.connect(shared_server.url)
                pjs = pnc.jetstream()
                for i in range(10):
                    await pjs.publish("compat3", b"%d" % i)
                await pnc.close()

            asyncio.run(pub())
            assert done.wait(10)
            assert got == [b"%d" % i for i in range(10)]
            sub.unsubscribe()
        finally:
            js.delete_stream("COMPAT3")


def test_pull_subscribe_refuses_a_durable_filtering_other_subjects(js, stream):
    """pull_subscribe(subject, durable=d) refuses a durable that filters on another subject."""
    js.create_consumer(stream.name, durable_name="pulled", filter_subject=f"{stream.name}.a")
    with pytest.raises(ValueError, match="filters on"):
        js.pull_subscribe(f"{stream.name}.b", durable="pulled")
    assert js.pull_subscribe(f"{stream.name}.a", durable="pulled").consumer.name == "pulled"


def test_pull_subscription_messages_iterates_like_the_nats_py_docs(js, stream):
    """nats.py's JetStream docs loop ``for msg in pull_sub.messages()``: blocks, in order."""
    subject = f"{stream.name}.jobs"
    for i in range(3):
        js.publish(subject, f"job {i}".encode())
    psub = js.pull_subscribe(subject, durable="jobs")
    got = []
    with psub.messages(max_messages=2) as it:
        for msg in it:
            msg.ack_sync()
            got.append(msg.data)
            if len(got) == 3:
                break
    assert got == [b"job 0", b"job 1", b"job 2"]
    assert psub.consumer_info().num_ack_pending == 0
