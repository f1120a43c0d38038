"""docs/errors.md is the contract: each error class it lists is the one a real case raises.

The test walks the tables of docs/errors.md. Each class named there has a case here,
run against a real nats-server (or, for errors refused before sending, the client's
own check), or a named test elsewhere in the suite that makes it (fault proxies, fake
servers, old servers, Spark). Every ``err_code`` the page gives maps to its class, and
every code the client registers is on the page.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync as j
from jetstream_sync.errors import APIError, api_error
from jetstream_sync.jetstream.publish import parse_pub_ack
from jetstream_sync.jetstream.stream import Stream
from tests.fixtures.polling import wait_for

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "errors.md"
_ROW = re.compile(r"^\|\s*\[?`(\w+)`")
_CODES = re.compile(r"\b(10\d{3})\b")


def _documented() -> dict[str, set[int]]:
    """Each error class the page's tables list (first column), with the err_codes given."""
    found: dict[str, set[int]] = {}
    for line in PAGE.read_text().splitlines():
        m = _ROW.match(line)
        cls = getattr(j, m.group(1), None) if m else None
        if m is None or not (isinstance(cls, type) and issubclass(cls, BaseException)):
            continue
        cells = line.split("|")
        head = cells[1] + (cells[2] if issubclass(cls, APIError) else "")
        found.setdefault(m.group(1), set()).update(int(c) for c in _CODES.findall(head))
    return found


class Env:
    """What a case needs: the shared server's client and context, fresh streams."""

    def __init__(self, request: pytest.FixtureRequest, nc: j.Client, js: j.JetStreamContext):
        self.request, self.nc, self.js = request, nc, js
        self.url = request.getfixturevalue("shared_server").url
        self._streams: list[str] = []

    def name(self) -> str:
        return "DOC" + uuid.uuid4().hex[:8].upper()

    def stream(self, **options: Any) -> Stream:
        name = self.name()
        self._streams.append(name)
        return self.js.create_stream(name=name, subjects=[f"{name}.>"], **options)

    def mirror(self, origin: Stream) -> Stream:
        name = self.name()
        self._streams.append(name)
        return self.js.create_stream(name=name, mirror=j.StreamSource(name=origin.name))

    def bucket(self) -> str:
        name = self.name()
        self._streams += [f"KV_{name}", f"OBJ_{name}"]
        return name

    def close(self) -> None:
        for name in self._streams:
            try:
                self.js.delete_stream(name)
            except j.StreamNotFoundError:
                pass


def _raw_reply(env: Env, subject: str, reply_tail: str, headers: dict[str, str] | None = None):
    """Publish with a crafted reply subject; parse the stream's answer as a PubAck."""
    inbox = env.nc.new_inbox()
    with env.nc.subscribe(f"{inbox}.>") as sub:
        env.nc.publish(subject, b"x", reply=f"{inbox}.{reply_tail}", headers=headers)
        return parse_pub_ack(sub.next_msg(timeout=5))


def _slow_consumer(env: Env) -> BaseException:
    seen: list[BaseException] = []
    with j.connect(env.url, error_cb=seen.append) as nc:
        nc.subscribe("doc.slow", pending_msgs_limit=1)
        for _ in range(3):
            nc.publish("doc.slow", b"x")
        nc.flush()
        wait_for(lambda: seen, timeout=5)
    return seen[0]


def _too_many_pending(env: Env) -> None:
    ctx = env.nc.jetstream(max_ack_inflight=1, backpressure_on_inflight=False)
    with env.nc.subscribe("doc.noack"):  # a listener that never acks
        ctx.publish_async("doc.noack", b"1")
        ctx.publish_async("doc.noack", b"2")


def _too_many_results(env: Env) -> None:
    s = env.stream(allow_direct=True)
    for i in range(1025):
        env.js.publish_async(f"{s.name}.{i}", b"")
    env.js.publish_async_completed(30)
    reply = env.nc.request(f"$JS.API.DIRECT.GET.{s.name}", json.dumps({"multi_last": [">"]}))
    raise api_error(reply.status or 0, 0, reply.description, stream=s.name)


