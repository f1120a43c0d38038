"""The test harness itself: real servers, cluster, TLS, the polling helper, the thread hook.

Checked with the official asyncio client (nats-py) and raw sockets only, never
with jetstream_sync.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.errors import NoStreamResponseError

from tests.fixtures.cluster import NatsCluster
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer, ServerStartError
from tests.fixtures.tls import TLSMaterial

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS_DIR.parent


# --------------------------------------------------------------------------
# Helpers


class Wire:
    """A raw NATS client connection: read lines, send bytes."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        """Connect to 127.0.0.1:port and read the server's INFO."""
        self.sock: socket.socket | ssl.SSLSocket = socket.create_connection(
            ("127.0.0.1", port), timeout=timeout
        )
        self.buffer = b""
        self.info = self.expect_info()

    def line(self) -> bytes:
        """Return the next protocol line, without CRLF (b"" once the server closed)."""
        while b"\r\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                rest, self.buffer = self.buffer, b""
                return rest
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def expect_info(self) -> dict[str, Any]:
        """Read a line that must be INFO and return its JSON."""
        line = self.line()
        assert line.startswith(b"INFO "), line
        return json.loads(line[5:])

    def upgrade_tls(self, context: ssl.SSLContext) -> None:
        """Wrap the socket in TLS (after INFO, as NATS does), checking the name 127.0.0.1."""
        self.sock = context.wrap_socket(self.sock, server_hostname="127.0.0.1")

    def connect(self, **fields: Any) -> bytes:
        """Send CONNECT with ``fields`` and a PING; return the server's reply line."""
        payload = {"verbose": False, "pedantic": False, "protocol": 1, **fields}
        self.sock.sendall(b"CONNECT " + json.dumps(payload).encode() + b"\r\nPING\r\n")
        return self.line()

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def run(coro: Any) -> Any:
    """Run one nats-py coroutine to completion."""
    return asyncio.run(coro)


async def _connect(servers: str | list[str], **options: Any) -> Any:
    """nats-py connection that fails fast instead of reconnecting."""
    return await nats.connect(
        servers, allow_reconnect=False, connect_timeout=5, max_reconnect_attempts=0, **options
    )


def _process_exists(pid: int) -> bool:
    """Whether a process with this pid exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------
# One server


def test_server_answers_info_with_jetstream(nats_server: NatsServer) -> None:
    """A started server answers INFO on its client port with jetstream true."""
    wire = Wire(nats_server.port)
    try:
        assert wire.info["jetstream"] is True
        assert wire.info["port"] == nats_server.port
        assert wire.connect() == b"PONG"
    finally:
        wire.close()
    assert nats_server.url == f"nats://127.0.0.1:{nats_server.port}"


def test_server_binds_loopback_and_serves_monitor(nats_server: NatsServer) -> None:
    """The server listens on 127.0.0.1 only and its monitor answers /varz and /jsz."""
    varz = nats_server.monitor("varz")
    assert varz["host"] == "127.0.0.1"
    assert varz["port"] == nats_server.port
    assert nats_server.monitor("jsz")["config"]["store_dir"].startswith(str(nats_server.store_dir))
    assert nats_server.healthy()


def test_nats_py_round_trip_on_shared_server(shared_server: NatsServer) -> None:
    """nats-py can publish, subscribe and use JetStream on the shared server."""

    async def main() -> tuple[bytes, int]:
        """The nats-py side of this test."""
        nc = await _connect(shared_server.url)
        try:
            sub = await nc.subscribe("fixtures.echo")
            await nc.publish("fixtures.echo", b"hello")
            msg = await sub.next_msg(timeout=5)
            account = await nc.jetstream().account_info()
            return msg.data, account.limits.max_streams
        finally:
            await nc.close()

    data, _ = run(main())
    assert data == b"hello"


def test_server_options_reach_the_server(tmp_path: Path) -> None:
    """max_payload, server_name and extra config lines end up in the running server."""
    server = NatsServer(
        directory=tmp_path,
        jetstream=False,
        server_name="opts",
        max_payload=4096,
        extra_config=["max_connections: 7"],
    )
    with server:
        assert server.info["max_payload"] == 4096
        assert server.info["server_name"] == "opts"
        assert not server.info.get("jetstream")
        assert server.monitor("varz")["max_connections"] == 7
    assert not server.running


def test_restart_keeps_port_and_stream_data(restartable_server: NatsServer) -> None:
    """restart() comes back on the same port with the stream's messages intact."""
    port, pid = restartable_server.port, restartable_server.pid

    async def write() -> None:
        """Create the stream and publish to it with nats-py."""
        nc = await _connect(restartable_server.url)
        js = nc.jetstream()
        await js.add_stream(name="KEEP", subjects=["keep.>"])
        for i in range(3):
            await js.publish(f"keep.{i}", f"m{i}".encode())
        await nc.close()

    async def read() -> tuple[int, bytes]:
        """Read the stream back with nats-py."""
        nc = await _connect(restartable_server.url)
        js = nc.jetstream()
        info = await js.stream_info("KEEP")
        msg = await js.get_msg("KEEP", seq=2)
        await nc.close()
        return info.state.messages, msg.data

    run(write())
    restartable_server.restart()
    assert restartable_server.port == port
    assert restartable_server.pid != pid
    assert run(read()) == (3, b"m1")


