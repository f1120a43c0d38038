"""Pull consumers: fetch, fetch_bytes, next, messages(), consume(), restarts, priority groups."""

from __future__ import annotations

import sys
import threading
import time

import pytest

import jetstream_sync
from jetstream_sync.errors import ConsumerDeletedError, TimeoutError
from jetstream_sync.jetstream.enums import PriorityPolicy, StorageType
from jetstream_sync.msg import pull_size
from tests.fixtures.jetstream import publish_numbered
from tests.fixtures.polling import wait_for
from tests.fixtures.server import stopped
from tests.fixtures.stall import fill_past_high_water


def test_fetch_on_empty_consumer_returns_empty_within_timeout(stream):
    """fetch() on an empty consumer returns [] by its timeout (not an error)."""
    cons = stream.create_consumer()
    start = time.monotonic()
    assert cons.fetch(10, timeout=1.0) == []
    assert time.monotonic() - start < 2.0


def test_fetch_full_and_partial_batches(js, stream):
    """A batch fills at once; a larger batch returns the partial set at the timeout."""
    publish_numbered(js, f"{stream.name}.x", 15)
    cons = stream.create_consumer()
    first = cons.fetch(10, timeout=5)
    assert [m.data for m in first] == [b"%d" % i for i in range(10)]
    start = time.monotonic()
    rest = cons.fetch(10, timeout=1.0)
    assert [m.data for m in rest] == [b"%d" % i for i in range(10, 15)]
    assert time.monotonic() - start < 2.0


def test_repeated_fetches_are_not_cut_by_stale_timeouts(js, stream):
    """Each fetch has its own inbox: many short fetches in a row never see an old 408."""
    cons = stream.create_consumer()
    for _ in range(5):
        assert cons.fetch(1, timeout=0.2) == []
    js.publish(f"{stream.name}.x", b"late")
    assert [m.data for m in cons.fetch(1, timeout=2)] == [b"late"]


def test_fetch_bytes_respects_the_limit(js, stream):
    """fetch_bytes never returns more bytes than asked for."""
    publish_numbered(js, f"{stream.name}.x", 20, size=100)
    cons = stream.create_consumer()
    msgs = cons.fetch_bytes(1000, timeout=2)
    assert 1 <= len(msgs) < 10
    assert sum(len(m.data) for m in msgs) <= 1000


def test_fetch_bytes_returns_as_soon_as_the_messages_fill_it(js, stream):
    """Messages that fill max_bytes exactly end the fetch at once, as nats.go's does.

    The server ends such a request without a status; waiting for one would take the
    whole timeout.
    """
    publish_numbered(js, f"{stream.name}.x", 3, size=100)
    twin = stream.create_consumer(durable_name="twin1")  # the same deliveries, to measure
    size = sum(map(pull_size, twin.fetch(2, timeout=5)))
    cons = stream.create_consumer(durable_name="twin2")
    start = time.monotonic()
    msgs = cons.fetch_bytes(size, timeout=10)
    assert [int(m.data.rstrip(b".")) for m in msgs] == [0, 1]
    assert time.monotonic() - start < 5


def test_fetch_no_wait_and_next(js, stream):
    """fetch_no_wait returns what is there now; next() raises TimeoutError when empty."""
    cons = stream.create_consumer()
    assert cons.fetch_no_wait(5) == []
    publish_numbered(js, f"{stream.name}.x", 3)
    # A no-wait pull is refused while the consumer counts nothing pending, and the
    # server counts new messages into an existing consumer just after the PubAck.
    wait_for(lambda: cons.info().num_pending == 3)
    assert len(cons.fetch_no_wait(5)) == 3
    with pytest.raises(TimeoutError):
        cons.next(timeout=0.5)
    js.publish(f"{stream.name}.x", b"n")
    assert cons.next(timeout=2).data == b"n"


def test_fetch_with_heartbeat(js, stream):
    """fetch(heartbeat=) on an idle consumer gets heartbeats and returns [] at the timeout."""
    cons = stream.create_consumer()
    assert cons.fetch(5, timeout=3, heartbeat=0.5) == []
    with pytest.raises(ValueError):
        cons.fetch(1, timeout=1.0, heartbeat=0.9)


def test_fetch_heartbeat_may_be_half_the_timeout(js, stream):
    """heartbeat= may be half the timeout, as documented (and as nats.go allows)."""
    cons = stream.create_consumer()
    assert cons.fetch(5, timeout=1.0, heartbeat=0.5) == []
    js.publish(f"{stream.name}.x", b"1")
    assert [m.data for m in cons.fetch(5, timeout=1.0, heartbeat=0.5)] == [b"1"]


