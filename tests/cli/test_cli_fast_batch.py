"""``jetstream-sync pub --fast-batch``: one fast-ingest batch from BODY copies or stdin lines."""

from __future__ import annotations

import pytest

import jetstream_sync


@pytest.fixture
def stream_options() -> dict[str, object]:
    """The streams here allow fast-ingest batches and batched direct gets."""
    return {"allow_batched": True, "allow_direct": True}


def stored(stream: jetstream_sync.Stream) -> list[bytes]:
    """Every payload the stream holds, in sequence order."""
    count = stream.info().state.messages
    return [stream.get_msg(seq).data for seq in range(1, count + 1)]


def test_count_copies_of_a_template_body(cli, stream):
    """``--count`` copies of BODY, templates filled in, go in one batch; the text result
    names the stream, the last sequence and the batch's size."""
    result = cli.run("pub", f"{stream.name}.a", "n {{Count}}", "--count", "3", "--fast-batch")
    assert result.code == 0, result.stderr
    assert result.stdout.startswith(f"Published 3 messages (9 B) to '{stream.name}.a' in ")
    assert result.stdout.endswith(f"(stream {stream.name}, last seq 3, batch of 3)\n")
    assert stored(stream) == [b"n 1", b"n 2", b"n 3"]


def test_stdin_lines_are_the_messages(cli, stream):
    """Each line of stdin is one message: LF and CRLF endings are dropped, an empty line is
    an empty message, a last line without a newline counts; --json gives the commit's ack."""
    result = cli.run("--json", "pub", f"{stream.name}.in", "--fast-batch",
                     input=b"one\ntwo\r\n\n\xff\xfe bytes\nlast")  # fmt: skip
    assert result.code == 0, result.stderr
    doc = result.json()
    assert (doc["count"], doc["bytes"], doc["stream"], doc["seq"], doc["batch_size"]) == (
        5, 18, stream.name, 5, 5,
    )  # fmt: skip
    assert doc["batch_id"]
    assert stored(stream) == [b"one", b"two", b"", b"\xff\xfe bytes", b"last"]


def test_many_stdin_lines_pass_the_window(cli, stream, tmp_path):
    """5,000 lines from a file (several flow windows) are stored in order, each once."""
    source = tmp_path / "lines.txt"
    source.write_bytes(b"".join(b"line %d\n" % i for i in range(5000)))
    result = cli.run("--json", "pub", f"{stream.name}.f", "-", "--fast-batch", stdin=source)
    assert result.code == 0, result.stderr
    assert (result.json()["count"], result.json()["seq"]) == (5000, 5000)
    got = stream.get_msgs(start_seq=1, batch=5000)
    assert [m.data for m in got] == [b"line %d" % i for i in range(5000)]


def test_headers_are_rendered_per_message(cli, stream):
    """-H values are templates per message (a Nats-Msg-Id each)."""
    result = cli.run("pub", f"{stream.name}.h", "x", "-H", "Nats-Msg-Id:id-{{Count}}",
                     "--count", "2", "--fast-batch")  # fmt: skip
    assert result.code == 0, result.stderr
    assert [stream.get_msg(seq).headers["Nats-Msg-Id"] for seq in (1, 2)] == ["id-1", "id-2"]


def test_stream_without_allow_batched_exits_1(cli, js, stream_name):
    """A stream without allow_batched: exit 1 with the server's refusal and what the stream
    needs; nothing is stored."""
    plain = js.create_stream(name=stream_name, subjects=[f"{stream_name}.>"])
    result = cli.run("pub", f"{stream_name}.a", "x", "--count", "3", "--fast-batch")
    assert result.code == 1
    assert result.stderr.startswith("jetstream-sync: error: ")
    assert "10205" in result.stderr and "allow_batched" in result.stderr
    assert plain.info().state.messages == 0


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["--count", "2"], b"a\n", "--count cannot be used"),
        ([], b"", "stdin has no lines"),
        (["body", "--reply", "r"], None, "--reply cannot be used with --fast-batch"),
    ],
    ids=["count-with-stdin", "empty-stdin", "reply"],
)
def test_bad_combinations_exit_1_sending_nothing(cli, stream, args, stdin, message):
    """--count with stdin lines, an empty stdin and --reply are refused; nothing is stored."""
    result = cli.run("pub", f"{stream.name}.a", *args, "--fast-batch", input=stdin)
    assert result.code == 1 and message in result.stderr, result.stderr
    assert stream.info().state.messages == 0
