"""Push consumers through ctx.subscribe / subscribe_bind: flow control, heartbeats, groups."""

from __future__ import annotations

import threading

import pytest

import jetstream_sync
from jetstream_sync.errors import ConsumerNotFoundError, TimeoutError
from tests.fixtures.jetstream import publish_numbered
from tests.fixtures.polling import wait_for
from tests.fixtures.threads import run_in_threads


def test_next_msg_and_unsubscribe_deletes_ephemeral(js, stream):
    """next_msg yields messages in order; unsubscribe removes the ephemeral consumer."""
    publish_numbered(js, f"{stream.name}.a", 5, timeout=60)
    sub = js.subscribe(f"{stream.name}.a")
    got = [sub.next_msg(timeout=2) for _ in range(5)]
    assert [int(m.data) for m in got] == list(range(5))
    for m in got:
        m.ack()
    with pytest.raises(TimeoutError):
        sub.next_msg(timeout=0.3)
    name = sub.consumer
    assert sub.consumer_info().name == name
    sub.unsubscribe()
    with pytest.raises(ConsumerNotFoundError):
        js.consumer_info(stream.name, name)


def test_callback_auto_acks(js, stream):
    """With cb= (no manual_ack) each message is acked after the callback returns."""
    publish_numbered(js, f"{stream.name}.a", 20, timeout=60)
    seen = []
    sub = js.subscribe(f"{stream.name}.a", cb=lambda m: seen.append(m), durable="auto")
    wait_for(lambda: len(seen) == 20)
    wait_for(lambda: sub.consumer_info().num_ack_pending == 0)
    sub.unsubscribe()
    assert js.consumer_info(stream.name, "auto").name == "auto"  # durable kept


def test_manual_ack(js, stream):
    """manual_ack=True leaves acking to the application."""
    publish_numbered(js, f"{stream.name}.a", 3, timeout=60)
    seen = []
    sub = js.subscribe(f"{stream.name}.a", cb=seen.append, manual_ack=True, durable="man")
    wait_for(lambda: len(seen) == 3)
    assert sub.consumer_info().num_ack_pending == 3
    for m in seen:
        m.ack()
    wait_for(lambda: sub.consumer_info().num_ack_pending == 0)
    sub.unsubscribe()


def test_queue_group_splits_messages(js, stream):
    """Two members of a queue group share one consumer; each message goes to one."""
    a, b = [], []
    lock = threading.Lock()

    def into(bucket):
        def cb(m):
            with lock:
                bucket.append(int(m.data))

        return cb

    sa = js.subscribe(f"{stream.name}.q", queue="workers", cb=into(a))
    sb = js.subscribe(f"{stream.name}.q", queue="workers", cb=into(b))
    assert sa.consumer == sb.consumer == "workers"
    publish_numbered(js, f"{stream.name}.q", 200, timeout=60)
    wait_for(lambda: len(a) + len(b) == 200)
    assert sorted(a + b) == list(range(200))
    sa.unsubscribe()
    sb.unsubscribe()


def test_queue_group_members_subscribing_at_once_all_join(js, stream):
    """16 threads joining a new queue group at once all bind to its one consumer."""
    for group in ("g0", "g1", "g2", "g3", "g4"):
        subs = []
        lock = threading.Lock()
        start = threading.Barrier(16)

        def join(_n, group=group, subs=subs, lock=lock, start=start):
            start.wait()
            sub = js.subscribe(f"{stream.name}.q", queue=group, cb=lambda m: None)
            with lock:
                subs.append(sub)

        errors = run_in_threads(join, 16)
        for sub in subs:
            sub.unsubscribe()
        assert errors == []
        assert {sub.consumer for sub in subs} == {group}


def test_subscribe_delivers_to_the_configured_deliver_subject(js, nc, stream):
    """A deliver_subject in config= is the consumer's, as in nats.py; an inbox otherwise."""
    watcher = nc.subscribe("deliver.here")
    config = jetstream_sync.ConsumerConfig(deliver_subject="deliver.here")
    sub = js.subscribe(f"{stream.name}.a", config=config)
    publish_numbered(js, f"{stream.name}.a", 2, timeout=60)
    assert sub.consumer_info().config.deliver_subject == "deliver.here"
    assert [int(sub.next_msg(2).data) for _ in range(2)] == [0, 1]
    assert [int(watcher.next_msg(2).data) for _ in range(2)] == [0, 1]
    sub.unsubscribe()
    watcher.unsubscribe()


