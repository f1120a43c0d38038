"""One rule for bytes that are not UTF-8 in every ``jetstream-sync`` output.

Another client (here: a raw socket) may publish a subject, a header or a KV key
that is not UTF-8. JSON output: valid Unicode with U+FFFD for each such byte,
plus ``subject_b64`` / ``reply_b64`` / ``key_b64`` / ``name_b64`` with the exact
bytes; text output: ``\\xNN`` escapes (control characters and backslashes too).
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator

import pytest

from jetstream_sync.cli._output import escaped, text_fields
from tests.fixtures.jetstream import unique_stream_name

LISTEN_TIMEOUT = 15.0


class RawPublisher:
    """A NATS connection over a plain socket: publishes whatever bytes it is given."""

    def __init__(self, port: int) -> None:
        """Connect and say CONNECT (headers on)."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.recv(65536)  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false,"headers":true}\r\n')

    def publish(self, subject: bytes, data: bytes, header: bytes = b"") -> None:
        """PUB (or HPUB with one ``header`` line), then a PING whose PONG proves it arrived."""
        if header:
            head = b"NATS/1.0\r\n" + header + b"\r\n\r\n"
            frame = b"HPUB %s %d %d\r\n%s%s\r\n" % (
                subject,
                len(head),
                len(head) + len(data),
                head,
                data,
            )
        else:
            frame = b"PUB %s %d\r\n%s\r\n" % (subject, len(data), data)
        self.sock.sendall(frame + b"PING\r\n")
        reply = b""
        while not reply.endswith(b"PONG\r\n"):
            chunk = self.sock.recv(4096)
            assert chunk and b"-ERR" not in chunk, reply + chunk
            reply += chunk

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


@pytest.fixture
def raw(shared_server) -> Iterator[RawPublisher]:
    """A raw-socket publisher on the shared server."""
    publisher = RawPublisher(shared_server.port)
    yield publisher
    publisher.close()


def b64(data: bytes) -> str:
    """Base64 text of ``data``."""
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("allow_direct", [True, False])
def test_stream_view_and_get_show_a_non_utf8_subject_by_one_rule(cli, js, raw, allow_direct):
    """view and get print the same JSON: U+FFFD in ``subject``, the bytes in ``subject_b64``
    (get reads them by direct get; without it the server's JSON API has already replaced
    them), the header value with U+FFFD; text output escapes the bytes."""
    name = unique_stream_name("CLIBYTES")
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_direct=allow_direct)
    try:
        subject = f"{name}.caf".encode() + b"\xe9"
        raw.publish(subject, b"hi", header=b"K: v\xe9")
        viewed = cli.run("--json", "stream", "view", name)
        got = cli.run("--json", "stream", "get", name, "1")
        for stdout in (viewed.stdout, got.stdout):
            json.loads(stdout)  # strict JSON: no lone surrogate escapes
            assert "\\ud" not in stdout
        for doc in (viewed.json(), got.json()):
            assert doc["subject"] == f"{name}.caf\ufffd"
            assert doc["headers"] == {"K": ["v\ufffd"]} and doc["data"] == "hi"
        assert viewed.json()["subject_b64"] == b64(subject)
        text = cli.run("stream", "view", name).stdout
        assert text.startswith(f"[1] {name}.caf\\xe9 @ ") and "K: v\\xe9" in text
        got_text = cli.run("stream", "get", name, "1").stdout
        last = cli.run("--json", "stream", "get", name, "--last-for", f"{name}.>").json()
        if allow_direct:
            assert got.json()["subject_b64"] == last["subject_b64"] == b64(subject)
            assert got_text.startswith(f"[1] {name}.caf\\xe9 @ ")
        else:
            assert "subject_b64" not in got.json() and "subject_b64" not in last
            assert got_text.startswith(f"[1] {name}.caf\ufffd @ ")
    finally:
        js.delete_stream(name)


