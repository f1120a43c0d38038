"""Distributed counters (ADR-49) against a real nats-server: adds, reads, sources, interop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

import jetstream_sync
from jetstream_sync import (
    Counter,
    CounterEntry,
    CounterNotFoundError,
    CountersNotEnabledError,
    JetStreamContext,
    StreamSource,
    SubjectTransform,
)
from jetstream_sync.errors import api_error
from jetstream_sync.jetstream.stream import Stream
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for


@pytest.fixture
def stream_options() -> dict[str, Any]:
    return {"allow_msg_counter": True, "allow_direct": True}


@pytest.fixture
def counter(js: JetStreamContext, stream: Stream) -> Counter:
    return js.counter(stream.name)


def test_add_returns_the_running_total(counter: Counter, stream: Stream) -> None:
    subject = f"{stream.name}.hits"
    assert counter.add(subject, 5) == 5
    assert counter.add(subject, -7) == -2
    assert counter.add(subject, 0) == -2
    assert counter.load(subject) == -2


def test_values_past_64_bits(counter: Counter, stream: Stream) -> None:
    subject = f"{stream.name}.big"
    assert counter.add(subject, 2**64) == 2**64
    assert counter.add(subject, 2**64 + 1) == 2**65 + 1
    entry = counter.get(subject)
    assert entry == CounterEntry(subject, 2**65 + 1, 2**64 + 1, {}, entry.seq)


@pytest.fixture
def low_int_digit_limit() -> Iterator[None]:
    """CPython's int/str conversion limit at its lowest (640 digits) for one test."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    yield
    sys.set_int_max_str_digits(before)


def test_a_total_past_4300_digits(counter: Counter, stream: Stream) -> None:
    """Increments under CPython's 4,300-digit limit whose total passes it: add and load work."""
    subject, big = f"{stream.name}.huge", 9 * 10**4299
    assert counter.add(subject, big) == big
    assert counter.add(subject, big) == 2 * big  # stored by the server: the answer is read
    assert counter.load(subject) == 2 * big
    assert [e.value for e in counter.get_many([subject])] == [2 * big]
    assert counter.get(subject).increment == big


def test_increments_of_any_size(counter: Counter, stream: Stream) -> None:
    """A 20,000-digit increment is sent and its total read back."""
    subject, big = f"{stream.name}.vast", 10**19_999
    assert counter.add(subject, big) == big
    assert counter.add(subject, -1) == big - 1
    assert counter.load(subject) == big - 1


def test_an_increment_past_the_stored_header_limit_is_refused_before_sending(
    nc: jetstream_sync.Client, counter: Counter, stream: Stream
) -> None:
    """The stream stores at most 65,535 bytes of headers: an increment of 65,509 digits
    (with its sign, "NATS/1.0", its name and line ends, 65,535 bytes) is added; one digit
    more is a ValueError raised before sending (the server answered a bare APIError 10097)."""
    subject = f"{stream.name}.edge"
    assert counter.add(subject, 10**65_508) == 10**65_508
    sent = nc.stats.out_msgs
    with pytest.raises(ValueError, match="65,535 bytes of headers"):
        counter.add(subject, -(10**65_509))
    with pytest.raises(ValueError, match="65,535 bytes of headers"):
        counter.add(subject, 1, headers={"Note": "x" * 65_535})
    assert nc.stats.out_msgs == sent
    assert counter.load(subject) == 10**65_508


def test_totals_ignore_the_int_digit_limit(
    counter: Counter, stream: Stream, low_int_digit_limit: None
) -> None:
    """With sys.set_int_max_str_digits(640), 700-digit totals still add and load."""
    subject, big = f"{stream.name}.wide", 7 * 10**699
    assert counter.add(subject, big) == big
    assert counter.add(subject, big) == 2 * big
    assert counter.load(subject) == 2 * big