def test_bad_arguments(stream):
    """Bad batch/timeout values raise ValueError naming the parameter."""
    cons = stream.create_consumer()
    with pytest.raises(ValueError, match="batch"):
        cons.fetch(0)
    with pytest.raises(ValueError, match="timeout"):
        cons.fetch(1, timeout=float("nan"))
    with pytest.raises(ValueError, match="expires"):
        cons.messages(expires=0.5)


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.fetch(2**63),
        lambda c: c.fetch_no_wait(2**63),
        lambda c: c.fetch_bytes(2**63),
        lambda c: c.messages(max_messages=2**63),
        lambda c: c.messages(max_bytes=2**63),
    ],
    ids=["fetch", "fetch_no_wait", "fetch_bytes", "messages", "messages-bytes"],
)
def test_sizes_past_64_bits_are_refused_before_sending(stream, call):
    """A batch or max_bytes past the server's int64 raises ValueError before anything is
    sent (the server answered 400 "cannot unmarshal number")."""
    with pytest.raises(ValueError, match="at most 9223372036854775807"):
        call(stream.create_consumer())


def test_messages_iterates_and_refills(js, stream):
    """messages() delivers everything in order across many refills."""
    publish_numbered(js, f"{stream.name}.x", 1000)
    cons = stream.create_consumer()
    seen = []
    with cons.messages(max_messages=50) as it:
        for msg in it:
            msg.ack()
            seen.append(int(msg.data))
            if len(seen) == 1000:
                break
    assert seen == list(range(1000))


def test_messages_by_bytes(js, stream):
    """messages(max_bytes=) pulls by size and still delivers everything."""
    publish_numbered(js, f"{stream.name}.x", 100, size=200)
    cons = stream.create_consumer()
    with cons.messages(max_bytes=2000) as it:
        got = [it.next(timeout=5) for _ in range(100)]
    assert len(got) == 100


def test_messages_by_bytes_backs_off_from_a_message_larger_than_max_bytes(nc, js, stream):
    """A message larger than max_bytes is reported and pulled for again after a pause.

    The server refuses every request with "409 Message Size Exceeds MaxBytes";
    pulling again at once would be a hot loop of requests.
    """
    js.publish(f"{stream.name}.x", b"x" * 1000)
    cons = stream.create_consumer(durable_name="small")
    pulls = nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream.name}.small")
    warnings = []
    start = time.monotonic()
    ctx = cons.consume(lambda m: None, error_handler=warnings.append, max_bytes=100)
    wait_for(lambda: len(warnings) >= 3, timeout=10)
    ctx.stop()
    assert time.monotonic() - start >= 2 * 0.5  # RETRY_WAIT between refused pulls
    assert all(isinstance(e, jetstream_sync.PullStatusError) for e in warnings[:3])
    assert "MaxBytes" in str(warnings[0])
    assert pulls.pending_msgs <= 10
    pulls.unsubscribe()


def test_fetch_bytes_keeps_to_the_consumers_max_batch(js, stream):
    """fetch_bytes on a consumer with max_batch asks for no larger batch than it allows
    (its implicit batch of 1,000,000 made the server refuse every such fetch)."""
    publish_numbered(js, f"{stream.name}.x", 20, size=10)
    cons = stream.create_consumer(max_batch=5)
    got = cons.fetch_bytes(10_000, timeout=2)
    assert [int(m.data.rstrip(b".")) for m in got] == list(range(5))


@pytest.mark.parametrize("kind", ["default", "max_bytes", "expires"])
def test_messages_keeps_to_the_consumers_request_limits(js, stream, kind):
    """messages() on a consumer with max_batch, max_bytes and max_expires smaller than its
    pulls' sizes pulls within them and delivers everything (the server refused every
    larger pull, and the iterator delivered nothing, forever)."""
    publish_numbered(js, f"{stream.name}.x", 30, size=10)
    cons = stream.create_consumer(max_batch=5, max_bytes=200, max_expires=2.0)
    options = {"default": {}, "max_bytes": {"max_bytes": 10_000}, "expires": {"expires": 60.0}}
    with cons.messages(**options[kind]) as it:
        got = [int(it.next(timeout=5).data.rstrip(b".")) for _ in range(30)]
    assert got == list(range(30))