def _domain_down(env: Env) -> None:
    # Consumer creation in a JetStream domain that no server answers: no responders, an
    # error that can heal (the domain's servers may come back), so the links are retried.
    ctx = env.nc.jetstream(domain=f"DOWN{env.name()}", timeout=1)
    ctx.ordered_consumer("ORDERS", max_reset_attempts=2).fetch(1, timeout=5)


def _ordered_in_use(env: Env) -> None:
    oc = env.stream().ordered_consumer()
    with oc.messages():
        oc.fetch(1, timeout=1)


def _fetched(env: Env) -> j.Msg:
    s = env.stream()
    env.js.publish(f"{s.name}.a", b"x")
    return s.create_consumer(durable_name="d").fetch(1, timeout=5)[0]


def _closed_iterator(env: Env) -> None:
    s = env.stream()
    it = s.create_consumer(durable_name="d").messages()
    it.stop()
    it.next(timeout=1)


def _kv(env: Env) -> j.KeyValue:
    return env.js.create_key_value(bucket=env.bucket(), history=5)


def _obs(env: Env) -> j.ObjectStore:
    return env.js.create_object_store(bucket=env.bucket())


def _rename_onto(env: Env) -> None:
    obs = _obs(env)
    obs.put("a", b"1")
    obs.put("b", b"2")
    obs.update_meta("a", j.ObjectMeta(name="b"))


def _link_to_link(env: Env) -> None:
    obs = _obs(env)
    info = obs.put("a", b"1")
    link = obs.add_link("l1", info)
    obs.add_link("l2", link)


def _bucket_link(env: Env) -> None:
    obs = _obs(env)
    obs.add_bucket_link("b", obs)
    obs.get("b")


def _schedule_raw(env: Env, **extra: str) -> None:
    s = env.stream(allow_msg_schedules=True, allow_msg_ttl=True)
    headers = {"Nats-Schedule": "@every 1h", "Nats-Schedule-Target": f"{s.name}.out", **extra}
    env.js.publish(f"{s.name}.sched", b"", headers=headers)


def _cron_zone(env: Env) -> None:
    s = env.stream(allow_msg_schedules=True)
    headers = {
        "Nats-Schedule": "0 0 * * * *",
        "Nats-Schedule-Target": f"{s.name}.out",
        "Nats-Schedule-Time-Zone": "Mars/Olympus_Mons",
    }
    env.js.publish(f"{s.name}.sched", b"", headers=headers)


def _fast_batch_too_big_message(env: Env) -> None:
    """A message over max_msg_size in the middle of a fast batch: refused with its sequence."""
    s = env.stream(allow_batched=True, max_msg_size=100)
    with env.js.fast_batch() as batch:
        batch.add(f"{s.name}.a", b"1")
        batch.add(f"{s.name}.a", b"x" * 200)
        batch.add(f"{s.name}.a", b"3")
        batch.commit()


def _fast_batch_closed(env: Env) -> None:
    s = env.stream(allow_batched=True)
    with env.js.fast_batch() as batch:
        batch.add(f"{s.name}.a", b"1")
        batch.commit()
        batch.add(f"{s.name}.a", b"2")


def _duplicate_in_batch(env: Env) -> None:
    s = env.stream(allow_atomic=True)
    env.js.publish(f"{s.name}.a", b"1", msg_id="one")
    env.js.publish_batch([(f"{s.name}.a", b"2", {"Nats-Msg-Id": "one"})])


def _wrong_last_msg_id(env: Env) -> None:
    s = env.stream()
    env.js.publish(f"{s.name}.a", b"1", msg_id="one")
    env.js.publish(f"{s.name}.a", b"2", expected_last_msg_id="two")


def _consumer_exists(env: Env) -> None:
    s = env.stream()
    s.create_consumer(durable_name="d", ack_wait=5)
    s.create_consumer(durable_name="d", ack_wait=9)


def _too_many_consumers(env: Env) -> None:
    s = env.stream(max_consumers=1)
    s.create_consumer(durable_name="only")
    s.create_consumer(durable_name="one_more")


