"""The ``jetstream-sync`` command: global options, exit codes, pub/sub/req/reply, server, bench.

Every command runs as a subprocess (``python -m jetstream_sync.cli``) against a
real nats-server; JetStream commands are in ``test_cli_jetstream.py``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import jetstream_sync
from jetstream_sync._nkeys import KeyPair
from jetstream_sync.cli import main
from tests.fixtures.cli import REPO_ROOT, Cli, cli_env
from tests.fixtures.ctrl_c import ctrl_c_reaches_children
from tests.fixtures.jetstream import unique_stream_name
from tests.fixtures.server import NatsServer

LISTEN_TIMEOUT = 15.0


def subject() -> str:
    """A subject no other test uses."""
    return f"cli.{unique_stream_name('t').lower()}"


# -- usage and errors ---------------------------------------------------------


def test_help_exits_0(cli):
    """--help lists every command group and exits 0."""
    result = cli.run("--help")
    assert result.code == 0
    for command in (
        "server",
        "pub",
        "sub",
        "req",
        "reply",
        "stream",
        "consumer",
        "kv",
        "object",
        "bench",
    ):
        assert command in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("nonsense",),
        ("pub",),
        ("stream", "add"),
        ("pub", "x", "--count", "0"),
        ("--timeout", "soon", "pub", "x"),
        ("stream", "add", "S", "--retention", "forever"),
        ("consumer", "pause", "S", "C", "whenever"),
        ("object", "get", "B"),
    ],
)
def test_bad_usage_is_exit_2(args, capsys):
    """A missing argument, an unknown command, or a bad value: SystemExit(2), usage on stderr."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert "usage:" in captured.err and captured.out == ""


def test_bad_usage_exits_2_from_the_command(cli):
    """The process itself exits 2 on bad usage, with argparse's message and no output."""
    result = cli.run("stream", "ls", "--bogus")
    assert result.code == 2
    assert "unrecognized arguments: --bogus" in result.stderr and result.stdout == ""


def test_unreachable_server_exits_1_with_a_clear_message(cli):
    """No server listening: exit 1, one line naming the server, no traceback, no password."""
    result = cli.run("--server", "nats://alice:pa55word@127.0.0.1:1", "stream", "ls")
    assert result.code == 1
    assert result.stderr.strip().splitlines() == [
        "jetstream-sync: error: cannot connect to nats://127.0.0.1:1: connection refused"
    ]
    assert "Traceback" not in result.stderr and "pa55word" not in result.stderr


def test_an_unparsable_server_url_exits_1_with_one_line(cli):
    """A URL urllib cannot split (an unclosed IPv6 bracket) is an error line, not a
    traceback from hiding its password, and the password is still not shown."""
    result = cli.run("--server", "nats://alice:pa55word@[::1", "stream", "ls")
    assert result.code == 1
    assert result.stderr.strip().splitlines() == [
        "jetstream-sync: error: server URL 'nats://***@[::1': Invalid IPv6 URL"
    ]


def test_server_option_after_the_command_and_from_the_environment(cli, shared_server):
    """--server works after the subcommand too; NATS_URL is the default; the flag wins."""
    down = "nats://127.0.0.1:1"
    assert (
        cli.run("pub", subject(), "x", "--server", shared_server.url, env={"NATS_URL": down}).code
        == 0
    )
    assert cli.run("pub", subject(), "x", env={"NATS_URL": down}).code == 1


def test_user_and_password(auth_server, tmp_path):
    """--user/--password authenticate; a wrong password exits 1 without printing it."""
    cli = Cli(auth_server.url, tmp_path)
    ok = cli.run("--user", "alice", "--password", "s3cret", "pub", "auth.x", "hi")
    assert ok.code == 0, ok.stderr
    bad = cli.run("--user", "alice", "--password", "wr0ngpw", "pub", "auth.x", "hi")
    assert bad.code == 1
    assert "wr0ngpw" not in bad.stderr and "Traceback" not in bad.stderr
    assert "jetstream-sync: error:" in bad.stderr