def test_fetch_timeouts_past_max_expires_pull_in_turns(js, stream):
    """fetch(), next(), fetch_bytes() and the nats.py-style fetch() with a timeout past a
    consumer's max_expires (the default 5 s, or 2.5 s, against 1 s) send requests of at
    most 1 s, again while nothing came, until the timeout (the server refused each such
    call: 409 Exceeded MaxRequestExpires)."""
    publish_numbered(js, f"{stream.name}.x", 3)
    cons = stream.create_consumer(durable_name="brief", max_expires=1.0)
    psub = js.pull_subscribe_bind(stream.name, "brief")
    assert [m.data for m in cons.fetch()] == [b"0"]
    assert cons.next().data == b"1"
    assert [m.data for m in psub.fetch()] == [b"2"]
    start = time.monotonic()
    assert cons.fetch_bytes(1000, timeout=2.5) == []
    elapsed = time.monotonic() - start
    assert elapsed > 2.2, elapsed  # not 1 s: one request, then more
    assert elapsed < 5.0, elapsed  # within its timeout (with room for a loaded machine)
    with pytest.raises(TimeoutError):
        psub.fetch(timeout=1.5)


@pytest.mark.parametrize("kind", ["fetch", "fetch_bytes", "messages", "consume"])
def test_a_handle_with_a_stale_config_learns_the_consumers_new_limits(js, stream, kind, caplog):
    """A handle made before another client lowered its consumer's max_batch and
    max_expires: its first refused pull (409 Exceeded MaxRequest...) fetches the
    consumer's info, and it pulls again within the new limits; messages() and consume()
    report that one refusal as a warning (every such pull was refused, with a warning
    each half second, until info() was called)."""
    publish_numbered(js, f"{stream.name}.x", 12, size=10)
    cons = stream.create_consumer(durable_name="stale")
    stream.update_consumer(durable_name="stale", max_batch=5, max_expires=1.0)
    warnings = []
    if kind == "fetch":  # the default timeout, past max_expires
        got = [m for _ in range(12) for m in cons.fetch()]
    elif kind == "fetch_bytes":  # its batch, past max_batch
        got = cons.fetch_bytes(10_000, timeout=1.0)
        assert len(got) == 5
        got += cons.fetch(5, timeout=1.0) + cons.fetch(2, timeout=1.0)
    elif kind == "messages":
        with cons.messages() as it:
            got = [it.next(timeout=5) for _ in range(12)]
        warnings = [r.getMessage() for r in caplog.records if "MaxRequest" in r.getMessage()]
    else:
        seen = []
        ctx = cons.consume(seen.append, error_handler=warnings.append)
        wait_for(lambda: len(seen) >= 12)
        ctx.stop()
        got = seen
    assert [int(m.data.rstrip(b".")) for m in got] == list(range(12))
    assert len(warnings) == (kind in ("messages", "consume"))  # the one refusal
    assert cons.cached_info.config.max_batch == 5


def test_messages_next_timeout_and_stop(stream):
    """next(timeout) raises TimeoutError; after stop() iteration ends."""
    cons = stream.create_consumer()
    it = cons.messages()
    with pytest.raises(TimeoutError):
        it.next(timeout=0.3)
    it.stop()
    assert list(it) == []
    assert it.closed


def test_messages_raises_when_consumer_deleted(js, stream):
    """The iterator ends with ConsumerDeletedError when the consumer is deleted."""
    cons = stream.create_consumer(durable_name="gone")
    it = cons.messages(expires=5)
    js.publish(f"{stream.name}.x", b"1")
    assert it.next(timeout=5).data == b"1"
    stream.delete_consumer("gone")
    with pytest.raises(ConsumerDeletedError):
        it.next(timeout=10)
    with pytest.raises(ConsumerDeletedError):
        it.next(timeout=1)


def test_consume_runs_callback_in_order_on_its_thread(js, stream):
    """consume() calls back in order, on a jetstream_sync-consume thread; stop() joins it."""
    publish_numbered(js, f"{stream.name}.x", 300)
    cons = stream.create_consumer()
    seen, threads = [], set()

    def cb(msg):
        threads.add(threading.current_thread().name)
        seen.append(int(msg.data))
        msg.ack()

    ctx = cons.consume(cb, max_messages=40)
    wait_for(lambda: len(seen) == 300)
    ctx.stop()
    assert ctx.closed
    assert seen == list(range(300))
    assert len(threads) == 1 and threads.pop().startswith("jetstream_sync-consume-")


