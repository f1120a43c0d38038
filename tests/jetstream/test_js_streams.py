"""Stream management and message access against a real server."""

from __future__ import annotations

import pickle
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

import jetstream_sync as js
from jetstream_sync.jetstream._codec import config_matches
from jetstream_sync.jetstream.enums import StorageType
from jetstream_sync.jetstream.stream_config import StreamConfig, StreamSource
from tests.fixtures.polling import wait_for
from tests.fixtures.server import NatsServer


@pytest.fixture
def ctx(js):
    """The shared ``js`` context (in this module ``js`` names the package)."""
    return js


@pytest.fixture
def name(stream_name):
    """A unique stream name; the stream is deleted afterwards if it exists."""
    return stream_name


def _fill(ctx, name, count, subject=None):
    for i in range(count):
        ctx.publish(subject or f"{name}.s{i % 3}", b"m%d" % i)


def test_create_with_config_or_fields(ctx, name):
    """create_stream takes a StreamConfig, fields, or both; the server echoes the config."""
    config = StreamConfig(name=name, subjects=[f"{name}.>"], storage=StorageType.MEMORY)
    stream = ctx.create_stream(config, max_msgs=100, description="orders")
    info = stream.cached_info
    assert info.config.max_msgs == 100 and info.config.description == "orders"
    assert config_matches(StreamConfig(name=name, max_msgs=100), info.config)
    assert ctx.create_stream(config, max_msgs=100, description="orders").name == name


def test_create_existing_with_other_config_raises(ctx, name):
    """Re-creating a stream with a different config raises StreamNameInUseError."""
    ctx.create_stream(name=name, subjects=[f"{name}.>"])
    with pytest.raises(js.StreamNameInUseError) as info:
        ctx.create_stream(name=name, subjects=[f"{name}.other"])
    assert (info.value.code, info.value.err_code) == (400, 10058)


def test_update_and_create_or_update(ctx, name):
    """update_stream changes a stream; create_or_update creates or updates."""
    with pytest.raises(js.StreamNotFoundError):
        ctx.update_stream(name=name, subjects=[f"{name}.>"])
    ctx.create_or_update_stream(name=name, subjects=[f"{name}.>"])
    updated = ctx.create_or_update_stream(name=name, subjects=[f"{name}.>"], max_msgs=5)
    assert updated.cached_info.config.max_msgs == 5
    assert (
        ctx.update_stream(name=name, subjects=[f"{name}.>"], max_msgs=7).cached_info.config.max_msgs
        == 7
    )


def test_create_or_update_stream_racing_on_a_new_name(ctx, name):
    """create_or_update_stream from 16 threads at once on a new name, 16 configs: all succeed."""
    start = threading.Barrier(16)

    def create_or_update(i):
        start.wait()
        return ctx.create_or_update_stream(name=name, subjects=[f"{name}.>"], max_msgs=i + 1)

    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(create_or_update, i) for i in range(16)]
    assert [f.exception() for f in futures if f.exception()] == []
    assert 1 <= ctx.stream(name).info().config.max_msgs <= 16


def test_stream_and_stream_no_info(ctx, name):
    """stream() fetches info; stream_no_info() asks nothing; missing streams raise."""
    ctx.create_stream(name=name, subjects=[f"{name}.>"])
    assert ctx.stream(name).cached_info.config.name == name
    lazy = ctx.stream_no_info(name)
    assert lazy.cached_info is None and lazy.info().config.name == name
    with pytest.raises(js.StreamNotFoundError):
        ctx.stream("NO_SUCH_STREAM")


def test_delete_stream(ctx, name):
    """delete_stream returns True, then the stream is gone."""
    ctx.create_stream(name=name, subjects=[f"{name}.>"])
    assert ctx.delete_stream(name) is True
    with pytest.raises(js.StreamNotFoundError):
        ctx.delete_stream(name)


@pytest.mark.parametrize("bad", ["", "a b", "a.b", "a*", "a>", "a/b"])
def test_bad_stream_names_raise_before_sending(ctx, bad):
    """Invalid stream names raise ValueError without a request."""
    with pytest.raises(ValueError):
        ctx.stream_no_info(bad)
    with pytest.raises(ValueError):
        ctx.create_stream(name=bad, subjects=["x"])


