"""Message schedules (ADR-51) against a real nats-server: at, every, cron, cancel, listing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import JetStreamContext, Msg, Republish, ScheduleInfo
from jetstream_sync.jetstream.stream import Stream
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.polling import wait_for


@pytest.fixture
def stream_options(stream_name: str) -> dict[str, Any]:
    # The scheduler stores what it produces; republish shows it to core subscribers too.
    republish = Republish(src=f"{stream_name}.out.>", dest=f"seen.{stream_name}.>")
    return {
        "allow_msg_schedules": True,
        "allow_direct": True,
        "allow_msg_ttl": True,
        "republish": republish,
    }


def _seen(stream: Stream, leaf: str) -> str:
    """The core subject where the stream republishes what its scheduler stores on ``out.<leaf>``."""
    return f"seen.{stream.name}.{leaf}"


def _drain(sub: jetstream_sync.Subscription, into: list[Msg]) -> int:
    while True:
        try:
            into.append(sub.next_msg(timeout=0.01))
        except jetstream_sync.TimeoutError:
            return len(into)


def _scheduler_passes(nc: jetstream_sync.Client, js: JetStreamContext, stream: Stream,
                      seconds: float) -> None:  # fmt: skip
    """Wait until the stream's scheduler has fired a one-off schedule ``seconds`` from now.

    Whatever the scheduler stored before that time was republished before it, so a
    subscription on this connection already holds it: a test waits for this instead
    of for a fixed time before it checks that nothing more fired.
    """
    target = f"{stream.name}.out.passed"
    with nc.subscribe(_seen(stream, "passed")) as sub:
        when = datetime.now(UTC) + timedelta(seconds=seconds)
        js.schedule(f"{stream.name}.sched.passed", target, b"passed", at=when)
        assert sub.next_msg(timeout=seconds + 10).data == b"passed", "the scheduler stalled"


def test_at_fires_once(nc: jetstream_sync.Client, js: JetStreamContext, stream: Stream) -> None:
    sched, target = f"{stream.name}.sched.once", f"{stream.name}.out.once"
    with nc.subscribe(_seen(stream, "once")) as sub:
        js.schedule(sched, target, b"hello", at=datetime.now(UTC) + timedelta(seconds=2))
        msg = sub.next_msg(timeout=5)
        assert msg.data == b"hello"
        assert msg.scheduled_by == sched
        assert msg.schedule_next is None
        _scheduler_passes(nc, js, stream, 1.2)
        with pytest.raises(jetstream_sync.TimeoutError):
            sub.next_msg(timeout=0.01)  # nothing fired again before the scheduler passed
    # fired, both one-off schedules are removed
    wait_for(lambda: js.schedules(stream.name) == [], message="a fired schedule stayed stored")


def test_every_fires_repeatedly_and_stops_after_cancel(
    nc: jetstream_sync.Client, js: JetStreamContext, stream: Stream
) -> None:
    sched, target = f"{stream.name}.sched.tick", f"{stream.name}.out.tick"
    got: list[Msg] = []
    with nc.subscribe(_seen(stream, "tick")) as sub:
        js.schedule(sched, target, b"tick", every=1)
        # the first run is at the next whole second after the store, up to 1.5 s away
        wait_for(lambda: _drain(sub, got) >= 3, timeout=6)
        assert got[0].scheduled_by == sched
        assert isinstance(got[0].schedule_next, datetime)
        assert js.cancel_schedule(sched) is True
        _drain(sub, got)
        # a tick fired just before the cancel may still arrive; a live schedule sends 2-3 more
        _scheduler_passes(nc, js, stream, 2.5)
        late: list[Msg] = []
        _drain(sub, late)
        assert len(late) <= 1, [m.data for m in late]
    assert js.cancel_schedule(sched) is False


def test_source_samples_the_latest_message_and_rollup_keeps_one(
    nc: jetstream_sync.Client, js: JetStreamContext, stream: Stream
) -> None:
    """source= publishes the source subject's last message at each run (ADR-51 sampling);
    rollup=True makes each produced message replace the target's previous one. Both are
    nats-server 2.14 headers the client used to refuse in headers= as "set by schedule()'s
    arguments" while schedule() had no such arguments."""
    sched, target, source = (f"{stream.name}.{leaf}" for leaf in ("sched.s", "out.s", "src"))
    js.publish(source, b"v1")
    got: list[Msg] = []
    with nc.subscribe(_seen(stream, "s")) as sub:
        js.schedule(sched, target, b"fallback", every=1, source=source, rollup=True)
        wait_for(lambda: _drain(sub, got) >= 1, timeout=5)
        assert got[0].data == b"v1"
        js.publish(source, b"v2")
        wait_for(lambda: _drain(sub, got) and got[-1].data == b"v2", timeout=5)
    (info,) = js.schedules(stream.name, filter=sched)
    assert (info.source, info.rollup) == (source, True)
    assert js.cancel_schedule(sched) is True
    assert stream.info(subjects_filter=target).state.subjects == {target: 1}


def test_cron_with_seconds_fires_in_a_time_zone(
    nc: jetstream_sync.Client, js: JetStreamContext, stream: Stream
) -> None:
    sched, target = f"{stream.name}.sched.cron", f"{stream.name}.out.cron"
    with nc.subscribe(_seen(stream, "cron")) as sub:
        js.schedule(sched, target, b"c", cron="* * * * * *", time_zone="Europe/Paris", ttl=60)
        msg = sub.next_msg(timeout=3)
        assert msg.data == b"c" and msg.scheduled_by == sched
        assert msg.headers.get("Nats-TTL") == "60s"
    js.cancel_schedule(sched)


