"""Batched direct gets in pages: every request asks for at most ``max_payload`` bytes.

Without a ``max_bytes`` nats-server answers a batch with up to its ``max_pending``
bytes at once (64 MiB by default; 16 MiB on this module's server, so 20 MB show
it), past which it cuts a client that falls behind off as a slow consumer. The
end-of-batch status says how many are pending; the client asks again from after
the last message received.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream_sync
from jetstream_sync.jetstream import _direct_batch
from tests.fixtures.server import NatsServer

_MAX_PENDING = 16 * 1024 * 1024
_SUBJECTS = 1000
_SIZE = 20_000  # 1,000 x 20,000 bytes (20 MB), two batches; at most 1,024 subjects: one request


@pytest.fixture(scope="module")
def small_pending_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A JetStream server whose ``max_pending`` ends a batch after 16 MiB of replies."""
    directory: Path = tmp_path_factory.mktemp("small-pending")
    server = NatsServer(directory=directory, extra_config=f"max_pending: {_MAX_PENDING}")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client(small_pending_server: NatsServer) -> Iterator[jetstream_sync.Client]:
    with jetstream_sync.connect(small_pending_server.url) as nc:
        yield nc


def _fill(js: jetstream_sync.JetStreamContext, name: str) -> jetstream_sync.Stream:
    stream = js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True)
    for i in range(_SUBJECTS):
        js.publish_async(f"{name}.{i:04d}", b"x" * _SIZE)
    js.publish_async_completed(timeout=30)
    return stream


def test_get_last_msgs_for_pages_stay_on_the_first_pages_snapshot(client, monkeypatch):
    """A subject written again after the first page came is not returned twice: every page
    answers as of the first page's last sequence (the server's Nats-UpTo-Sequence)."""
    js = client.jetstream()
    stream = _fill(js, "PAGES_SNAPSHOT")
    real_replies = _direct_batch.PendingBatch.replies
    pages: list[int] = []

    def write_after_the_first_page(self):
        replies = real_replies(self)
        pages.append(len(replies))
        if len(pages) == 1:
            js.publish(f"{stream.name}.0000", b"written after the first page")
        return replies

    monkeypatch.setattr(_direct_batch.PendingBatch, "replies", write_after_the_first_page)
    got = stream.get_last_msgs_for([f"{stream.name}.>"])
    assert len(pages) > 1  # the server did end the first batch early
    assert [m.seq for m in got] == list(range(1, _SUBJECTS + 1))
    assert not [s for s, n in Counter(m.subject for m in got).items() if n > 1]


def test_get_msgs_pages_return_the_whole_batch(client):
    """get_msgs past max_pending bytes returns every message asked for, in order."""
    stream = _fill(client.jetstream(), "PAGES_GET_MSGS")
    assert [m.seq for m in stream.get_msgs(batch=_SUBJECTS)] == list(range(1, _SUBJECTS + 1))


def test_every_request_asks_for_at_most_max_payload_bytes(client):
    """Each batched get asks for at most max_payload bytes (the server's max_pending is never
    below it): without it the server queues a burst of max_pending bytes, past which it cuts a
    client that falls behind off as a slow consumer."""
    js = client.jetstream()
    stream = _fill(js, "PAGES_BURST")
    with jetstream_sync.connect(client.connected_url) as spy:
        requests = spy.subscribe(f"$JS.API.DIRECT.GET.{stream.name}")
        spy.flush()
        assert len(stream.get_msgs(batch=_SUBJECTS)) == _SUBJECTS
        assert len(stream.get_last_msgs_for([f"{stream.name}.>"])) == _SUBJECTS
        spy.flush()  # the requests reached the spy before the server answered them
        asked = [json.loads(m.data) for m in requests.next_msgs(100, timeout=1)]
    assert len(asked) > 2
    assert all(0 < body.get("max_bytes", 0) <= client.max_payload for body in asked)
