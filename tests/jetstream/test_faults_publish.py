"""JetStream publishing through a fault proxy: acked means stored, exactly once.

The loops below are what an application should do: republish whatever failed
(``ConnectionLostError``, ``TimeoutError``) with the same ``msg_id``. The
stream's duplicate window turns every retry of a stored message into a
duplicate ack, so the stream ends with every message exactly once, whatever
the cuts hit: the request on its way out, or the ack on its way back.
"""

from __future__ import annotations

import jetstream_sync as js
from tests.fixtures.faults import assert_works, stored_payloads
from tests.fixtures.proxy import TO_CLIENT, TO_SERVER

RETRYABLE = (js.ConnectionLostError, js.TimeoutError, js.DuplicateMsgIdInProcessError)
# (message index, bytes to let through, direction) of each fault of a run
FAULTS = [(20, 30, TO_CLIENT), (50, 5, TO_SERVER), (90, 200, TO_CLIENT), (130, 0, TO_CLIENT)]


def test_publish_loop_with_msg_id_stores_each_message_once(fault_proxy, fault_client, stream):
    """A publish loop that retries failures with the same msg_id: every message stored once,
    in order, and at least one retry was answered as a duplicate."""
    ctx = fault_client.jetstream(timeout=2)
    subject = f"{stream.name}.sync"
    faults = {i: (n, d) for i, n, d in FAULTS}
    retries = duplicates = 0
    for i in range(160):
        if i in faults:
            fault_proxy.cut_after(*faults[i])
        while True:
            try:
                ack = ctx.publish(subject, b"m%d" % i, msg_id=f"sync-{i}")
            except RETRYABLE:
                retries += 1
                continue
            duplicates += ack.duplicate
            break
    fault_proxy.wait(lambda p: p.cuts == len(FAULTS))
    assert retries >= 2  # a cut at once (0 bytes) lets the publish wait for the new link
    assert duplicates >= 1  # an ack was cut after the message was stored
    assert stored_payloads(stream) == [b"m%d" % i for i in range(160)]
    assert_works(fault_client)


def test_publish_async_republishing_failures_stores_each_message_once(
    fault_proxy, fault_client, events, stream
):
    """publish_async under cuts; every failed future is republished with its msg_id until
    acked: the stream holds every message exactly once."""
    ctx = fault_client.jetstream(timeout=3, ack_timeout=3)
    subject = f"{stream.name}.async"
    total = 600
    pending = {i: ctx.publish_async(subject, b"a%d" % i, msg_id=f"async-{i}") for i in range(200)}
    fault_proxy.cut_after(4000, TO_CLIENT)  # in the middle of the acks of the next batch
    pending.update(
        (i, ctx.publish_async(subject, b"a%d" % i, msg_id=f"async-{i}")) for i in range(200, 400)
    )
    events.wait(lambda e: e.reconnects >= 1)
    fault_proxy.cut_after(3000, TO_SERVER)  # in the middle of the next batch's publishes
    pending.update(
        (i, ctx.publish_async(subject, b"a%d" % i, msg_id=f"async-{i}")) for i in range(400, total)
    )
    acked: dict[int, js.PubAck] = {}
    rounds = failures = 0
    while pending:
        rounds += 1
        assert rounds < 20, f"still failing after {rounds} rounds: {len(pending)} left"
        retry = {}
        for i, future in pending.items():
            error = future.exception(timeout=10)
            if error is None:
                acked[i] = future.result()
            else:
                assert isinstance(error, RETRYABLE), error
                failures += 1
                retry[i] = ctx.publish_async(subject, b"a%d" % i, msg_id=f"async-{i}")
        pending = retry
    assert failures > 0
    fault_proxy.wait(lambda p: p.cuts == 2)
    assert any(ack.duplicate for ack in acked.values())  # some acks were cut, not the messages
    assert sorted(acked) == list(range(total))
    stored = stored_payloads(stream)
    assert len(stored) == total
    # a duplicate's ack names the sequence of the copy stored first
    assert all(stored[ack.seq - 1] == b"a%d" % i for i, ack in acked.items())
    assert sorted(ack.seq for ack in acked.values()) == list(range(1, total + 1))
    assert_works(fault_client)