def test_a_handle_writes_only_into_its_own_stream(
    js: JetStreamContext, counter: Counter, stream: Stream
) -> None:
    """add() on a subject another counter stream captures is refused before sending."""
    other = js.create_stream(
        name=f"{stream.name}B", subjects=[f"{stream.name}b.>"], allow_msg_counter=True
    )
    try:
        with pytest.raises(jetstream_sync.StreamWrongExpectedError) as info:
            counter.add(f"{stream.name}b.x", 5)
        assert (info.value.stream, info.value.subject) == (stream.name, f"{stream.name}b.x")
        assert other.info().state.messages == 0
        # subjects added to the stream later are its own: the handle asks again
        js.update_stream(
            name=stream.name, subjects=[f"{stream.name}.>", f"{stream.name}c.*"],
            allow_msg_counter=True, allow_direct=True,
        )  # fmt: skip
        assert counter.add(f"{stream.name}c.x", 2) == 2
    finally:
        js.delete_stream(other.name)


def test_concurrent_adds_from_16_threads_sum_exactly(counter: Counter, stream: Stream) -> None:
    subject = f"{stream.name}.shared"
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for _ in range(25):
                counter.add(subject, n)
        except BaseException as exc:  # reported below: a thread must not swallow it
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(1, 17)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert counter.load(subject) == 25 * sum(range(1, 17))


def test_a_subject_never_counted_raises(counter: Counter, stream: Stream) -> None:
    with pytest.raises(CounterNotFoundError) as info:
        counter.load(f"{stream.name}.nothing")
    assert info.value.subject == f"{stream.name}.nothing"


def test_get_many_reads_many_counters_in_one_batch(counter: Counter, stream: Stream) -> None:
    for i in range(20):
        counter.add(f"{stream.name}.c.{i}", i)
    entries = {e.subject: e.value for e in counter.get_many(f"{stream.name}.c.>")}
    assert entries == {f"{stream.name}.c.{i}": i for i in range(20)}
    two = [f"{stream.name}.c.3", f"{stream.name}.c.4"]
    assert sorted(e.value for e in counter.get_many(two)) == [3, 4]


def test_bad_input_is_refused_before_sending(counter: Counter, stream: Stream) -> None:
    subject = f"{stream.name}.x"
    with pytest.raises(TypeError):
        counter.add(subject, True)
    with pytest.raises(TypeError):
        counter.add(subject, 1.5)  # type: ignore[arg-type]
    with pytest.raises(jetstream_sync.BadSubjectError):
        counter.add(f"{stream.name}.*", 1)
    for header in ("Nats-Expected-Last-Sequence", "Nats-Rollup", "nats-incr"):
        with pytest.raises(ValueError, match=header):
            counter.add(subject, 1, headers={header: "1"})
    with pytest.raises(CounterNotFoundError):
        counter.load(subject)


def test_a_stream_without_counters_is_refused(js: JetStreamContext, stream_name: str) -> None:
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    with pytest.raises(CountersNotEnabledError):
        js.counter(stream_name)


def test_the_server_refuses_an_increment_on_a_plain_stream(
    js: JetStreamContext, stream_name: str
) -> None:
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    plain = Counter(js, js.stream(stream_name))
    with pytest.raises(CountersNotEnabledError) as info:
        plain.add(f"{stream_name}.a", 1)
    assert info.value.err_code == 10168


@pytest.fixture
def two_sources(js: JetStreamContext) -> Iterator[tuple[str, str]]:
    names = (unique_stream_name("CNTSRCA"), unique_stream_name("CNTSRCB"))
    for name in names:
        js.create_stream(
            name=name, subjects=[f"{name}.>"], allow_msg_counter=True, allow_direct=True
        )
    yield names
    for name in names:
        with contextlib.suppress(jetstream_sync.StreamNotFoundError):
            js.delete_stream(name)


def test_a_stream_sourcing_two_counter_streams_aggregates(
    js: JetStreamContext, stream_name: str, two_sources: tuple[str, str]
) -> None:
    a, b = two_sources
    js.counter(a).add(f"{a}.total", 3)
    js.counter(b).add(f"{b}.total", 4)
    js.create_stream(
        name=stream_name,
        subjects=[],
        allow_msg_counter=True,
        allow_direct=True,
        sources=[
            StreamSource(
                name=src, subject_transforms=[SubjectTransform(src=f"{src}.>", dest="agg.>")]
            )
            for src in (a, b)
        ],
    )
    agg = js.counter(stream_name)
    entry = wait_for(
        lambda: agg.get("agg.total").value == 7 and agg.get("agg.total"),
        ignore=CounterNotFoundError,
    )
    assert entry.sources == {a: {f"{a}.total": 3}, b: {f"{b}.total": 4}}
    js.counter(a).add(f"{a}.total", 10)
    wait_for(lambda: agg.load("agg.total") == 17)
    assert agg.get("agg.total").sources[a] == {f"{a}.total": 13}