def test_schedules_lists_the_stored_schedules(js: JetStreamContext, stream: Stream) -> None:
    when = datetime.now(UTC) + timedelta(hours=1)
    js.schedule(f"{stream.name}.s.a", f"{stream.name}.t", b"1", at=when)
    js.schedule(f"{stream.name}.s.b", f"{stream.name}.t", b"2", cron="@hourly", ttl=5)
    js.publish(f"{stream.name}.plain", b"not a schedule")
    listed = js.schedules(stream.name)
    assert [s.subject for s in listed] == [f"{stream.name}.s.a", f"{stream.name}.s.b"]
    first, second = listed
    assert isinstance(first, ScheduleInfo)
    assert first.spec.startswith("@at ") and first.target == f"{stream.name}.t"
    assert first.next_run is not None and abs((first.next_run - when).total_seconds()) < 0.001
    assert (second.spec, second.ttl, second.data) == ("@hourly", "5s", b"2")
    assert js.schedules(stream.name, filter=f"{stream.name}.s.b") == [second]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one"),
        ({"every": 5, "cron": "@hourly"}, "exactly one"),
        ({"cron": "* * * * *"}, "6 fields"),
        ({"cron": "61 * * * * *"}, "outside"),
        ({"cron": "@fortnightly"}, "unknown predefined"),
        ({"cron": "*/0 * * * * *"}, "step"),
        ({"cron": "@hourly", "time_zone": "Mars/Olympus"}, "unknown time zone"),
        ({"every": 2, "time_zone": "UTC"}, "cron schedules only"),
        ({"every": 0.5}, "at least 1 second"),
        ({"at": datetime(2030, 1, 1)}, "timezone-aware"),
        ({"every": 5, "headers": {"Nats-Schedule": "@hourly"}}, "set by schedule"),
        ({"every": 5, "ttl": 0.2}, "at least 1 second"),
        ({"every": 1e10}, "Go duration"),
        ({"every": timedelta(days=300 * 365)}, "Go duration"),
        ({"at": datetime(9999, 12, 31, tzinfo=UTC)}, "1678 and 2262"),
        ({"at": datetime(1, 1, 1, tzinfo=UTC)}, "1678 and 2262"),
        ({"at": datetime(2262, 4, 12, tzinfo=UTC)}, "1678 and 2262"),
        ({"cron": "@at 3000-01-01T00:00:00Z"}, "1678 and 2262"),
        ({"cron": "@at 1677-01-01T00:00:00+01:00"}, "1678 and 2262"),
        ({"every": 5, "headers": {"Nats-Rollup": "all"}}, "Nats-Rollup"),
    ],
)
def test_bad_specs_are_refused_before_sending(
    js: JetStreamContext, stream: Stream, kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        js.schedule(f"{stream.name}.s", f"{stream.name}.t", **kwargs)
    assert stream.info().state.messages == 0


def test_an_at_past_2262_sent_raw_fires_at_once(
    nc: jetstream_sync.Client, js: JetStreamContext, stream: Stream
) -> None:
    """Why at= must fall between 1678 and 2262: nats-server keeps the time as int64
    nanoseconds, so a raw "@at 9999-12-31..." schedule fires at once instead of never."""
    with nc.subscribe(_seen(stream, "far")) as sub:
        headers = {
            "Nats-Schedule": "@at 9999-12-31T23:59:59Z",
            "Nats-Schedule-Target": f"{stream.name}.out.far",
        }
        js.publish(f"{stream.name}.sched.far", b"far", headers=headers)
        assert sub.next_msg(timeout=10).data == b"far"


def test_bad_subjects_are_refused_before_sending(js: JetStreamContext, stream: Stream) -> None:
    with pytest.raises(ValueError, match="differ"):
        js.schedule(f"{stream.name}.s", f"{stream.name}.s", every=5)
    with pytest.raises(jetstream_sync.BadSubjectError):
        js.schedule(f"{stream.name}.s", f"{stream.name}.*", every=5)
    for source in (f"{stream.name}.s", f"{stream.name}.t"):
        with pytest.raises(ValueError, match="source must differ"):
            js.schedule(f"{stream.name}.s", f"{stream.name}.t", every=5, source=source)
    with pytest.raises(jetstream_sync.BadSubjectError):
        js.schedule(f"{stream.name}.s", f"{stream.name}.t", every=5, source=f"{stream.name}.>")
    with pytest.raises(TypeError, match="rollup"):
        js.schedule(f"{stream.name}.s", f"{stream.name}.t", every=5, rollup="sub")
    assert stream.info().state.messages == 0


def test_server_errors_are_typed(js: JetStreamContext, stream: Stream) -> None:
    with pytest.raises(jetstream_sync.ScheduleTargetInvalidError) as info:
        js.schedule(f"{stream.name}.s", "elsewhere.t", every=5)
    assert info.value.err_code == 10190
    plain = unique_stream_name("SCHEDPLAIN")
    js.create_stream(name=plain, subjects=[f"{plain}.>"])
    try:
        with pytest.raises(jetstream_sync.SchedulesNotEnabledError) as info:
            js.schedule(f"{plain}.s", f"{plain}.t", every=5)
        assert info.value.err_code == 10188
    finally:
        js.delete_stream(plain)


def test_an_old_server_is_refused_naming_the_version(
    js: JetStreamContext, stream: Stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = dict(js.client.server_info)
    info["api_lvl"] = 2
    monkeypatch.setattr(type(js.client), "server_info", property(lambda self: info))
    with pytest.raises(jetstream_sync.RequiredApiLevelError, match="2.14"):
        js.schedule(f"{stream.name}.s", f"{stream.name}.t", every=5)
    assert stream.info().state.messages == 0
