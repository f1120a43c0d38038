"""Objects inherited through os.fork(): every use in the child raises ForkedClientError.

Each child runs one function, reports a line through a pipe and leaves with
``os._exit``; the parent gives it a deadline and kills it if it hangs, so a
blocking call in the child fails the test instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import select
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream_sync as js
from jetstream_sync._connection.writer import Writer
from jetstream_sync._nuid import NUID
from jetstream_sync._process_lock import ProcessLock
from tests.fixtures.polling import wait_for

CHILD_DEADLINE = 10.0
#: How many children :func:`in_child` forks before it gives up on one that never starts.
FORKS = 3
#: The byte a child writes first, when it runs.
STARTED = b"+"
# libc's fork(), called directly: Python's at-fork handlers do not run in the child, as in
# the workers uWSGI forks from C (without --lazy-apps or --py-call-osafterfork). Through
# PyDLL, which keeps the GIL during the call, as uWSGI takes it around its fork: the child
# of a fork made without it could find the GIL held by a parent's thread and never run.
c_fork = ctypes.PyDLL(None, use_errno=True).fork


def in_child(fn: Callable[[], object], fork: Callable[[], int] = os.fork) -> str:
    """Run ``fn`` in a child made by ``fork``.

    A child forked from C can stop before its first line, in CPython itself: when a parent's
    thread was waiting for the GIL at the fork, the child's only thread hands the GIL over
    and waits for a thread it does not have to take it. Such a child is killed and another
    forked (up to :data:`FORKS`); a child that hangs later, in the client, fails the test.

    Returns:
        ``"ok: <result>"`` or ``"<ErrorClass>: <text>"``; a child that hangs fails the
        test with the stack it hung in.
    """
    for _ in range(FORKS):
        report = _run_in_child(fn, fork)
        if report is not None:
            return report
    pytest.fail(f"{FORKS} forked children in a row hung before their first line")


def _run_in_child(fn: Callable[[], object], fork: Callable[[], int]) -> str | None:
    """:func:`in_child` once; ``None`` if the child never ran its first line."""
    read_fd, write_fd = os.pipe()
    pid = fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            _announce_start(write_fd)
            os.close(read_fd)
            # all_threads: the parent's threads too, as they were at the fork (one of them
            # may have held what the child waits for)
            faulthandler.register(signal.SIGUSR1, file=write_fd, all_threads=True)
            try:
                line = f"ok: {fn()!r}"
            except BaseException as exc:  # reported to the parent
                line = f"{type(exc).__name__}: {exc}"
            os.write(write_fd, line.encode()[:4000])
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        if not select.select([read_fd], [], [], CHILD_DEADLINE)[0]:
            os.kill(pid, signal.SIGKILL)
            return None
        assert os.read(read_fd, len(STARTED)) == STARTED
        ready, _, _ = select.select([read_fd], [], [], CHILD_DEADLINE)
        if not ready:
            os.kill(pid, signal.SIGUSR1)  # the child writes its stack to the pipe
            stack = _read_until_quiet(read_fd)
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the forked child hung for {CHILD_DEADLINE} s, here:\n{stack}")
        return os.read(read_fd, 4096).decode()
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)


def _announce_start(fd: int) -> None:
    """A forked child's first Python call: it writes :data:`STARTED` to ``fd``.

    A call, not a write in the caller's code: CPython hands the GIL over on entry to a
    Python function (a C call such as ``os.write`` returns without it), so a child that
    is to hang in that hand-over does so before it writes.
    """
    os.write(fd, STARTED)


def _read_until_quiet(fd: int) -> str:
    """What a hung child writes to ``fd``: its first bytes within 10 s (a loaded machine),
    then until it has been quiet for a second."""
    chunks = []
    wait = 10.0
    while select.select([fd], [], [], wait)[0] and (chunk := os.read(fd, 65536)):
        chunks.append(chunk.decode(errors="replace"))
        wait = 1.0
    return "".join(chunks)


def assert_forked(report: str) -> None:
    assert report.startswith("ForkedClientError: "), report


@pytest.fixture
def nc_fork(shared_server):
    """A client whose objects the tests hand to a forked child."""
    with js.connect(shared_server.url) as client:
        yield client


def test_in_child_reports_results_and_errors():
    """The harness itself: a result and an exception are each reported."""
    assert in_child(lambda: 42) == "ok: 42"
    assert in_child(lambda: 1 / 0).startswith("ZeroDivisionError")


@pytest.mark.parametrize(
    "call",
    [
        lambda nc: nc.publish("forked.c", b"x"),
        lambda nc: nc.flush(timeout=2),
        lambda nc: nc.request("forked.c", b"x", timeout=2),
        lambda nc: nc.subscribe("forked.c"),
        lambda nc: nc.jetstream().account_info(),
    ],
    ids=["publish", "flush", "request", "subscribe", "jetstream"],
)
def test_a_fork_from_c_is_noticed_on_the_first_send(nc_fork, call):
    """Forked from C (no at-fork handler ran), the child's first send raises
    ForkedClientError instead of sharing the parent's socket (a publish otherwise sat
    unsent in a buffer no thread serves; a flush or request read the parent's bytes);
    then the client says it is not connected and close() returns at once."""

    def use_then_close() -> tuple[bool, bool]:
        try:
            call(nc_fork)
        except js.ForkedClientError:
            pass
        else:
            raise AssertionError("the inherited client was used without ForkedClientError")
        connected = nc_fork.is_connected
        nc_fork.close()
        return connected, nc_fork.is_closed

    assert in_child(use_then_close, fork=c_fork) == "ok: (False, True)"
    nc_fork.flush(timeout=5)  # the parent's connection is untouched


def test_a_fork_from_c_right_after_connect_is_noticed_before_the_flusher_ran(
    shared_server, monkeypatch
):
    """connect() leaves the flusher nothing to do: a child forked from C before the
    parent's flusher thread first ran (a loaded machine; stop 53's run on 8 workers) has
    its first publish refused, not left in a buffer no thread serves."""
    started = threading.Event()
    run = Writer._run

    def late_run(self: Writer) -> None:
        started.wait()
        run(self)

    monkeypatch.setattr(Writer, "_run", late_run)
    nc = js.connect(shared_server.url)
    try:
        assert_forked(in_child(lambda: nc.publish("forked.c", b"x"), fork=c_fork))
    finally:
        started.set()
        nc.close()


def test_next_msg_without_timeout(nc_fork):
    """next_msg(timeout=None) in the child raises instead of blocking forever."""
    sub = nc_fork.subscribe("fork.next")
    assert_forked(in_child(lambda: sub.next_msg(timeout=None)))
    assert_forked(in_child(lambda: sub.next_msg(timeout=0.5)))
    assert_forked(in_child(lambda: sub.next_msgs(10, timeout=None)))


def test_next_msg_with_messages_pending(nc_fork):
    """Even messages the parent already received are not handed out in the child."""
    sub = nc_fork.subscribe("fork.pending")
    nc_fork.publish("fork.pending", b"x")
    wait_for(lambda: sub.pending_msgs == 1)
    assert_forked(in_child(lambda: sub.next_msg(timeout=1)))
    assert sub.next_msg(timeout=1).data == b"x"  # the parent still has it


def test_iterating_a_subscription(nc_fork):
    """Iterating a subscription in the child raises, also an iteration begun in the parent."""
    sub = nc_fork.subscribe("fork.iter")
    assert_forked(in_child(lambda: next(iter(sub))))
    nc_fork.publish("fork.iter", b"1")
    it = iter(sub)
    assert next(it).data == b"1"
    assert_forked(in_child(lambda: next(it)))


def test_is_connected_is_false_in_the_child(nc_fork):
    """is_connected says False in the child and True again in the parent."""
    assert in_child(lambda: nc_fork.is_connected) == "ok: False"
    assert in_child(lambda: nc_fork.connected_url) == "ok: None"
    assert nc_fork.is_connected


def test_publish_request_flush_and_unsubscribe(nc_fork):
    """The client's other calls and a subscription's unsubscribe raise in the child."""
    sub = nc_fork.subscribe("fork.calls")
    assert_forked(in_child(lambda: nc_fork.publish("fork.calls", b"x")))
    assert_forked(in_child(lambda: nc_fork.request("fork.calls", b"x", timeout=1)))
    assert_forked(in_child(lambda: nc_fork.flush(timeout=1)))
    assert_forked(in_child(lambda: nc_fork.subscribe("fork.other")))
    assert_forked(in_child(lambda: sub.unsubscribe(limit=5)))
    assert sub.is_active


@contextlib.contextmanager
def held_by_a_thread(lock: Any) -> Iterator[None]:
    """``lock`` held by another thread of this process while the block runs."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait()
        yield
    finally:
        release.set()
        holder.join()


