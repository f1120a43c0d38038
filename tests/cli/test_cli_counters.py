"""The ``counter`` and ``schedule`` commands, run as subprocesses against the shared server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.fixtures.jetstream import unique_stream_name


@pytest.fixture
def name(js) -> Iterator[str]:
    """A unique stream name; the stream is deleted afterwards."""
    found = unique_stream_name("CLICNT")
    yield found
    if found in set(js.stream_names()):
        js.delete_stream(found)


def ok(result):
    """Assert exit 0 (showing stderr otherwise); return the result."""
    assert result.code == 0, result.stderr
    return result


def test_counter_add_get_ls(cli, js, name):
    """add prints the total (negative and past 64 bits too), get and ls read it back."""
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_msg_counter=True, allow_direct=True)
    assert ok(cli.run("counter", "add", name, f"{name}.a", "5")).stdout == f"{name}.a: 5\n"
    assert ok(cli.run("counter", "add", name, f"{name}.a", "-7")).stdout == f"{name}.a: -2\n"
    assert ok(cli.run("counter", "add", name, f"{name}.b")).stdout == f"{name}.b: 1\n"
    big = ok(cli.run("--json", "counter", "add", name, f"{name}.c", str(2**70))).json()
    assert big["value"] == str(2**70)
    got = ok(cli.run("--json", "counter", "get", name, f"{name}.a")).json()
    assert (got["value"], got["increment"], got["sources"]) == ("-2", "-7", {})
    listed = ok(cli.run("counter", "ls", name)).stdout.splitlines()
    assert listed == [f"{name}.a: -2", f"{name}.b: 1", f"{name}.c: {2**70}"]


def test_counter_ls_lists_past_the_servers_1024(cli, js, name):
    """ls over 3,000 counters prints every one (the server answers 1,024 per request)."""
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_msg_counter=True, allow_direct=True)
    for i in range(3000):
        js.publish_async(f"{name}.c.{i}", b"", headers={"Nats-Incr": "+1"})
    js.publish_async_completed(timeout=60)
    listed = ok(cli.run("counter", "ls", name)).stdout.splitlines()
    assert sorted(listed) == sorted(f"{name}.c.{i}: 1" for i in range(3000))


def test_schedule_rm_refuses_a_subject_without_a_schedule(cli, js, name):
    """rm on a subject holding ordinary messages exits 1 and removes nothing."""
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_msg_schedules=True)
    for i in range(3):
        js.publish(f"{name}.orders", b"order %d" % i)
    result = cli.run("schedule", "rm", f"{name}.orders")
    assert result.code == 1 and "not a schedule" in result.stderr, result.stderr
    assert js.stream(name).info().state.messages == 3


def test_counter_totals_past_4300_digits(cli, js, name):
    """add, get and ls print totals of any size (CPython's str() stops at 4,300 digits)."""
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_msg_counter=True, allow_direct=True)
    digits = "9" * 4300
    ok(cli.run("counter", "add", name, f"{name}.h", digits))
    total = "1" + "9" * 4299 + "8"  # 2 * (10**4300 - 1)
    assert ok(cli.run("counter", "add", name, f"{name}.h", digits)).stdout == f"{name}.h: {total}\n"
    assert ok(cli.run("--json", "counter", "get", name, f"{name}.h")).json()["value"] == total
    assert ok(cli.run("counter", "ls", name)).stdout == f"{name}.h: {total}\n"


def test_counter_errors_exit_1(cli, js, name):
    """A stream without counters, a subject never counted and a bad increment are refused."""
    js.create_stream(name=name, subjects=[f"{name}.>"])
    plain = cli.run("counter", "add", name, f"{name}.a", "1")
    assert plain.code == 1 and "not a counter stream" in plain.stderr
    js.delete_stream(name)
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_msg_counter=True)
    missing = cli.run("counter", "get", name, f"{name}.none")
    assert missing.code == 1 and "no counter value" in missing.stderr
    assert cli.run("counter", "add", name, f"{name}.a", "1.5").code == 2


def test_counter_ls_on_a_stream_without_direct_get_says_which_flag_allows_it(cli, js, name):
    """``counter ls`` reads by direct get: a counter stream made without it is refused with
    the command that allows it (not the Python API's allow_direct=True / get_msg)."""
    ok(cli.run("stream", "add", name, "--subjects", f"{name}.>", "--allow-msg-counter"))
    ok(cli.run("counter", "add", name, f"{name}.a", "1"))
    refused = cli.run("counter", "ls", name)
    assert refused.code == 1
    assert f"jetstream-sync stream edit {name} --allow-direct" in refused.stderr
    assert "get_msg" not in refused.stderr
    ok(cli.run("stream", "edit", name, "--allow-direct"))
    assert ok(cli.run("counter", "ls", name)).stdout == f"{name}.a: 1\n"


def test_schedule_add_ls_rm(cli, js, name):
    """add with --every and --at, ls (text and JSON), rm; rm of nothing exits 1."""
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_msg_schedules=True)
    ok(cli.run("schedule", "add", f"{name}.s.tick", f"{name}.out", "hi", "--every", "1h"))
    when = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    ok(cli.run("schedule", "add", f"{name}.s.once", f"{name}.out", "--at", when.isoformat()))
    ok(cli.run("schedule", "add", f"{name}.s.cron", f"{name}.out", "--cron", "0 0 9 * * mon",
               "--time-zone", "America/New_York"))  # fmt: skip
    text = ok(cli.run("schedule", "ls", name)).stdout.splitlines()
    assert text[0] == f"{name}.s.cron -> {name}.out: 0 0 9 * * mon [America/New_York]"
    assert text[1] == f"{name}.s.once -> {name}.out: @at {when:%Y-%m-%dT%H:%M:%SZ} " \
        f"(next: {when.isoformat()})"  # fmt: skip
    assert text[2] == f"{name}.s.tick -> {name}.out: @every 3600s"
    docs = ok(cli.run("--json", "schedule", "ls", name, f"{name}.s.tick")).json()
    assert [(d["subject"], d["data"]) for d in docs] == [(f"{name}.s.tick", "hi")]
    assert ok(cli.run("schedule", "rm", f"{name}.s.tick")).code == 0
    again = cli.run("schedule", "rm", f"{name}.s.tick")
    assert again.code == 1 and "no schedule" in again.stderr


def test_schedule_add_refuses_bad_input(cli, js, name):
    """A bad cron, zone or missing spec is refused; nothing is stored."""
    js.create_stream(name=name, subjects=[f"{name}.>"], allow_msg_schedules=True)
    bad = cli.run("schedule", "add", f"{name}.s", f"{name}.t", "--cron", "* * * * *")
    assert bad.code == 1 and "6 fields" in bad.stderr
    zone = cli.run("schedule", "add", f"{name}.s", f"{name}.t", "--cron", "@daily",
                   "--time-zone", "Nowhere/Atlantis")  # fmt: skip
    assert zone.code == 1 and "unknown time zone" in zone.stderr
    assert cli.run("schedule", "add", f"{name}.s", f"{name}.t").code == 2
    assert js.stream(name).info().state.messages == 0