def test_consume_reports_callback_errors_and_deletion(js, stream):
    """Callback exceptions and the consumer's deletion reach error_handler; then it stops."""
    cons = stream.create_consumer(durable_name="cd")
    errors = []
    ctx = cons.consume(lambda m: 1 / 0, error_handler=errors.append, expires=5)
    js.publish(f"{stream.name}.x", b"1")
    wait_for(lambda: any(isinstance(e, ZeroDivisionError) for e in errors))
    stream.delete_consumer("cd")
    wait_for(lambda: ctx.closed, timeout=10)
    assert any(isinstance(e, ConsumerDeletedError) for e in errors)


def test_consume_reports_sys_exit_and_goes_on(js, stream):
    """SystemExit raised by the callback reaches error_handler; the next message still comes."""
    cons = stream.create_consumer()
    errors, seen = [], []

    def cb(msg):
        seen.append(msg.data)
        if msg.data == b"exit":
            sys.exit(2)

    ctx = cons.consume(cb, error_handler=errors.append)
    js.publish(f"{stream.name}.x", b"exit")
    js.publish(f"{stream.name}.x", b"after")
    wait_for(lambda: seen == [b"exit", b"after"])
    assert [type(e) for e in errors] == [SystemExit]
    ctx.stop()


def test_consume_drain_delivers_buffered_then_stops(js, stream):
    """drain() hands over what was buffered, then joins; stop() from a callback works."""
    publish_numbered(js, f"{stream.name}.x", 50)
    cons = stream.create_consumer()
    seen = []
    gate = threading.Event()

    def cb(msg):
        gate.wait(5)
        seen.append(msg)

    ctx = cons.consume(cb, max_messages=100)
    wait_for(lambda: ctx._source._buf or ctx._source._sub.pending_msgs > 0)
    gate.set()
    ctx.drain(timeout=10)
    assert ctx.closed and len(seen) >= 1

    ctx2 = cons.consume(lambda m: ctx2.stop())
    js.publish(f"{stream.name}.x", b"z")
    wait_for(lambda: ctx2.closed, timeout=10)


def test_consume_stop_discards_the_rest_of_a_buffered_batch(js, stream):
    """stop() from the callback while the rest of the batch waits behind it: none is handed over.

    The rest may wait in the iterator's buffer or still in the inbox, depending on how
    much had arrived when the buffer was filled; both must be discarded.
    """
    publish_numbered(js, f"{stream.name}.x", 50)
    cons = stream.create_consumer()
    seen = []
    gate = threading.Event()
    holder = []

    def cb(msg):
        gate.wait(30)
        seen.append(msg)
        holder[0].stop()

    holder.append(cons.consume(cb, max_messages=100))
    ctx = holder[0]
    source = ctx._source
    wait_for(lambda: len(source._buf) + source._sub.pending_msgs >= 49, timeout=20)  # 1 is held
    gate.set()
    wait_for(lambda: ctx.closed, timeout=10)
    assert len(seen) == 1


@pytest.mark.slow
def test_messages_survives_a_server_restart_with_nothing_lost(restartable_server):
    """messages() keeps delivering across a server restart; every message arrives."""
    with jetstream_sync.connect(restartable_server.url, reconnect_time_wait=0.1) as nc:
        js = nc.jetstream()
        st = js.create_stream(name="R", subjects=["r.>"], storage=StorageType.FILE)
        cons = st.create_consumer(durable_name="d", ack_wait=5)
        for i in range(200):
            js.publish("r.x", b"%d" % i)
        seen = set()
        with cons.messages(max_messages=20, expires=2, heartbeat=0.5) as it:
            while len(seen) < 100:
                msg = it.next(timeout=10)
                msg.ack_sync()
                seen.add(int(msg.data))
            restartable_server.restart()
            wait_for(lambda: nc.is_connected, timeout=20)
            for i in range(200, 300):
                js.publish("r.x", b"%d" % i, timeout=10)
            while len(seen) < 300:
                msg = it.next(timeout=30)
                msg.ack()
                seen.add(int(msg.data))
        assert seen == set(range(300))


def test_priority_group_pins_one_client(js, stream):
    """With PINNED_CLIENT, the pinned handle gets messages and another waits."""
    publish_numbered(js, f"{stream.name}.x", 4)
    a = stream.create_consumer(
        durable_name="pg", priority_policy=PriorityPolicy.PINNED_CLIENT, priority_groups=["g"]
    )
    b = stream.consumer("pg")
    assert len(a.fetch(2, timeout=2, group="g")) == 2
    assert b.fetch(2, timeout=0.5, group="g") == []
    assert len(a.fetch(2, timeout=2, group="g")) == 2


