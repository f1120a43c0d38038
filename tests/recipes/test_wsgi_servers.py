"""examples/wsgi_app.py under real WSGI servers: gunicorn's sync, gthread and gevent
workers (with and without --preload), uWSGI with gevent and its monkey-patch, with
threads, and with neither (its defaults, where ``--enable-threads`` is off). 200
requests, 50 at a time, over 2 worker processes; each request publishes to JetStream,
makes a request/reply to a responder of its own worker and reads a Key-Value entry: all
succeed. And a client made at import in uWSGI's master is refused in its workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import jetstream_sync
from tests.fixtures.examples import EXAMPLES
from tests.fixtures.polling import wait_for
from tests.fixtures.sockets import free_port

REQUESTS = 200
AT_ONCE = 50
HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _gunicorn(worker: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gunicorn", "--workers", "2", "-k", worker, *extra,
            "--bind", "127.0.0.1:{port}", "wsgi_app:app"]  # fmt: skip


def _uwsgi(*extra: str) -> list[str]:
    # Its workers fork from C: no os.register_at_fork handler runs in them.
    return [str(Path(sys.executable).with_name("uwsgi")), "--master", "--processes", "2", *extra,
            "--die-on-term", "--need-app", "--virtualenv", sys.prefix, "--listen", "128",
            "--http-socket", "127.0.0.1:{port}", "--wsgi-file", str(EXAMPLES / "wsgi_app.py"),
            "--callable", "app", "--disable-logging"]  # fmt: skip


SERVERS = {
    "gunicorn-sync": ("threads", _gunicorn("sync")),
    "gunicorn-gthread": ("threads", _gunicorn("gthread", "--threads", "8")),
    "gunicorn-gevent": ("cooperative", _gunicorn("gevent", "--worker-connections", "100")),
    "gunicorn-gevent-preload": ("cooperative", _gunicorn("gevent", "--preload")),
    "uwsgi-gevent": ("cooperative", _uwsgi("--gevent", "100", "--gevent-early-monkey-patch")),
    "uwsgi-threads": ("threads", _uwsgi("--threads", "8", "--enable-threads")),
    "uwsgi-default": ("threads", _uwsgi()),
    "uwsgi-threads-without-enable-threads": ("threads", _uwsgi("--threads", "4")),
}


class Server:
    """A WSGI server process serving examples/wsgi_app.py on a free port."""

    def __init__(self, command: list[str], nats_url: str, tmp_path: Path) -> None:
        self.port = free_port()
        self.log = tmp_path / "server.log"
        repo = str(EXAMPLES.parent)
        env = {**os.environ, "NATS_URL": nats_url, "PYTHONPATH": f"{EXAMPLES}:{repo}"}
        with open(self.log, "wb") as log:
            # A session of its own: stop() ends every process of the server's group.
            self.process = subprocess.Popen(
                [part.format(port=self.port) for part in command],
                cwd=EXAMPLES, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def post(self, body: str) -> dict:
        """One POST; its JSON answer (an HTTP error is raised)."""
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/", data=body.encode(), method="POST"
        )
        with HTTP.open(req, timeout=30) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        """SIGTERM and wait (kill if it hangs), then kill what is left of its process group:
        a uWSGI worker forked from C while a thread of the master held the GIL or a lock
        can outlive its master (one was found waiting for the GIL an hour after a run)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:  # the group is empty: nothing outlived the server
            pass


@pytest.fixture
def web_state(nats_server) -> Iterator[jetstream_sync.JetStreamContext]:
    """The stream and the Key-Value bucket the app uses."""
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="WEB", subjects=["web.orders"])
        js.create_key_value(bucket="web").put("greeting", b"hello")
        yield js


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", list(SERVERS))
def test_every_request_succeeds(name, nats_server, web_state, tmp_path):
    """200 requests, 50 at a time: each publishes, gets its echo and reads KV, in 2 workers."""
    mode, command = SERVERS[name]
    pytest.importorskip("gevent" if "gevent" in name else "gunicorn")
    if name.startswith("uwsgi") and not Path(command[0]).exists():
        pytest.skip("uwsgi is not installed")
    server = Server(command, nats_server.url, tmp_path)
    try:
        wait_for(
            lambda: server.post("warm-up"),
            timeout=60, interval=0.1, ignore=(OSError, urllib.error.HTTPError),
            message=lambda: f"{name} did not answer:\n{server.log.read_text()}",
        )  # fmt: skip
        with ThreadPoolExecutor(AT_ONCE) as pool:
            answers = list(pool.map(server.post, [f"order-{i}" for i in range(REQUESTS)]))
    except OSError as exc:
        raise AssertionError(f"{name}: {exc!r}; its log:\n{server.log.read_text()}") from exc
    finally:
        server.stop()
    assert all(a["echo"] and a["greeting"] == "hello" for a in answers)
    assert {a["mode"] for a in answers} == {mode}
    workers = {a["pid"] for a in answers}
    assert 1 <= len(workers) <= 2 and server.process.pid not in workers
    assert len({a["seq"] for a in answers}) == REQUESTS
    assert web_state.stream("WEB").info().state.messages == REQUESTS + 1  # and the warm-up


IMPORT_TIME_APP = """
import json, os
import jetstream_sync

nc = jetstream_sync.connect(os.environ["NATS_URL"])  # at import: in uWSGI's master


def app(environ, start_response):
    environ["wsgi.input"].read()  # unread, uWSGI would reset the connection
    try:
        nc.publish("uwsgi.import", b"from a worker")
        nc.flush(timeout=5)
        answer = {"error": None}
    except Exception as exc:
        answer = {"error": type(exc).__name__, "connected": nc.is_connected}
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(answer).encode()]
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_uwsgi_refuses_a_client_made_at_import_in_its_master(nats_server, tmp_path):
    """uWSGI without --lazy-apps imports the app in its master and forks the workers
    from C (no at-fork handler runs): a worker's publish through the master's client
    raises ForkedClientError, and nothing of it reaches the server.

    With --enable-threads: without it the master never gives up the GIL once the app is
    imported, so a thread of the client made there that still wanted it (one just
    started, say) waits for good, and every worker forked then hangs at its first line,
    asked to hand over the GIL (both workers did in a 3.12 gate: app-servers.md)."""
    uwsgi = Path(sys.executable).with_name("uwsgi")
    if not uwsgi.exists():
        pytest.skip("uwsgi is not installed")
    (tmp_path / "import_time_app.py").write_text(IMPORT_TIME_APP)
    command = [
        part if part != str(EXAMPLES / "wsgi_app.py") else str(tmp_path / "import_time_app.py")
        for part in _uwsgi("--enable-threads")
    ]
    with jetstream_sync.connect(nats_server.url) as watcher:
        sub = watcher.subscribe("uwsgi.import")
        watcher.flush()
        server = Server(command, nats_server.url, tmp_path)
        try:
            first = wait_for(
                lambda: server.post("x"),
                timeout=60, interval=0.1, ignore=(OSError, urllib.error.HTTPError),
                message=lambda: f"uWSGI did not answer:\n{server.log.read_text()}",
            )  # fmt: skip
            answers = [first, *(server.post("x") for _ in range(5))]
        finally:
            server.stop()
        assert answers == [{"error": "ForkedClientError", "connected": False}] * 6
        watcher.publish("uwsgi.import", b"marker")  # what arrives first was sent first
        assert sub.next_msg(timeout=10).data == b"marker"