def test_close_in_the_child_of_a_fork_while_another_thread_held_the_clients_lock(
    nc_fork,
):
    """A fork while another thread holds the client's state lock (adding a status
    listener, making a shared resource): the child has no such thread to release it,
    and close() there returns instead of waiting for it forever."""
    with held_by_a_thread(nc_fork._state_lock):
        assert in_child(nc_fork.close) == "ok: None"
    assert nc_fork.is_connected


@pytest.mark.parametrize("fork", [os.fork, c_fork], ids=["os.fork", "fork-from-c"])
def test_a_process_lock_held_by_a_parents_thread_is_free_in_the_child(fork):
    """A ProcessLock another thread holds at the fork is free in the child (a threading.Lock
    would stay held there for good), and it still excludes within each process."""
    lock = ProcessLock()

    def take_twice() -> bool:
        with lock.here():
            pass
        with lock.here():
            return lock.here().locked()

    with held_by_a_thread(lock.here()):
        assert in_child(take_twice, fork=fork) == "ok: True"
        assert lock.here().locked()  # the parent's holder still has it


def test_a_child_forked_from_c_while_a_thread_makes_an_inbox(nc_fork, shared_server):
    """A parent's thread making an inbox at a fork from C (the inbox generator's lock held):
    the inherited client's JetStream call raises ForkedClientError, and a client the child
    makes connects and has its request answered (the gate's
    test_a_fork_from_c_is_noticed_on_the_first_send[jetstream] child hung here)."""

    def inherited_then_new() -> tuple[str, bool]:
        try:
            nc_fork.jetstream().account_info()
        except js.ForkedClientError as exc:
            inherited = type(exc).__name__
        else:
            inherited = "no error"
        with js.connect(shared_server.url) as nc:
            answered = nc.jetstream().account_info().api is not None
        return inherited, answered

    with held_by_a_thread(NUID._lock.here()):
        result = in_child(inherited_then_new, fork=c_fork)
    assert result == "ok: ('ForkedClientError', True)"


