"""The wait mode: chosen once at connect (option, environment, detection), refused if it
cannot work."""

from __future__ import annotations

import logging

import pytest

import jetstream_sync
from jetstream_sync._connection import read_role as _read_role
from jetstream_sync._connection import wait as _wait


def test_default_is_threads_when_nothing_is_patched(nc):
    """Without gevent or eventlet patching anything, the client uses OS threads."""
    assert nc.wait_mode == "threads"


@pytest.mark.parametrize("how", ["option", "environment"])
def test_cooperative_mode_works_on_plain_threads(shared_server, monkeypatch, how):
    """wait="cooperative" (or JETSTREAM_SYNC_WAIT) with nothing patched: requests, JetStream, KV."""
    options = {"wait": "cooperative"} if how == "option" else {}
    if how == "environment":
        monkeypatch.setenv(_wait.ENV_VAR, "cooperative")
    with jetstream_sync.connect(shared_server.url, **options) as nc:
        assert nc.wait_mode == "cooperative"
        nc.subscribe("wait.mode.echo", cb=lambda msg: msg.respond(msg.data))
        assert [nc.request("wait.mode.echo", str(i)).data for i in range(50)] == [
            str(i).encode() for i in range(50)
        ]
        js = nc.jetstream()
        js.create_stream(name=f"WAITMODE_{how}", subjects=[f"wait.mode.{how}"])
        futures = [js.publish_async(f"wait.mode.{how}", b"x") for _ in range(2000)]
        js.publish_async_completed(timeout=30)
        assert [f.result().seq for f in futures] == list(range(1, 2001))
        assert js.publish(f"wait.mode.{how}", b"y").seq == 2001
        assert nc._connection._reader.role.round_trips == 0  # noqa: SLF001 - never the C wait


def test_threads_option_beats_the_environment(shared_server, monkeypatch):
    """The connect() option overrides JETSTREAM_SYNC_WAIT."""
    monkeypatch.setenv(_wait.ENV_VAR, "cooperative")
    with jetstream_sync.connect(shared_server.url, wait="threads") as nc:
        assert nc.wait_mode == "threads"


@pytest.mark.parametrize(("value", "error"), [("greenlets", ValueError), (1, TypeError)])
def test_a_bad_option_is_refused_before_connecting(value, error):
    """A wait option that is not a mode is refused before any connection is tried."""
    with pytest.raises(error, match="wait must"):
        jetstream_sync.connect("nats://127.0.0.1:1", wait=value)


def test_a_bad_environment_value_is_refused(monkeypatch):
    """JETSTREAM_SYNC_WAIT holding something else than a mode is refused, naming it."""
    monkeypatch.setenv(_wait.ENV_VAR, "fast")
    with pytest.raises(ValueError, match="JETSTREAM_SYNC_WAIT must be one of"):
        jetstream_sync.connect("nats://127.0.0.1:1")


def test_the_timeout_text_is_rounded(nc):
    """A request's timeout reads as the caller gave it, not a float's full repr."""
    nc.subscribe("wait.mode.silent")
    with pytest.raises(jetstream_sync.TimeoutError, match=r"within 0\.2 s$"):
        nc.request("wait.mode.silent", b"", timeout=0.2000001)


def test_a_reader_that_fails_is_logged_and_fails_waiting_calls(shared_server, monkeypatch, caplog):
    """A bug in the reader ends the client at once: logged at ERROR, a waiting call fails
    (ConnectionClosedError, not its timeout)."""
    with jetstream_sync.connect(shared_server.url, wait="cooperative") as nc:
        nc.subscribe("wait.mode.quiet")

        def broken() -> None:
            raise RuntimeError("a bug in the reader")

        monkeypatch.setattr(_read_role, "pause", broken)
        with caplog.at_level(logging.ERROR, logger="jetstream_sync"):
            with pytest.raises(jetstream_sync.ConnectionClosedError):
                nc.request("wait.mode.quiet", b"", timeout=30)
        failed = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert failed and "reader thread failed" in failed[0].getMessage()
        assert "a bug in the reader" in str(failed[0].exc_info[1])