def test_token_from_the_environment(token_server, tmp_path):
    """NATS_TOKEN authenticates like --token."""
    cli = Cli(token_server.url, tmp_path)
    assert cli.run("pub", "tok.x", "hi", env={"NATS_TOKEN": "t0ken"}).code == 0
    assert cli.run("--token", "t0ken", "pub", "tok.x", "hi").code == 0
    assert cli.run("pub", "tok.x", "hi").code == 1


def test_tls_ca(tls_server, tmp_path):
    """--tls-ca trusts the test CA; without it, or with a missing file, exit 1 saying why."""
    server, ca = tls_server
    cli = Cli(server.url, tmp_path)
    ok = cli.run("--tls-ca", str(ca), "pub", "tls.x", "hi")
    assert ok.code == 0, ok.stderr
    untrusted = cli.run("--timeout", "2", "pub", "tls.x", "hi")
    assert untrusted.code == 1 and "TLS certificate is not trusted" in untrusted.stderr
    missing = cli.run("--tls-ca", str(tmp_path / "nope.pem"), "pub", "tls.x", "hi")
    assert missing.code == 1 and "cannot load the CA file" in missing.stderr


def test_nkey_seed_file_and_an_unreadable_creds_file(tmp_path):
    """--nkey authenticates with a seed file; a missing --creds file exits 1 naming it."""
    user = KeyPair.create()
    seed = tmp_path / "user.nk"
    seed.write_text(user.seed)
    admitted = f'authorization {{ users = [ {{ nkey: "{user.public_key}" }} ] }}'
    with NatsServer(jetstream=False, extra_config=[admitted]) as server:
        cli = Cli(server.url, tmp_path)
        assert cli.run("--nkey", str(seed), "pub", "x", "y").code == 0
        refused = cli.run("pub", "x", "y")
        assert refused.code == 1 and "Authorization Violation" in refused.stderr
    creds = Cli(None, tmp_path).run("--creds", str(tmp_path / "gone.creds"), "pub", "x", "y")
    assert creds.code == 1 and "gone.creds" in creds.stderr


# -- pub / sub / req / reply ----------------------------------------------------


def test_pub_and_sub_with_json_headers_and_templates(cli):
    """sub --count N --json prints N JSON lines and exits 0; pub renders {{Count}} and headers."""
    topic = subject()
    sub = cli.start("--json", "sub", topic, "--count", "2")
    assert sub.stderr.readline(LISTEN_TIMEOUT) == f"Listening on {topic!r}"
    result = cli.run("pub", topic, "order {{Count}}", "--count", "2", "-H", "Kind:test")
    assert result.code == 0, result.stderr
    done = sub.wait()
    assert done.code == 0
    messages = done.json_lines()
    assert [m["data"] for m in messages] == ["order 1", "order 2"]
    assert all(m["subject"] == topic and m["headers"] == {"Kind": ["test"]} for m in messages)


def test_sub_prints_binary_payloads_as_base64_in_json(cli, nc):
    """A payload that is not UTF-8 is data_b64 in JSON; --size makes bodies that long."""
    topic = subject()
    sub = cli.start("sub", topic, "--count", "2", "--json", "--queue", "workers")
    assert "in queue group 'workers'" in sub.stderr.readline(LISTEN_TIMEOUT)
    assert cli.run("pub", topic, "ab", "--size", "5").code == 0
    nc.publish(topic, b"\xff\x00")
    nc.flush(timeout=5)
    text, binary = sub.wait().json_lines()
    assert text["data"] == "ababa"
    assert binary["data_b64"] == "/wA=" and "data" not in binary


def test_pub_count_prints_progress_and_rate(cli):
    """pub --count N shows a progress line on stderr (with --progress) and the rate at the end."""
    result = cli.run("pub", subject(), "x", "--count", "500", "--progress")
    assert result.code == 0
    assert "100.0%" in result.stderr and "500 msgs/500 msgs" in result.stderr
    assert result.stdout.startswith("Published 500 messages") and "msgs/s" in result.stdout
    doc = cli.run("--json", "pub", subject(), "x", "--count", "50").json()
    assert doc["count"] == 50 and doc["bytes"] == 50 and doc["msgs_per_sec"] > 0


