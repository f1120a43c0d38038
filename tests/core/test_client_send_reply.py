"""Client.send_reply: the one method a received message answers through (issue 17, item 3)."""

from __future__ import annotations

import pytest

import jetstream_sync as js


def test_a_response_is_checked_and_carries_its_headers(shared_server):
    """send_reply(reply, data, headers) publishes a checked message to the reply subject."""
    with js.connect(shared_server.url) as nc:
        sub = nc.subscribe("sr.reply")
        nc.send_reply("sr.reply", "text", {"K": "v"})
        msg = sub.next_msg(timeout=5)
        assert (msg.data, msg.headers["K"]) == (b"text", "v")
        with pytest.raises(js.BadSubjectError):
            nc.send_reply("sr.*", b"x")


def test_an_ack_body_goes_out_as_it_is_to_the_subject_as_received(shared_server):
    """With ack=True the body is sent unchanged, and a subject that is not UTF-8 keeps its bytes."""
    with js.connect(shared_server.url) as nc:
        sub = nc.subscribe("sr.ack.>")
        received = "sr.ack.caf\udce9"  # how the client hands out the subject b"sr.ack.caf\xe9"
        nc.send_reply(received, b"+ACK", None, True)
        nc.send_reply(received, b"-NAK", None, True)
        first, second = sub.next_msg(timeout=5), sub.next_msg(timeout=5)
        assert (first.subject, first.data, second.data) == (received, b"+ACK", b"-NAK")


def test_a_closed_client_refuses_to_answer(shared_server):
    """send_reply on a closed client raises ConnectionClosedError, for acks too."""
    nc = js.connect(shared_server.url)
    nc.close()
    with pytest.raises(js.ConnectionClosedError):
        nc.send_reply("sr.closed", b"+ACK", None, True)
    with pytest.raises(js.ConnectionClosedError):
        nc.send_reply("sr.closed", b"x")
