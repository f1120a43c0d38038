"""Suite-wide fixtures: real nats-servers, JetStream on the shared one, and thread failures.

Server fixtures yield ``fixtures.server.NatsServer`` objects (``.url``,
``.port``, ``.monitor_port``, ``.monitor("jsz")``, ``.restart()``, ``.kill()``,
``.lame_duck()``...). Tests using ``cluster`` or ``tls_server`` get the
``cluster`` / ``tls`` marker automatically, so ``-m "not cluster"`` works.

Under pytest-xdist (``make suite``: ``-n 4 --dist loadgroup``) every worker has its
own ``shared_server`` and its own temp dirs, and kills only its own servers at the end.
Tests sharing an expensive fixture run on one worker (``tests/fixtures/workers.py``):
every test of the ``spark`` session, every test of the session's ``cluster``, and the
tests of a module-scoped fixture.

JetStream fixtures work on ``shared_server``: ``nc`` (a client), ``js`` (its
context) and ``stream`` (a fresh stream capturing ``<name>.>``); a module that
needs other stream fields overrides ``stream_options``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync.jetstream.stream import Stream
from tests.fixtures.cluster import NatsCluster
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.faults import FAST, Events
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.proxy import FaultProxy
from tests.fixtures.server import NatsServer, kill_leftovers
from tests.fixtures.spark_classes import JVM_OPTIONS, finish, use_archive
from tests.fixtures.spark_home import spark_home
from tests.fixtures.tls import TLSMaterial, make_tls_material

pytest_plugins = ["pytester"]

# Every JVM the tests start (Spark sessions and their executors, Connect servers, the
# standalone daemons, spark-pipelines) inherits this: C1 compilation only and the serial
# collector. A test's JVM lives seconds to a minute, too short for C2's optimised code to
# repay compiling it, and on two cores the compiler and GC threads halved what is left for
# the tests (a Spark test module took twice the CPU without these). Before the first
# ``spark`` test the JVMs get Spark's class archive as well (``tests/fixtures/spark_classes.py``).
os.environ.setdefault("JAVA_TOOL_OPTIONS", JVM_OPTIONS)
# Spark's Python processes import pyspark from site-packages, where its bytecode is cached,
# not from the zip of its sources in pip's pyspark (tests/fixtures/spark_home.py).
if "SPARK_HOME" not in os.environ and (_home := spark_home()) is not None:
    os.environ["SPARK_HOME"] = str(_home)

# fixture name -> marker given to every test that uses it
_FIXTURE_MARKERS = {"cluster": "cluster", "tls_server": "tls", "tls_material": "tls"}


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, schedule tests that share a fixture onto one worker."""
    if config.pluginmanager.hasplugin("xdist"):
        from tests.fixtures.workers import WorkerPlan

        config.pluginmanager.register(WorkerPlan(), "jetstream_sync-worker-plan")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Join the thread making Spark's class archive, if this process started it."""
    finish()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Give a ``spark`` test's JVMs Spark's class archive once it is made (the first such
    test starts making it: ``tests/fixtures/spark_classes.py``)."""
    if item.get_closest_marker("spark") is not None:
        use_archive()
    return (yield)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by the server fixtures they use (``cluster``, ``tls``)."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        for fixture, marker in _FIXTURE_MARKERS.items():
            if fixture in names:
                item.add_marker(marker)


# --------------------------------------------------------------------------
# Exceptions escaping background threads fail the test.


class ThreadExceptions:
    """Collects exceptions that escape threads while one test runs."""

    def __init__(self) -> None:
        """Start empty."""
        self._lock = threading.Lock()
        self._caught: list[tuple[str, BaseException, str]] = []

    def hook(self, args: threading.ExceptHookArgs) -> None:
        """``threading.excepthook`` replacement: record, never print."""
        if args.exc_type is SystemExit:  # the default hook ignores it too
            return
        name = args.thread.name if args.thread is not None else "<unknown>"
        text = "".join(
            traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)
        )
        with self._lock:
            exc = args.exc_value if args.exc_value is not None else RuntimeError(args.exc_type)
            self._caught.append((name, exc, text))

    def take(self) -> list[BaseException]:
        """Return and forget the exceptions caught so far (to expect some in a test)."""
        with self._lock:
            caught, self._caught = self._caught, []
        return [exc for _, exc, _ in caught]

    def fail_if_any(self, when: str) -> None:
        """``pytest.fail`` with every caught traceback, if any were caught."""
        with self._lock:
            caught, self._caught = self._caught, []
        if caught:
            parts = [f"{len(caught)} exception(s) escaped background threads {when}:"]
            parts += [f"--- thread {name!r} ---\n{text}" for name, _, text in caught]
            pytest.fail("\n".join(parts), pytrace=False)


_THREAD_EXCEPTIONS = pytest.StashKey[ThreadExceptions]()


@pytest.fixture(autouse=True)
def _fail_on_thread_exceptions(request: pytest.FixtureRequest) -> Iterator[ThreadExceptions]:
    """Install the collecting excepthook around each test; fail at teardown if it caught any."""
    collector = ThreadExceptions()
    previous = threading.excepthook
    threading.excepthook = collector.hook
    request.node.stash[_THREAD_EXCEPTIONS] = collector
    try:
        yield collector
    finally:
        threading.excepthook = previous
    collector.fail_if_any("during the test or its teardown")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail the call phase of a passing test whose background threads raised."""
    result = yield
    collector = item.stash.get(_THREAD_EXCEPTIONS, None)
    if collector is not None:
        collector.fail_if_any("during the test")
    return result


