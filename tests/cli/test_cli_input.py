"""What the ``jetstream-sync`` command reads: bodies from stdin, and bad values refused by cause.

``pub`` and ``req`` take the body from stdin like the ``nats`` CLI (``-``, or no
body while stdin is a pipe or a file); every message about a bad subject or a
bad number says what exactly is wrong.
"""

from __future__ import annotations

import subprocess

import pytest

from jetstream_sync.cli import main
from tests.fixtures.cli import COMMAND, RUN_TIMEOUT, cli_env


@pytest.mark.parametrize("closing", ["<&-", ">&-", "2>&-"])
def test_a_standard_stream_the_shell_closed_is_no_error(cli, stream, closing):
    """``pub ... <&-``, ``>&-``, ``2>&-``: the message is stored and the command exits 0 (a
    closed stdin is an empty body, a closed output discards), no AttributeError."""
    done = subprocess.run(
        ["sh", "-c", f'exec "$@" {closing}', "sh", *COMMAND, "pub", f"{stream.name}.c", "-", "-J"],
        cwd=cli.cwd,
        env=cli_env(cli.url),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert stream.get_msg(1).data == b""


def test_piped_stdin_is_the_body_of_a_jetstream_pub(cli, stream):
    """``printf 'piped-body' | jetstream-sync pub S --jetstream`` stores 'piped-body'."""
    result = cli.run("--json", "pub", f"{stream.name}.in", "--jetstream", input=b"piped-body")
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["bytes"] == len(b"piped-body") and doc["seq"] == 1
    assert stream.get_msg(1).data == b"piped-body"


def test_a_dash_reads_stdin_from_a_file_byte_for_byte(cli, stream, tmp_path):
    """``pub S - < file`` sends the file's bytes as they are (not UTF-8, no template filled in),
    once per ``--count``."""
    body = b"\xff\x00 {{Count}} \xe9"
    source = tmp_path / "body.bin"
    source.write_bytes(body)
    assert cli.run("pub", f"{stream.name}.f", "-", "-J", "--count", "2", stdin=source).code == 0
    assert [stream.get_msg(seq).data for seq in (1, 2)] == [body, body]


def test_no_body_from_a_redirected_file_and_a_given_body_wins_over_stdin(cli, stream, tmp_path):
    """No BODY with stdin redirected from a file reads the file; a BODY given on the command
    line is sent even while stdin carries something else."""
    source = tmp_path / "body.txt"
    source.write_bytes(b"from the file")
    assert cli.run("pub", f"{stream.name}.a", "-J", stdin=source).code == 0
    assert cli.run("pub", f"{stream.name}.b", "argument", "-J", input=b"stdin").code == 0
    assert [stream.get_msg(seq).data for seq in (1, 2)] == [b"from the file", b"argument"]


def test_no_body_without_redirected_stdin_is_an_empty_message(cli, stream):
    """With stdin on /dev/null (as a terminal would be: nothing redirected), no BODY is an
    empty message, sent at once instead of waiting for input."""
    assert cli.run("pub", f"{stream.name}.empty", "-J").code == 0
    assert stream.get_msg(1).data == b""


def test_req_sends_piped_stdin(cli, nc):
    """``printf ... | jetstream-sync req S`` sends stdin as the request's body."""
    nc.subscribe("cli.input.upper", cb=lambda msg: msg.respond(msg.data.upper()))
    nc.flush(timeout=5)
    result = cli.run("req", "cli.input.upper", "--raw", input=b"ping body")
    assert result.code == 0, result.stderr
    assert result.stdout == "PING BODY\n"
    dashed = cli.run("req", "cli.input.upper", "-", "--raw", input=b"dash")
    assert dashed.stdout == "DASH\n"


@pytest.mark.parametrize(
    ("subject", "says"),
    [
        ("orders new", "invalid subject (it contains a space; subjects take no whitespace)"),
        ("orders\tnew", "invalid subject (it contains a tab; subjects take no whitespace)"),
        ("orders..new", "invalid subject (it has an empty token"),
        (".orders", "invalid subject (it has an empty token"),
        ("orders.*", "invalid subject (publish subjects take no wildcards, and '*' is one)"),
        ("orders.>", "invalid subject (publish subjects take no wildcards, and '>' is one)"),
    ],
)
def test_a_bad_publish_subject_is_refused_naming_its_fault(shared_server, capsys, subject, says):
    """pub to a bad subject exits 1 with the one cause that is wrong, not a wildcard message
    for a space."""
    assert main(["pub", subject, "x", "--server", shared_server.url]) == 1
    error = capsys.readouterr().err
    assert says in error, error
    assert ("wildcards" in error) == ("wildcards" in says)


@pytest.mark.parametrize(
    ("subject", "says"),
    [
        ("orders new", "invalid subject (it contains a space; subjects take no whitespace)"),
        ("orders..*", "invalid subject (it has an empty token"),
        ("orders.>.x", "invalid subject ('>' may only be the last token)"),
    ],
)
def test_a_bad_subscribe_subject_is_refused_naming_its_fault(shared_server, capsys, subject, says):
    """sub on a bad subject exits 1 with the one cause that is wrong (a space is no wildcard
    fault)."""
    assert main(["sub", subject, "--count", "1", "--server", shared_server.url]) == 1
    error = capsys.readouterr().err
    assert says in error, error


@pytest.mark.parametrize("given", ["", " , "])
def test_subjects_that_name_no_subject_are_bad_usage(capsys, given):
    """``stream edit S --subjects ''`` is refused (exit 2), not reported as an update that
    changed nothing."""
    with pytest.raises(SystemExit) as exited:
        main(["stream", "edit", "S", "--subjects", given])
    assert exited.value.code == 2
    assert "names no subject" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--timeout", "nan", "pub", "x"), "a duration must be a number, got 'nan'"),
        (("pub", "x", "--timeout", "NaN"), "a duration must be a number, got 'NaN'"),
        (("--timeout", "inf", "pub", "x"), "a duration must be finite, got 'inf'"),
        (("--timeout", "-1", "pub", "x"), "a duration must not be negative, got '-1'"),
        (("stream", "add", "S", "--max-age", "nan"), "a duration must be a number"),
        (("kv", "add", "B", "--ttl", "inf"), "a duration must be finite"),
        (("pub", "x", "--size", "9" * 400), "is too large"),
        (("consumer", "pause", "S", "C", "1e300"), "from now is past the year 9999"),
        # past what the wire carries (int64 nanoseconds) and what a wait can take
        (("--timeout", "1e20", "stream", "ls"), "a duration must be at most 292 years"),
        (("stream", "add", "S", "--max-age", "300y"), "a duration must be at most 292 years"),
        (("consumer", "next", "S", "C", "--wait", "9300000000"), "at most 292 years"),
    ],
)
def test_a_number_that_is_not_one_is_bad_usage_saying_so(capsys, args, says):
    """NaN, infinity and numbers too large to use are refused by argparse (exit 2) with what
    is wrong, never as a negative number or a traceback."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert says in error, error