def test_unknown_config_field_is_a_type_error(ctx, name):
    """A misspelt config field raises TypeError naming it."""
    with pytest.raises(TypeError, match="max_msg_count"):
        ctx.create_stream(name=name, max_msg_count=5)


@pytest.mark.slow
def test_stream_listing_paginates_past_300(nats_server):
    """stream_names and streams page through 300 streams lazily; subject filters apply."""
    with js.connect(nats_server.url) as nc:
        ctx = nc.jetstream(timeout=30)
        for i in range(300):
            ctx.create_stream(name=f"P{i}", subjects=[f"p{i}.>"], storage=StorageType.MEMORY)
        names = list(ctx.stream_names())
        assert len(names) == 300 and len(set(names)) == 300
        infos = list(ctx.streams())
        assert sorted(i.config.name for i in infos) == sorted(names)
        assert list(ctx.stream_names(subject="p7.x")) == ["P7"]
        assert [i.config.name for i in ctx.streams(subject="p8.>")] == ["P8"]


def test_stream_name_by_subject(ctx, name):
    """stream_name_by_subject finds the capturing stream or raises StreamNotFoundError."""
    ctx.create_stream(name=name, subjects=[f"{name}.>"])
    assert ctx.stream_name_by_subject(f"{name}.x.y") == name
    with pytest.raises(js.StreamNotFoundError):
        ctx.stream_name_by_subject("nothing.captures.this")


def test_info_subjects_filter_pages_and_deleted_details(ctx, name):
    """info() returns every subject count across pages, and deleted sequences on request."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"], storage=StorageType.MEMORY)
    for i in range(120):
        ctx.publish_async(f"{name}.k{i}", b"x")
    ctx.publish_async_completed(timeout=30)
    info = stream.info(subjects_filter=f"{name}.>")
    assert len(info.state.subjects) == 120
    stream.delete_msg(3)
    assert 3 in stream.info(deleted_details=True).state.deleted


@pytest.mark.slow
def test_info_subject_map_larger_than_one_page(ctx, name):
    """A subject map over the server's page size (100k) is fetched in full."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"], storage=StorageType.MEMORY)
    for i in range(100_050):
        ctx.publish_async(f"{name}.{i}", b"")
    ctx.publish_async_completed(timeout=60)
    assert len(stream.info(subjects_filter=">", timeout=30).state.subjects) == 100_050


def test_purge_variants(ctx, name):
    """purge by subject, below a sequence, and keeping the newest; each returns the count."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"])
    _fill(ctx, name, 30)
    assert stream.purge(subject=f"{name}.s0") == 10
    assert stream.purge(seq=10) == 6
    assert stream.purge(keep=5) == 9
    assert stream.info().state.messages == 5
    with pytest.raises(ValueError):
        stream.purge(seq=1, keep=1)
    assert stream.purge() == 5


def test_get_and_direct_get(ctx, name):
    """get_msg, last-for-subject and their direct variants return the stored messages."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True)
    ctx.publish(f"{name}.a", b"first", headers={"H": "1"})
    ctx.publish(f"{name}.b", b"second")
    ctx.publish(f"{name}.a", b"third")
    one = stream.get_msg(1)
    assert (one.subject, one.seq, one.data, one.headers["H"]) == (f"{name}.a", 1, b"first", "1")
    assert one.time is not None and one.time_ns > 0
    assert stream.get_last_msg_for_subject(f"{name}.a").data == b"third"
    direct = stream.direct_get(1)
    assert (direct.data, direct.headers["H"], direct.seq) == (b"first", "1", 1)
    assert stream.direct_get_last_for_subject(f"{name}.b").seq == 2
    with pytest.raises(js.MessageNotFoundError):
        stream.get_msg(99)
    with pytest.raises(js.MessageNotFoundError):
        stream.direct_get(99)


