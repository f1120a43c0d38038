"""examples/flask_app.py under gunicorn (2 prefork workers, with and without --preload):
1,000 real HTTP requests, every order acked and stored exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream_sync
from tests.fixtures.examples import EXAMPLES
from tests.fixtures.polling import wait_for
from tests.fixtures.sockets import free_port

pytest.importorskip("flask")
pytest.importorskip("gunicorn")

ORDERS = 1000
CLIENT_THREADS = 4
# No HTTP proxy from the environment between the test and the loopback server.
HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Gunicorn:
    """gunicorn serving the example from a temp dir, with only the package on the path."""

    def __init__(self, tmp_path: Path, nats_url: str, preload: bool) -> None:
        site = tmp_path / "site"
        site.mkdir()
        (site / "jetstream_sync").symlink_to(Path(jetstream_sync.__file__).resolve().parent)
        env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "PYTHONPATH")}
        env.update(PYTHONPATH=str(site), NATS_URL=nats_url)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = "flask_app:create_app(connect_now=True)" if preload else "flask_app:app"
        self.log = tmp_path / "gunicorn.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable, "-m", "gunicorn", "--workers", "2",
                    "--bind", f"127.0.0.1:{self.port}", "--chdir", str(EXAMPLES),
                    *(["--preload"] if preload else []), app,
                ],
                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        """One HTTP request; the status and the JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with HTTP.open(req, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def stop(self) -> None:
        """SIGTERM (gunicorn's graceful stop) and wait."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(params=[False, True], ids=["lazy", "preload"])
def gunicorn(request, nats_server, tmp_path: Path) -> Iterator[Gunicorn]:
    """The example served by gunicorn with 2 workers, ready to answer."""
    server = Gunicorn(tmp_path, nats_server.url, preload=request.param)
    try:
        wait_for(
            lambda: server.call("GET", "/status")[0] == 200,
            timeout=30,
            interval=0.05,
            ignore=OSError,
            message=lambda: f"gunicorn did not answer:\n{server.log.read_text()}",
        )
        yield server
    finally:
        server.stop()


def _post_orders(server: Gunicorn, ids: list[int], answers: dict[int, dict]) -> None:
    """POST each order once; each must be stored (201)."""
    for i in ids:
        status, body = server.call("POST", "/orders", {"order_id": str(i), "qty": i})
        assert status == 201, (i, status, body)
        answers[i] = body


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_every_request_is_acked_and_stored_once(gunicorn, nats_server, request):
    """1,000 POSTs from 4 threads over 2 prefork workers: each worker connected in its
    own process (after the fork), every order stored exactly once under its msg_id."""
    answers: dict[int, dict] = {}
    threads = [
        threading.Thread(target=_post_orders, args=(gunicorn, list(range(t, ORDERS, 4)), answers))
        for t in range(CLIENT_THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == list(range(ORDERS))
    workers = {a["pid"] for a in answers.values()}
    assert len(workers) == 2 and gunicorn.process.pid not in workers
    # each worker connected itself; with --preload, after dropping the master's client
    preload = request.node.callspec.params["gunicorn"]
    for _ in range(20):
        status = gunicorn.call("GET", "/status")[1]
        assert status["connected_in"] == status["pid"] in workers
        assert status["inherited_from"] == (gunicorn.process.pid if preload else None)
    # a retried request is answered as a duplicate with the first copy's sequence
    status, again = gunicorn.call("POST", "/orders", {"order_id": "7", "qty": 7})
    assert status == 200 and again["duplicate"] and again["seq"] == answers[7]["seq"]
    assert gunicorn.call("POST", "/orders", {"qty": 1})[0] == 400
    with jetstream_sync.connect(nats_server.url) as nc:
        stream = nc.jetstream().stream("ORDERS")
        state = stream.info().state
        assert (state.first_seq, state.last_seq, state.messages) == (1, ORDERS, ORDERS)
        for i, answer in answers.items():
            msg = stream.get_msg(answer["seq"])
            assert msg.headers["Nats-Msg-Id"] == f"order-{i}"
            assert json.loads(msg.data) == {"order_id": str(i), "qty": i}
