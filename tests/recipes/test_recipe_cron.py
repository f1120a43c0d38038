"""examples/cron_export.py, run as cron runs it: a fresh process each time, from elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import jetstream_sync
from tests.fixtures.examples import run_example
from tests.fixtures.polling import wait_for

ARGS = ["--stream", "CRONORDERS", "--durable", "export", "--out", "orders.jsonl"]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_two_runs_export_each_message_once_and_ack_it(nats_server, tmp_path: Path):
    """The first run exports and acks everything; the second finds nothing new."""
    with jetstream_sync.connect(nats_server.url) as nc:
        ctx = nc.jetstream()
        ctx.create_stream(name="CRONORDERS", subjects=["cronorders.>"])
        for i in range(1, 6):
            ctx.publish(f"cronorders.{i}", json.dumps({"id": i}).encode())
        ctx.publish("cronorders.raw", b"\xff not json")
        env = {"NATS_URL": nats_server.url}

        first = run_example("cron_export.py", ARGS, cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stderr
        assert first.stdout == "exported 6 messages to orders.jsonl\n"
        exported = _lines(tmp_path / "orders.jsonl")
        assert [line["seq"] for line in exported] == [1, 2, 3, 4, 5, 6]
        assert [line.get("data") for line in exported[:5]] == [{"id": i} for i in range(1, 6)]
        assert exported[5]["data_base64"] == "/yBub3QganNvbg=="
        info = ctx.consumer_info("CRONORDERS", "export")
        assert (info.num_pending, info.num_ack_pending) == (0, 0)  # acked before the exit

        second = run_example("cron_export.py", ARGS, cwd=tmp_path, env=env)
        assert second.returncode == 0, second.stderr
        assert second.stdout == "exported 0 messages to orders.jsonl\n"
        assert len(_lines(tmp_path / "orders.jsonl")) == 6

        ctx.publish("cronorders.7", b'{"id": 7}')
        # the job's no-wait pull sees it once the server counted it into the consumer
        wait_for(lambda: ctx.consumer_info("CRONORDERS", "export").num_pending == 1)
        third = run_example("cron_export.py", ARGS, cwd=tmp_path, env=env)
        assert third.stdout == "exported 1 messages to orders.jsonl\n", third.stderr
        assert [line["seq"] for line in _lines(tmp_path / "orders.jsonl")] == list(range(1, 8))


def test_an_unreachable_server_is_one_line_on_stderr_and_a_failure(nats_server, tmp_path: Path):
    """With the server down, the job fails at once with one clear line and writes nothing."""
    url = nats_server.url
    nats_server.stop()
    done = run_example(
        "cron_export.py", ARGS, cwd=tmp_path,
        env={"NATS_URL": url.replace("nats://", "nats://cron:s3cret@")},
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == f"cron_export: cannot connect to {url} (unreachable)\n"
    assert not (tmp_path / "orders.jsonl").exists()


def test_a_missing_stream_is_a_clear_failure(nats_server, tmp_path: Path):
    """A stream that does not exist is named on stderr; the exit status is 1."""
    done = run_example("cron_export.py", ARGS, cwd=tmp_path, env={"NATS_URL": nats_server.url})
    assert done.returncode == 1
    assert done.stderr == "cron_export: stream 'CRONORDERS' does not exist\n"
