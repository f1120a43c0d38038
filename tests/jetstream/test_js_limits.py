"""Stream and consumer names and API subjects against the server's limits (real server)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

import jetstream_sync
from jetstream_sync.jetstream.consumer_config import ConsumerConfig
from jetstream_sync.jetstream.stream_config import StreamConfig

LONG = 5000  # past the server's default max_control_line (4,096)


@pytest.fixture
def in_flight(nc, shared_server) -> Iterator[Callable[[Callable[[], object]], None]]:
    """Run a call while another thread's request on ``nc`` waits; then check it was answered."""
    with jetstream_sync.connect(shared_server.url) as other:
        arrived, release = threading.Event(), threading.Event()

        def answer(msg: jetstream_sync.Msg) -> None:
            arrived.set()
            release.wait(10)
            msg.respond(b"answered")

        subject = nc.new_inbox()  # a subject nobody else uses
        other.subscribe(subject, cb=answer)
        other.flush()
        replies: list[bytes] = []
        requester = threading.Thread(
            target=lambda: replies.append(nc.request(subject, b"?", timeout=10).data)
        )

        def run(call: Callable[[], object]) -> None:
            requester.start()
            try:
                assert arrived.wait(10), "the other thread's request never arrived"
                call()
            finally:
                release.set()
                requester.join(15)
            assert replies == [b"answered"]
            assert nc.is_connected and nc.stats.reconnects == 0

        yield run


def test_a_filter_too_long_for_the_create_subject_goes_in_the_body(stream, in_flight):
    """A filter subject too long to ride in CONSUMER.CREATE's subject is sent in the
    config alone: the consumer is made, the other thread's request lives."""
    long_filter = f"{stream.name}." + "f" * LONG

    def create() -> None:
        cons = stream.create_consumer(durable_name="LIM", filter_subject=long_filter)
        assert cons.cached_info.config.filter_subject == long_filter

    in_flight(create)


def test_a_consumer_reads_a_subject_of_4000_bytes(js, stream):
    """A consumer and an ordered consumer filtering on a subject of 4,000 bytes (one a
    message may have) read its message: the filter went in the body, not the subject
    (which the client refused as too long for the server's max_control_line)."""
    subject = f"{stream.name}." + "s" * (4000 - len(stream.name) - 1)
    js.publish(subject, b"long")
    [msg] = stream.create_consumer(filter_subject=subject).fetch(1, timeout=5)
    assert (msg.subject, msg.data) == (subject, b"long")
    with stream.ordered_consumer(filter_subjects=[subject]) as oc:
        assert [m.data for m in oc.fetch(1, timeout=5)] == [b"long"]


@pytest.mark.parametrize("stream_options", [{"allow_direct": True}])
def test_long_direct_get_subject_refused_while_another_request_is_in_flight(stream, in_flight):
    """The subject of a direct get by subject is measured too: refused, nothing sent."""
    subject = f"{stream.name}." + "s" * LONG

    def get() -> None:
        with pytest.raises(jetstream_sync.LimitExceededError) as info:
            stream.direct_get_last_for_subject(subject)
        assert (info.value.argument, info.value.length) == ("subject", len(subject))

    in_flight(get)


def test_names_past_the_server_name_limit_are_refused(js, stream, in_flight):
    """Names past the server's 255 bytes raise LimitExceededError naming the argument."""
    name = "N" * 256

    def refuse() -> None:
        calls = {
            "stream name": [
                lambda: js.stream(name),
                lambda: js.delete_stream(name),
                lambda: js.consumer_names(name),
            ],
            "name": [lambda: js.create_stream(name=name, subjects=["lim.names"])],
            "consumer name": [
                lambda: stream.consumer(name),
                lambda: stream.delete_consumer(name),
                lambda: js.consumer(stream.name, name),
            ],
            "durable_name": [lambda: stream.create_consumer(durable_name=name)],
        }
        for argument, each in calls.items():
            for call in each:
                with pytest.raises(jetstream_sync.LimitExceededError) as info:
                    call()
                assert info.value.argument == argument
                assert (info.value.length, info.value.limit) == (256, 255)

    in_flight(refuse)


def test_configs_refuse_long_names_at_construction():
    """StreamConfig and ConsumerConfig refuse a name past 255 bytes, counting UTF-8 bytes."""
    with pytest.raises(jetstream_sync.LimitExceededError) as info:
        StreamConfig(name="é" * 128)
    assert (info.value.length, info.value.limit) == (256, 255)
    with pytest.raises(jetstream_sync.LimitExceededError):
        ConsumerConfig(name="c" * 256)
    assert StreamConfig(name="s" * 255).name == "s" * 255