def _name_in_use(env: Env) -> None:
    s = env.stream()
    env.js.create_stream(name=s.name, subjects=[f"{s.name}.other"])


def _obs_exists(env: Env) -> None:
    name = env.bucket()
    env.js.create_object_store(bucket=name)
    env.js.create_object_store(bucket=name, description="another config")


def _key_deleted(env: Env) -> None:
    kv = _kv(env)
    kv.put("k", b"v")
    kv.delete("k")
    kv.get("k")


def _key_exists(env: Env) -> None:
    kv = _kv(env)
    kv.create("k", b"v")
    kv.create("k", b"w")


def _key_wrong_last(env: Env) -> None:
    kv = _kv(env)
    kv.put("k", b"v")
    kv.update("k", b"w", last=99)


def _closed_client(env: Env) -> None:
    nc = j.connect(env.url)
    nc.close()
    nc.publish("doc.closed", b"x")


Case = Callable[[Env], Any]


def _mirror_changed(env: Env) -> None:
    origin = env.stream()
    mirror = env.mirror(origin)
    env.js.update_stream(
        mirror.cached_info.config, mirror=j.StreamSource(name=origin.name, opt_start_seq=2)
    )


CASES: dict[str, Case] = {
    # connection and core
    "NoServersError": lambda e: j.connect("nats://127.0.0.1:1", connect_timeout=0.5),
    "AuthorizationError": lambda e: j.connect(e.request.getfixturevalue("auth_server").url),
    "NKeyError": lambda e: j.connect(e.url, nkeys_seed="SUBADSEED" * 7),
    "ConnectionClosedError": _closed_client,
    "TimeoutError": lambda e: e.nc.subscribe("doc.silence").next_msg(timeout=0.05),
    "NoRespondersError": lambda e: e.nc.request(f"doc.nobody.{e.name()}", timeout=2),
    "BadSubjectError": lambda e: e.nc.publish("a b", b"x"),
    "BadHeaderError": lambda e: e.nc.publish("a", b"x", headers={"K K": "v"}),
    "MaxPayloadError": lambda e: e.nc.publish("a", b"x" * (e.nc.max_payload + 1)),
    "LimitExceededError": lambda e: e.nc.publish("a." + "x" * 5000, b"x"),
    "SlowConsumerError": _slow_consumer,
    # JetStream
    "StreamNotFoundError": lambda e: e.js.stream(e.name()),
    "StreamNameInUseError": _name_in_use,
    "StreamSubjectOverlapError": lambda e: e.js.create_stream(
        name=e.name(), subjects=[f"{e.stream().name}.a"]
    ),
    "StreamSourceInvalidError": lambda e: e.js.create_stream(
        name=e.name(), sources=[j.StreamSource(name="A"), j.StreamSource(name="A")]
    ),
    "StreamTransformInvalidError": lambda e: e.js.create_stream(
        name=(n := e.name()),
        subjects=[f"{n}.>"],
        subject_transform=j.SubjectTransform(src=f"{n}.>", dest="x.{{wildcard(5)}}"),
    ),  # fmt: skip
    "StreamInvalidConfigError": lambda e: e.js.update_stream(
        e.stream().cached_info.config, storage=j.StorageType.MEMORY
    ),
    "StreamMirrorNotUpdatableError": _mirror_changed,
    "OverlappingFilterSubjectsError": lambda e: e.stream().create_consumer(
        filter_subjects=["x.*", "x.a"]
    ),
    "ConsumerNotFoundError": lambda e: e.stream().consumer("nope"),
    "MessageNotFoundError": lambda e: e.stream().get_msg(5),
    "WrongLastSequenceError": lambda e: e.js.publish(
        f"{e.stream().name}.a", b"x", expected_last_seq=99
    ),
    "WrongLastMsgIdError": _wrong_last_msg_id,
    "StreamWrongExpectedError": lambda e: e.js.publish(
        f"{e.stream().name}.a", b"x", expected_stream="ELSEWHERE"
    ),
    "TooManyResultsError": _too_many_results,
    "MessageTooLargeError": lambda e: e.js.publish(
        f"{e.stream(max_msg_size=10).name}.a", b"x" * 100
    ),
    "HeadersTooLargeError": lambda e: e.js.publish(
        f"{e.stream().name}.a", b"x", headers={"Big": "x" * 70_000}
    ),
    "MessageTTLDisabledError": lambda e: e.js.publish(f"{e.stream().name}.a", b"x", ttl=5),
    "MessageTTLInvalidError": lambda e: e.js.publish(
        f"{e.stream(allow_msg_ttl=True).name}.a", b"x", headers={"Nats-TTL": "soon"}
    ),
    "TooManyPendingAcksError": _too_many_pending,
    "MsgAlreadyAckedError": lambda e: [m.ack() for m in [_fetched(e)] * 2],
    "NotJetStreamMsgError": lambda e: _core_msg(e).ack(),
    "ConsumerExistsError": _consumer_exists,
    "MaximumConsumersLimitError": _too_many_consumers,
    "ConsumerDoesNotExistError": lambda e: e.stream().update_consumer(durable_name="nope"),
    "ConsumerCreateError": lambda e: [
        (s := e.stream()).create_consumer(durable_name="c"),
        s.update_consumer(durable_name="c", deliver_policy=j.DeliverPolicy.NEW),
    ],
    "WorkQueueConsumerNotUniqueError": lambda e: [
        (s := e.stream(retention=j.RetentionPolicy.WORK_QUEUE)).create_consumer(durable_name="a"),
        s.create_consumer(durable_name="b"),
    ],
    "ReplicasNotSupportedError": lambda e: e.stream().create_consumer(num_replicas=3),
    "StreamMsgDeleteFailedError": lambda e: [
        e.js.publish(f"{(s := e.stream(deny_delete=True)).name}.a", b"x"),
        s.delete_msg(1),
    ],
    "StreamPurgeFailedError": lambda e: e.stream(deny_purge=True).purge(),
    "StreamStoreFailedError": lambda e: [
        e.js.publish(f"{(s := e.stream(max_msgs=1, discard=j.DiscardPolicy.NEW)).name}.a", b"x"),
        e.js.publish_async(f"{s.name}.a", b"y").result(timeout=5),
    ],
    "InsufficientResourcesError": lambda e: e.stream(max_bytes=10**15),
    "DirectGetNotAllowedError": lambda e: e.stream().direct_get(1),
    "IteratorClosedError": _closed_iterator,
    "OrderedConsumerResetError": _domain_down,
    "OrderedConsumerInUseError": _ordered_in_use,
    # Key-Value
    "InvalidBucketNameError": lambda e: e.js.key_value("a.b"),
    "InvalidKeyError": lambda e: _kv(e).put("a..b", b"v"),
    "BucketNotFoundError": lambda e: e.js.key_value(e.name()),
    "KeyNotFoundError": lambda e: _kv(e).get("none"),
    "KeyDeletedError": _key_deleted,
    "KeyWrongLastSequenceError": _key_wrong_last,
    "KeyExistsError": _key_exists,
    # Object Store
    "InvalidObjectStoreNameError": lambda e: e.js.create_object_store(bucket="a.b"),
    "InvalidObjectNameError": lambda e: _obs(e).put("", b"x"),
    "ObjectStoreNotFoundError": lambda e: e.js.object_store(e.name()),
    "ObjectStoreExistsError": _obs_exists,
    "ObjectNotFoundError": lambda e: _obs(e).get("none"),
    "ObjectAlreadyExistsError": _rename_onto,
    "ObjectLinkError": _link_to_link,
    "LinkIsABucketError": _bucket_link,
    # counters and schedules
    "CountersNotEnabledError": lambda e: e.js.counter(e.stream().name),
    "CounterIncrementMissingError": lambda e: e.js.publish(
        f"{e.stream(allow_msg_counter=True).name}.c", b""
    ),
    "CounterPayloadError": lambda e: e.js.publish(
        f"{e.stream(allow_msg_counter=True).name}.c", b"body", headers={"Nats-Incr": "+1"}
    ),
    "CounterIncrementInvalidError": lambda e: e.js.publish(
        f"{e.stream(allow_msg_counter=True).name}.c", b"", headers={"Nats-Incr": "one"}
    ),
    "MirrorWithCountersError": lambda e: e.js.create_stream(
        name=e.name(), mirror=j.StreamSource(name=e.stream().name), allow_msg_counter=True
    ),
    "CounterNotFoundError": lambda e: e.js.counter(e.stream(allow_msg_counter=True).name).load(
        "x.never"
    ),
    "SchedulesNotEnabledError": lambda e: e.js.schedule(
        f"{e.stream().name}.s", f"{e.stream().name}.t", every=60
    ),
    "SchedulePatternInvalidError": lambda e: _schedule_raw(
        e, **{"Nats-Schedule": "@every 10000000000s"}
    ),
    "ScheduleTargetInvalidError": lambda e: e.js.schedule(
        f"{e.stream(allow_msg_schedules=True).name}.s", "elsewhere.t", every=60
    ),
    "ScheduleTTLInvalidError": lambda e: _schedule_raw(e, **{"Nats-Schedule-TTL": "soon"}),
    "ScheduleRollupInvalidError": lambda e: _schedule_raw(e, **{"Nats-Rollup": "all"}),
    "ScheduleSourceInvalidError": lambda e: _schedule_raw(e, **{"Nats-Schedule-Source": "a.*"}),
    "ScheduleSchedulerInvalidError": lambda e: _schedule_raw(e, **{"Nats-Scheduler": "x.y"}),
    "ScheduleTimeZoneInvalidError": _cron_zone,
    "NotAScheduleError": lambda e: [
        e.js.publish(f"{(s := e.stream()).name}.o", b"x"),
        e.js.cancel_schedule(f"{s.name}.o"),
    ],
    # batches
    "AtomicPublishDisabledError": lambda e: e.js.publish_batch([(f"{e.stream().name}.a", b"x")]),
    "AtomicPublishUnsupportedHeaderError": lambda e: e.js.publish_batch(
        [(f"{e.stream(allow_atomic=True).name}.a", b"x", {"Nats-Expected-Last-Msg-Id": "x"})]
    ),
    "AtomicPublishDuplicateMsgIdError": _duplicate_in_batch,
    "BatchPublishDisabledError": lambda e: e.js.fast_batch().add(f"{e.stream().name}.a", b"x"),
    "BatchPublishInvalidPatternError": lambda e: _raw_reply(
        e, f"{e.stream(allow_batched=True).name}.a", "10.ok.x.0.$FI"
    ),
    "BatchPublishInvalidBatchIdError": lambda e: _raw_reply(
        e, f"{e.stream(allow_batched=True).name}.a", "x" * 70 + ".10.ok.1.0.$FI"
    ),
    "BatchPublishUnknownBatchIdError": lambda e: _raw_reply(
        e, f"{e.stream(allow_batched=True).name}.a", "10.ok.2.1.$FI"
    ),
    "FastBatchError": _fast_batch_too_big_message,
    "FastBatchMessageError": _fast_batch_too_big_message,
    "FastBatchClosedError": _fast_batch_closed,
}


