"""jetstream_sync.testing.NatsServer: the dev server users and examples start."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import jetstream_sync
from jetstream_sync.testing import NatsServer, ServerStartError, find_nats_server
from tests.fixtures.polling import wait_for

PACKAGE_ROOT = Path(jetstream_sync.__file__).resolve().parent.parent


def _process_gone(pid: int) -> bool:
    """Whether no process (or only a zombie) has this pid."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: reaped between open and read
        return True


def _port_closed(port: int) -> bool:
    """Whether nothing accepts connections on 127.0.0.1:port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except OSError:
        return True
    return False


def _free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serves_jetstream_and_cleans_up_on_exit():
    """Inside the block the server serves JetStream; afterwards process, port and files are gone."""
    with NatsServer() as server:
        pid, port, workdir = server.pid, server.port, server.store_dir.parent
        assert server.url == f"nats://127.0.0.1:{port}"
        with jetstream_sync.connect(server.url) as nc:
            ctx = nc.jetstream()
            ctx.create_stream(name="T", subjects=["t.>"])
            assert ctx.publish("t.1", b"x").seq == 1
        assert any(server.store_dir.iterdir())
    assert pid is not None
    assert _process_gone(pid)
    assert _port_closed(port)
    assert not workdir.exists()
    assert server.pid is None and not server.running
    with pytest.raises(RuntimeError):
        server.url  # noqa: B018


def test_repr_has_single_spaces_before_during_and_after_a_run():
    """repr() names what is known, one space apart, with or without a server_name."""
    for server in (NatsServer(), NatsServer(server_name="n1")):
        assert "  " not in repr(server) and " >" not in repr(server)
        with server:
            shown = repr(server)
            assert "  " not in shown and f"127.0.0.1:{server.port}" in shown
            with jetstream_sync.connect(server.url) as nc:
                assert "  " not in repr(nc)
            assert repr(nc) == "<Client closed>"
        assert "  " not in repr(server)


def test_without_jetstream():
    """jetstream=False starts a core-NATS-only server."""
    with NatsServer(jetstream=False) as server, jetstream_sync.connect(server.url) as nc:
        assert not nc.server_info.get("jetstream")


def test_fixed_port_and_extra_args():
    """A requested port is used, and extra args reach the server (here: user/password)."""
    port = _free_port()
    with NatsServer(port=port, args=("--user", "alice", "--pass", "s3cret")) as server:
        assert server.port == port
        with pytest.raises(jetstream_sync.AuthorizationError):
            jetstream_sync.connect(server.url, allow_reconnect=False)
        with jetstream_sync.connect(server.url, user="alice", password="s3cret") as nc:
            assert nc.is_connected


def test_given_store_dir_is_kept_and_reused(tmp_path: Path):
    """A store_dir passed in survives stop(), so a second server sees the first one's streams."""
    store = tmp_path / "store"
    with NatsServer(store_dir=store) as server, jetstream_sync.connect(server.url) as nc:
        nc.jetstream().create_stream(name="KEPT", subjects=["kept"])
        nc.jetstream().publish("kept", b"1")
    assert store.is_dir()
    with NatsServer(store_dir=store) as server, jetstream_sync.connect(server.url) as nc:
        assert nc.jetstream().stream("KEPT").info().state.messages == 1


def test_non_ascii_and_control_characters_reach_the_config(tmp_path: Path):
    """Credentials and directories with non-ASCII or control characters (a home directory
    named josé, a password with a tab) are written so nats-server reads them back as given."""
    password = 'pässwörd "quoted" back\\slash\ttab\x01'
    with NatsServer(
        user="jösé", password=password, store_dir=tmp_path / "störe", directory=tmp_path / "josé"
    ) as server:
        with pytest.raises(jetstream_sync.AuthorizationError):
            jetstream_sync.connect(
                server.url, user="jösé", password="pässwörd", allow_reconnect=False
            )
        with jetstream_sync.connect(server.url, user="jösé", password=password) as nc:
            nc.jetstream().create_stream(name="UNICODE", subjects=["unicode"])
    assert (tmp_path / "störe" / "jetstream").is_dir()


def test_start_twice_and_bad_port():
    """A second start() raises; a port outside 1..65535 is rejected before anything runs."""
    with NatsServer() as server, pytest.raises(RuntimeError, match="already started"):
        server.start()
    with pytest.raises(ValueError, match="port"):
        NatsServer(port=70000)


