"""Bad input is rejected with a typed error before anything is sent."""

from __future__ import annotations

import pytest

import jetstream_sync as js


def _nothing_sent(nc, action):
    before = nc.stats.out_bytes
    nc.flush()
    baseline = nc.stats.out_bytes
    with pytest.raises(ValueError) as info:
        action()
    nc.flush()
    # the two flushes' PINGs are the only bytes written around the failed call
    assert nc.stats.out_bytes - baseline == baseline - before
    return info.value


@pytest.mark.parametrize(
    "subject", ["", "has space", "tab\tbad", "cr\rbad", "lf\nbad", "a..b", ".a", "a.", "a.*", ">"]
)
def test_bad_publish_subjects(nc, subject):
    """Invalid subjects raise BadSubjectError (a ValueError) and send nothing."""
    err = _nothing_sent(nc, lambda: nc.publish(subject, b"x"))
    assert isinstance(err, js.BadSubjectError)


@pytest.mark.parametrize("reply", ["bad reply", "r..b", "x.y..zz", "a.", ".a", "r.*.t"])
def test_bad_reply_subject(nc, reply):
    """An invalid reply subject is rejected too, and the error quotes the whole of it."""
    err = _nothing_sent(nc, lambda: nc.publish("ok", b"x", reply=reply))
    assert isinstance(err, js.BadSubjectError)
    assert str(err).endswith(f": {reply!r}")


@pytest.mark.parametrize(
    "headers",
    [{"Bad Key": "v"}, {"Bad:Key": "v"}, {"K": "v\r\nInjected: yes"}, {"K\n": "v"}, {"": "v"}],
)
def test_header_injection_is_rejected(nc, headers):
    """Header keys/values that would break the frame raise BadHeaderError."""
    err = _nothing_sent(nc, lambda: nc.publish("ok", b"x", headers=headers))
    assert isinstance(err, js.BadHeaderError)


def test_payload_over_max_payload(nc):
    """A payload larger than max_payload raises MaxPayloadError and sends nothing."""
    err = _nothing_sent(nc, lambda: nc.publish("ok", b"x" * (nc.max_payload + 1)))
    assert isinstance(err, js.MaxPayloadError)


def test_headers_count_against_max_payload(nc):
    """A payload that fits alone but not with its headers raises MaxPayloadError."""
    data = b"x" * (nc.max_payload - 5)
    err = _nothing_sent(nc, lambda: nc.publish("ok", data, headers={"Key": "value"}))
    assert isinstance(err, js.MaxPayloadError)


def test_bad_subscribe_subject_and_queue(nc):
    """Subscribing with a bad subject or queue group raises BadSubjectError."""
    with pytest.raises(js.BadSubjectError):
        nc.subscribe("a b")
    with pytest.raises(js.BadSubjectError):
        nc.subscribe("ok", queue="bad queue")


def test_non_str_subject(nc):
    """A subject that is not a str raises BadSubjectError."""
    with pytest.raises(js.BadSubjectError):
        nc.publish(b"bytes.subject", b"x")


@pytest.mark.parametrize("data", [5, 1.5, None, ["x"], {"k": "v"}])
@pytest.mark.parametrize("headers", [None, {"h": "1"}])
@pytest.mark.parametrize(
    "call",
    [
        lambda nc, data, headers: nc.publish("a", data, headers=headers),
        lambda nc, data, headers: nc.request("a", data, headers=headers, timeout=1),
        lambda nc, data, headers: nc.jetstream().publish("a", data, headers=headers),
        lambda nc, data, headers: nc.jetstream().publish_async("a", data, headers=headers),
    ],
    ids=["publish", "request", "js-publish", "js-publish-async"],
)
def test_a_payload_that_is_not_bytes_or_str_is_refused_naming_its_type(nc, call, data, headers):
    """A payload of another type raises a TypeError that names the type, before sending."""
    before = nc.stats.out_bytes
    nc.flush()
    baseline = nc.stats.out_bytes
    with pytest.raises(TypeError, match=f"not {type(data).__name__}$") as info:
        call(nc, data, headers)
    assert "payload must be bytes, str or a bytes-like object" in str(info.value)
    nc.flush()
    assert nc.stats.out_bytes - baseline == baseline - before


@pytest.mark.parametrize(
    "data", [bytearray(b"ab"), memoryview(b"ab"), memoryview(b"xaby")[1:3], "ab", b"ab"]
)
@pytest.mark.parametrize("headers", [None, {"h": "1"}])
def test_bytes_like_payloads_are_sent_as_their_bytes(nc, data, headers):
    """bytearray, memoryview (a slice too), str and bytes payloads arrive as their bytes."""
    sub = nc.subscribe("bytes.like")
    nc.publish("bytes.like", data, headers=headers)
    assert sub.next_msg(timeout=5).data == b"ab"


