"""Header values are a str or a sequence of str; anything else is a TypeError naming the key."""

from __future__ import annotations

import pytest

import jetstream_sync as js

BAD_HEADERS = [
    pytest.param({"Bin": b"abc"}, "Bin", id="bytes"),
    pytest.param({"Buf": bytearray(b"abc")}, "Buf", id="bytearray"),
    pytest.param({"Num": 5}, "Num", id="int"),
    pytest.param({"None": None}, "None", id="none"),
    pytest.param({"List": ["ok", b"abc"]}, "List", id="bytes-in-list"),
    pytest.param({"List": ["ok", 7]}, "List", id="int-in-list"),
    pytest.param({"Set": {"a"}}, "Set", id="set"),
    pytest.param({5: "v"}, "key 5", id="int-key"),
]

# Every way a message with user headers leaves the client.
SENDERS = {
    "Client.publish": lambda nc, ctx, h: nc.publish("hdr.in", b"x", headers=h),
    "Client.request": lambda nc, ctx, h: nc.request("hdr.in", b"x", timeout=1, headers=h),
    "js.publish": lambda nc, ctx, h: ctx.publish("hdr.in", b"x", headers=h, timeout=1),
    "js.publish_async": lambda nc, ctx, h: ctx.publish_async("hdr.in", b"x", headers=h),
    "js.publish_batch": lambda nc, ctx, h: ctx.publish_batch(
        [("hdr.in", b"ok"), ("hdr.in", b"x", h)], timeout=1
    ),
}


@pytest.mark.parametrize("send", SENDERS.values(), ids=SENDERS.keys())
@pytest.mark.parametrize(("headers", "key"), BAD_HEADERS)
def test_bad_header_value_is_a_type_error_before_sending(nc, send, headers, key):
    """A value not a str or a sequence of str: TypeError naming the key, nothing sent."""
    ctx = nc.jetstream()
    with pytest.raises(js.NoRespondersError):  # the request inbox is subscribed on first use
        nc.request("hdr.nobody", b"", timeout=5)
    nc.flush()
    before = nc.stats
    with pytest.raises(TypeError) as info:
        send(nc, ctx, headers)
    assert key in str(info.value)
    assert not isinstance(info.value, js.BadHeaderError)
    after = nc.stats
    assert (after.out_msgs, after.out_bytes) == (before.out_msgs, before.out_bytes)
    assert ctx.publish_async_pending() == 0


def test_bytes_value_says_decode_it(nc):
    """The error for a bytes value tells the caller to decode it."""
    with pytest.raises(TypeError, match="decode it first"):
        nc.publish("hdr.in", b"x", headers={"K": b"abc"})


def test_headers_that_are_not_a_mapping(nc):
    """A list of pairs instead of a mapping is refused with TypeError."""
    with pytest.raises(TypeError, match="mapping"):
        nc.publish("hdr.in", b"x", headers=[("K", "v")])


def test_str_and_sequences_of_str_arrive(nc):
    """A str value is one header; a list or tuple of str is one header per item, in order."""
    sub = nc.subscribe("hdr.ok")
    nc.publish("hdr.ok", b"x", headers={"One": "1", "Many": ["a", "b"], "Tuple": ("c",)})
    msg = sub.next_msg(timeout=5)
    assert msg.headers["One"] == "1"
    assert msg.headers.get_all("Many") == ["a", "b"]
    assert msg.headers.get_all("Tuple") == ["c"]


def test_headers_class_refuses_what_publish_refuses():
    """Headers() takes the same input as publish and refuses the same values."""
    assert js.Headers({"K": ["a", "b"]}).get_all("K") == ["a", "b"]
    with pytest.raises(TypeError, match="'K'"):
        js.Headers({"K": b"abc"})
    with pytest.raises(TypeError, match="'K'"):
        js.Headers({"K": 5})


def test_key_with_no_values_is_not_in_headers(nc):
    """A key given an empty list sends no header; Headers() leaves it out as well.

    It used to be counted and iterated, while ``h[key]``, ``h.get(key)`` and
    ``dict(h)`` raised IndexError.
    """
    headers = js.Headers({"Empty": [], "K": "v"})
    assert "Empty" not in headers
    assert headers.get("Empty") is None
    assert dict(headers) == {"K": "v"}
    assert headers == js.Headers({"K": "v"})
    sub = nc.subscribe("hdr.empty")
    nc.publish("hdr.empty", b"x", headers={"Empty": [], "K": "v"})
    assert sub.next_msg(timeout=5).headers == headers


@pytest.mark.parametrize("other", [{"K": 1}, {1: "v"}, {"K": b"v"}, {"K": None}])
def test_comparing_headers_with_a_mapping_they_cannot_hold_is_false(other):
    """``==`` with a mapping of non-str keys or values is False, as for a dict; it used to
    raise the TypeError that building Headers from that mapping raises."""
    headers = js.Headers({"K": "v"})
    assert headers != other
    assert not headers == other  # noqa: SIM201 (the == path itself is under test)
