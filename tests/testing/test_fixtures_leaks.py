"""tests/fixtures/leaks.py: the leak measure blames the code under test for what it left open."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.fixtures.leaks import LeakCheck


def described(sock: socket.socket) -> str:
    """How a leak report names ``sock`` (its number and inode)."""
    return f"fd {sock.fileno()} -> socket:[{os.fstat(sock.fileno()).st_ino}]"


# Threads of earlier tests in the same worker may still be opening or closing
# descriptors and ending: each test checks what the report says of its own objects.


class Parked:
    """Threads that wait until :meth:`release`, which also joins them."""

    def __init__(self) -> None:
        """No thread yet."""
        self._go = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, name: str) -> threading.Thread:
        """Start a thread called ``name`` that waits for the release."""
        thread = threading.Thread(target=self._go.wait, name=name)
        thread.start()
        self._threads.append(thread)
        return thread

    def release(self) -> None:
        """Let every thread end and join it."""
        self._go.set()
        for thread in self._threads:
            thread.join()


@pytest.fixture
def parked() -> Iterator[Parked]:
    """Threads parked for the test, released and joined after it."""
    threads = Parked()
    yield threads
    threads.release()


def test_a_socket_left_open_is_a_leak_named_by_its_target():
    """A socket opened after the baseline and still open is reported as ``socket:[inode]``."""
    check = LeakCheck()
    with socket.socket() as sock:
        ours = described(sock)
        leaks = check.leaks(grace=0)
        assert ours in leaks.fds and leaks
    assert ours not in check.leaks(grace=0).fds


def test_descriptors_that_closed_meanwhile_do_not_hide_a_leak():
    """Descriptors of earlier work that close during the run neither count as leaks nor
    offset one (the soak's 40 == 48 after the notebook test closed its sockets)."""
    earlier = [socket.socket() for _ in range(8)]
    closed = {described(sock) for sock in earlier}
    check = LeakCheck()
    for sock in earlier:
        sock.close()
    assert not closed & set(check.leaks(grace=0).fds)
    with socket.socket() as leaked:
        assert described(leaked) in check.leaks(grace=0).fds


def test_a_descriptor_number_reused_for_something_new_is_a_leak():
    """A number that was open at the baseline and is reused for another socket is new."""
    earlier = socket.socket()
    number = earlier.fileno()
    check = LeakCheck()
    earlier.close()
    with socket.socket() as reused:
        assert reused.fileno() == number  # the lowest free number comes back
        # Other threads of the process may open descriptors meanwhile; only this one matters.
        assert f"fd {number}" in [line.split(" -> ")[0] for line in check.leaks(grace=0).fds]


def test_a_thread_left_running_is_a_leak_unless_it_is_not_ours(parked):
    """A new thread whose name has a watched prefix and that is still running is a leak;
    threads of other code (other names) and threads from before the baseline are not."""
    before = parked.start("jetstream_sync-test-before")
    check = LeakCheck(thread_prefixes=("jetstream_sync-",))
    parked.start("someone-else")
    mine = {"jetstream_sync-test-before", "someone-else", "jetstream_sync-test-parked"}
    assert not mine & set(check.leaks(grace=0).threads)
    parked.start("jetstream_sync-test-parked")
    assert mine & set(check.leaks(grace=0).threads) == {"jetstream_sync-test-parked"}
    assert before.is_alive()


def test_a_thread_that_ends_within_the_grace_is_no_leak():
    """A thread that is finishing when the check runs is joined, not reported."""
    check = LeakCheck(thread_prefixes=("jetstream_sync-",))
    go = threading.Event()
    ending = threading.Thread(target=go.wait, name="jetstream_sync-test-closer")
    ending.start()
    go.set()
    assert "jetstream_sync-test-closer" not in check.leaks(grace=5.0).threads
    assert not ending.is_alive()