@pytest.mark.parametrize("header", ["Nats-Counter-Sources", "nats-stream-source"])
def test_headers_the_server_keeps_are_refused_before_sending(
    nc: jetstream_sync.Client, counter: Counter, stream: Stream, header: str
) -> None:
    """add() refuses the sourcing headers the server maintains: a Nats-Counter-Sources of
    the caller's was stored and broke the counter for good (every later increment got
    CounterBrokenError); Nats-Stream-Source came back as a bare APIError (10227)."""
    subject, sent = f"{stream.name}.kept", nc.stats.out_msgs
    with pytest.raises(ValueError, match=header):
        counter.add(subject, 1, headers={header: "garbage"})
    assert nc.stats.out_msgs == sent
    assert counter.add(subject, 1) == 1


def test_a_counter_broken_by_another_client_reads_as_counter_broken(
    nc: jetstream_sync.Client, counter: Counter, stream: Stream
) -> None:
    """A counter whose stored sources another client made unreadable (a raw increment with a
    Nats-Counter-Sources header) raises CounterBrokenError naming its subject from get() and
    get_many(), as the server answers its next increment, instead of a JSONDecodeError."""
    broken = f"{stream.name}.broken"
    raw = {"Nats-Incr": "+1", "Nats-Counter-Sources": "garbage"}
    nc.request(broken, b"", headers=raw, timeout=5)
    with pytest.raises(jetstream_sync.CounterBrokenError) as info:
        counter.add(broken, 1)
    assert info.value.err_code == 10172
    for read in (lambda: counter.get(broken), lambda: list(counter.get_many(broken))):
        with pytest.raises(jetstream_sync.CounterBrokenError, match="Nats-Counter-Sources") as got:
            read()
        assert got.value.subject == broken and isinstance(got.value, ValueError)


def test_increments_sent_by_nats_py_are_read_back(
    js: JetStreamContext, counter: Counter, stream: Stream, shared_server: Any
) -> None:
    subject = f"{stream.name}.py"

    async def natspy_side() -> None:
        nc = await nats.connect(shared_server.url)
        try:
            for incr in ("+10", "-3"):
                reply = await nc.request(subject, b"", headers={"Nats-Incr": incr}, timeout=5)
                assert b'"val"' in reply.data
        finally:
            await nc.close()

    asyncio.run(natspy_side())
    entry = counter.get(subject)
    assert (entry.value, entry.increment) == (7, -3)
    assert counter.add(subject, 1) == 8


_ADDER = """
import sys
import jetstream_sync
with jetstream_sync.connect(sys.argv[1]) as nc:
    counter = nc.jetstream().counter(sys.argv[2])
    for _ in range(100):
        counter.add(sys.argv[3], 3)
"""


def test_concurrent_adds_from_2_processes_sum_exactly(
    counter: Counter, stream: Stream, shared_server: Any
) -> None:
    subject = f"{stream.name}.procs"
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    args = [sys.executable, "-c", _ADDER, shared_server.url, stream.name, subject]
    procs = [subprocess.Popen(args, env=env) for _ in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    assert counter.load(subject) == 2 * 100 * 3


def test_server_refusals_are_typed_by_err_code(js: JetStreamContext, stream: Stream) -> None:
    subject = f"{stream.name}.raw"
    with pytest.raises(jetstream_sync.CounterIncrementMissingError):
        js.publish(subject, b"")
    with pytest.raises(jetstream_sync.CounterPayloadError):
        js.publish(subject, b"body", headers={"Nats-Incr": "+1"})
    with pytest.raises(jetstream_sync.CounterIncrementInvalidError):
        js.publish(subject, b"", headers={"Nats-Incr": "one"})
    # A counter mirror is refused by the config check before sending; the code still maps.
    mirror = unique_stream_name("CNTMIRROR")
    with pytest.raises(ValueError, match="mirror"):
        js.create_stream(name=mirror, mirror=StreamSource(name=stream.name), allow_msg_counter=True)
    assert type(api_error(400, 10173, "mirror")) is jetstream_sync.MirrorWithCountersError
