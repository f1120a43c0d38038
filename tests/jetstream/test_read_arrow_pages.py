"""``Stream.read_arrow`` of large messages: every request asks for pages the server can send.

Without a ``max_bytes`` a pull of 4,096 messages (or a batched direct get) is
answered with everything at once, up to the server's ``max_pending`` bytes, the
limit past which it cuts a client that falls behind off as a slow consumer.
This module's server has a ``max_pending`` of 4 MiB, so 40 MB of messages show
it on both read paths.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import jetstream_sync
from tests.fixtures.server import NatsServer

pytestmark = pytest.mark.timeout(120)

_MAX_PENDING = 4 * 1024 * 1024
_COUNT = 400
_SIZE = 100_000  # 400 x 100 KB: ten times max_pending


@pytest.fixture(scope="module")
def small_pending_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A JetStream server that cuts a client off past 4 MiB of replies pending."""
    config = f"max_pending: {_MAX_PENDING}"
    with NatsServer(
        directory=tmp_path_factory.mktemp("arrow-pages"), extra_config=config
    ) as server:
        yield server


def _stream(nc: jetstream_sync.Client, name: str, allow_direct: bool) -> jetstream_sync.Stream:
    """A stream ``name`` capturing ``<name>.>``, read by direct gets or by a consumer."""
    return nc.jetstream().create_stream(
        name=name, subjects=[f"{name}.>"], allow_direct=allow_direct
    )


@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct", "consumer"])
def test_large_messages_are_read_without_a_slow_consumer_cut(small_pending_server, allow_direct):
    """Every message comes back, in order, and the connection never dropped."""
    with jetstream_sync.connect(small_pending_server.url) as nc:
        js = nc.jetstream()
        name = f"ARROW_PAGES_{int(allow_direct)}"
        stream = _stream(nc, name, allow_direct)
        for i in range(_COUNT):
            js.publish_async(f"{name}.{i % 7}", i.to_bytes(4, "big") * (_SIZE // 4))
        js.publish_async_completed(timeout=60)
        rows = [row for batch in stream.read_arrow() for row in batch.to_pylist()]
        assert [row["seq"] for row in rows] == list(range(1, _COUNT + 1))
        assert all(row["data"][:4] == (row["seq"] - 1).to_bytes(4, "big") for row in rows)
        assert nc.stats.reconnects == 0


@pytest.mark.parametrize("allow_direct", [True, False], ids=["direct", "consumer"])
def test_a_message_of_max_payload_bytes_fits_one_request(small_pending_server, allow_direct):
    """A page's byte limit leaves room for the subject and ack reply of the largest message."""
    with jetstream_sync.connect(small_pending_server.url) as nc:
        name = f"ARROW_LARGEST_{int(allow_direct)}"
        stream = _stream(nc, name, allow_direct)
        subject = f"{name}." + "s" * 200
        nc.jetstream().publish(subject, b"x" * nc.max_payload)
        nc.jetstream().publish(subject, b"y")
        rows = [row for batch in stream.read_arrow(timeout=10) for row in batch.to_pylist()]
        assert [(row["seq"], len(row["data"])) for row in rows] == [(1, nc.max_payload), (2, 1)]


def test_many_pulls_answered_whole_read_every_message(small_pending_server):
    """A pull with ``max_bytes`` that got all it asked for ends with a "409 Batch Completed"
    status after its last message; the read counts it once, never as a pull ended empty."""
    with jetstream_sync.connect(small_pending_server.url) as nc:
        js = nc.jetstream()
        stream = _stream(nc, "ARROW_MANY_PULLS", allow_direct=False)
        count = 100_000
        for i in range(count):
            js.publish_async(f"ARROW_MANY_PULLS.k{i % 16}", b"x" * 128)
        js.publish_async_completed(timeout=60)
        assert sum(batch.num_rows for batch in stream.read_arrow()) == count