def test_sub_shows_a_non_utf8_subject_by_the_same_rule(cli, raw):
    """sub --json gives ``subject`` with U+FFFD and ``subject_b64``; sub's text escapes it."""
    topic = f"cli.bytes.{unique_stream_name('s').lower()}"
    subject = topic.encode() + b".\xff\xfe"
    as_json = cli.start("--json", "sub", f"{topic}.>", "--count", "1")
    as_text = cli.start("sub", f"{topic}.>", "--count", "1")
    for process in (as_json, as_text):
        assert process.stderr.readline(LISTEN_TIMEOUT).startswith("Listening on")
    raw.publish(subject, b"\xe9")
    doc = as_json.wait().json()
    assert doc["subject"] == f"{topic}.\ufffd\ufffd" and doc["subject_b64"] == b64(subject)
    assert doc["data_b64"] == b64(b"\xe9")
    text = as_text.wait().stdout
    assert text.splitlines()[:2] == [f"[#1] Received on '{topic}.\\xff\\xfe'", "\\xe9"]


def test_kv_keys_written_by_another_client_by_the_same_rule(cli, js, raw):
    """kv watch --json gives ``key`` with U+FFFD and ``key_b64``; kv ls and watch text escape."""
    bucket = unique_stream_name("CLIKV")
    js.create_key_value(bucket=bucket)
    try:
        raw.publish(f"$KV.{bucket}.caf".encode() + b"\xe9", b"v")
        doc = cli.run("--json", "kv", "watch", bucket, "--count", "1").json()
        assert doc["key"] == "caf\ufffd" and doc["key_b64"] == b64(b"caf\xe9")
        assert cli.run("kv", "ls", bucket).stdout == "caf\\xe9\n"
        assert cli.run("--json", "kv", "ls", bucket).json() == ["caf\ufffd"]
        watched = cli.run("kv", "watch", bucket, "--count", "1").stdout
        assert watched.startswith(f"{bucket} > caf\\xe9 revision 1 (PUT)")
    finally:
        js.delete_key_value(bucket)


def test_object_names_with_control_characters_are_escaped_in_text(cli, js):
    """object ls prints a name with a tab escaped in text and as it is in JSON."""
    bucket = unique_stream_name("CLIOBJ")
    js.create_object_store(bucket=bucket).put("tab\there", b"x")
    try:
        assert cli.run("object", "ls", bucket).stdout.startswith(f"{bucket} > tab\\x09here: ")
        (doc,) = cli.run("--json", "object", "ls", bucket).json()
        assert doc["name"] == "tab\there" and "name_b64" not in doc
    finally:
        js.delete_object_store(bucket)


@pytest.mark.parametrize(
    ("text", "shown", "fields"),
    [
        ("orders.eu", "orders.eu", {"s": "orders.eu"}),
        ("café", "café", {"s": "café"}),
        ("caf\udce9", "caf\\xe9", {"s": "caf\ufffd", "s_b64": "Y2Fm6Q=="}),
        ("a\\b", "a\\\\b", {"s": "a\\b"}),
        ("x\x1b[2Jy", "x\\x1b[2Jy", {"s": "x\x1b[2Jy"}),
        ("\ud800z", "\\xed\\xa0\\x80z", {"s": "\ufffd\ufffd\ufffdz", "s_b64": "7aCAeg=="}),
    ],
)
def test_the_rule_itself(text, shown, fields):
    """Text escapes what is not printable UTF-8 (as bash's $'...' reads it back); JSON fields
    are valid Unicode plus ``_b64`` of the exact bytes when they are not UTF-8."""
    assert escaped(text) == shown
    assert text_fields("s", text) == fields


def test_a_body_or_value_argument_sends_the_bytes_the_shell_gave(cli, js):
    """``pub SUBJECT $'caf\\xe9'`` and ``kv put B K $'caf\\xe9'`` send those bytes (what
    the text output shows comes back as it was), not a UnicodeEncodeError."""
    name = unique_stream_name("CLIARG")
    bucket = unique_stream_name("CLIARGKV")
    js.create_stream(name=name, subjects=[f"{name}.>"])
    js.create_key_value(bucket=bucket)
    try:
        argument = "caf\udce9"  # how Python hands over the byte 0xe9 of argv
        published = cli.run("pub", f"{name}.x", argument, "--jetstream")
        assert published.code == 0, published.stderr
        stored = cli.run("--json", "stream", "get", name, "1").json()
        assert stored["data_b64"] == b64(b"caf\xe9")
        put = cli.run("kv", "put", bucket, "k", argument)
        assert put.code == 0, put.stderr
        assert cli.run("--json", "kv", "get", bucket, "k").json()["value_b64"] == b64(b"caf\xe9")
    finally:
        js.delete_stream(name)
        js.delete_key_value(bucket)