def test_batched_direct_get(ctx, name):
    """get_msgs and get_last_msgs_for use batched direct get and stop at the end marker."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True)
    _fill(ctx, name, 20)
    msgs = stream.get_msgs(start_seq=5, batch=4)
    assert [m.seq for m in msgs] == [5, 6, 7, 8]
    only_s1 = stream.get_msgs(start_seq=1, batch=100, subject=f"{name}.s1")
    assert [m.seq for m in only_s1] == list(range(2, 21, 3))
    assert len(stream.get_msgs(start_seq=1, batch=100, max_bytes=100)) < 20
    last = stream.get_last_msgs_for([f"{name}.s0", f"{name}.s2"])
    assert sorted(m.seq for m in last) == [18, 19]
    as_of = stream.get_last_msgs_for([f"{name}.>"], up_to_seq=6)
    assert sorted(m.seq for m in as_of) == [4, 5, 6]
    assert stream.get_msgs(start_seq=100, batch=5) == []


def test_get_last_msgs_for_up_to_time(ctx, name):
    """get_last_msgs_for(up_to_time=) answers as of the messages stored before that time, for
    literal, ``*`` and ``>`` subjects; a time before the first message gives []."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True)
    _fill(ctx, name, 20)
    seventh = stream.get_msg(7).time
    literals = [f"{name}.s0", f"{name}.s1", f"{name}.s2"]
    for subjects in (literals, [f"{name}.*"], [f"{name}.>"]):
        assert [m.seq for m in stream.get_last_msgs_for(subjects, up_to_time=seventh)] == [4, 5, 6]
    assert stream.get_last_msgs_for([f"{name}.>"], up_to_time=stream.get_msg(1).time) == []
    with pytest.raises(ValueError, match="up_to_seq or up_to_time"):
        stream.get_last_msgs_for([f"{name}.>"], up_to_seq=3, up_to_time=seventh)
    with pytest.raises(ValueError, match="up_to_time"):
        stream.get_last_msgs_for([f"{name}.>"], up_to_time=seventh.replace(tzinfo=None))


@pytest.mark.parametrize(
    ("max_bytes", "error"),
    [(-1, ValueError), (1.5, TypeError), ("10", TypeError), (2**63, ValueError)],
)
def test_get_msgs_refuses_a_bad_max_bytes_before_sending(ctx, name, max_bytes, error):
    """get_msgs(max_bytes=) that is no count of bytes raises; nothing is asked of the server."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True)
    _fill(ctx, name, 3)
    with pytest.raises(error, match="max_bytes"):
        stream.get_msgs(max_bytes=max_bytes)
    assert len(stream.get_msgs(max_bytes=0)) == 3  # 0: no limit, as before


def test_get_msgs_refuses_a_batch_past_the_servers_int64(ctx, name):
    """get_msgs(batch=2**63) raises ValueError before sending (the server's batch is an
    int64: it answered "Malformed Request", an APIError with no err_code)."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=True)
    with pytest.raises(ValueError, match="batch must be at most 9223372036854775807"):
        stream.get_msgs(batch=2**63)


def test_delete_msg_fast_and_erase(ctx, name):
    """delete_msg removes a message, with or without erasing it."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"])
    _fill(ctx, name, 3)
    assert stream.delete_msg(1) is True
    assert stream.delete_msg(2, erase=True) is True
    assert stream.info().state.messages == 1
    with pytest.raises(js.MessageNotFoundError):
        stream.get_msg(2)


@pytest.mark.parametrize("storage", ["file", "memory"])
@pytest.mark.parametrize("erase", [False, True], ids=["no_erase", "erase"])
def test_delete_msg_of_a_missing_message_is_message_not_found(ctx, name, storage, erase):
    """delete_msg of a deleted sequence, one below the first or past the last raises
    MessageNotFoundError naming the sequence, on either storage; nothing else goes."""
    stream = ctx.create_stream(
        name=name, subjects=[f"{name}.>"], storage=storage, allow_direct=True
    )
    _fill(ctx, name, 6)
    stream.purge(seq=3)
    stream.delete_msg(4)
    for seq in (1, 4, 7, 1000):
        with pytest.raises(js.MessageNotFoundError) as caught:
            stream.delete_msg(seq, erase=erase)
        assert caught.value.seq == seq
    assert [m.seq for m in stream.get_msgs(batch=10)] == [3, 5, 6]


def test_delete_msg_refused_by_deny_delete_is_no_message_not_found(ctx, name):
    """On a deny_delete stream delete_msg raises the server's refusal, not MessageNotFoundError."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"], deny_delete=True)
    _fill(ctx, name, 1)
    for seq in (1, 2):
        with pytest.raises(js.StreamMsgDeleteFailedError):
            stream.delete_msg(seq)