@pytest.fixture
def thread_exceptions(_fail_on_thread_exceptions: ThreadExceptions) -> ThreadExceptions:
    """The collector, for tests that expect a thread to raise: call ``.take()``."""
    return _fail_on_thread_exceptions


# --------------------------------------------------------------------------
# Servers.


@pytest.fixture(scope="session", autouse=True)
def _kill_leftover_servers() -> Iterator[None]:
    """At session end, kill every nats-server a test or fixture left running."""
    yield
    kill_leftovers()


def _server(directory: Path, **options: object) -> NatsServer:
    """Start a NatsServer whose files live under ``directory``."""
    return NatsServer(directory=directory, **options).start()  # type: ignore[arg-type]


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A fresh JetStream server for one test."""
    server = _server(tmp_path / "nats-server")
    yield server
    server.stop()


#: The stream that stays on the shared server (see ``shared_server``).
KEEPER_STREAM = "SHARED_SERVER_KEEPER"


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One JetStream server for the whole session: use unique stream names, never restart it.

    It holds one stream of its own for the whole session, ``KEEPER_STREAM``. When an
    account's last file stream is deleted, nats-server removes the account's emptied
    ``streams`` directory from a goroutine of its own; a stream create that comes
    meanwhile (the next test's) fails with "error creating store for stream" (its log:
    ``mkdir .../streams: no such file or directory``; seen once in a fresh-clone run).
    A stream that stays keeps that directory from emptying.
    """
    server = _server(tmp_path_factory.mktemp("shared-server"))
    with jetstream_sync.connect(server.url) as client:
        client.jetstream().create_stream(name=KEEPER_STREAM, subjects=["shared-server.keeper"])
    yield server
    server.stop()


