"""One ordered consumer shared by 16 threads: each message once, through link deletions."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import jetstream_sync
from tests.fixtures.jetstream import publish_numbered
from tests.fixtures.polling import wait_for
from tests.fixtures.threads import run_in_threads

pytestmark = pytest.mark.timeout(120)

TOTAL = 3000
THREADS = 16


def delete_link(stream: jetstream_sync.Stream, oc: jetstream_sync.OrderedConsumer) -> bool:
    """Delete the ordered consumer's current link; False while it has none (a reset runs)."""
    name = oc.name
    if name is None:
        return False
    try:
        stream.delete_consumer(name)
    except jetstream_sync.ConsumerNotFoundError:  # replaced meanwhile
        return False
    return True


def delete_links_while(taken: list[int], stream, oc, at: tuple[int, ...]) -> None:
    """Delete the current link once ``taken`` holds each count of ``at`` (or all was taken)."""
    for count in at:
        wait_for(lambda: len(taken) >= count, timeout=60)  # noqa: B023
        wait_for(lambda: delete_link(stream, oc) or len(taken) == TOTAL, timeout=30)


def take_while_links_are_deleted(
    take: Callable[[int], None],
    taken: list[int],
    stream: jetstream_sync.Stream,
    oc: jetstream_sync.OrderedConsumer,
) -> list[BaseException]:
    """Run ``take`` on 16 threads while the link is deleted 3 times; return their errors."""
    errors: list[BaseException] = []
    readers = threading.Thread(target=lambda: errors.extend(run_in_threads(take, THREADS)))
    readers.start()
    delete_links_while(taken, stream, oc, (300, 1000, 2000))
    readers.join(90)
    assert not readers.is_alive()
    return errors


def test_threads_taking_from_one_ordered_iterator_get_each_message_once(js, stream):
    """16 threads calling next() on one ordered iterator, its link deleted 3 times: every
    message is handed out once, none twice."""
    publish_numbered(js, f"{stream.name}.a", TOTAL)
    oc = stream.ordered_consumer()
    taken: list[int] = []
    lock = threading.Lock()
    with oc, oc.messages(max_messages=50, expires=2, heartbeat=0.5) as it:

        def take(_: int) -> None:
            while True:
                try:
                    msg = it.next(timeout=30)
                except jetstream_sync.IteratorClosedError:
                    return
                with lock:
                    taken.append(int(msg.data))
                    if len(taken) == TOTAL:
                        it.stop()

        errors = take_while_links_are_deleted(take, taken, stream, oc)
    assert errors == []
    assert sorted(taken) == list(range(TOTAL))


def test_threads_calling_next_on_one_ordered_consumer_get_each_message_once(js, stream):
    """16 threads calling next() on one ordered consumer, its link deleted 3 times: every
    message is handed out once, none twice."""
    publish_numbered(js, f"{stream.name}.a", TOTAL)
    oc = stream.ordered_consumer()
    taken: list[int] = []

    def take(_: int) -> None:
        while len(taken) < TOTAL:
            try:
                taken.append(int(oc.next(timeout=2).data))
            except jetstream_sync.TimeoutError:
                pass

    with oc:
        errors = take_while_links_are_deleted(take, taken, stream, oc)
    assert errors == []
    assert sorted(taken) == list(range(TOTAL))


def test_a_running_iterator_refuses_other_reads_until_stopped(js, stream, caplog):
    """fetch(), next() and a second messages()/consume() while an iterator runs would hand
    out the same messages twice: they raise; after stop() a fetch goes on where it ended.

    On a new link: the stopped one had delivered all 20 its pull asked for, so a fetch on
    it met a gap only once its pull expired (make test's gate: 25 s into a loaded run, the
    new link then had no time left and the fetch returned nothing).
    """
    publish_numbered(js, f"{stream.name}.a", 30)
    with stream.ordered_consumer() as oc:
        iterator = oc.messages(max_messages=20)
        first = [iterator.next(timeout=5).metadata.sequence.stream for _ in range(5)]
        with pytest.raises(jetstream_sync.OrderedConsumerInUseError):
            oc.fetch(5, timeout=1)
        with pytest.raises(jetstream_sync.OrderedConsumerInUseError):
            oc.next(timeout=1)
        with pytest.raises(jetstream_sync.OrderedConsumerInUseError):
            oc.fetch_no_wait(5)
        with pytest.raises(jetstream_sync.OrderedConsumerInUseError):
            oc.messages()
        with pytest.raises(jetstream_sync.OrderedConsumerInUseError):
            oc.consume(lambda msg: None)
        iterator.stop()
        rest = [m.metadata.sequence.stream for m in oc.fetch(25, timeout=5)]
        assert first + rest == list(range(1, 31))
        assert "sequence gap" not in caplog.text
