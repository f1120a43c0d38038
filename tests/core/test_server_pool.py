"""The server pool: a list of servers is shuffled unless ``no_randomize=True``; a string
may name several servers separated by commas."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

import jetstream_sync
from tests.fixtures.server import NatsServer

CLIENTS = 30


@pytest.fixture(scope="module")
def three_servers() -> Iterator[list[NatsServer]]:
    """Three unrelated core-NATS servers (no cluster: only the given URLs are known)."""
    servers = [NatsServer(jetstream=False).start() for _ in range(3)]
    yield servers
    for server in servers:
        server.stop()


def _first_servers(urls: list[str], **options: object) -> Counter[str]:
    """Which server each of CLIENTS clients given ``urls`` connected to."""
    landed: Counter[str] = Counter()
    for _ in range(CLIENTS):
        with jetstream_sync.connect(urls, **options) as nc:
            landed[nc.connected_url] += 1
    return landed


def test_clients_given_the_same_list_spread_over_the_servers(three_servers):
    """By default the pool is shuffled: 30 clients do not all land on the first server."""
    urls = [server.url for server in three_servers]
    landed = _first_servers(urls)
    # All 30 on one server has a chance of 3 * (1/3)**30 with a fair shuffle.
    assert len(landed) > 1, landed


def test_no_randomize_keeps_the_given_order(three_servers):
    """no_randomize=True: every client connects to the first server of its list."""
    urls = [server.url for server in three_servers]
    assert _first_servers(urls, no_randomize=True) == Counter({urls[0]: CLIENTS})
    reordered = urls[2:] + urls[:2]
    assert _first_servers(reordered, no_randomize=True) == Counter({reordered[0]: CLIENTS})


def test_a_comma_separated_string_names_several_servers(three_servers):
    """``connect("nats://a, nats://b")`` (how nats.go, the NATS CLI and ``NATS_URL`` name a
    cluster) is the list of both; empty items are skipped."""
    urls = [server.url for server in three_servers]
    with jetstream_sync.connect(f"{urls[1]}, ,{urls[0]},", no_randomize=True) as nc:
        assert nc.connected_url == urls[1]
        assert nc.servers == [urls[1], urls[0]]