def test_stop_then_start_reuses_the_port(restartable_server: NatsServer) -> None:
    """stop() then start() comes back on the same port; keep_store=True also keeps the data."""
    port = restartable_server.port

    async def streams() -> list[str]:
        """Names of the streams the server has."""
        nc = await _connect(restartable_server.url)
        names = await nc.jetstream().streams_info()
        await nc.close()
        return [info.config.name for info in names]

    async def create() -> None:
        """Create one stream with nats-py."""
        nc = await _connect(restartable_server.url)
        await nc.jetstream().add_stream(name="KEPT", subjects=["kept"])
        await nc.close()

    run(create())
    restartable_server.stop(keep_store=True)
    restartable_server.start()
    assert restartable_server.port == port
    assert run(streams()) == ["KEPT"]
    restartable_server.stop()
    restartable_server.start()
    assert restartable_server.port == port
    assert run(streams()) == []


def test_start_waits_for_its_port_taken_while_down(restartable_server: NatsServer) -> None:
    """A restart whose port is briefly taken waits for it; one taken for good fails clearly."""
    port = restartable_server.port
    restartable_server.stop(keep_store=True)
    squatter = socket.create_server(("127.0.0.1", port))
    try:
        with pytest.raises(ServerStartError, match="stayed taken"):
            restartable_server.start(timeout=1)
        outcome: list[object] = []
        starter = threading.Thread(
            target=lambda: outcome.append(restartable_server.start(timeout=20)),
            name="starter",
        )
        refusals = restartable_server.log_text().count("address already in use")
        starter.start()
        wait_for(
            lambda: restartable_server.log_text().count("address already in use") > refusals,
            message="the second start never met the taken port",
        )
    finally:
        squatter.close()
    starter.join()
    assert outcome == [restartable_server]
    assert restartable_server.running and restartable_server.port == port


def test_kill_is_unclean_and_restart_recovers(restartable_server: NatsServer) -> None:
    """kill() SIGKILLs the process; restart() recovers the acknowledged messages."""

    async def write() -> None:
        """Create the stream and publish to it with nats-py."""
        nc = await _connect(restartable_server.url)
        js = nc.jetstream()
        await js.add_stream(name="CRASH", subjects=["crash"])
        await js.publish("crash", b"survives")
        await nc.close()

    async def read() -> bytes:
        """Read the stream back with nats-py."""
        nc = await _connect(restartable_server.url)
        msg = await nc.jetstream().get_msg("CRASH", seq=1)
        await nc.close()
        return msg.data

    run(write())
    pid = restartable_server.pid
    assert pid is not None
    restartable_server.kill()
    assert restartable_server.pid is None
    assert not _process_exists(pid)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", restartable_server.port), timeout=2).close()
    restartable_server.restart()
    assert run(read()) == b"survives"


