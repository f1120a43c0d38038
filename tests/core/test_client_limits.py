"""Arguments too long for the server's control line are refused before sending (issue 18, item 1).

The server drops a connection that sends a control line longer than its
``max_control_line`` (4,096 bytes by default): every thread sharing it would
lose its call. Each test keeps another thread's request waiting for its reply
while the bad call is made; that request must still get its answer.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import jetstream_sync as js
from tests.fixtures.in_flight import request_in_flight

pytestmark = pytest.mark.timeout(60)

LONG = "a" * 5000


def refused(argument: str, call: Callable[[], object], length: int = len(LONG)) -> None:
    """``call()`` raises LimitExceededError (a ValueError) naming ``argument`` and its length."""
    with pytest.raises(js.LimitExceededError) as info:
        call()
    assert isinstance(info.value, ValueError)
    assert info.value.argument == argument
    assert info.value.limit == 4096
    assert info.value.length == length


@pytest.mark.parametrize(
    ("argument", "call"),
    [
        ("subject", lambda nc: nc.publish(LONG, b"x")),
        ("reply subject", lambda nc: nc.publish("limits.x", b"x", reply=LONG)),
        ("subject", lambda nc: nc.request(LONG, b"x", timeout=1)),
        ("subject", lambda nc: nc.subscribe(LONG)),
        ("queue group", lambda nc: nc.subscribe("limits.q", queue=LONG)),
        ("subject", lambda nc: nc.validate_publish(LONG, b"x")),
    ],
    ids=["publish", "reply", "request", "subscribe", "queue", "validate"],
)
def test_a_too_long_argument_is_refused_and_costs_no_one_their_request(
    shared_server, argument, call
):
    """The call raises LimitExceededError naming the argument; a request in flight succeeds."""
    with js.connect(shared_server.url) as nc:
        with request_in_flight(nc):
            refused(argument, lambda: call(nc))
        nc.publish("limits.after", b"x")
        nc.flush()


def test_subject_and_reply_are_measured_together(shared_server):
    """Each fits alone, the line they make does not: the longer one is named."""
    with js.connect(shared_server.url) as nc:
        with request_in_flight(nc):
            refused("reply subject", lambda: nc.publish("s" * 1500, b"", reply="r" * 2600), 2600)
        nc.publish("s" * 1500, b"", reply="r" * 2000)  # a line under 4,096 bytes goes out
        nc.flush()


def test_a_reply_routed_publish_is_refused_too(shared_server):
    """publish_routed (JetStream's async publish) refuses a subject the line cannot hold."""
    with js.connect(shared_server.url) as nc:
        prefix = nc.add_reply_route(lambda replies: None)
        with request_in_flight(nc):
            refused("subject", lambda: nc.publish_routed(LONG, b"x", prefix, 1, 1.0))
        nc.publish_routed("limits.routed", b"x", prefix, 1, 1.0)
        nc.flush()


def test_max_control_line_defaults_to_the_servers_default(shared_server):
    """Without the field in INFO, the limit is nats-server's default of 4,096 bytes."""
    with js.connect(shared_server.url) as nc:
        assert nc.max_control_line == 4096


def test_an_inbox_prefix_too_long_for_the_server_fails_connect(shared_server):
    """connect() refuses an inbox_prefix whose inboxes would pass max_control_line."""
    with pytest.raises(js.LimitExceededError) as info:
        js.connect(shared_server.url, inbox_prefix="_INBOX." + "p" * 4050)
    assert info.value.argument == "inbox_prefix"
    with js.connect(shared_server.url, inbox_prefix="_INBOX." + "p" * 3900) as nc:
        nc.subscribe("limits.inbox", cb=lambda msg: msg.respond(b"ok"))
        assert nc.request("limits.inbox", b"", timeout=5).data == b"ok"