@pytest.fixture
def restartable_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A fresh JetStream server a test may restart, kill or put in lame duck mode.

    Lame duck: the grace period is 0.5 s and the duration 30 s (the minimum).
    """
    server = _server(tmp_path / "nats-server", lame_duck_duration=30.0, lame_duck_grace_period=0.5)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    """A formed 3-node JetStream cluster shared by the session (by the one pytest-xdist worker
    that runs every ``cluster`` test); use unique stream names, restart what you kill."""
    nodes = NatsCluster(3, directory=tmp_path_factory.mktemp("cluster")).start()
    yield nodes
    nodes.stop()


@pytest.fixture(autouse=True)
def _heal_cluster(request: pytest.FixtureRequest) -> None:
    """Before a test using ``cluster``, restart any node an earlier test left down."""
    if "cluster" in request.fixturenames:
        request.getfixturevalue("cluster").heal()


@pytest.fixture
def auth_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A JetStream server requiring user ``alice``, password ``s3cret`` (``.auth_url`` has them)."""
    server = _server(tmp_path / "nats-server", user="alice", password="s3cret")
    yield server
    server.stop()


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A JetStream server requiring token ``t0ken`` (``.token``, ``.auth_url``)."""
    server = _server(tmp_path / "nats-server", token="t0ken")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> TLSMaterial:
    """A throwaway CA with server (localhost, 127.0.0.1, ::1) and client certificates."""
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_server(tmp_path: Path, tls_material: TLSMaterial) -> Iterator[tuple[NatsServer, Path]]:
    """A TLS JetStream server (no client certs) and the CA path: ``server, ca = tls_server``."""
    server = NatsServer(
        directory=tmp_path / "nats-server",
        tls_cert=tls_material.server_cert,
        tls_key=tls_material.server_key,
    )
    server.tls = tls_material
    server.start()
    yield server, tls_material.ca_cert
    server.stop()


@pytest.fixture
def fault_proxy(shared_server: NatsServer) -> Iterator[FaultProxy]:
    """A TCP fault proxy in front of the shared server (``tests/fixtures/proxy.py``)."""
    with FaultProxy(shared_server.port) as proxy:
        yield proxy


@pytest.fixture
def events() -> Events:
    """The connection callbacks of the client under test (``tests/fixtures/faults.py``)."""
    return Events()


@pytest.fixture
def fault_client(fault_proxy: FaultProxy, events: Events) -> Iterator[jetstream_sync.Client]:
    """A client connected through ``fault_proxy`` with the fast fault options, its callbacks
    recorded in ``events``."""
    with jetstream_sync.connect(fault_proxy.url, **FAST, **events.callbacks()) as client:
        yield client


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    """A fake server (``tests/fixtures/fake_server.py``), stopped (threads joined) afterwards."""
    with FakeServer() as server:
        yield server


# --------------------------------------------------------------------------
# JetStream on the shared server.


@pytest.fixture
def nc(shared_server: NatsServer) -> Iterator[jetstream_sync.Client]:
    """A client connected to the shared server, closed afterwards."""
    with jetstream_sync.connect(shared_server.url) as client:
        yield client


@pytest.fixture
def js(nc: jetstream_sync.Client) -> jetstream_sync.JetStreamContext:
    """The JetStream context of ``nc``."""
    return nc.jetstream()


@pytest.fixture
def stream_name(
    request: pytest.FixtureRequest, js: jetstream_sync.JetStreamContext
) -> Iterator[str]:
    """A unique stream name (``test_pull.py``: ``PULL1A2B3C4D``); deleted afterwards if made."""
    module = request.module.__name__.rpartition(".")[2]
    name = unique_stream_name(module.removeprefix("test_").upper())
    yield name
    with contextlib.suppress(jetstream_sync.StreamNotFoundError):
        js.delete_stream(name)


@pytest.fixture
def stream_options() -> dict[str, Any]:
    """Extra ``create_stream`` fields for ``stream``: none; a module overrides this to add some."""
    return {}


@pytest.fixture
def stream(
    js: jetstream_sync.JetStreamContext, stream_name: str, stream_options: dict[str, Any]
) -> Stream:
    """A fresh stream named ``stream_name`` capturing ``<name>.>``, deleted afterwards."""
    return js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], **stream_options)


# --------------------------------------------------------------------------
# The command line.
