"""Every call that deletes or purges removes only what it was asked to, or refuses, typed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import JetStreamContext
from jetstream_sync.jetstream.stream import Stream


@pytest.fixture
def stream_options() -> dict[str, Any]:
    return {"allow_msg_schedules": True}


def _count(stream: Stream, subject: str) -> int:
    return (stream.info(subjects_filter=subject).state.subjects or {}).get(subject, 0)


def _later() -> datetime:
    return datetime.now(UTC) + timedelta(days=1)


def test_cancel_schedule_refuses_ordinary_messages(js: JetStreamContext, stream: Stream) -> None:
    """A subject holding ordinary messages and no schedule: NotAScheduleError, nothing purged."""
    subject = f"{stream.name}.orders"
    for i in range(3):
        js.publish(subject, b"order %d" % i)
    with pytest.raises(jetstream_sync.NotAScheduleError) as info:
        js.cancel_schedule(subject)
    assert (info.value.subject, info.value.seq) == (subject, 3)
    assert _count(stream, subject) == 3


def test_cancel_schedule_removes_the_schedule(js: JetStreamContext, stream: Stream) -> None:
    """A schedule (stored over another) is removed, then the subject holds nothing to cancel."""
    subject, target = f"{stream.name}.sched", f"{stream.name}.out"
    js.schedule(subject, target, b"first", at=_later())
    js.schedule(subject, target, b"second", every=3600)
    assert js.cancel_schedule(subject) is True
    assert js.schedules(stream.name) == []
    assert _count(stream, subject) == 0
    assert js.cancel_schedule(subject) is False


def test_cancel_schedule_of_an_empty_subject_is_false(js: JetStreamContext, stream: Stream) -> None:
    """No message on the subject: False, as before."""
    assert js.cancel_schedule(f"{stream.name}.nothing") is False


def test_purge_with_an_empty_subject_purges_nothing(js: JetStreamContext, stream: Stream) -> None:
    """purge(subject="") is a bad subject, never the whole stream."""
    js.publish(f"{stream.name}.a", b"x")
    with pytest.raises(jetstream_sync.BadSubjectError):
        stream.purge(subject="")
    assert stream.info().state.messages == 1


def test_purge_deletes_keeps_a_value_put_after_listing(
    js: JetStreamContext, stream_name: str
) -> None:
    """A value put between purge_deletes' listing and its purge stays."""
    kv = js.create_key_value(bucket=stream_name, history=5)
    try:
        kv.put("k", b"old")
        kv.delete("k")
        listing = kv._initial

        def list_then_put(*args: Any, **kwargs: Any) -> Any:
            found = listing(*args, **kwargs)
            kv.put("k", b"new")  # another writer, right after the listing
            return found

        kv._initial = list_then_put  # type: ignore[method-assign]
        assert kv.purge_deletes(older_than=-1) == 1
        assert kv.get("k").value == b"new"
    finally:
        js.delete_key_value(stream_name)


def test_object_delete_refuses_a_version_put_meanwhile(
    js: JetStreamContext, stream_name: str
) -> None:
    """delete() removes the version it read; a put meanwhile makes it refuse, typed."""
    obs = js.create_object_store(bucket=stream_name)
    try:
        obs.put("o", b"v1")
        read_meta = obs._last_meta
        injected: list[bool] = []

        def read_then_put(*args: Any, **kwargs: Any) -> Any:
            raw = read_meta(*args, **kwargs)
            if not injected:
                injected.append(True)
                obs.put("o", b"v2")  # another writer replaces the object
            return raw

        obs._last_meta = read_then_put  # type: ignore[method-assign]
        with pytest.raises(jetstream_sync.WrongLastSequenceError):
            obs.delete("o")
        obs._last_meta = read_meta  # type: ignore[method-assign]
        assert obs.get("o") == b"v2"
    finally:
        js.delete_object_store(stream_name)


def test_bucket_deletes_refuse_streams_that_are_not_buckets(
    js: JetStreamContext, stream_name: str
) -> None:
    """delete_key_value / delete_object_store on a plain stream named KV_x / OBJ_x refuse."""
    for prefix, delete, error in (
        ("KV_", js.delete_key_value, jetstream_sync.KeyValueError),
        ("OBJ_", js.delete_object_store, jetstream_sync.ObjectStoreError),
    ):
        name = prefix + stream_name
        js.create_stream(name=name, subjects=[f"{name}.>"])
        try:
            with pytest.raises(error):
                delete(stream_name)
            assert js.stream(name).name == name
        finally:
            js.delete_stream(name)