def test_lame_duck_sends_ldm_then_exits(restartable_server: NatsServer) -> None:
    """lame_duck() makes the server announce ldm to clients, close them and exit."""
    wire = Wire(restartable_server.port)
    try:
        assert wire.connect() == b"PONG"
        restartable_server.lame_duck()
        lines = []
        while not lines or lines[-1]:  # until the server closes, 0.5 s after entering ldm
            lines.append(wire.line())
        infos = [json.loads(line[5:]) for line in lines if line.startswith(b"INFO ")]
        assert any(info.get("ldm") is True for info in infos), lines
    finally:
        wire.close()
    assert restartable_server.wait_exit(timeout=10) == 0
    restartable_server.restart()
    again = Wire(restartable_server.port)
    try:
        assert again.connect() == b"PONG"
    finally:
        again.close()


def test_stop_ends_the_process_and_removes_the_store() -> None:
    """stop() leaves no process, no listener and no files behind."""
    server = NatsServer().start()
    pid, port, directory = server.pid, server.port, server.directory
    assert pid is not None and _process_exists(pid)
    assert server.store_dir.is_dir()
    server.stop()
    assert server.pid is None and not server.running
    assert not _process_exists(pid)
    assert not directory.exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    server.stop()  # idempotent


def test_start_failure_reports_the_log(tmp_path: Path) -> None:
    """A server that cannot start raises ServerStartError quoting its log."""
    server = NatsServer(directory=tmp_path, extra_config=["this is { not valid"])
    with pytest.raises(ServerStartError, match="exited"):
        server.start(timeout=10)
    assert not server.running
    server.stop()


# --------------------------------------------------------------------------
# Authentication


def test_auth_server_rejects_a_wrong_password(auth_server: NatsServer) -> None:
    """The user/password server answers a wrong password with an authorization error."""
    wire = Wire(auth_server.port)
    try:
        assert wire.info.get("auth_required") is True
        reply = wire.connect(user=auth_server.user, **{"pass": "wrong"})
        assert reply.startswith(b"-ERR") and b"Authorization" in reply
    finally:
        wire.close()


def test_auth_server_accepts_the_right_password(auth_server: NatsServer) -> None:
    """The user/password server accepts its credentials, raw and through nats-py."""
    wire = Wire(auth_server.port)
    try:
        assert wire.connect(user=auth_server.user, **{"pass": auth_server.password}) == b"PONG"
    finally:
        wire.close()

    async def main() -> None:
        """The nats-py side of this test."""
        nc = await _connect(auth_server.auth_url)
        await nc.flush(timeout=5)
        await nc.close()

    run(main())


def test_token_server_checks_the_token(token_server: NatsServer) -> None:
    """The token server rejects a wrong token and accepts the right one."""
    wrong, right = Wire(token_server.port), Wire(token_server.port)
    try:
        assert wrong.connect(auth_token="nope").startswith(b"-ERR")
        assert right.connect(auth_token=token_server.token) == b"PONG"
    finally:
        wrong.close()
        right.close()


# --------------------------------------------------------------------------
# TLS


def test_tls_server_accepts_a_client_trusting_the_ca(tls_server: tuple[NatsServer, Path]) -> None:
    """The TLS server completes a verified handshake for a client trusting the generated CA."""
    server, ca = tls_server
    wire = Wire(server.port)
    try:
        assert wire.info["tls_required"] is True
        wire.upgrade_tls(ssl.create_default_context(cafile=str(ca)))
        assert wire.connect() == b"PONG"
    finally:
        wire.close()

    async def main() -> bool:
        """The nats-py side of this test."""
        nc = await _connect(server.url, tls=ssl.create_default_context(cafile=str(ca)))
        js_ok = bool(await nc.jetstream().account_info())
        await nc.close()
        return js_ok

    assert run(main())