@pytest.mark.parametrize("mode", [(), ("--jetstream",), ("--fast-batch",)])
def test_pub_refuses_a_size_past_max_payload_before_building_the_bodies(cli, mode):
    """--size over the server's max_payload (a typo: 1TiB for 1KiB) exits 1 naming the limit,
    without first trying to build a body that large."""
    result = cli.run("pub", subject(), "x", "--size", "1TiB", *mode)
    assert result.code == 1
    assert "--size 1,099,511,627,776 bytes: the server accepts at most" in result.stderr


def test_pub_refuses_reply_with_jetstream(cli):
    """--reply and --jetstream together: exit 1 before anything is sent."""
    result = cli.run(
        "pub", subject(), "x", "--jetstream", "--reply", "r", "-s", "nats://127.0.0.1:1"
    )
    assert result.code == 1 and "--reply cannot be used with --jetstream" in result.stderr


def test_req_and_reply(cli):
    """reply answers with its (templated) body; req prints the reply; JSON on both sides."""
    topic = subject()
    replier = cli.start("reply", topic, "pong {{Count}}", "--count", "2", "--json")
    assert replier.stderr.readline(LISTEN_TIMEOUT).startswith("Listening on")
    text = cli.run("req", topic, "ping", "-H", "A:1")
    assert text.code == 0 and "pong 1" in text.stdout
    doc = cli.run("--json", "req", topic, "ping").json()
    assert doc["data"] == "pong 2" and doc["rtt_ms"] > 0
    done = replier.wait()
    assert done.code == 0
    first, second = done.json_lines()
    assert first["data"] == "ping" and first["headers"] == {"A": ["1"]} and first["reply"]
    assert second["data"] == "ping"


def test_reply_echo(cli):
    """reply --echo sends each request back."""
    topic = subject()
    replier = cli.start("reply", topic, "--echo", "--count", "1")
    replier.stderr.readline(LISTEN_TIMEOUT)
    result = cli.run("req", topic, "same to you", "--raw")
    assert result.stdout == "same to you\n"
    assert replier.wait().code == 0


def test_req_without_responders_exits_1(cli):
    """A request nobody answers: exit 1, "no responders"."""
    result = cli.run("req", subject(), "anyone?")
    assert result.code == 1
    assert "no responders" in result.stderr and "Traceback" not in result.stderr


def test_a_reader_that_goes_away_ends_sub_quietly(cli):
    """Like ``sub | head -1``: once stdout's reader is gone, sub exits 1 without a traceback."""
    topic = subject()
    sub = cli.start("sub", topic)
    sub.stderr.readline(LISTEN_TIMEOUT)
    assert cli.run("pub", topic, "first").code == 0
    assert sub.stdout.readline(LISTEN_TIMEOUT) == f"[#1] Received on {topic!r}"
    sub.close_stdout()
    assert cli.run("pub", topic, "more", "--count", "3").code == 0
    assert sub.process.wait(LISTEN_TIMEOUT) == 1
    assert sub.stderr.rest() == ""


def test_ctrl_c_exits_130(cli):
    """SIGINT (Ctrl-C) stops a waiting sub cleanly: exit 130, no traceback."""
    with ctrl_c_reaches_children():
        sub = cli.start("sub", subject())
    sub.stderr.readline(LISTEN_TIMEOUT)
    sub.signal(signal.SIGINT)
    done = sub.wait()
    assert done.code == 130
    assert "Traceback" not in done.stderr


# -- server ------------------------------------------------------------------------


def test_server_prints_its_url_serves_and_stops_on_sigterm(tmp_path):
    """server prints a URL the other commands use; SIGTERM stops it: exit 0, files removed."""
    runner = Cli(None, tmp_path)
    try:
        server = runner.start("--json", "server")
        doc = json.loads(server.stdout.readline(LISTEN_TIMEOUT))
        assert doc["url"].startswith("nats://127.0.0.1:")
        store = Path(doc["store_dir"])
        assert store.exists()
        user = Cli(doc["url"], tmp_path)
        assert user.run("stream", "add", "DEV", "--subjects", "dev.>").code == 0
        assert user.run("pub", "dev.x", "hi", "--jetstream").code == 0
        assert user.run("--json", "stream", "info", "DEV").json()["state"]["messages"] == 1
        server.signal(signal.SIGTERM)
        done = server.wait()
        assert done.code == 0
        assert "stopped" in done.stderr
        assert not store.exists()
        assert user.run("--timeout", "1", "stream", "ls").code == 1
    finally:
        runner.close()


