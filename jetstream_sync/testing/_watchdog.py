"""The watchdog between a ``NatsServer`` owner and its nats-server process.

Run as a script (``python -I -S _watchdog.py WORKDIR -- nats-server ARGS...``)
by ``NatsServer.start``; it uses only the standard library, so it needs no
import path. It starts the server as its own child, writes the server's pid on
stdout, then reads its stdin, a pipe whose write end only the owner holds.
A line ``stop`` (SIGTERM, then SIGKILL after a grace period) or ``kill``
(SIGKILL) from the owner, or the server exiting by itself, ends the run: the
watchdog writes ``exit <code>`` and exits, leaving the files for the owner
(a restart reuses them). End of file on the pipe means the owner has died
(any way, SIGKILL included: the kernel closes the pipe): the watchdog stops
the server, removes ``WORKDIR`` (when it is not empty) and exits. On Linux the server also
gets ``PR_SET_DEATHSIG``, so it dies even if the watchdog itself is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys

STOP_GRACE = 10.0
_PR_SET_DEATHSIG = 1


class _StopRequested(Exception):
    """Raised by the SIGTERM handler: stop the server now, as on end of file."""


def _stop_requested(signum: int, frame: object) -> None:
    """SIGTERM handler: end the wait for the owner."""
    raise _StopRequested


def _die_with_parent() -> None:
    """In the server child, before exec: ask Linux for SIGKILL when the watchdog dies."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DEATHSIG, signal.SIGKILL, 0, 0, 0)


def _wait_for_owner(server: subprocess.Popen[bytes]) -> bytes:
    """Block until the owner says ``stop`` or ``kill``, stdin reaches end of file (``b""``:
    the owner is gone), or the server exits by itself (``b"exited"``)."""
    pending = b""
    while True:
        readable, _, _ = select.select([0], [], [], 0.1)
        if readable:
            chunk = os.read(0, 4096)
            if not chunk:
                return b""
            pending += chunk
            if b"\n" in pending:
                return pending.split(b"\n", 1)[0].strip()
        if server.poll() is not None:
            return b"exited"


def _stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server, SIGKILL it after ``STOP_GRACE`` seconds, and reap it."""
    if server.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        server.terminate()
    try:
        server.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            server.kill()
        server.wait()


def main(argv: list[str]) -> int:
    """Run the server given after ``--`` until the owner says so, goes away, or it exits."""
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: _watchdog.py WORKDIR -- nats-server [ARGS...]\n")
        return 2
    workdir, command = argv[0], argv[2:]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the owner decides when to stop
    signal.signal(signal.SIGTERM, _stop_requested)
    owner_gone = True
    try:
        server = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        sys.stdout.write(f"{server.pid}\n")
        sys.stdout.flush()
        request = b""
        with contextlib.suppress(_StopRequested):
            request = _wait_for_owner(server)
        owner_gone = request == b""
        if request == b"kill" and server.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                server.kill()
        _stop(server)
        sys.stdout.write(f"exit {server.returncode}\n")
        sys.stdout.flush()
    finally:
        if workdir and owner_gone:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