def test_tls_server_is_not_trusted_without_the_ca(tls_server: tuple[NatsServer, Path]) -> None:
    """A client with only the system CAs rejects the throwaway certificate."""
    server, _ = tls_server
    wire = Wire(server.port)
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            wire.upgrade_tls(ssl.create_default_context())
    finally:
        wire.close()


@pytest.mark.tls
def test_tls_verify_requires_a_client_certificate(
    tmp_path: Path, tls_material: TLSMaterial
) -> None:
    """With tls_verify, a client certificate signed by the CA is required."""
    server = NatsServer(
        directory=tmp_path,
        jetstream=False,
        tls_cert=tls_material.server_cert,
        tls_key=tls_material.server_key,
        tls_ca=tls_material.ca_cert,
        tls_verify=True,
    )
    with server:
        context = ssl.create_default_context(cafile=str(tls_material.ca_cert))
        context.load_cert_chain(str(tls_material.client_cert), str(tls_material.client_key))
        good = Wire(server.port)
        try:
            good.upgrade_tls(context)
            assert good.connect() == b"PONG"
        finally:
            good.close()
        bad = Wire(server.port)
        try:
            with pytest.raises((ssl.SSLError, ConnectionError)):
                bad.upgrade_tls(ssl.create_default_context(cafile=str(tls_material.ca_cert)))
                bad.connect()  # TLS 1.3 reports the missing certificate on first read
        finally:
            bad.close()


# --------------------------------------------------------------------------
# Cluster


def test_cluster_forms_and_hosts_an_r3_stream(cluster: NatsCluster) -> None:
    """All three servers agree on a meta leader and an R3 stream gets a leader and 2 replicas."""
    names = {server.server_name for server in cluster.servers}
    assert len(cluster.urls) == 3 and len(names) == 3
    leaders = {server.monitor("jsz")["meta_cluster"]["leader"] for server in cluster.servers}
    assert len(leaders) == 1 and leaders <= names

    async def on_cluster(step: str) -> Any:
        """The nats-py side of this test: add the stream, ask for its leader, or publish."""
        nc = await _connect(cluster.urls)
        js = nc.jetstream()
        try:
            if step == "add":
                return await js.add_stream(name="R3", subjects=["r3.>"], num_replicas=3)
            if step == "leader":
                return (await js.stream_info("R3")).cluster.leader
            return await js.publish("r3.a", b"replicated"), await js.stream_info("R3")
        finally:
            await nc.close()

    run(on_cluster("add"))
    # On a loaded machine the new stream's leader election can outlast the
    # add's reply; a publish before it finds no responders.
    wait_for(lambda: run(on_cluster("leader")), timeout=30, message="R3 elected no leader")
    # Even once the info names the leader, the leader's interest in the stream's
    # subjects may not have reached the server this connection is on yet (it
    # subscribes after its election and tells the routes after that): no responders,
    # so nothing was stored and the publish may be sent again.
    ack, info = wait_for(
        lambda: run(on_cluster("publish")),
        timeout=30,
        ignore=NoStreamResponseError,
        message="no server routed the publish to the R3 stream's leader",
    )
    assert ack.seq == 1
    assert info.config.num_replicas == 3
    assert info.cluster.leader in names
    assert {peer.name for peer in info.cluster.replicas} == names - {info.cluster.leader}


