"""Consumer management on Stream and on the context: create/update actions, lists, pause, unpin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jetstream_sync import errors
from jetstream_sync.errors import (
    ConsumerDoesNotExistError,
    ConsumerExistsError,
    ConsumerNotFoundError,
)
from jetstream_sync.jetstream.consumer_config import ConsumerConfig
from jetstream_sync.jetstream.enums import AckPolicy, DeliverPolicy, PriorityPolicy


def test_create_durable_and_get_it_back(stream):
    """A durable consumer is created, fetched by name, and reports its config."""
    cons = stream.create_consumer(durable_name="d1", ack_wait=7.5, max_deliver=3)
    assert cons.name == "d1" and cons.stream_name == stream.name
    again = stream.consumer("d1")
    cfg = again.cached_info.config
    assert cfg.ack_wait == 7.5 and cfg.max_deliver == 3 and cfg.ack_policy is AckPolicy.EXPLICIT
    assert not again.is_ephemeral


def test_create_action_refuses_a_different_config(stream):
    """create_consumer on an existing name with another config raises ConsumerExistsError."""
    stream.create_consumer(durable_name="d1")
    stream.create_consumer(durable_name="d1")  # identical: fine
    with pytest.raises(ConsumerExistsError) as err:
        stream.create_consumer(durable_name="d1", description="other")
    assert err.value.err_code == 10148


def test_update_action_needs_an_existing_consumer(stream):
    """update_consumer of a missing consumer raises ConsumerDoesNotExistError (10149)."""
    with pytest.raises(ConsumerDoesNotExistError) as err:
        stream.update_consumer(durable_name="ghost")
    assert err.value.err_code == 10149
    stream.create_consumer(durable_name="d1")
    updated = stream.update_consumer(durable_name="d1", description="new")
    assert updated.cached_info.config.description == "new"


def test_create_or_update(stream):
    """create_or_update_consumer creates, then updates."""
    stream.create_or_update_consumer(durable_name="d1")
    cons = stream.create_or_update_consumer(durable_name="d1", max_ack_pending=10)
    assert cons.info().config.max_ack_pending == 10


def test_config_object_plus_fields(stream):
    """A ConsumerConfig and keyword fields combine."""
    cfg = ConsumerConfig(durable_name="d1", filter_subject=f"{stream.name}.a")
    cons = stream.create_consumer(cfg, description="kw")
    info = cons.cached_info
    assert info.config.filter_subject == f"{stream.name}.a" and info.config.description == "kw"


def test_ephemeral_gets_a_name_and_filter_subjects(stream):
    """Without a name the consumer is ephemeral with a generated name; filter_subjects work."""
    cons = stream.create_consumer(
        filter_subjects=[f"{stream.name}.a", f"{stream.name}.b"],
        deliver_policy=DeliverPolicy.NEW,
    )
    assert cons.name and cons.is_ephemeral
    assert cons.info().config.filter_subjects == (f"{stream.name}.a", f"{stream.name}.b")


def test_names_list_info_delete(stream):
    """consumer_names, consumers, info and delete_consumer agree."""
    for n in ("a1", "a2", "a3"):
        stream.create_consumer(durable_name=n)
    assert sorted(stream.consumer_names()) == ["a1", "a2", "a3"]
    assert sorted(i.name for i in stream.consumers()) == ["a1", "a2", "a3"]
    assert stream.delete_consumer("a2") is True
    assert sorted(stream.consumer_names()) == ["a1", "a3"]
    with pytest.raises(ConsumerNotFoundError):
        stream.consumer("a2")
    with pytest.raises(ConsumerNotFoundError):
        stream.delete_consumer("a2")


def test_context_variants_take_the_stream_first(js, stream):
    """ctx.create_consumer(stream, ...) and friends mirror the Stream methods."""
    cons = js.create_consumer(stream.name, durable_name="c1")
    assert js.consumer(stream.name, "c1").name == cons.name
    assert js.consumer_info(stream.name, "c1").name == "c1"
    js.update_consumer(stream.name, durable_name="c1", description="x")
    js.create_or_update_consumer(stream.name, durable_name="c1", description="y")
    assert list(js.consumer_names(stream.name)) == ["c1"]
    assert [i.config.description for i in js.consumers(stream.name)] == ["y"]
    assert js.delete_consumer(stream.name, "c1")


def test_pause_and_resume(stream):
    """pause(until) pauses delivery; resume() ends it."""
    cons = stream.create_consumer(durable_name="p")
    until = datetime.now(UTC) + timedelta(minutes=5)
    res = cons.pause(until)
    assert res.paused and res.pause_remaining > 200
    assert cons.info().paused
    assert not cons.resume().paused
    assert not cons.info().paused
    stream.pause_consumer("p", until)
    assert stream.consumer("p").cached_info.paused
    stream.resume_consumer("p")


def test_naive_times_are_refused_naming_the_argument(stream):
    """A naive datetime for pause(until) or get_msgs(start_time) raises naming that argument."""
    stream.create_consumer(durable_name="p")
    with pytest.raises(ValueError, match="^until: "):
        stream.pause_consumer("p", datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="^start_time: "):
        stream.get_msgs(start_time=datetime(2020, 1, 1))


def test_unpin(js, stream):
    """unpin(group) releases the pinned client; a later pull gets a new pin id."""
    js.publish(f"{stream.name}.a", b"1")
    js.publish(f"{stream.name}.a", b"2")
    cons = stream.create_consumer(
        durable_name="pin", priority_policy=PriorityPolicy.PINNED_CLIENT, priority_groups=["g"]
    )
    assert len(cons.fetch(1, timeout=2, group="g")) == 1
    first = cons.pin_id("g")
    assert first
    cons.unpin("g")
    other = stream.consumer("pin")
    assert len(other.fetch(1, timeout=2, group="g")) == 1
    assert other.pin_id("g") and other.pin_id("g") != first


def test_ephemeral_deleted_on_with_exit(stream):
    """An ephemeral consumer made in a with block is deleted on exit; a durable is kept."""
    with stream.create_consumer() as eph:
        name = eph.name
        assert name in list(stream.consumer_names())
    assert name not in list(stream.consumer_names())
    with stream.create_consumer(durable_name="keep"):
        pass
    assert "keep" in list(stream.consumer_names())


def test_with_on_a_consumer_looked_up_keeps_it(stream, js):
    """Leaving a with block on a handle from consumer(name) or update_consumer keeps it."""
    stream.create_consumer(name="shared", inactive_threshold=3600)  # another process's
    with stream.consumer("shared"):
        pass
    with js.consumer(stream.name, "shared"):
        pass
    with stream.update_consumer(name="shared", inactive_threshold=1800):
        pass
    assert "shared" in list(stream.consumer_names())


def test_bad_names_rejected_before_sending(stream):
    """A consumer name with a dot or a space raises ValueError."""
    with pytest.raises(ValueError):
        stream.consumer("a.b")
    with pytest.raises(ValueError):
        stream.create_consumer(durable_name="a b")


def test_overlapping_filter_subjects_raise_a_typed_error(stream):
    """Overlapping filter_subjects (``a.*`` beside ``a.b``) raise OverlappingFilterSubjectsError."""
    with pytest.raises(errors.OverlappingFilterSubjectsError):
        stream.create_consumer(
            durable_name="overlap", filter_subjects=[f"{stream.name}.a.*", f"{stream.name}.a.b"]
        )
    assert list(stream.consumer_names()) == []


def test_work_queue_consumers_that_would_share_messages_are_refused_typed(js, stream_name):
    """A work queue's second unfiltered consumer (10099) and an overlapping filter (10100)
    both raise WorkQueueConsumerNotUniqueError."""
    wq = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"], retention="workqueue")
    wq.create_consumer(durable_name="a", filter_subject=f"{stream_name}.a.>")
    with pytest.raises(errors.WorkQueueConsumerNotUniqueError) as overlap:
        wq.create_consumer(durable_name="b", filter_subject=f"{stream_name}.a.x")
    wq.delete_consumer("a")
    wq.create_consumer(durable_name="all")
    with pytest.raises(errors.WorkQueueConsumerNotUniqueError) as unfiltered:
        wq.create_consumer(durable_name="c")
    assert (overlap.value.err_code, unfiltered.value.err_code) == (10100, 10099)
