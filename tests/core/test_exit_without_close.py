"""A program that exits without close(): what it published still goes out, or it says so."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable

import jetstream_sync as js

COUNT = 1_000
BIG = 10 << 20  # more than the kernel's socket buffers hold

# Connects, says so, waits for a line on stdin (then, with a fourth argument, for
# the client to see its connection lost), publishes and ends without close(), as
# a short script does.
_PUBLISH_AND_EXIT = """
import sys
import threading
import jetstream_sync as js
lost = threading.Event()
nc = js.connect(sys.argv[1], disconnected_cb=lost.set)
print("connected", flush=True)
sys.stdin.readline()
if len(sys.argv) > 4:
    assert lost.wait(30)
for i in range(int(sys.argv[2])):
    nc.publish("exit.core", b"x" * int(sys.argv[3]))
print("published", flush=True)
"""


def _run(
    url: str,
    count: int,
    size: int,
    before_publishing: Callable[[], object] = lambda: None,
    after_disconnect: bool = False,
) -> tuple[str, str]:
    """Run the script; call ``before_publishing`` once it connected; its stdout and stderr."""
    extra = ["after-disconnect"] if after_disconnect else []
    child = subprocess.Popen(
        [sys.executable, "-c", _PUBLISH_AND_EXIT, url, str(count), str(size), *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None
    assert child.stdout.readline() == "connected\n"
    before_publishing()
    out, err = child.communicate("go\n", timeout=60)
    assert child.returncode == 0, err
    return out, err


def test_publishes_buffered_at_exit_are_sent(nats_server):
    """Core publishes still buffered when the program ends reach the server."""
    with js.connect(nats_server.url) as nc:
        sub = nc.subscribe("exit.core")
        nc.flush()
        assert _run(nats_server.url, COUNT, 100) == ("published\n", "")
        for _ in range(COUNT):
            sub.next_msg(timeout=10)


def test_exit_behind_a_frozen_server_says_what_was_not_sent(nats_server):
    """Behind a stalled server the exit waits a second for the buffer, then warns on stderr."""
    with contextlib.ExitStack() as frozen:
        freeze = lambda: frozen.enter_context(nats_server.freeze())  # noqa: E731
        out, err = _run(nats_server.url, BIG >> 10, 1024, freeze)
    assert out == "published\n"
    assert "RuntimeWarning: exiting without close(): " in err
    assert " bytes of publishes were not sent" in err


def test_exit_while_disconnected_says_what_was_not_sent(restartable_server):
    """Publishes buffered for a reconnect that never came are named on stderr at exit."""
    out, err = _run(restartable_server.url, COUNT, 100, restartable_server.stop, True)
    assert out == "published\n"
    assert "RuntimeWarning: exiting without close(): " in err
    assert " bytes of publishes were not sent" in err