def test_server_text_output_is_the_url(tmp_path):
    """Without --json the first stdout line is just the URL; Ctrl-C also exits 0."""
    runner = Cli(None, tmp_path)
    try:
        server = runner.start("server", "--no-jetstream")
        url = server.stdout.readline(LISTEN_TIMEOUT)
        assert url.startswith("nats://127.0.0.1:")
        assert Cli(url, tmp_path).run("pub", "x", "y").code == 0
        server.signal(signal.SIGINT)
        assert server.wait().code == 0
    finally:
        runner.close()


# -- bench ----------------------------------------------------------------------------


def test_bench_builtin(cli):
    """bench measures publish and subscribe rates (JSON), and JetStream publishes with -J."""
    doc = cli.run("--json", "bench", "--msgs", "2000", "--size", "16").json()
    assert doc["pub"]["msgs"] == 2000 and doc["sub"]["msgs"] == 2000
    assert doc["pub"]["msgs_per_sec"] > 0 and doc["size"] == 16
    js_doc = cli.run("--json", "bench", "--msgs", "500", "-J").json()
    assert js_doc["js_pub"]["msgs"] == 500
    text = cli.run("bench", "--msgs", "100")
    assert text.code == 0 and text.stdout.startswith("pub: 100 msgs")
    assert js_doc["stream"] not in cli.run("stream", "ls", "--names").stdout


@pytest.mark.parametrize("mode", [(), ("--jetstream",)])
def test_bench_refuses_a_size_past_max_payload_before_building_it(cli, mode):
    """bench --size 1TiB exits 1 naming the server's limit (no MemoryError first)."""
    result = cli.run("bench", "--msgs", "10", "--size", "1TiB", *mode)
    assert result.code == 1 and "the server accepts at most" in result.stderr


def test_bench_suite_runs_the_project_benchmarks_quick(cli, tmp_path):
    """--suite runs ``python -m benchmarks --quick`` and passes its success or failure on."""
    fake = tmp_path / "fake"
    (fake / "benchmarks").mkdir(parents=True)
    (fake / "benchmarks" / "__init__.py").write_text("")
    (fake / "benchmarks" / "__main__.py").write_text(
        "import sys\n"
        "print('ran', *sys.argv[1:])\n"
        "sys.exit(0 if sys.argv[1:] == ['--quick'] else 3)\n"
    )
    (fake / "jetstream_sync").symlink_to(REPO_ROOT / "jetstream_sync")
    result = cli.run("bench", "--suite", env={"PYTHONPATH": str(fake)})
    assert result.code == 0 and result.stdout == "ran --quick\n"


def test_bench_suite_without_the_benchmarks_package_exits_1(cli, tmp_path):
    """Outside a checkout, --suite says what it needs: exit 1."""
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "jetstream_sync").symlink_to(REPO_ROOT / "jetstream_sync")
    result = cli.run("bench", "--suite", env={"PYTHONPATH": str(alone)})
    assert result.code == 1
    assert "benchmarks package" in result.stderr


# -- the installed console script --------------------------------------------------------


def test_console_script_entry_point_runs():
    """The installed ``jetstream-sync`` script points at ``jetstream_sync.cli:run`` and runs."""
    points = [
        e
        for e in importlib.metadata.entry_points(group="console_scripts")
        if e.name == "jetstream-sync"
    ]
    script = shutil.which("jetstream-sync", path=os.path.dirname(sys.executable))
    if not points or script is None:
        pytest.skip("jetstream_sync is not installed with its console script (pip install -e .)")
    assert points[0].value == "jetstream_sync.cli:run"
    assert points[0].load() is jetstream_sync.cli.run
    done = subprocess.run(
        [script, "--help"], env=cli_env(None), capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 0 and b"jetstream-sync" in done.stdout
