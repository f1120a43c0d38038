"""examples/django_orders: Django's test client and management commands against a real server."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import django
import pytest

import jetstream_sync
from tests.fixtures.ctrl_c import ctrl_c_reaches_children
from tests.fixtures.examples import EXAMPLES, run_example
from tests.fixtures.polling import wait_for
from tests.fixtures.sockets import free_port

PROJECT = EXAMPLES / "django_orders"


@pytest.fixture(scope="module")
def django_project() -> Iterator[None]:
    """Django set up in this process on the example's settings, as its test runner does."""
    from django.conf import settings
    from django.test.utils import setup_test_environment, teardown_test_environment

    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(PROJECT))
        mp.setenv("DJANGO_SETTINGS_MODULE", "orders_site.settings")
        django.setup()
        assert settings.ROOT_URLCONF == "orders_site.urls"
        setup_test_environment()
        yield
        teardown_test_environment()


@pytest.fixture
def nats_settings(django_project, nats_server) -> Iterator[str]:
    """``settings.NATS_URL`` pointing at a fresh server; the process's client closed after."""
    from django.test import override_settings
    from orders import nats_client

    with override_settings(NATS_URL=nats_server.url):
        yield nats_server.url
        nats_client.close_client()


def _post(client, order, **headers) -> tuple[int, dict]:
    response = client.post(
        "/orders/", data=json.dumps(order), content_type="application/json", headers=headers
    )
    return response.status_code, response.json()


def _command(name: str, *args: str) -> tuple[str, str]:
    from django.core.management import call_command

    out, err = io.StringIO(), io.StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_view_publishes_and_the_command_consumes(nats_settings):
    """POST /orders/ answers with the PubAck's seq; consume_orders prints and acks them."""
    from django.test import Client

    assert _command("setup_orders")[0] == "stream ORDERS ready\n"
    client = Client()
    assert _post(client, {"item": "apple", "qty": 3}) == (
        201, {"stream": "ORDERS", "seq": 1, "duplicate": False}
    )  # fmt: skip
    assert _post(client, {"item": "pear", "qty": 1}, **{"Idempotency-Key": "k2"})[1]["seq"] == 2
    retried = _post(client, {"item": "pear", "qty": 1}, **{"Idempotency-Key": "k2"})
    assert retried == (201, {"stream": "ORDERS", "seq": 2, "duplicate": True})
    assert _post(client, {"item": "fig", "qty": 7})[1]["seq"] == 3

    out, err = _command("consume_orders", "--count", "2")
    assert [json.loads(line) for line in out.splitlines()] == [
        {"seq": 1, "order": {"item": "apple", "qty": 3}},
        {"seq": 2, "order": {"item": "pear", "qty": 1}},
    ]
    assert err == "consumed 2 orders\n"
    out, err = _command("consume_orders", "--idle", "0.5")
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [3]
    assert err == "consumed 1 orders\n"

    with jetstream_sync.connect(nats_settings) as nc:
        info = nc.jetstream().consumer_info("ORDERS", "order-processor")
        assert (info.num_pending, info.num_ack_pending) == (0, 0)


def test_bad_bodies_are_400_and_publish_nothing(nats_settings):
    """A body that is not a JSON object is refused before anything is sent."""
    from django.test import Client

    _command("setup_orders")
    client = Client()
    assert client.post("/orders/", data="{nope", content_type="application/json").status_code == 400
    assert _post(client, [1, 2])[0] == 400
    assert client.get("/orders/").status_code == 405
    with jetstream_sync.connect(nats_settings) as nc:
        assert nc.jetstream().stream("ORDERS").info().state.messages == 0


def test_an_unreachable_server_is_a_503(django_project, nats_server):
    """With NATS down, the view answers 503 instead of failing the whole request."""
    from django.test import Client, override_settings
    from orders import nats_client

    url = nats_server.url
    nats_server.stop()
    with override_settings(NATS_URL=url, NATS_TIMEOUT=0.5):
        status, body = _post(Client(), {"item": "apple"})
        nats_client.close_client()
    assert (status, body) == (503, {"error": "orders unavailable: NoServersError"})


def test_no_stream_is_a_503(nats_settings):
    """Before setup_orders created the stream, an order is refused with 503, not lost."""
    from django.test import Client

    assert _post(Client(), {"item": "apple"}) == (
        503, {"error": "orders unavailable: NoRespondersError"}
    )  # fmt: skip