def _core_msg(env: Env) -> j.Msg:
    with env.nc.subscribe("doc.core") as sub:
        env.nc.publish("doc.core", b"x")
        return sub.next_msg(timeout=5)


# Made by tests that need a fault proxy, a fake or old server, a cluster, fork or Spark.
ELSEWHERE: dict[str, str] = {
    "StreamSealedError": "tests/jetstream/test_js_streams.py::"
    "test_a_sealed_stream_refuses_publishes_deletes_and_purges_with_a_typed_error",
    "DuplicateMsgIdInProcessError": "tests/core/test_failover.py::"
    "test_retry_loop_rides_a_duplicate_in_process",
    "ConnectionLostError": "tests/jetstream/test_direct_batch_route.py::"
    "test_a_dropped_connection_fails_the_request_in_flight",
    "ServerStartError": "tests/testing/test_fixtures.py::test_start_failure_reports_the_log",
    "ForkedClientError": "tests/core/test_fork.py::test_next_msg_without_timeout",
    "WaitModeError": "tests/recipes/test_gevent.py::test_a_wait_mode_that_cannot_work_is_refused",
    "InlineCallbackError": "tests/core/test_inline_callbacks.py::"
    "test_calls_that_wait_for_reads_are_refused_in_an_inline_callback",
    "ReconnectBufferFullError": "tests/core/test_wait_deadlines.py::"
    "test_reconnect_buffer_full_error_is_a_public_error",
    "WriteBufferTimeoutError": "tests/jetstream/test_acks.py::"
    "test_ack_sync_that_found_no_room_to_send_can_be_sent_again",
    "ProtocolError": "tests/core/test_hostile_server.py::"
    "test_malformed_frame_is_a_protocol_error_then_a_reconnect",
    "StaleConnectionError": "tests/core/test_hostile_server.py::"
    "test_each_err_is_typed_then_silence_is_stale_and_the_client_reconnects",
    "PermissionViolationError": "tests/core/test_hostile_server.py::"
    "test_a_real_permission_violation_keeps_the_connection",
    "MaxConnectionsExceededError": "tests/core/test_hostile_server.py::"
    "test_each_err_is_typed_then_silence_is_stale_and_the_client_reconnects",
    "MaxSubscriptionsExceededError": "tests/core/test_max_subscriptions.py::"
    "test_a_request_at_the_limit_raises_then_works_once_a_subscription_is_freed",
    "ServerSlowConsumerError": "tests/core/test_hostile_server.py::"
    "test_each_err_is_typed_then_silence_is_stale_and_the_client_reconnects",
    "ServerError": "tests/core/test_hostile_server.py::"
    "test_each_err_is_typed_then_silence_is_stale_and_the_client_reconnects",
    "JetStreamNotEnabledError": "tests/jetstream/test_js_streams.py::test_jetstream_not_enabled",
    "RequiredApiLevelError": "tests/jetstream/test_schedules.py::"
    "test_an_old_server_is_refused_naming_the_version",
    "ConsumerDeletedError": "tests/jetstream/test_pull.py::"
    "test_messages_raises_when_consumer_deleted",
    "NoHeartbeatError": "tests/jetstream/test_pull_status.py::"
    "test_missed_heartbeats_raise_no_heartbeat_error",
    "PullBadRequestError": "tests/jetstream/test_pull_status.py::test_400_bad_request",
    "PriorityGroupError": "tests/jetstream/test_priority_groups.py::"
    "test_server_refusals_map_to_priority_group_error",
    "ConsumerPushBasedError": "tests/jetstream/test_pull_status.py::"
    "test_409_consumer_is_push_based",
    "MaximumStreamsLimitError": "tests/jetstream/test_consumer_limit.py::"
    "test_an_account_at_its_max_streams_raises_a_typed_error",
    "PullRequestLimitError": "tests/jetstream/test_pull_status.py::test_409_exceeded_max_waiting",
    "LeadershipChangedError": "tests/jetstream/test_pull_status.py::test_409_leadership_change",
    "ServerShutdownError": "tests/jetstream/test_pull_status.py::test_409_server_shutdown",
    "PinIdMismatchError": "tests/jetstream/test_priority_groups.py::"
    "test_423_consume_reports_a_warning_and_goes_on",
    "DigestMismatchError": "tests/object_store/test_object_store.py::"
    "test_digest_mismatch_is_detected",
    "ObjectSizeMismatchError": "tests/object_store/test_object_store.py::"
    "test_size_mismatch_is_detected",
    "BadObjectMetaError": "tests/object_store/test_object_store.py::test_bad_meta_is_reported",
    "ObjectReplacedError": "tests/object_store/test_object_store_races.py::"
    "test_get_into_a_writer_raises_when_the_object_is_replaced_mid_read",
    "AtomicPublishMissingSeqError": "tests/jetstream/test_fast_batch.py::"
    "test_malformed_atomic_batch_codes_map_to_types",
    "AtomicPublishIncompleteBatchError": "tests/jetstream/test_fast_batch.py::"
    "test_malformed_atomic_batch_codes_map_to_types",
    "AtomicPublishInvalidBatchIdError": "tests/jetstream/test_fast_batch.py::"
    "test_malformed_atomic_batch_codes_map_to_types",
    "AtomicPublishInvalidCommitError": "tests/jetstream/test_fast_batch.py::"
    "test_malformed_atomic_batch_codes_map_to_types",
    "AtomicPublishTooLargeBatchError": "tests/jetstream/test_fast_batch.py::"
    "test_batch_limits_map_to_their_errors",
    "AtomicPublishTooManyInflightError": "tests/jetstream/test_fast_batch.py::"
    "test_batch_limits_map_to_their_errors",
    "BatchPublishTooManyInflightError": "tests/jetstream/test_fast_batch.py::"
    "test_batch_limits_map_to_their_errors",
    "FastBatchGapError": "tests/jetstream/test_fast_batch.py::"
    "test_lost_message_stops_a_failing_batch",
    "FastBatchUnsupportedError": "tests/jetstream/test_fast_batch.py::"
    "test_older_server_is_refused_before_sending",
    "UnknownOptionError": "tests/spark/test_spark_options.py::"
    "test_names_match_ignoring_case_and_underscores",
    "DataLossError": "tests/spark/test_spark_data_loss.py::"
    "test_a_purge_mid_read_fails_naming_the_stream_and_the_range",
    "RowPublishError": "tests/jetstream/test_publish_arrow.py::"
    "test_an_unsendable_row_is_named_and_the_rows_before_it_are_stored",
}