def test_stream_configs_the_server_refuses_raise_typed_errors(ctx, name):
    """Subjects another stream captures, an update the server cannot make (storage, unseal,
    a source cycle) and a changed mirror raise their classes; the stream is unchanged."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"])
    with pytest.raises(js.StreamSubjectOverlapError):
        ctx.create_stream(name=f"{name}_OVER", subjects=[f"{name}.a"])
    config = stream.info().config
    with pytest.raises(js.StreamInvalidConfigError):
        ctx.update_stream(config, storage=StorageType.MEMORY)
    with pytest.raises(js.StreamInvalidConfigError):
        ctx.update_stream(config, sources=[StreamSource(name=name)])
    ctx.update_stream(config, sealed=True)
    with pytest.raises(js.StreamInvalidConfigError):
        ctx.update_stream(stream.info().config, sealed=False)
    assert stream.info().config.storage == StorageType.FILE
    mirror = ctx.create_stream(name=f"{name}_MIRROR", mirror=StreamSource(name=name))
    try:
        with pytest.raises(js.StreamMirrorNotUpdatableError):
            ctx.update_stream(mirror.info().config, mirror=StreamSource(name=name, opt_start_seq=2))
    finally:
        ctx.delete_stream(mirror.name)


@pytest.mark.parametrize("part", ["mirror", "sources"])
def test_an_external_api_prefix_on_the_local_api_is_a_source_error(ctx, name, part):
    """A mirror or source whose external API prefix is this account's own ``$JS.API``
    (err_code 10021) raises StreamSourceInvalidError; no stream is made."""
    source = StreamSource(name="ORIGIN", external=js.ExternalStream(api="$JS.API"))
    with pytest.raises(js.StreamSourceInvalidError, match=r"\$JS\.API") as caught:
        ctx.create_stream(name=name, **{part: source if part == "mirror" else [source]})
    assert caught.value.err_code == 10021
    with pytest.raises(js.StreamNotFoundError):
        ctx.stream(name)


def test_mirror_and_sourced_stream(ctx, name):
    """A mirror copies its origin; a sourced stream aggregates and transforms subjects."""
    ctx.create_stream(name=name, subjects=[f"{name}.>"])
    _fill(ctx, name, 10)
    mirror = ctx.create_stream(name=f"{name}_M", mirror=StreamSource(name=name))
    sourced = ctx.create_stream(
        name=f"{name}_S",
        sources=[StreamSource(name=name, filter_subject=f"{name}.s1")],
    )
    try:
        assert wait_for(lambda: mirror.info().state.messages == 10, timeout=10)
        assert wait_for(lambda: sourced.info().state.messages == 3, timeout=10)
        assert mirror.cached_info.mirror.name == name
        assert sourced.cached_info.sources[0].name == name
    finally:
        ctx.delete_stream(f"{name}_M")
        ctx.delete_stream(f"{name}_S")


def test_source_a_work_queue_through_its_consumer(ctx, name):
    """A stream sources a work queue through a durable push consumer (2.14+), named by
    ``js.StreamConsumerSource``; its info round-trips through update_stream unchanged."""
    queue = ctx.create_stream(name=name, subjects=[f"{name}.>"], retention="workqueue")
    _fill(ctx, name, 5)
    deliver = f"deliver.{name}"
    queue.create_consumer(
        durable_name="c",
        deliver_subject=deliver,
        ack_policy=js.AckPolicy.FLOW_CONTROL,
        flow_control=True,
        idle_heartbeat=1.0,
    )
    source = js.StreamSource(
        name=name, consumer=js.StreamConsumerSource(name="c", deliver_subject=deliver)
    )
    copy = ctx.create_stream(name=f"{name}_S", sources=[source])
    try:
        assert wait_for(lambda: copy.info().state.messages == 5, timeout=10)
        config = copy.info().config
        assert config.sources == (source,)
        assert ctx.update_stream(config).cached_info.config == config
    finally:
        ctx.delete_stream(f"{name}_S")


def test_account_info_reports_api_level(ctx):
    """account_info includes the server's JetStream API level."""
    info = ctx.account_info()
    assert info.api.level >= 5