def test_failed_start_reports_the_log_and_leaves_nothing():
    """A server that cannot start raises ServerStartError with its log, and cleans up."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = NatsServer(port=taken.getsockname()[1])
        with pytest.raises(ServerStartError, match="address already in use"):
            server.start(timeout=10)
    assert not server.running


def test_binary_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """$NATS_SERVER_BIN wins; when it names no executable, FileNotFoundError says so."""
    real = find_nats_server()
    monkeypatch.setenv("NATS_SERVER_BIN", real)
    assert find_nats_server() == real
    monkeypatch.setenv("NATS_SERVER_BIN", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="NATS_SERVER_BIN"):
        NatsServer()


def test_the_suites_fixture_servers_use_this_launchers_binary_and_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """tests/fixtures/server.py finds nats-server as this package does ($NATS_SERVER_BIN
    first) and fails with the one ServerStartError (also ``jetstream_sync.ServerStartError``)."""
    from tests.fixtures import server as fixture

    assert fixture.ServerStartError is ServerStartError is jetstream_sync.ServerStartError
    assert issubclass(ServerStartError, RuntimeError)
    chosen = tmp_path / "nats-server-chosen"
    chosen.symlink_to(find_nats_server())
    monkeypatch.setenv("NATS_SERVER_BIN", str(chosen))
    with fixture.NatsServer(jetstream=False, directory=tmp_path / "srv") as server:
        assert server.binary == str(chosen) and server.info["server_id"]
    monkeypatch.setenv("NATS_SERVER_BIN", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="NATS_SERVER_BIN"):
        fixture.NatsServer()


def test_starts_in_a_process_holding_more_than_1024_files():
    """A process with 1,100 files open starts a server (its pipe's descriptor is past what
    select() takes: it raised ValueError)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        if hard != resource.RLIM_INFINITY and hard < 1200:
            pytest.skip(f"the file limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with NatsServer() as server, jetstream_sync.connect(server.url) as nc:
            assert nc.request("$JS.API.INFO", b"", timeout=5).data
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_restart_kill_freeze_and_monitor(tmp_path: Path):
    """A server with credentials survives kill() and restart() on its port with its stream;
    freeze() silences it for the block only; monitor() reads its endpoints."""
    with NatsServer(user="alice", password="s3cret", store_dir=tmp_path / "store") as server:
        port = server.port
        assert server.auth_url == f"nats://alice:s3cret@127.0.0.1:{port}"
        with jetstream_sync.connect(server.auth_url) as nc:
            nc.jetstream().create_stream(name="KEEP", subjects=["keep"])
            nc.jetstream().publish("keep", b"1")
        server.kill()
        assert not server.running and server.pid is None
        assert _port_closed(port)
        server.restart()
        assert server.port == port and server.info["auth_required"] is True
        with server.freeze():
            with pytest.raises(OSError):
                server.monitor("varz", timeout=0.5)
        assert server.monitor("varz")["port"] == port
        with jetstream_sync.connect(server.auth_url) as nc:
            assert nc.jetstream().stream("KEEP").info().state.messages == 1


def test_lame_duck_ends_the_server_with_exit_code_0():
    """lame_duck() makes the server leave by itself; wait_exit() returns its exit code."""
    with NatsServer(jetstream=False, lame_duck_duration=30, lame_duck_grace_period=0.2) as server:
        pid = server.pid
        server.lame_duck()
        assert server.wait_exit(timeout=20) == 0
        assert pid is not None and _process_gone(pid) and not server.running


def test_owner_killed_after_a_restart_still_takes_the_server_along():
    """Each run has its watchdog: after restart(), the owner's SIGKILL still cleans up."""
    script = _OWNER.replace("NatsServer().start()", "NatsServer().start().restart()")
    owner = _run_owner(script.replace("AFTER", "import signal; signal.pause()"))
    try:
        started = _started(owner)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        _assert_cleaned_up(started)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def _run_owner(script: str) -> subprocess.Popen[str]:
    """Start a Python process running ``script`` with this package importable."""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


_OWNER = """
    import json, sys
    from jetstream_sync.testing import NatsServer
    server = NatsServer().start()
    print(json.dumps(dict(pid=server.pid, port=server.port,
                          workdir=str(server.store_dir.parent))), flush=True)
    AFTER
"""


def _started(owner: subprocess.Popen[str]) -> dict:
    """The pid, port and working directory the owner process printed."""
    assert owner.stdout is not None
    return json.loads(owner.stdout.readline())


def _assert_cleaned_up(started: dict) -> None:
    """The server process is gone, its port closed and its files removed."""
    wait_for(lambda: _process_gone(started["pid"]), timeout=20, message="server still runs")
    wait_for(lambda: not Path(started["workdir"]).exists(), timeout=20, message="files left")
    assert _port_closed(started["port"])


def test_owner_killed_with_sigkill_takes_the_server_along():
    """When the owning process dies by SIGKILL, the server stops and its files go."""
    owner = _run_owner(_OWNER.replace("AFTER", "import signal; signal.pause()"))
    try:
        started = _started(owner)
        assert not _process_gone(started["pid"])
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        _assert_cleaned_up(started)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_interpreter_exit_stops_the_server():
    """A server never stopped explicitly is stopped at interpreter exit."""
    owner = _run_owner(_OWNER.replace("AFTER", "pass"))
    started = _started(owner)
    assert owner.wait(30) == 0
    _assert_cleaned_up(started)


def test_a_temporary_server_starts_afresh_after_stop():
    """stop() of a server with a temporary directory forgets its OS-chosen port and files:
    the next start() is a new server (a requested port is asked for again)."""
    server = NatsServer(jetstream=False)
    first = server.start().port
    server.stop()
    squatter = socket.create_server(("127.0.0.1", first))  # the old port is taken meanwhile
    try:
        assert server.start().port != first
    finally:
        server.stop()
        squatter.close()


def test_a_forked_child_leaves_its_parents_server_alone():
    """A child forked after start() exits normally (stop() and the exit hook included)
    without hanging, and the parent's server keeps running with its files."""
    owner = _run_owner(_OWNER.replace("AFTER", _FORKING_CHILD))
    child = None
    try:
        started = _started(owner)
        child = _started(owner)["child"]
        wait_for(lambda: _process_gone(child), timeout=20, message="the child hangs")
        assert _started(owner) == {"exit": 0}
        assert owner.wait(30) == 0
        _assert_cleaned_up(started)
    finally:
        for pid in (child, owner.pid):
            if pid is not None and not _process_gone(pid):
                os.kill(pid, signal.SIGKILL)
        owner.wait()


_FORKING_CHILD = """import os, socket
    child = os.fork()
    if child == 0:
        server.stop()  # the parent's server: nothing to do here
        sys.exit(0)  # the exit hook stops nothing either
    print(json.dumps(dict(child=child)), flush=True)
    _, status = os.waitpid(child, 0)
    socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
    assert server.store_dir.parent.exists()
    print(json.dumps(dict(exit=os.waitstatus_to_exitcode(status))), flush=True)"""
