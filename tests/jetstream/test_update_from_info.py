"""Updating a stream or consumer with the config its info gave is a no-op, never a refusal.

Other clients write what the server then reports back in its own words: nats.go
sends a local ``time.Time`` with its UTC offset, and the server keeps that
offset. Sending such a config back must not read as a change.
"""

from __future__ import annotations

import contextlib
import json

import pytest

import jetstream_sync


@pytest.fixture
def mirror_name(stream_name, js):
    """A second unique stream name, deleted afterwards if made."""
    name = f"{stream_name}_M"
    yield name
    with contextlib.suppress(jetstream_sync.StreamNotFoundError):
        js.delete_stream(name)


def _api(nc, subject, body):
    """Send a raw JetStream API request, as another client would, and check it was taken."""
    reply = json.loads(nc.request(subject, json.dumps(body).encode(), timeout=5).data)
    assert "error" not in reply, reply
    return reply


def test_mirror_with_an_offset_start_time_updates_from_its_info(nc, js, stream_name, mirror_name):
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    start = "2025-01-01T02:00:00.5+02:00"
    _api(
        nc,
        f"$JS.API.STREAM.CREATE.{mirror_name}",
        {"name": mirror_name, "mirror": {"name": stream_name, "opt_start_time": start}},
    )
    config = js.stream(mirror_name).cached_info.config

    updated = js.update_stream(config)

    assert updated.cached_info.config.mirror.opt_start_time == config.mirror.opt_start_time


def _create_durable_c(nc, stream_name: str, **config: object) -> None:
    """Durable consumer ``C`` (explicit acks) of ``stream_name`` with ``config``, as another
    client writes it (straight to the API)."""
    body = {"durable_name": "C", "ack_policy": "explicit", **config}
    _api(
        nc, f"$JS.API.CONSUMER.CREATE.{stream_name}.C", {"stream_name": stream_name, "config": body}
    )


def test_consumer_with_an_offset_start_time_updates_from_its_info(nc, js, stream_name):
    js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    _create_durable_c(
        nc, stream_name, deliver_policy="by_start_time",
        opt_start_time="2025-01-01T02:00:00.5-05:30",
    )  # fmt: skip
    config = js.consumer_info(stream_name, "C").config

    js.update_consumer(stream_name, config)

    assert js.consumer_info(stream_name, "C").config.opt_start_time == config.opt_start_time


def test_kv_mirror_with_an_offset_start_time_updates_from_its_status(nc, js, stream_name):
    """A bucket mirror nats.go made with a local start time: update_key_value(status().config)."""
    origin, mirror = stream_name, f"{stream_name}_M"
    js.create_key_value(bucket=origin)
    try:
        _api(
            nc,
            f"$JS.API.STREAM.CREATE.KV_{mirror}",
            {
                "name": f"KV_{mirror}",
                "max_msgs_per_subject": 1,
                "discard": "new",
                "deny_delete": True,
                "allow_rollup_hdrs": True,
                "allow_direct": True,
                "mirror_direct": True,
                "mirror": {"name": f"KV_{origin}", "opt_start_time": "2025-01-01T02:00:00+02:00"},
            },
        )
        config = js.key_value(mirror).status().config

        js.update_key_value(config)

        assert js.key_value(mirror).status().config == config
    finally:
        for bucket in (mirror, origin):
            with contextlib.suppress(jetstream_sync.BucketNotFoundError):
                js.delete_key_value(bucket)


def test_durations_past_float_precision_stay_exact(nc, js, stream_name):
    """A duration of more than 52 days to the nanosecond (as nats.go can write it) is not
    changed by updating the stream and a consumer from their info."""
    max_age = 365 * 86400 * 10**9 + 1
    _api(
        nc,
        f"$JS.API.STREAM.CREATE.{stream_name}",
        {"name": stream_name, "subjects": [f"{stream_name}.>"], "max_age": max_age},
    )
    _create_durable_c(nc, stream_name, inactive_threshold=max_age)

    js.update_stream(js.stream(stream_name).cached_info.config)
    js.update_consumer(stream_name, js.consumer_info(stream_name, "C").config)

    stream = _api(nc, f"$JS.API.STREAM.INFO.{stream_name}", {})
    consumer = _api(nc, f"$JS.API.CONSUMER.INFO.{stream_name}.C", {})
    assert stream["config"]["max_age"] == max_age
    assert consumer["config"]["inactive_threshold"] == max_age


def test_the_longest_duration_the_server_takes_survives_a_changed_update(nc, js, stream_name):
    """max_age of the largest int64 nanoseconds (accepted by the server) is kept through
    update_stream(info.config, field=...), whose checks run again."""
    forever = 2**63 - 1
    _api(nc, f"$JS.API.STREAM.CREATE.{stream_name}", {"name": stream_name, "max_age": forever})

    js.update_stream(js.stream(stream_name).cached_info.config, max_msgs=10)

    stream = _api(nc, f"$JS.API.STREAM.INFO.{stream_name}", {})
    assert (stream["config"]["max_age"], stream["config"]["max_msgs"]) == (forever, 10)