def _publish_in_child(queue) -> None:
    from django.test import Client

    status, body = _post(Client(), {"item": "from the child"})
    queue.put((status, body))


def test_a_forked_child_makes_its_own_client(nats_settings):
    """After a fork, the child connects anew instead of using its parent's socket."""
    from django.test import Client
    from orders import nats_client

    _command("setup_orders")
    assert _post(Client(), {"item": "parent"})[1]["seq"] == 1
    parent_client = nats_client.get_client()
    queue = multiprocessing.get_context("fork").SimpleQueue()
    child = multiprocessing.get_context("fork").Process(target=_publish_in_child, args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert queue.get() == (201, {"stream": "ORDERS", "seq": 2, "duplicate": False})
    assert nats_client.get_client() is parent_client and parent_client.is_connected
    assert _post(Client(), {"item": "parent again"})[1]["seq"] == 3


def test_manage_py_runs_from_elsewhere_and_connects_only_when_needed(nats_server, tmp_path: Path):
    """manage.py check imports everything without a server; the commands run as subprocesses."""
    url = nats_server.url
    down = {"NATS_URL": "nats://127.0.0.1:1", "NATS_TIMEOUT": "0.5"}
    checked = run_example("django_orders/manage.py", ["check"], cwd=tmp_path, env=down)
    assert checked.returncode == 0, checked.stderr  # a connection at import would fail here

    up = {"NATS_URL": url}
    setup = run_example("django_orders/manage.py", ["setup_orders"], cwd=tmp_path, env=up)
    assert setup.stdout == "stream ORDERS ready\n", setup.stderr
    with jetstream_sync.connect(url) as nc:
        nc.jetstream().publish("orders.new", b'{"item": "kiwi"}')
    consumed = run_example(
        "django_orders/manage.py", ["consume_orders", "--idle", "0.5"], cwd=tmp_path, env=up
    )
    assert consumed.returncode == 0, consumed.stderr
    assert json.loads(consumed.stdout) == {"seq": 1, "order": {"item": "kiwi"}}
    assert consumed.stderr == "consumed 1 orders\n"


def _stop_runserver(server: subprocess.Popen[bytes], log: Path) -> None:
    """Ctrl-C, as a developer stops it; a server still running after 60 s dumps its threads
    (SIGABRT under PYTHONFAULTHANDLER) into ``log`` and fails the test with it."""
    server.send_signal(signal.SIGINT)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        server.send_signal(signal.SIGABRT)
        server.wait(30)
        pytest.fail(f"runserver did not stop on SIGINT in 60 s:\n{log.read_text()[-8000:]}")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_runserver_serves_concurrent_requests(nats_server, tmp_path: Path):
    """manage.py runserver (a thread per request): 40 POSTs, 10 at a time, share one client."""
    with jetstream_sync.connect(nats_server.url) as nc:
        nc.jetstream().create_stream(name="ORDERS", subjects=["orders.>"])
    port = free_port()
    # NATS_TIMEOUT: a loaded CI machine must not turn a slow PubAck into a 503 here;
    # PYTHONFAULTHANDLER: a server that does not stop dumps its threads on SIGABRT.
    env = {**os.environ, "NATS_URL": nats_server.url, "PYTHONPATH": str(EXAMPLES.parent),
           "NATS_TIMEOUT": "30", "PYTHONFAULTHANDLER": "1"}  # fmt: skip
    log = tmp_path / "runserver.log"
    with open(log, "wb") as out, ctrl_c_reaches_children():
        server = subprocess.Popen(
            [sys.executable, str(PROJECT / "manage.py"), "runserver", "--noreload",
             f"127.0.0.1:{port}"],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    http = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def post(i: int) -> int:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/orders/", data=json.dumps({"item": str(i)}).encode(),
            method="POST", headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with http.open(req, timeout=30) as response:
            return json.loads(response.read())["seq"]

    try:
        wait_for(lambda: post(-1), timeout=60, interval=0.1, ignore=OSError,
                 message=lambda: log.read_text())  # fmt: skip
        with ThreadPoolExecutor(10) as pool:
            seqs = sorted(pool.map(post, range(40)))
    finally:
        _stop_runserver(server, log)
    assert seqs == list(range(2, 42))  # after the warm-up's 1
