"""Every not-found error of the JetStream API names what was not found, against a real server."""

from __future__ import annotations

import pickle

import pytest

import jetstream_sync as js


@pytest.fixture
def ctx(js):
    """The shared ``js`` context (in this module ``js`` names the package)."""
    return js


def test_missing_stream_is_named(ctx, stream_name):
    """StreamNotFoundError names the stream, as ``.stream`` and in its text, keeping the codes."""
    for call in (ctx.stream, ctx.delete_stream, lambda name: ctx.consumer_names(name).__next__()):
        with pytest.raises(js.StreamNotFoundError) as info:
            call(stream_name)
        err = info.value
        assert err.stream == stream_name
        assert f"stream {stream_name!r}" in str(err)
        assert (err.code, err.err_code, err.description) == (404, 10059, "stream not found")


def test_missing_consumer_is_named_with_its_stream(ctx, stream):
    """ConsumerNotFoundError names the stream and the consumer."""
    for call in (stream.consumer, stream.delete_consumer):
        with pytest.raises(js.ConsumerNotFoundError) as info:
            call("NOPE")
        err = info.value
        assert (err.stream, err.consumer) == (stream.name, "NOPE")
        assert f"stream {stream.name!r}, consumer 'NOPE'" in str(err)
        assert err.err_code == 10014


def test_missing_message_is_named_by_stream_and_sequence(ctx, stream):
    """MessageNotFoundError of a get by sequence names the stream and the sequence."""
    ctx.publish(f"{stream.name}.a", b"1")
    with pytest.raises(js.MessageNotFoundError) as info:
        stream.get_msg(99)
    assert (info.value.stream, info.value.seq) == (stream.name, 99)
    assert f"stream {stream.name!r}, seq 99" in str(info.value)
    assert info.value.err_code == 10037


def test_missing_message_is_named_by_stream_and_subject(ctx, stream):
    """MessageNotFoundError of a last-for-subject get names the stream and the subject."""
    subject = f"{stream.name}.none"
    with pytest.raises(js.MessageNotFoundError) as info:
        stream.get_last_msg_for_subject(subject)
    assert (info.value.stream, info.value.subject) == (stream.name, subject)
    assert f"subject {subject!r}" in str(info.value)


@pytest.mark.parametrize("stream_options", [{"allow_direct": True}])
def test_missing_direct_get_message_is_named(ctx, stream):
    """A direct get that finds nothing names the stream and the sequence or subject."""
    with pytest.raises(js.MessageNotFoundError) as info:
        stream.direct_get(7)
    assert (info.value.stream, info.value.seq) == (stream.name, 7)
    subject = f"{stream.name}.none"
    with pytest.raises(js.MessageNotFoundError) as info:
        stream.direct_get_last_for_subject(subject)
    assert (info.value.stream, info.value.subject) == (stream.name, subject)


def test_publish_to_a_subject_no_stream_captures_names_the_subject(ctx, stream_name):
    """publish and publish_async to a subject without a stream name that subject, not an inbox."""
    subject = f"{stream_name}.nobody"
    with pytest.raises(js.NoRespondersError) as info:
        ctx.publish(subject, b"x", retry_attempts=0)
    assert info.value.subject == subject
    assert repr(subject) in str(info.value)
    with pytest.raises(js.NoRespondersError) as info:
        ctx.publish_async(subject, b"x").result(5)
    assert info.value.subject == subject
    assert repr(subject) in str(info.value)
    assert "_INBOX" not in str(info.value)


def test_named_errors_pickle_with_what_they_name(ctx, stream):
    """A not-found error keeps its class, codes and names through pickle (Spark ships them)."""
    with pytest.raises(js.ConsumerNotFoundError) as info:
        stream.consumer("NOPE")
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is js.ConsumerNotFoundError
    assert (copy.code, copy.err_code, copy.description) == (404, 10014, "consumer not found")
    assert (copy.stream, copy.consumer) == (stream.name, "NOPE")
    assert str(copy) == str(info.value)
    with pytest.raises(js.NoRespondersError) as caught:
        ctx.publish(f"{stream.name}x.nobody", b"x", retry_attempts=0)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.subject, str(again)) == (caught.value.subject, str(caught.value))


def test_errors_match_by_code_whatever_they_name():
    """The class still comes from err_code alone; the names are data on top."""
    err = js.errors.api_error(404, 10059, "stream not found", stream="S")
    assert type(err) is js.StreamNotFoundError
    assert type(js.errors.api_error(404, 10059, "stream not found")) is js.StreamNotFoundError
    assert str(js.errors.api_error(404, 10059, "stream not found")) == (
        "stream not found (code=404, err_code=10059)"
    )


def test_fetch_on_a_consumer_nothing_serves_names_stream_and_consumer(stream):
    """A fetch that no consumer answers names the pull subject, which holds both names."""
    consumer = stream.create_consumer(durable_name="GONE")
    stream.delete_consumer("GONE")
    with pytest.raises(js.NoRespondersError) as info:
        consumer.fetch(1, timeout=2)
    assert info.value.subject.endswith(f".CONSUMER.MSG.NEXT.{stream.name}.GONE")
    assert repr(info.value.subject) in str(info.value)
    with pytest.raises(js.ConsumerNotFoundError) as gone:
        consumer.info()
    assert (gone.value.stream, gone.value.consumer) == (stream.name, "GONE")
