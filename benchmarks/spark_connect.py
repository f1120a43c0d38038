"""A Spark Connect server from the pyspark wheel, on loopback.

``python -m benchmarks spark`` runs its Connect cells against one, and the
test suite's ``connect_spark`` fixture (``tests/fixtures/spark.py``) starts
one per module; this module needs only pyspark and Java. The server runs the
given master with the caller's ``PYTHONPATH`` on its Python workers, writes its
pid file and logs in a directory of its own, and is stopped by that pid file.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from .server import free_port

START_TIMEOUT = 180.0  # seconds for the server's port to accept connections
STOP_TIMEOUT = 60.0  # seconds for its process to end once told to stop


class ConnectServer:
    """One Spark Connect server: :meth:`start` / :meth:`stop`, or a context manager.

    Args:
        directory: where its pid file and logs go.
        master: the Spark master it runs.
        shuffle_partitions: its ``spark.sql.shuffle.partitions``.
    """

    def __init__(
        self, directory: Path, master: str = "local[2]", shuffle_partitions: int = 4
    ) -> None:
        import pyspark

        self.directory = directory
        self.master = master
        self.shuffle_partitions = shuffle_partitions
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self._sbin = Path(pyspark.__file__).resolve().parent / "sbin"
        self._env = {
            **os.environ,
            "SPARK_PID_DIR": str(directory),
            "SPARK_LOG_DIR": str(directory),
            "SPARK_IDENT_STRING": "jetstream-sync",
        }

    def _listening(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def log(self) -> str:
        """The end of the server's output files, for an error message."""
        return "\n".join(
            p.read_text(errors="replace")[-3000:] for p in self.directory.glob("*.out")
        )

    def pid(self) -> int | None:
        """The server's pid from its pid file, or None once it is gone."""
        files = list(self.directory.glob("*.pid"))
        return int(files[0].read_text().strip()) if files else None

    def start(self) -> ConnectServer:
        """Start it and wait until its port accepts connections.

        Raises:
            RuntimeError: it did not listen within ``START_TIMEOUT`` seconds (with its log);
                it is stopped first.
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
                f"spark.sql.shuffle.partitions={self.shuffle_partitions}",
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
                log = self.log()
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not listen:\n{log}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        """Stop it by its pid file and wait for the process to end (up to ``STOP_TIMEOUT``)."""
        pid = self.pid()
        if pid is None:
            return
        subprocess.run(
            [str(self._sbin / "stop-connect-server.sh")],
            env=self._env,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + STOP_TIMEOUT
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)

    def __enter__(self) -> ConnectServer:
        """:meth:`start`."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """:meth:`stop`."""
        self.stop()