def test_inherited_messages_iterator(nc_fork, shared_server):
    """An inherited messages() iterator raises in the child, buffered messages or not."""
    ctx = nc_fork.jetstream()
    name = f"FORK{os.getpid()}"
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"])
    try:
        cons = stream.create_consumer()
        it = cons.messages(max_messages=10)
        assert_forked(in_child(lambda: it.next(timeout=None)))
        for i in range(3):
            ctx.publish(f"{name}.x", b"%d" % i)
        wait_for(lambda: it._sub.pending_msgs >= 3)  # all three reached the inbox
        first = it.next(timeout=5)
        assert len(it._buf) == 2  # two more buffered in the parent
        assert_forked(in_child(lambda: it.next(timeout=1)))
        assert_forked(in_child(lambda: next(iter(it))))
        assert_forked(in_child(first.ack))
        assert_forked(in_child(it.stop))
        assert_forked(in_child(lambda: cons.fetch(1, timeout=1)))
        assert_forked(in_child(lambda: ctx.account_info()))
        assert_forked(in_child(lambda: ctx.publish(f"{name}.x", b"child")))
        assert [it.next(timeout=5).data for _ in range(2)] == [b"1", b"2"]  # the parent goes on
        it.stop()
        oc = stream.ordered_consumer()
        ordered = oc.messages()
        assert_forked(in_child(lambda: ordered.next(timeout=None)))
        assert_forked(in_child(ordered.stop))
        assert ordered.next(timeout=5).data == b"0"
        ordered.stop()
        oc.close()
    finally:
        ctx.delete_stream(name)


def test_pending_publish_async_future(nc_fork):
    """A future whose ack was pending at the fork raises in the child instead of waiting forever."""
    nc_fork.subscribe("fork.silent")  # takes the message, never acknowledges it
    ctx = nc_fork.jetstream(ack_timeout=60)
    future = ctx.publish_async("fork.silent", b"x")
    assert_forked(in_child(future.result))
    assert_forked(in_child(future.exception))
    assert_forked(in_child(lambda: future.result(timeout=1)))
    assert_forked(in_child(ctx.publish_async_completed))
    assert not future.done()  # the parent still waits for it


def test_inherited_key_value_watcher(nc_fork):
    """An inherited Key-Value watcher raises in the child, entries buffered or not."""
    ctx = nc_fork.jetstream()
    bucket = f"fork{os.getpid()}"
    kv = ctx.create_key_value(bucket=bucket)
    try:
        kv.put("k", b"1")
        with kv.watch() as watcher:
            wait_for(lambda: len(watcher._feed._items) == 2)  # the entry and the marker
            assert_forked(in_child(lambda: watcher.next(timeout=1)))
            assert watcher.next(timeout=5).value == b"1"
            assert watcher.next(timeout=5) is None
            assert_forked(in_child(watcher.next))  # nothing buffered: it would wait forever
            assert_forked(in_child(lambda: next(iter(watcher))))
            assert_forked(in_child(watcher.stop))
            kv.put("k", b"2")
            assert watcher.next(timeout=5).value == b"2"  # the parent goes on
    finally:
        ctx.delete_key_value(bucket)


def test_inherited_object_store_watcher(nc_fork):
    """An inherited Object Store watcher raises in the child instead of waiting forever."""
    ctx = nc_fork.jetstream()
    bucket = f"fork{os.getpid()}"
    store = ctx.create_object_store(bucket=bucket)
    try:
        watcher = store.watch()
        assert watcher.next(timeout=5) is None  # an empty store: the marker at once
        assert_forked(in_child(watcher.next))
        assert_forked(in_child(watcher.stop))
        store.put("o", b"data")
        assert watcher.next(timeout=5).name == "o"  # the parent goes on
        watcher.stop()
    finally:
        ctx.delete_object_store(bucket)
