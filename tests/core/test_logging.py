"""Logging: ``jetstream_sync.*`` loggers report connection events, silent unless configured."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import jetstream_sync
from jetstream_sync._log import logger, redact
from tests.fixtures.polling import wait_for


def _messages(caplog: pytest.LogCaptureFixture, level: int, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and r.name == name]


def _client_info(caplog: pytest.LogCaptureFixture) -> list[str]:
    return _messages(caplog, logging.INFO, "jetstream_sync.client")


def test_connect_disconnect_reconnect_and_close_are_logged_at_info(restartable_server, caplog):
    """Connect, disconnect, reconnect (server restarted) and close are INFO on .client."""
    caplog.set_level(logging.INFO, logger="jetstream_sync")
    url = restartable_server.url
    with jetstream_sync.connect(url, reconnect_time_wait=0.05):
        restartable_server.restart()
        wait_for(lambda: f"reconnected to {url}" in _client_info(caplog), timeout=15)
    info = _client_info(caplog)
    assert info[0].startswith(f"connected to {url} (nats-server ")
    assert any(m.startswith(f"disconnected from {url}: ") for m in info)
    assert info[-1] == f"closed the connection to {url}"


def test_lame_duck_mode_is_logged_at_info(restartable_server, caplog):
    """A server entering lame duck mode is an INFO record."""
    caplog.set_level(logging.INFO, logger="jetstream_sync")
    expected = f"server {restartable_server.url} entered lame duck mode"
    with jetstream_sync.connect(restartable_server.url):
        restartable_server.lame_duck()
        wait_for(lambda: expected in _client_info(caplog), timeout=10)


def test_giving_up_on_reconnecting_is_an_error(nats_server, caplog):
    """When every reconnect attempt failed, the client closes and says so at ERROR."""
    caplog.set_level(logging.INFO, logger="jetstream_sync")
    nc = jetstream_sync.connect(
        nats_server.url, max_reconnect_attempts=1, reconnect_time_wait=0.05, connect_timeout=0.5
    )
    nats_server.stop()
    expected = "NoServersError: reconnect attempts exhausted; the last attempt failed: "
    wait_for(
        lambda: any(
            m.startswith(expected)
            for m in _messages(caplog, logging.ERROR, "jetstream_sync.client")
        ),
        timeout=15,
    )
    assert nc.is_closed
    nc.close()


def test_a_slow_consumer_is_a_warning(nats_server, caplog):
    """A subscription whose queue overflows is reported at WARNING with its subject."""
    caplog.set_level(logging.WARNING, logger="jetstream_sync")
    with jetstream_sync.connect(nats_server.url) as nc:
        nc.subscribe("slow.logged", pending_msgs_limit=5)
        for _ in range(50):
            nc.publish("slow.logged", b"x")
        nc.flush()
        wait_for(
            lambda: any(
                m.startswith("SlowConsumerError") and "slow.logged" in m
                for m in _messages(caplog, logging.WARNING, "jetstream_sync.client")
            ),
            message=lambda: f"no slow consumer warning in {caplog.records}",
        )


def test_an_ordered_consumer_reset_is_a_warning(nats_server, caplog):
    """An ordered consumer whose server-side consumer vanished logs its reset at WARNING."""
    caplog.set_level(logging.WARNING, logger="jetstream_sync")
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(name="LOGORD", subjects=["logord.>"])
        js.publish("logord.a", b"1")
        oc = stream.ordered_consumer()
        assert [m.data for m in oc.fetch(1, timeout=5)] == [b"1"]
        for name in list(stream.consumer_names()):
            stream.delete_consumer(name)
        js.publish("logord.a", b"2")
        assert [m.data for m in wait_for(lambda: oc.fetch(1, timeout=1), timeout=15)] == [b"2"]
    warnings = _messages(caplog, logging.WARNING, "jetstream_sync.jetstream")
    assert any(m.startswith("ordered consumer on LOGORD reset: ") for m in warnings), warnings


def test_no_credentials_in_any_record(auth_server, caplog):
    """With user:pass in the URL, no record of a connect/reconnect cycle carries the password."""
    caplog.set_level(logging.DEBUG, logger="jetstream_sync")
    url = f"nats://alice:s3cret@127.0.0.1:{auth_server.port}"
    with jetstream_sync.connect(url, reconnect_time_wait=0.05) as nc:
        auth_server.restart()
        wait_for(lambda: nc.stats.reconnects == 1, timeout=15)
    logger("client").warning("a message carrying %s", url)  # a message built from a URL
    texts = [r.getMessage() for r in caplog.records]
    assert any("reconnected to" in t for t in texts)
    assert f"a message carrying nats://***@127.0.0.1:{auth_server.port}" in texts
    assert not [t for t in texts if "s3cret" in t or "alice" in t]


def test_the_connect_error_names_the_servers_without_credentials(nats_server):
    """NoServersError (often logged by applications) lists the URLs without user:pass@."""
    url = nats_server.url
    nats_server.stop()
    with pytest.raises(jetstream_sync.NoServersError) as caught:
        jetstream_sync.connect(url.replace("nats://", "nats://alice:s3cret@"), connect_timeout=0.5)
    assert f"could not connect to any server in ['{url}']" in str(caught.value)
    assert "s3cret" not in str(caught.value) and "alice" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nats://alice:s3cret@h:4222", "nats://***@h:4222"),
        ("tried ['tls://t0ken@a:1', 'nats://b:2']", "tried ['tls://***@a:1', 'nats://b:2']"),
        ("nats://127.0.0.1:4222 user@example.com", "nats://127.0.0.1:4222 user@example.com"),
    ],
)
def test_redact_removes_userinfo_from_urls_only(text, expected):
    """user:pass@ and token@ in URLs become ***@; other text is kept."""
    assert redact(text) == expected


def test_nothing_is_printed_by_default(nats_server, tmp_path):
    """A program that configures no logging prints nothing, even when warnings are logged."""
    script = textwrap.dedent(
        f"""
        import logging, threading
        import jetstream_sync

        slow = threading.Event()

        def on_error(exc):
            if isinstance(exc, jetstream_sync.SlowConsumerError):
                slow.set()

        assert logging.getLogger("jetstream_sync.client").isEnabledFor(logging.WARNING)
        with jetstream_sync.connect({nats_server.url!r}, error_cb=on_error) as nc:
            nc.subscribe("quiet", pending_msgs_limit=2)
            for _ in range(20):
                nc.publish("quiet", b"x")
            nc.flush()
            assert slow.wait(10), "no slow consumer"
        print("done")
        """
    )
    env = dict(os.environ, PYTHONPATH=str(Path(jetstream_sync.__file__).parent.parent))
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    assert done.stderr == ""