# The server sends these codes only in states a test cannot reach on nats-server 2.15.1;
# the err_code check below still maps each one to its class.
NO_REAL_CASE: dict[str, str] = {
    "ConsumerNameExistsError": "10013 is the refusal of servers older than 2.10",
    "CounterBrokenError": "the server refuses every write that would leave a non-counter "
    "value on a counter stream's subject (a body: 10170; turning counters on: 10052; "
    "sourcing plain messages stores nothing)",
    "StreamTooManyRequestsError": "10167 needs the stream's queue of publishes waiting "
    "to be stored to overflow, which a test on this machine cannot make happen at will",
}

# A documented base class whose subclasses are what a real case raises.
BASES = {"FastBatchError"}


@pytest.fixture
def env(request: pytest.FixtureRequest, nc: j.Client, js: j.JetStreamContext) -> Iterator[Env]:
    made = Env(request, nc, js)
    yield made
    made.close()


def test_every_documented_error_has_a_real_case() -> None:
    """Each class docs/errors.md lists has a case here or a named test elsewhere."""
    documented = set(_documented())
    covered = set(CASES) | set(ELSEWHERE) | set(NO_REAL_CASE)
    assert sorted(documented - covered) == []
    assert sorted(covered - documented) == []
    for name, where in ELSEWHERE.items():
        path, _, test = where.partition("::")
        source = (ROOT / path).read_text()
        assert f"def {test}(" in source, where
        assert name in source, f"{where} does not make {name}"


def test_every_documented_err_code_maps_to_its_class() -> None:
    """Each err_code the page gives is its class's (or, "also X", its base's); each
    registered code is on the page."""
    documented = _documented()
    for name, codes in documented.items():
        for code in codes:
            mapped = type(api_error(400, code, ""))
            assert mapped is not APIError and issubclass(getattr(j, name), mapped), (name, code)
    for code, cls in APIError._registry.items():
        assert code in documented.get(cls.__name__, set()), (cls.__name__, code)
    assert type(api_error(413, 0, "Too Many Results")) is j.TooManyResultsError


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_case_raises_the_documented_class(env: Env, name: str) -> None:
    """The case raises (or reports to error_cb) exactly the class the page names."""
    cls = getattr(j, name)
    try:
        got = CASES[name](env)
    except Exception as exc:  # noqa: BLE001 - the class is what is checked
        got = exc
    assert isinstance(got, BaseException), f"{name}: no error, got {got!r}"
    if name in BASES:
        assert isinstance(got, cls), repr(got)
    else:
        assert type(got) is cls, repr(got)
