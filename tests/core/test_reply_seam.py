"""One rule for a status line, in the module upper rooms import for raw replies (issue 17, 4)."""

from __future__ import annotations

import pytest

from jetstream_sync._reply import is_status_block
from jetstream_sync.msg import Msg, first_status

BLOCKS = [
    (b"NATS/1.0 503\r\n\r\n", 503),
    (b"NATS/1.0\t404 No Messages\r\n\r\n", 404),  # the parser reads a tab there too
    (b"NATS/1.0\r\nK: v\r\n\r\n", None),
    (None, None),
    # Blocks another client wrote (delivered as they came): no status line, so no status.
    (b"HTTP/1.1 200\r\n\r\n", None),
    (b"XATS/1.0 503\r\n\r\n", None),
]


@pytest.mark.parametrize(("block", "status"), BLOCKS)
def test_a_status_block_is_told_the_same_way_everywhere(block, status):
    """is_status_block, Msg.is_status, Msg.status and first_status agree, tab or space."""
    msg = Msg("s", "", b"", block)
    assert is_status_block(block) is (status is not None)
    assert msg.is_status is (status is not None)
    assert msg.status == status
    assert first_status([Msg("s", "", b""), msg]) == (1 if status is not None else 2)