def test_a_durable_without_a_group_takes_one_subscriber(js, stream):
    """subscribe() to a bound durable without a queue group is refused, as in nats.py."""
    first = js.subscribe(f"{stream.name}.a", durable="solo")
    wait_for(lambda: first.consumer_info().push_bound)
    with pytest.raises(jetstream_sync.JetStreamError, match="already bound"):
        js.subscribe(f"{stream.name}.a", durable="solo")
    publish_numbered(js, f"{stream.name}.a", 1, timeout=60)
    assert first.next_msg(2).data == b"0"
    first.unsubscribe()
    wait_for(lambda: not js.consumer_info(stream.name, "solo").push_bound)
    again = js.subscribe(f"{stream.name}.a", durable="solo")
    again.unsubscribe()


def test_iterating_a_push_subscription(js, stream):
    """Iteration ends when the subscription does; on one with a callback it raises."""
    publish_numbered(js, f"{stream.name}.a", 3, timeout=60)
    sub = js.subscribe(f"{stream.name}.a")
    seen = []
    for msg in sub:
        seen.append(int(msg.data))
        if len(seen) == 3:
            sub.unsubscribe()
    assert seen == [0, 1, 2]
    with_cb = js.subscribe(f"{stream.name}.a", cb=lambda m: None)
    with pytest.raises(jetstream_sync.NatsError, match="callback"):
        next(iter(with_cb))
    with_cb.unsubscribe()
    ordered = js.subscribe(f"{stream.name}.a", cb=lambda m: None, ordered_consumer=True)
    with pytest.raises(jetstream_sync.NatsError, match="callback"):
        next(iter(ordered))
    ordered.unsubscribe()


def test_a_deliver_group_in_config_is_listened_in(js, stream):
    """config=ConsumerConfig(deliver_group=...) without queue= subscribes in that group."""
    config = jetstream_sync.ConsumerConfig(durable_name="grouped", deliver_group="crew")
    sub = js.subscribe(f"{stream.name}.a", config=config)
    publish_numbered(js, f"{stream.name}.a", 3, timeout=60)
    assert [int(sub.next_msg(2).data) for _ in range(3)] == [0, 1, 2]
    sub.unsubscribe()


def test_ordered_push_starts_where_config_says(js, stream):
    """ordered_consumer=True takes the start and headers_only from config=, as nats.py."""
    publish_numbered(js, f"{stream.name}.a", 5, timeout=60)
    config = jetstream_sync.ConsumerConfig(
        deliver_policy=jetstream_sync.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=4,
        headers_only=True,
    )  # fmt: skip
    sub = js.subscribe(f"{stream.name}.a", ordered_consumer=True, config=config)
    first = sub.next_msg(2)
    assert first.metadata.sequence.stream == 4
    assert first.data == b""
    assert sub.next_msg(2).metadata.sequence.stream == 5
    sub.unsubscribe()
    durable = jetstream_sync.ConsumerConfig(durable_name="not-ordered")
    with pytest.raises(ValueError, match="durable"):
        js.subscribe(f"{stream.name}.a", ordered_consumer=True, config=durable)


def test_a_durable_filtering_other_subjects_is_not_bound(js, stream):
    """subscribe(subject, durable=d) refuses a durable that filters on another subject."""
    js.create_consumer(
        stream.name, durable_name="orders", deliver_subject=js.client.new_inbox(),
        filter_subject=f"{stream.name}.a",
    )  # fmt: skip
    with pytest.raises(ValueError, match="filters on"):
        js.subscribe(f"{stream.name}.b", durable="orders")
    sub = js.subscribe(f"{stream.name}.a", durable="orders")
    sub.unsubscribe()
    both = jetstream_sync.ConsumerConfig(filter_subjects=[f"{stream.name}.a", f"{stream.name}.b"])
    js.subscribe(f"{stream.name}.>", durable="both", config=both).unsubscribe()
    wait_for(lambda: not js.consumer_info(stream.name, "both").push_bound)
    js.subscribe(f"{stream.name}.>", durable="both", config=both).unsubscribe()


def test_subscribe_bind(js, stream):
    """subscribe_bind attaches to an existing push consumer and never deletes it."""
    js.create_consumer(stream.name, durable_name="bound", deliver_subject="bind.deliver")
    publish_numbered(js, f"{stream.name}.a", 3, timeout=60)
    sub = js.subscribe_bind(stream.name, "bound")
    assert [int(sub.next_msg(2).data) for _ in range(3)] == [0, 1, 2]
    sub.unsubscribe()
    assert js.consumer_info(stream.name, "bound")
    pull = js.create_consumer(stream.name, durable_name="pull")
    with pytest.raises(ValueError):
        js.subscribe_bind(stream.name, pull.name)


def test_heartbeats_are_not_delivered(js, stream):
    """Idle heartbeats are handled, never handed to the application."""
    sub = js.subscribe(f"{stream.name}.a", idle_heartbeat=0.1)
    wait_for(lambda: sub.delivered >= 2)  # heartbeats arrived
    with pytest.raises(TimeoutError):
        sub.next_msg(timeout=0.3)
    sub.unsubscribe()