def test_jetstream_not_enabled(tmp_path):
    """A server without JetStream makes API calls raise JetStreamNotEnabledError."""
    with NatsServer(jetstream=False) as server, js.connect(server.url) as nc:
        with pytest.raises(js.JetStreamNotEnabledError):
            nc.jetstream(timeout=2).account_info()


def test_errors_and_configs_pickle(ctx, name):
    """API errors keep their fields through pickle; configs and infos pickle equal."""
    with pytest.raises(js.StreamNotFoundError) as info:
        ctx.stream(name)
    err = pickle.loads(pickle.dumps(info.value))
    assert type(err) is js.StreamNotFoundError
    assert (err.code, err.err_code, err.description) == (404, 10059, "stream not found")
    stream = ctx.create_stream(
        name=name, subjects=[f"{name}.>"], max_age=timedelta(hours=1).total_seconds()
    )
    assert pickle.loads(pickle.dumps(stream.cached_info)) == stream.cached_info
    assert stream.cached_info.config.max_age == 3600.0


def test_unknown_api_error_keeps_all_fields(ctx, name):
    """An error code without a subclass is a plain APIError with code, err_code, description."""
    ctx.create_stream(name=name, subjects=[f"{name}.>"])
    with pytest.raises(js.APIError) as info:
        ctx.update_stream(name=name, subjects=[f"{name}.>"], storage=StorageType.MEMORY)
    assert info.value.code == 500 or info.value.code == 400
    assert info.value.err_code and info.value.description


def test_direct_get_without_allow_direct_says_so(ctx, name):
    """direct_get on a stream without allow_direct names that, not 'JetStream is not enabled'."""
    stream = ctx.create_stream(name=name, subjects=[f"{name}.>"])
    ctx.publish(f"{name}.a", b"x")
    for call in (
        lambda: stream.direct_get(1),
        lambda: stream.direct_get_last_for_subject(f"{name}.a"),
        lambda: stream.get_msgs(1, batch=5),
    ):
        with pytest.raises(js.DirectGetNotAllowedError, match="allow_direct") as err:
            call()
        assert not isinstance(err.value, js.JetStreamNotEnabledError)
        assert name in str(err.value)
    assert stream.get_msg(1).data == b"x"  # the stream itself is fine


def test_direct_get_on_a_missing_stream_says_so(ctx, name):
    """direct_get on a stream that does not exist raises StreamNotFoundError."""
    stream = ctx.stream_no_info(name)
    for call in (lambda: stream.direct_get(1), lambda: stream.get_msgs(1)):
        with pytest.raises(js.StreamNotFoundError):
            call()


def test_a_sealed_stream_refuses_publishes_deletes_and_purges_with_a_typed_error(ctx, stream):
    """After ``sealed=True``: publish, publish_async, delete_msg and purge raise
    StreamSealedError (10109); the stream keeps what it held."""
    subject = f"{stream.name}.x"
    ctx.publish(subject, b"kept")
    ctx.update_stream(name=stream.name, subjects=[f"{stream.name}.>"], sealed=True)
    for call in (
        lambda: ctx.publish(subject, b"late"),
        lambda: ctx.publish_async(subject, b"late").result(5),
        lambda: stream.delete_msg(1),
        stream.purge,
    ):
        with pytest.raises(js.StreamSealedError) as refused:
            call()
        assert refused.value.err_code == 10109
    assert stream.info().state.messages == 1
