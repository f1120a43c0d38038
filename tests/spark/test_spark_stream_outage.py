"""A streaming read's driver-side looks at its stream ride out a server restart.

Spark stops the whole query when ``latestOffset`` raises; a look that fails in a way
that passes (no reply in time, no responders, a 503) is tried again
``fetchOffset.numRetries`` times, ``fetchOffset.retryIntervalMs`` apart, as Kafka's
source does. The readers here run in the test's process, as Spark runs them in its
Python worker, against a real server that is stopped and started again.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import jetstream_sync  # noqa: E402
from jetstream_sync.errors import APIError, ConnectionLostError, NoRespondersError  # noqa: E402
from jetstream_sync.spark import _stream as _stream_module  # noqa: E402
from jetstream_sync.spark._retry import passes  # noqa: E402
from jetstream_sync.spark._source import JetStreamDataSource  # noqa: E402
from tests.fixtures.polling import wait_for  # noqa: E402

pytestmark = pytest.mark.timeout(120)

# How a request fails while the server is down: no reply in time, or the connection found
# lost as the request was written.
OUTAGE_ERRORS = (jetstream_sync.TimeoutError, ConnectionLostError)


def _reader(server, stream: str, **options: str):
    source = JetStreamDataSource({"servers": server.url, "stream": stream, **options})
    return source.streamReader(source.schema())


def _fill(server, stream: str, count: int) -> None:
    with jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name=stream, subjects=[f"{stream.lower()}.>"])
        for i in range(count):
            js.publish(f"{stream.lower()}.x", b"%d" % i)


def test_a_look_rides_out_a_restart_longer_than_one_request(restartable_server, caplog):
    """With the server down past one request's timeout, the reader with retries logs its
    second try and answers once the server is back; one with ``numRetries=0`` raises the
    first timeout (what every streaming query did before)."""
    server = restartable_server
    _fill(server, "OUTAGE", 3)
    patient = _reader(server, "OUTAGE", startingOffsets="earliest",
                      **{"fetchOffset.retryIntervalMs": "100"})  # fmt: skip
    impatient = _reader(server, "OUTAGE", startingOffsets="earliest",
                        **{"fetchOffset.numRetries": "0"})  # fmt: skip
    start = patient.initialOffset()
    assert impatient.initialOffset() == start
    outcome: dict[str, Any] = {}

    def look(name: str, reader: Any) -> None:
        try:
            outcome[name] = reader.latestOffset(start, reader.getDefaultReadLimit())
        except Exception as exc:
            outcome[name] = exc

    server.stop(keep_store=True)
    threads = [threading.Thread(target=look, args=pair) for pair in
               (("patient", patient), ("impatient", impatient))]  # fmt: skip
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: "try 2 of 4" in caplog.text, timeout=60, interval=0.05)
        wait_for(lambda: "impatient" in outcome, timeout=60, interval=0.05)
        assert isinstance(outcome["impatient"], OUTAGE_ERRORS)
        assert "patient" not in outcome
        server.start()
    finally:
        for thread in threads:
            thread.join(90)
    assert outcome["patient"] == {**start, "seq": 4}
    assert "OUTAGE" in caplog.text
    assert any(error.__name__ in caplog.text for error in OUTAGE_ERRORS)


def test_the_start_time_search_rides_out_an_outage(restartable_server, caplog, monkeypatch):
    """A new query with ``startingTimestamp`` looks for its first sequence after the
    stream's end; the server going down between the two looks is tried again too, and
    the query starts where the timestamp says once the server is back."""
    server = restartable_server
    with jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="SINCE", subjects=["since.>"], allow_direct=True)
        js.publish("since.x", b"before")
        after_first = int(js.stream("SINCE").get_msg(1).time.timestamp() * 1000) + 1
        wait_for(lambda: time.time() * 1000 > after_first, timeout=5, interval=0.001)
        js.publish("since.x", b"after")
    reader = _reader(server, "SINCE", startingTimestamp=str(after_first),
                     **{"fetchOffset.retryIntervalMs": "100"})  # fmt: skip
    search = _stream_module.first_seq_at
    stopped = threading.Event()

    def search_while_down(*args: Any) -> Any:
        if not stopped.is_set():  # the first search only: the server then stays down
            stopped.set()
            server.stop(keep_store=True)
        return search(*args)

    monkeypatch.setattr(_stream_module, "first_seq_at", search_while_down)
    outcome: dict[str, Any] = {}

    def start() -> None:
        try:
            outcome["offset"] = reader.initialOffset()
        except Exception as exc:
            outcome["offset"] = exc

    thread = threading.Thread(target=start)
    thread.start()
    try:
        wait_for(lambda: "try 2 of 4" in caplog.text or "offset" in outcome, timeout=60,
                 interval=0.05)  # fmt: skip
        assert "offset" not in outcome, outcome
        server.start()
    finally:
        thread.join(90)
    assert outcome["offset"]["seq"] == 2
    assert "startingTimestamp" in caplog.text


def test_a_deleted_stream_is_not_tried_again(restartable_server, caplog):
    """A failure that is an answer (the stream is gone) is raised at once, without a retry."""
    server = restartable_server
    _fill(server, "GONE", 1)
    reader = _reader(server, "GONE", startingOffsets="earliest",
                     **{"fetchOffset.retryIntervalMs": "3600000"})  # fmt: skip
    start = reader.initialOffset()
    with jetstream_sync.connect(server.url) as nc:
        nc.jetstream().delete_stream("GONE")
    with pytest.raises(jetstream_sync.StreamNotFoundError):
        reader.latestOffset(start, reader.getDefaultReadLimit())
    assert "try 2" not in caplog.text


@pytest.mark.parametrize(
    ("option", "value"), [("fetchOffset.numRetries", "-1"), ("fetchOffset.retryIntervalMs", "x")]
)
def test_bad_retry_options_are_refused_when_the_query_is_planned(nats_server, option, value):
    """The reader refuses a negative or non-integer value before it asks the server."""
    with pytest.raises(ValueError, match=option.split(".")[1]):
        _reader(nats_server, "ANY", **{option: value})


@pytest.mark.parametrize(
    ("error", "tried_again"),
    [
        (jetstream_sync.TimeoutError("no reply"), True),
        (ConnectionLostError("cut"), True),
        (NoRespondersError("no responders"), True),
        (APIError(503, 10008, "JetStream system temporarily unavailable"), True),
        (jetstream_sync.StreamNotFoundError(404, 10059, "stream not found"), False),
        (APIError(400, 10003, "bad request"), False),
        (jetstream_sync.PermissionViolationError("publish to $JS.API.STREAM.INFO.S"), False),
        (ValueError("a bug"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_what_is_tried_again(error, tried_again):
    """An outage is tried again (no reply, a cut, no responders, a 503); an answer is not."""
    assert passes(error) is tried_again