def test_ordered_push(js, stream):
    """ordered_consumer=True delivers in order and survives the consumer's deletion."""
    publish_numbered(js, f"{stream.name}.a", 50, timeout=60)
    sub = js.subscribe(f"{stream.name}.a", ordered_consumer=True)
    got = [int(sub.next_msg(timeout=5).data) for _ in range(25)]
    js.delete_consumer(stream.name, sub.consumer)
    got += [int(sub.next_msg(timeout=10).data) for _ in range(25)]
    assert got == list(range(50))
    sub.unsubscribe()


@pytest.mark.slow
def test_flow_control_and_heartbeats_deliver_100k(js, stream):
    """A push consumer with flow control and heartbeats delivers 100,000 messages."""
    total = 100_000
    subject = f"{stream.name}.big"
    publish_numbered(js, subject, total, timeout=60)
    count = [0]
    done = threading.Event()

    def cb(msg):
        count[0] += 1
        if count[0] == total:
            done.set()

    sub = js.subscribe(
        subject, cb=cb, manual_ack=True, flow_control=True, idle_heartbeat=0.5,
        config=jetstream_sync.ConsumerConfig(ack_policy=jetstream_sync.AckPolicy.NONE),
    )  # fmt: skip
    assert done.wait(90), f"only {count[0]} of {total} arrived"
    sub.unsubscribe()


def test_flow_control_requests_are_answered(js, stream):
    """The server's flow-control requests reach the subscription and are answered: all arrive."""
    total = 20_000
    subject = f"{stream.name}.fc"
    deliver = js.client.new_inbox()
    js.create_consumer(
        stream.name, durable_name="fc", deliver_subject=deliver, flow_control=True,
        idle_heartbeat=1.0, ack_policy=jetstream_sync.AckPolicy.NONE,
    )  # fmt: skip
    observer = js.client.subscribe(deliver)  # sees the same frames, answers nothing
    js.client.flush()
    received = [0]
    done = threading.Event()

    def cb(msg):
        received[0] += 1
        if received[0] == total:
            done.set()

    sub = js.subscribe_bind(stream.name, "fc", cb=cb, manual_ack=True)
    publish_numbered(js, subject, total, timeout=60)  # published once both subscriptions listen
    assert done.wait(60), f"only {received[0]} of {total} arrived"
    seen = []
    while observer.pending_msgs:
        msg = observer.next_msg(timeout=1)
        if msg.status == 100 and msg.reply:
            seen.append(msg.description)
    assert seen and all("FlowControl" in d for d in seen)
    sub.unsubscribe()
    observer.unsubscribe()


def test_idle_heartbeats_arrive_and_are_not_delivered(js, stream):
    """With idle_heartbeat set, heartbeats flow on an idle consumer but never reach the user."""
    deliver = js.client.new_inbox()
    js.create_consumer(
        stream.name, durable_name="hb", deliver_subject=deliver, idle_heartbeat=0.2,
        ack_policy=jetstream_sync.AckPolicy.NONE,
    )  # fmt: skip
    observer = js.client.subscribe(deliver)
    sub = js.subscribe_bind(stream.name, "hb", manual_ack=True)
    beat = observer.next_msg(timeout=5)
    assert (beat.status, beat.description) == (100, "Idle Heartbeat")
    with pytest.raises(TimeoutError):
        sub.next_msg(timeout=0.5)
    sub.unsubscribe()
    observer.unsubscribe()


def test_a_deleted_consumer_is_reported_to_error_cb(shared_server, stream):
    """A callback subscription with heartbeats reports NoHeartbeatError when its consumer goes."""
    errors = []
    with jetstream_sync.connect(shared_server.url, error_cb=errors.append) as nc:
        js = nc.jetstream()
        seen = []
        sub = js.subscribe(f"{stream.name}.a", cb=seen.append, idle_heartbeat=0.2)
        js.publish(f"{stream.name}.a", b"1")
        wait_for(lambda: len(seen) == 1)
        js.delete_consumer(stream.name, sub.consumer)
        wait_for(lambda: any(isinstance(e, jetstream_sync.NoHeartbeatError) for e in errors))
        sub.unsubscribe()
    watchers = [t for t in threading.enumerate() if t.name == "jetstream_sync-push-heartbeats"]
    assert not watchers  # close() joined it