def test_cluster_restarts_a_killed_follower(cluster: NatsCluster) -> None:
    """A killed non-leader comes back on its ports and the cluster forms again."""
    leader = cluster.leader()
    index = next(i for i, s in enumerate(cluster.servers) if s is not leader)
    follower = cluster.servers[index]
    port = follower.port
    cluster.kill(index)
    assert not follower.running
    cluster.restart(index)
    assert follower.running and follower.port == port

    async def main() -> None:
        """The nats-py side of this test."""
        nc = await _connect(follower.url)
        await nc.jetstream().account_info()
        await nc.close()

    run(main())


# --------------------------------------------------------------------------
# The polling helper


def test_wait_for_returns_the_first_truthy_value() -> None:
    """wait_for returns the predicate's first truthy result."""
    calls = iter([0, None, "", "ready"])
    assert wait_for(lambda: next(calls), timeout=5, interval=0.001) == "ready"


def test_wait_for_raises_with_the_message() -> None:
    """wait_for raises AssertionError carrying the message when time runs out."""
    with pytest.raises(AssertionError, match="never happened"):
        wait_for(lambda: False, timeout=0.05, message="never happened")


def test_wait_for_names_what_it_waited_for() -> None:
    """Without a message, the failure quotes the lambda's source or names the function."""
    with pytest.raises(AssertionError, match=r"condition not met: .*lambda: 1 == 2.*0\.05 s"):
        wait_for(lambda: 1 == 2, timeout=0.05)
    with pytest.raises(AssertionError, match="condition not met: _never"):
        wait_for(_never, timeout=0.05)


def _never() -> bool:
    """Never true."""
    return False


def test_wait_for_can_ignore_exceptions() -> None:
    """Ignored exceptions count as not yet and are named in the failure."""
    with pytest.raises(AssertionError, match="ConnectionRefusedError"):
        wait_for(_refuse, timeout=0.05, ignore=OSError)
    with pytest.raises(ZeroDivisionError):
        wait_for(lambda: 1 / 0, timeout=0.05, ignore=OSError)


def _refuse() -> None:
    """Raise ConnectionRefusedError."""
    raise ConnectionRefusedError("nobody home")


def test_thread_exceptions_can_be_expected(thread_exceptions: Any) -> None:
    """A test that expects a thread to raise takes the exception and still passes."""
    worker = threading.Thread(target=_refuse, name="expected-raiser")
    worker.start()
    worker.join()
    assert [type(exc) for exc in thread_exceptions.take()] == [ConnectionRefusedError]


# --------------------------------------------------------------------------
# The harness, seen from inside a pytest run (pytester, in a subprocess)

_INNER_THREAD_TESTS = """
import threading

import pytest


def _boom():
    '''Raise in a thread.'''
    raise ZeroDivisionError("boom in thread")


def _run(name):
    '''Run _boom in a thread called name and join it.'''
    worker = threading.Thread(target=_boom, name=name)
    worker.start()
    worker.join()


def test_thread_raises():
    '''Fails: its thread raised.'''
    _run("worker-in-test")


def test_quiet():
    '''Passes: its thread did not raise.'''
    threading.Thread(target=lambda: None).start()


@pytest.fixture
def raises_at_teardown():
    '''Runs a raising thread at teardown.'''
    yield
    _run("worker-in-teardown")


def test_teardown_thread_raises(raises_at_teardown):
    '''Passes, then errors at teardown.'''


def test_expected(thread_exceptions):
    '''Passes: the exception was expected and taken.'''
    _run("worker-expected")
    assert len(thread_exceptions.take()) == 1
"""


@pytest.fixture
def inner_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester dir with a copy of our conftest, able to import ``tests.fixtures``."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    )
    pytester.makeconftest((TESTS_DIR / "conftest.py").read_text())
    return pytester


