"""A Spark Connect server from the pyspark wheel, on loopback, for ``python -m benchmarks spark``.

The test suite has its own launcher (``tests/fixtures/spark.py``), which needs
pytest; this one needs only pyspark and Java. The server runs ``local[2]``
with the repository on its Python workers' ``PYTHONPATH``, writes its pid file
and logs in a directory of its own, and is stopped by that pid file.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from .server import free_port

START_TIMEOUT = 180.0  # seconds for the server's port to accept connections


class ConnectServer:
    """One Spark Connect server; a context manager.

    Args:
        directory: where its pid file and logs go.
        master: the Spark master it runs.
    """

    def __init__(self, directory: Path, master: str = "local[2]") -> None:
        import pyspark

        self.directory = directory
        self.master = master
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self._sbin = Path(pyspark.__file__).resolve().parent / "sbin"
        self._env = {
            **os.environ,
            "SPARK_PID_DIR": str(directory),
            "SPARK_LOG_DIR": str(directory),
            "SPARK_IDENT_STRING": "jetstream-sync-bench",
        }

    def _listening(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def pid(self) -> int | None:
        """The server's pid from its pid file, or None once it is gone."""
        files = list(self.directory.glob("*.pid"))
        return int(files[0].read_text().strip()) if files else None

    def __enter__(self) -> ConnectServer:
        """Start it and wait until its port accepts connections.

        Raises:
            RuntimeError: it did not listen within ``START_TIMEOUT`` seconds (with its log).
        """
        subprocess.run(
            [
                str(self._sbin / "start-connect-server.sh"),
                "--master",
                self.master,
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                f"spark.connect.grpc.binding.port={self.port}",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.sql.shuffle.partitions=4",
                "--conf",
                f"spark.executorEnv.PYTHONPATH={os.environ.get('PYTHONPATH', '')}",
            ],  # fmt: skip
            env=self._env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not self._listening():  # a port to poll: no event to wait on
            if time.monotonic() > deadline:
                log = "\n".join(
                    p.read_text(errors="replace")[-3000:] for p in self.directory.glob("*.out")
                )
                self.__exit__()
                raise RuntimeError(f"the Spark Connect server did not listen:\n{log}")
            time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop it by its pid file and wait for the process to end."""
        pid = self.pid()
        if pid is None:
            return
        subprocess.run(
            [str(self._sbin / "stop-connect-server.sh")],
            env=self._env,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