def test_bad_server_url():
    """An unknown URL scheme raises ValueError before connecting."""
    with pytest.raises(ValueError):
        js.connect("http://127.0.0.1:4222")


@pytest.mark.parametrize("url", ["nats://[::1", "nats://svc:pw-SECRET@[::1:4222", "[fe80::1"])
def test_an_unparsable_server_url_is_named_in_the_error(url):
    """A URL urllib cannot split (an unclosed IPv6 bracket) raises ValueError naming the
    URL, as every other bad URL does, not urllib's bare "Invalid IPv6 URL"."""
    with pytest.raises(ValueError, match="^server URL ") as info:
        js.connect(url)
    assert "[::1" in str(info.value) or "[fe80::1" in str(info.value)
    assert "pw-SECRET" not in str(info.value)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"name": 123}, "name"),
        ({"user": "bob", "password": 123}, "password"),
        ({"user": b"bob", "password": "s3cret"}, "user"),
        ({"token": 42}, "token"),
        ({"tls": "yes"}, "tls"),
        ({"tls": 1}, "tls"),
    ],
)
def test_option_of_the_wrong_type_is_refused_before_connecting(shared_server, options, named):
    """A name, credential or tls of the wrong type raises TypeError naming it: not a
    CONNECT the server closes the connection on (seen as NoServersError)."""
    with pytest.raises(TypeError, match=f"^{named} must be") as info:
        js.connect(shared_server.url, connect_timeout=1, **options)
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    "servers", [None, b"nats://127.0.0.1:4222", ["nats://127.0.0.1:4222", None]]
)
def test_servers_of_the_wrong_type_are_refused(servers):
    """``servers`` that is not a str or a list of strs raises TypeError saying so."""
    with pytest.raises(TypeError, match="servers must"):
        js.connect(servers, connect_timeout=1)


def test_no_servers():
    """Connecting to a port nobody listens on raises NoServersError."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(js.NoServersError):
        js.connect(f"nats://127.0.0.1:{port}", connect_timeout=0.5)


def test_closed_client_raises(shared_server):
    """Every call on a closed client raises ConnectionClosedError."""
    nc = js.connect(shared_server.url)
    nc.close()
    assert nc.is_closed and not nc.is_connected
    with pytest.raises(js.ConnectionClosedError):
        nc.publish("x", b"")
    with pytest.raises(js.ConnectionClosedError):
        nc.request("x", b"")
    nc.close()  # a second close is harmless


def test_close_of_a_client_that_never_connected():
    """close() on a Client that never connected is harmless."""
    client = js.Client()
    client.close()
    assert client.is_closed


async def _coroutine_callback(*args):
    """An ``async def`` callback: the client calls it on a thread and would never await it."""


@pytest.mark.parametrize("cb", ["handler", 5, _coroutine_callback])
def test_a_callback_that_cannot_be_called_is_refused_at_subscribe(nc, cb):
    """A cb= that is not callable, or is an ``async def`` (calling it only makes a coroutine
    nobody awaits: every message would be dropped), raises TypeError naming cb; no SUB."""
    before = nc.stats.out_bytes
    nc.flush()
    baseline = nc.stats.out_bytes
    with pytest.raises(TypeError, match="^cb must be"):
        nc.subscribe("input.cb", cb=cb)
    nc.flush()
    assert nc.stats.out_bytes - baseline == baseline - before


@pytest.mark.parametrize(
    "option", ["error_cb", "disconnected_cb", "reconnected_cb", "closed_cb", "lame_duck_cb"]
)
@pytest.mark.parametrize("cb", [5, _coroutine_callback])
def test_a_connection_callback_that_cannot_be_called_is_refused_before_connecting(
    shared_server, option, cb
):
    """A connection callback that is not callable, or is an ``async def``, raises TypeError
    naming the option before any connection (it would only fail, or do nothing, later)."""
    with pytest.raises(TypeError, match=f"^{option} must be"):
        js.connect(shared_server.url, **{option: cb})


@pytest.mark.parametrize("cb", [None, _coroutine_callback])
def test_a_status_listener_that_cannot_be_called_is_refused(nc, cb):
    """add_status_listener and add_refusal_listener refuse what they could not call."""
    with pytest.raises(TypeError, match="^listener must be"):
        nc.add_status_listener(cb)
    with pytest.raises(TypeError, match="^listener must be"):
        nc.add_refusal_listener(cb)