def test_a_deleted_consumer_ends_the_wait_of_next_msg(js, stream):
    """next_msg() and iteration raise NoHeartbeatError once the consumer's heartbeats stop."""
    sub = js.subscribe(f"{stream.name}.a", idle_heartbeat=0.2)
    wait_for(lambda: sub.delivered >= 1)  # a heartbeat came
    js.delete_consumer(stream.name, sub.consumer)
    with pytest.raises(jetstream_sync.NoHeartbeatError):
        sub.next_msg(timeout=None)
    with pytest.raises(jetstream_sync.NoHeartbeatError):
        next(iter(sub))
    sub.unsubscribe()


def test_a_deleted_stream_is_reported_to_error_cb(shared_server, js, stream_name):
    """Deleting the stream under a bound push subscription with heartbeats is reported."""
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    deliver = js.client.new_inbox()
    js.create_consumer(
        stream_name, durable_name="hb", deliver_subject=deliver, idle_heartbeat=0.2,
    )  # fmt: skip
    errors = []
    with jetstream_sync.connect(shared_server.url, error_cb=errors.append) as nc:
        sub = nc.jetstream().subscribe_bind(stream_name, "hb", cb=lambda m: None)
        wait_for(lambda: sub.delivered >= 1)
        js.delete_stream(stream_name)
        wait_for(lambda: any(isinstance(e, jetstream_sync.NoHeartbeatError) for e in errors))
        sub.unsubscribe()


def test_an_idle_consumer_with_heartbeats_reports_nothing(shared_server, stream):
    """Heartbeats that keep coming are no error, whatever the subscription does meanwhile."""
    errors = []
    with jetstream_sync.connect(shared_server.url, error_cb=errors.append) as nc:
        js = nc.jetstream()
        sub = js.subscribe(f"{stream.name}.a", cb=lambda m: None, idle_heartbeat=0.1)
        wait_for(lambda: sub.delivered >= 10)  # longer than several checks
        it = js.subscribe(f"{stream.name}.a", idle_heartbeat=0.1)
        with pytest.raises(TimeoutError):
            it.next_msg(timeout=1.0)
        sub.unsubscribe()
        it.unsubscribe()
    assert errors == []


def test_queue_members_with_heartbeats_report_nothing(shared_server, stream):
    """Heartbeats go to one member of a queue group at a time: no member counts them."""
    errors = []
    with jetstream_sync.connect(shared_server.url, error_cb=errors.append) as nc:
        js = nc.jetstream()
        a = js.subscribe(f"{stream.name}.a", "q", cb=lambda m: None, idle_heartbeat=0.1)
        b = js.subscribe(f"{stream.name}.a", "q")  # joins the group's consumer
        wait_for(lambda: a.delivered + b.delivered >= 30)  # several checks' worth
        with pytest.raises(TimeoutError):
            b.next_msg(timeout=0.5)
        a.unsubscribe()
        b.unsubscribe()
    assert errors == []


def test_nats_py_subscribe_keywords_reach_the_consumer_and_the_subscription(shared_server, stream):
    """headers_only, inactive_threshold and the pending limits, as nats.py's js.subscribe
    takes them: the consumer is made with the first two, the subscription holds at most
    pending_msgs_limit messages and reports the overflow as a slow consumer."""
    errors = []
    with jetstream_sync.connect(shared_server.url, error_cb=errors.append) as nc:
        js = nc.jetstream()
        publish_numbered(js, f"{stream.name}.a", 10, timeout=60)
        sub = js.subscribe(
            f"{stream.name}.a", headers_only=True, inactive_threshold=30, pending_msgs_limit=3
        )
        config = sub.consumer_info().config
        assert (config.headers_only, config.inactive_threshold) == (True, 30)
        wait_for(lambda: any(isinstance(e, jetstream_sync.SlowConsumerError) for e in errors))
        assert sub.pending_msgs == 3
        first = sub.next_msg(timeout=5)
        assert first.data == b"" and first.headers["Nats-Msg-Size"] == "1"
        sub.unsubscribe()
        bound_errors = len(errors)
        config = jetstream_sync.ConsumerConfig(
            durable_name="bounded", deliver_subject=nc.new_inbox()
        )
        js.create_consumer(stream.name, config)
        bound = js.subscribe_bind(stream.name, "bounded", pending_bytes_limit=2)
        wait_for(lambda: len(errors) > bound_errors)
        assert isinstance(errors[-1], jetstream_sync.SlowConsumerError)
        bound.unsubscribe()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"pending_msgs_limit": 0}, ValueError),
        ({"pending_bytes_limit": "10"}, TypeError),
        ({"pending_msgs_limit": 5, "ordered_consumer": True}, ValueError),
    ],
)
def test_bad_pending_limits_are_refused_before_a_consumer_is_made(js, stream, options, error):
    """Nothing is created on the server when a limit is wrong."""
    with pytest.raises(error, match="pending"):
        js.subscribe(f"{stream.name}.a", **options)
    assert list(js.consumer_names(stream.name)) == []