def test_thread_exception_fails_the_test(inner_pytest: pytest.Pytester) -> None:
    """An exception escaping a thread fails its test (call) or errors it (teardown)."""
    inner_pytest.makepyfile(test_inner=_INNER_THREAD_TESTS)
    result = inner_pytest.runpytest_subprocess("-p", "no:cacheprovider", "-rA", timeout=120)
    result.assert_outcomes(passed=3, failed=1, errors=1)
    out = result.stdout.str()
    assert "FAILED test_inner.py::test_thread_raises" in out
    assert "ERROR test_inner.py::test_teardown_thread_raises" in out
    assert "ZeroDivisionError: boom in thread" in out
    assert "'worker-in-test'" in out and "'worker-in-teardown'" in out
    assert "PytestUnhandledThreadExceptionWarning" not in out


def test_leftover_servers_are_killed_at_session_end(
    inner_pytest: pytest.Pytester, tmp_path: Path
) -> None:
    """A server a test forgets to stop is dead by the time the session is over."""
    pid_file, alive_file = tmp_path / "pid", tmp_path / "alive"
    inner_pytest.makepyfile(
        test_leak=f"""
from pathlib import Path
from tests.fixtures.server import NatsServer

def test_forgets_to_stop():
    '''Starts a server and leaks it.'''
    server = NatsServer().start()
    Path({str(pid_file)!r}).write_text(str(server.pid))
"""
    )
    conftest = inner_pytest.path / "conftest.py"
    conftest.write_text(
        conftest.read_text()
        + f"""

def pytest_unconfigure(config):
    '''Record whether the leaked server still runs after the session finished.'''
    import os
    pid = int(Path({str(pid_file)!r}).read_text())
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    Path({str(alive_file)!r}).write_text(str(alive))
"""
    )
    result = inner_pytest.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1)
    assert alive_file.read_text() == "False"
    assert not _process_exists(int(pid_file.read_text()))


_INNER_DOC = """# Guide

A runnable block:

```python
import json, os, socket
host, port = os.environ["NATS_URL"].removeprefix("nats://").split(":")
with socket.create_connection((host, int(port)), timeout=5) as sock:
    info = json.loads(sock.recv(4096).split(b" ", 1)[1])
assert info["jetstream"] is True
print("connected")
```

A failing block:

```python
import sys
sys.stderr.write("doc-block-failure-marker\\n")
sys.exit(3)
```

Not run:

```python no-run
raise SystemExit(1)
```

````markdown
```python
raise SystemExit(2)
```
````

```text
not python
```
"""


def test_docs_runner_runs_each_python_block(inner_pytest: pytest.Pytester) -> None:
    """test_docs.py runs each ```python block, reports stderr, skips no-run and nested ones."""
    tests = inner_pytest.mkdir("tests")
    (inner_pytest.path / "conftest.py").rename(tests / "conftest.py")
    (tests / "docs").mkdir()  # where the runner sits in this repository: two below the root
    (tests / "docs" / "test_docs.py").write_text((TESTS_DIR / "docs" / "test_docs.py").read_text())
    docs = inner_pytest.mkdir("docs")
    (docs / "guide.md").write_text(_INNER_DOC)
    result = inner_pytest.runpytest_subprocess("-p", "no:cacheprovider", "-v", "tests")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "test_doc_block_runs[guide.md:5] PASSED" in out
    assert "test_doc_block_runs[guide.md:16] FAILED" in out
    assert "exited with status 3" in out and "doc-block-failure-marker" in out


def test_docs_runner_collects_nothing_without_blocks(inner_pytest: pytest.Pytester) -> None:
    """With no docs blocks, test_docs.py collects zero tests and no errors."""
    tests = inner_pytest.mkdir("tests")
    (inner_pytest.path / "conftest.py").rename(tests / "conftest.py")
    (tests / "docs").mkdir()  # where the runner sits in this repository: two below the root
    (tests / "docs" / "test_docs.py").write_text((TESTS_DIR / "docs" / "test_docs.py").read_text())
    inner_pytest.mkdir("docs")
    result = inner_pytest.runpytest_subprocess("-p", "no:cacheprovider", "tests")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.assert_outcomes()
