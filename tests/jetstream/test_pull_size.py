"""What a pulled message counts against ``max_bytes``: the server's own sum, in bytes."""

from __future__ import annotations

import pytest

from jetstream_sync.msg import Msg, pull_size


@pytest.mark.parametrize("token", ["ascii", "ünïcödé", "日本語"])
def test_pull_size_is_what_the_server_counts(js, stream, token):
    """A fetch of exactly ``pull_size`` bytes gets the message; one byte fewer gets nothing.

    Non-ASCII subjects count their UTF-8 bytes: counting characters would let
    ``messages(max_bytes=)`` believe fewer bytes arrived than the server sent.
    """
    js.publish(f"{stream.name}.{token}", b"payload", headers={"K": "välue"})
    cons = stream.create_consumer(ack_wait=30)
    [first] = cons.fetch_bytes(10_000, timeout=5)
    size = pull_size(first)
    subject, reply = first.subject.encode(), first.reply.encode()
    assert size == len(subject) + len(reply) + len(first.data) + first.header_size
    assert size > len(first.subject) + len(first.reply) + len(first.data) + first.header_size or (
        token == "ascii"
    )
    first.nak()
    assert cons.fetch_bytes(size - 1, timeout=2) == []
    [again] = cons.fetch_bytes(size, timeout=5)
    assert again.data == b"payload" and pull_size(again) == size


def test_pull_size_of_a_message_made_in_python():
    """A Msg built by hand (no received bytes) counts its encoded fields."""
    msg = Msg("a.ü", "_INBOX.x", b"1234")
    assert pull_size(msg) == len("a.ü".encode()) + len("_INBOX.x") + 4
