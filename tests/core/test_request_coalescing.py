"""Requests of many threads at once go out together; a lone request goes out on its thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import jetstream_sync
from tests.fixtures.polling import wait_for


@pytest.fixture
def other(shared_server: Any) -> Iterator[jetstream_sync.Client]:
    """A second client on the shared server: the responder lives there."""
    with jetstream_sync.connect(shared_server.url) as client:
        yield client


def test_a_request_made_while_another_waits_is_left_to_the_flusher(nc, other, monkeypatch):
    """Sent at once on the caller's thread when alone; queued for the flusher (which
    coalesces many threads' requests into one write) while another request waits."""
    silent = other.subscribe("coalesce.silent")
    other.flush()
    sent: list[bool] = []  # for each message written: urgent (sent on the caller's thread)?
    write = nc._writer.write

    def spy(frame: bytes, urgent: bool = False, msgs: int = 0, deadline: Any = None) -> None:
        if msgs:
            sent.append(urgent)
        write(frame, urgent, msgs, deadline)

    monkeypatch.setattr(nc._writer, "write", spy)
    replies: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: replies.append(nc.request(silent.subject, timeout=10).data))
        for _ in range(2)
    ]
    threads[0].start()
    first = silent.next_msg(timeout=5)
    threads[1].start()
    second = silent.next_msg(timeout=5)
    assert sent == [True, False]
    first.respond(b"1")
    second.respond(b"2")
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(replies) == [b"1", b"2"]
    wait_for(lambda: nc._connection.mux.waiting() == 0)
    responder = other.subscribe("coalesce.echo", cb=lambda m: m.respond(m.data))
    other.flush()
    assert nc.request(responder.subject, b"3", timeout=5).data == b"3"
    assert sent == [True, False, True]