def test_overflow_group_min_pending(js, stream):
    """OVERFLOW with min_pending: served only while enough is pending."""
    publish_numbered(js, f"{stream.name}.x", 3)
    cons = stream.create_consumer(
        durable_name="ov", priority_policy=PriorityPolicy.OVERFLOW, priority_groups=["g"]
    )
    assert cons.fetch(1, timeout=0.5, group="g", min_pending=10) == []
    assert len(cons.fetch(3, timeout=2, group="g", min_pending=1)) >= 1


@pytest.mark.interop
def test_interop_with_nats_py(shared_server, js, stream):
    """nats-py publishes, we consume; we publish, nats-py consumes."""
    import asyncio

    import nats

    subj = f"{stream.name}.i"

    async def publish_with_nats_py():
        nc = await nats.connect(shared_server.url)
        njs = nc.jetstream()
        for i in range(5):
            await njs.publish(subj, b"py%d" % i)
        await nc.close()

    asyncio.run(publish_with_nats_py())
    cons = stream.create_consumer(durable_name="ours", filter_subject=subj)
    msgs = cons.fetch(5, timeout=3)
    assert [m.data for m in msgs] == [b"py%d" % i for i in range(5)]
    for m in msgs:
        m.ack()

    for i in range(5):
        js.publish(subj, b"us%d" % i)

    async def consume_with_nats_py():
        nc = await nats.connect(shared_server.url)
        psub = await nc.jetstream().pull_subscribe(subj, durable="theirs", stream=stream.name)
        got = await psub.fetch(10, timeout=3)
        for m in got:
            await m.ack()
        await nc.close()
        return [m.data for m in got]

    assert asyncio.run(consume_with_nats_py())[-5:] == [b"us%d" % i for i in range(5)]


def test_iterator_drain_and_listener_cleanup(js, stream):
    """drain() still yields what was received; stop/drain remove the status listener."""
    publish_numbered(js, f"{stream.name}.x", 20)
    cons = stream.create_consumer()
    before = len(js.client._listeners)
    it = cons.messages(max_messages=100)
    first = it.next(timeout=5)
    wait_for(lambda: len(it._buf) + it._sub.pending_msgs >= 19)
    it.drain()
    rest = list(it)
    assert [int(m.data) for m in [first, *rest]] == list(range(20))
    assert len(js.client._listeners) == before


def test_consume_survives_an_error_handler_that_raises_on_a_warning(js, stream):
    """An error_handler raising on a warning (a refused pull) does not end consumption."""
    js.publish(f"{stream.name}.big", b"x" * 100)
    cons = stream.create_consumer(durable_name="strict")
    warnings = []

    def handler(exc):
        warnings.append(exc)
        raise RuntimeError("a bug in the handler")

    ctx = cons.consume(lambda m: None, error_handler=handler, max_bytes=50)
    wait_for(lambda: len(warnings) >= 2, timeout=10)  # the pull is refused, then retried
    assert not ctx.closed
    assert all(isinstance(e, jetstream_sync.PullStatusError) for e in warnings)
    assert "MaxBytes" in warnings[0].description  # the message is larger than max_bytes
    ctx.stop()


def test_messages_and_consume_do_not_block_on_a_full_write_buffer(nats_server):
    """With a stalled server and a full write buffer, messages() and consume() return at
    once, next(timeout=) keeps its deadline and stop() joins; then messages flow."""
    with jetstream_sync.connect(nats_server.url, ping_interval=60) as nc:
        js = nc.jetstream()
        st = js.create_stream(name="FULLBUF", subjects=["fullbuf"])
        cons = st.create_consumer(durable_name="d")
        seen = []
        with stopped(nats_server):
            fill_past_high_water(nc)
            made = []
            starter = threading.Thread(
                target=lambda: made.extend([cons.messages(), cons.consume(seen.append)]),
                daemon=True,
            )
            starter.start()
            starter.join(5)
            assert len(made) == 2, "messages() or consume() blocked on the full write buffer"
            it, ctx = made
            with pytest.raises(TimeoutError):
                it.next(timeout=0.5)
            ctx.stop(timeout=5)
        js.publish("fullbuf", b"1", timeout=30)
        assert it.next(timeout=30).data == b"1"
        it.stop()
