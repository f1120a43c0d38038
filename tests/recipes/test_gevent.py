"""The client under gevent and eventlet monkey-patching, in real processes
(tests/fixtures/greenlet_checks.py): it chooses the cooperative wait, never blocks the hub,
keeps its timeouts, close()/drain() from a greenlet fail the calls blocked in others, and a
server restart mid-load loses no acknowledged publish."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.ctrl_c import ctrl_c_reaches_children

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ROOT = FIXTURES.parent.parent


def _python(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run this interpreter in a fresh process on the worktree's package."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("library", ["gevent", "eventlet"])
def test_monkey_patched_client(library, nats_server, record_property):
    """Requests, JetStream publishes and KV gets from greenlets; no greenlet starves the hub;
    publishes through a server restart lose nothing acknowledged."""
    pytest.importorskip(library)
    run = _python(str(FIXTURES / "greenlet_checks.py"), library, nats_server.url)
    assert run.returncode == 0, run.stderr[-4000:]
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen["mode"] == "cooperative"
    assert "wait mode 'threads'" in seen["threads_refused"]
    assert "wait='cooperative'" in seen["threads_refused"]
    assert seen["calls"] == {"ok": 20, "of": 20}
    hub = seen["hub"]
    record_property("max_gap_ms", hub["max_gap_ms"])
    print(f"{library}: largest gap between 1 ms ticks {hub['max_gap_ms']} ms")
    # The ticker ran all along both loops (a hub blocked by either would see only their ends);
    # the gap itself is reported, not asserted: it measures the machine's load as well.
    assert hub["inside_requests"] >= 50, hub
    assert hub["inside_publishes"] >= 3, hub
    assert hub["stored"] == 20 + 10_000
    timeout = seen["timeout"]
    assert timeout["took"] is not None and timeout["took"] >= timeout["asked"]
    assert timeout["text"].endswith("within 0.5 s")
    for how in ("close", "drain"):
        assert seen[how]["errors"] == ["ConnectionClosedError"], seen[how]
        assert seen[how]["closed"]
    # a restart mid-load: publishes were acknowledged on both sides of it, and every
    # acknowledged one is stored once (a publish in flight may raise; none is lost)
    restart = seen["restart"]
    assert 0 < restart["acked_before"] < restart["acked"], restart
    assert restart["lost"] == [] and restart["stored_twice"] == 0, restart


@pytest.mark.timeout(120)
@pytest.mark.parametrize("library", ["gevent", "eventlet"])
def test_ctrl_c_on_a_client_greenlet_reaches_the_main_one(library, shared_server):
    """A Ctrl-C landing on the client's reader, writer or a callback's greenlet is raised in
    the main greenlet, and the client goes on working (tests/fixtures/greenlet_interrupts.py)."""
    pytest.importorskip(library)
    with ctrl_c_reaches_children():  # a suite run in the background ignores SIGINT
        script = str(FIXTURES / "greenlet_interrupts.py")
        run = _python(script, library, shared_server.url, timeout=100)
    assert run.returncode == 0, run.stderr[-4000:]
    seen = json.loads(run.stdout.splitlines()[-1])
    for where in ("reader", "callback", "consume", "events", "acks"):
        assert seen[where]["main"] and seen[where]["works"], seen
    assert seen["acks"]["seqs"] == [1, 2], seen
    for where in ("callback", "consume", "events"):  # the greenlet lives on: the next call comes
        assert seen[where]["seen"] == ["interrupt", "after"], seen
    for where in ("writer", "writer_lock"):
        writer = seen[where]
        assert writer["landed"] == writer["main"] == 1 and writer["works"], seen
    # Two alarms 1 ms apart can land in one call (the second while the first unwinds):
    # the main greenlet then sees one KeyboardInterrupt for both.
    window = seen["window_lock"]
    assert window["landed"] == 20 and window["main"] > 0, seen
    assert window["acked"] and window["works"], seen
    queue = seen["queue_lock"]
    assert queue["works"], seen
    # eventlet: a Ctrl-C between a timed wait's Timeout and its with-block left a timer
    # that ended the callback's greenlet (it stopped answering) or failed a later callback
    assert queue["landed"] == 20 and queue["main"] > 0 and queue["answered"], seen
    assert seen["errors"] == ["interrupt", "after"], seen  # the events check's, no other
    for name in ("reader", "writer"):
        assert f"jetstream_sync-1-{name}" in seen["threads"], seen


@pytest.mark.timeout(120)
def test_a_ctrl_c_between_an_eventlet_timeout_and_its_with_block_leaves_no_timer(shared_server):
    """A Ctrl-C landing on a callback's greenlet after eventlet started a timed wait's Timeout
    and before the ``with`` that cancels it: the greenlet cancels the stray timer, which would
    otherwise raise the Timeout in the next callback (reported to error_cb) or end the greenlet
    (tests/fixtures/eventlet_stray_timeout.py)."""
    pytest.importorskip("eventlet")
    run = _python(str(FIXTURES / "eventlet_stray_timeout.py"), shared_server.url, timeout=100)
    assert run.returncode == 0, run.stderr[-4000:]
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen["landed"] == 1 and seen["main"], seen
    assert seen["no_stray"] and seen["errors"] == [], seen
    assert seen["seen"] == ["hold", "after"], seen


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ("from gevent import monkey; monkey.patch_socket()", "patched socket but not select"),
        (
            "import eventlet; eventlet.monkey_patch(socket=True, select=False, thread=False)",
            "patched socket but not select, thread",
        ),
    ],
    ids=["gevent-partial", "eventlet-partial"],
)
def test_a_wait_mode_that_cannot_work_is_refused(patch, expected, shared_server):
    """A partial monkey-patch is refused at connect, naming the mode and the fix, instead of a
    dead reader and timeouts (wait="threads" under a patch: test_monkey_patched_client)."""
    pytest.importorskip(patch.split()[1].split(".")[0].rstrip(";"))
    script = (
        f"WAIT=None\n{patch}\nimport jetstream_sync\n"
        "try:\n"
        f"    jetstream_sync.connect({shared_server.url!r}, wait=WAIT)\n"
        "except jetstream_sync.WaitModeError as exc:\n"
        "    print(exc)\n"
    )
    run = _python("-c", script, timeout=60)
    assert run.returncode == 0, run.stderr
    assert expected in run.stdout, run.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("library", ["gevent", "eventlet"])
def test_a_forked_child_leaves_the_parents_connection_alone(library, shared_server):
    """After a fork the child's copies of the client's greenlets read nothing from the socket
    the parent still uses: every request of the parent gets its reply, the inherited client
    refuses in the child and a client of the child's own works (tests/fixtures/greenlet_fork.py)."""
    pytest.importorskip(library)
    run = _python(str(FIXTURES / "greenlet_fork.py"), library, shared_server.url, timeout=100)
    assert run.returncode == 0, run.stderr[-4000:]
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen["status"] == 0, seen
    assert seen["child"] == {"inherited": "ForkedClientError", "own": "own"}, seen
    assert seen["answered"] == seen["of"], seen
