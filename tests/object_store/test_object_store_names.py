"""Object names against the server's line limit: checked, after base64, before sending."""

from __future__ import annotations

import pytest

import jetstream_sync as nats_sync
from jetstream_sync import ObjectMeta
from tests.fixtures.in_flight import request_in_flight


def test_a_too_long_name_fails_alone_and_spares_a_request_in_flight(nc, obs):
    """A 3,500-character name raises LimitExceededError naming "object name" before anything
    is sent; another thread's request in flight on the same client is answered."""
    with request_in_flight(nc), pytest.raises(nats_sync.LimitExceededError) as refused:
        obs.get_info("n" * 3500)
    assert refused.value.argument == "object name"
    assert (refused.value.length, refused.value.limit) == (3500, nc.max_control_line)
    assert obs.put("after", b"1").size == 1


def test_a_name_at_the_limit_works_one_byte_more_is_refused(obs):
    """Every call takes a name of max_name_length bytes; each refuses one byte more."""
    limit = obs.max_name_length
    assert 2800 < limit < 3000
    name = "n" * limit
    info = obs.put(name, b"data")
    assert obs.get(name) == b"data" and obs.get_info(name).name == name
    link = "l" * limit
    obs.add_link(link, info)
    assert obs.get(link) == b"data"
    renamed = "r" * (limit - 2) + "é"  # a two-byte character: limit bytes in all
    obs.update_meta(name, ObjectMeta(name=renamed))
    assert obs.get(renamed) == b"data"
    obs.delete(renamed)
    over = "n" * (limit + 1)
    calls = [
        lambda: obs.put(over, b"x"),
        lambda: obs.get(over),
        lambda: obs.get_info(over),
        lambda: obs.delete(over),
        lambda: obs.add_link(over, info),
        lambda: obs.add_bucket_link(over, obs),
        lambda: obs.update_meta(link, ObjectMeta(name=over)),
        lambda: obs.get_info("é" * (limit // 2 + 1)),
    ]
    for call in calls:
        with pytest.raises(nats_sync.LimitExceededError) as refused:
            call()
        assert refused.value.argument == "object name"
        assert refused.value.length in (limit + 1, limit + 2)


def test_a_name_that_is_not_utf8_is_a_typed_error_before_sending(obs):
    """A name holding a lone surrogate (bytes that are not UTF-8) cannot go into the JSON
    meta: put, get and delete raise InvalidObjectNameError (a ValueError), not a
    UnicodeEncodeError, and nothing is stored."""
    name = b"caf\xe9".decode("utf-8", "surrogateescape")
    for call in (lambda: obs.put(name, b"x"), lambda: obs.get(name), lambda: obs.delete(name)):
        with pytest.raises(nats_sync.InvalidObjectNameError, match="UTF-8"):
            call()
    assert obs.list() == []
