"""The ``jetstream-sync`` JetStream commands: ``stream``, ``consumer``, ``kv``, ``object``.

Each runs as a subprocess against the shared server, with unique names;
``--json`` output is parsed, and errors must exit 1 with a message.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator

import pytest

from tests.fixtures.jetstream import unique_stream_name

LISTEN_TIMEOUT = 15.0


@pytest.fixture
def name(js) -> Iterator[str]:
    """A unique stream/bucket name; the stream, bucket or object store is deleted afterwards."""
    found = unique_stream_name("CLI")
    yield found
    for stream in (found, f"KV_{found}", f"OBJ_{found}"):
        if stream in set(js.stream_names()):
            js.delete_stream(stream)


def ok(result):
    """Assert exit 0 (showing stderr otherwise); return the result."""
    assert result.code == 0, result.stderr
    return result


# -- stream -------------------------------------------------------------------------


def test_stream_add_ls_info_edit_rm(cli, name):
    """add (JSON config), ls (table, --names, JSON), info, edit, rm; info after rm exits 1."""
    doc = ok(cli.run("--json", "stream", "add", name, "--subjects", f"{name}.a,{name}.b",
                     "--storage", "memory", "--retention", "limits", "--max-msgs", "1000",
                     "--max-age", "1h", "--defaults")).json()  # fmt: skip
    config = doc["config"]
    assert config["subjects"] == [f"{name}.a", f"{name}.b"]
    assert config["storage"] == "memory" and config["max_msgs"] == 1000
    assert config["max_age"] == 3600 * 10**9
    assert name in ok(cli.run("stream", "ls", "--names")).stdout.split()
    table = ok(cli.run("stream", "ls")).stdout.splitlines()
    assert table[0].split() == ["NAME", "SUBJECTS", "MESSAGES", "BYTES"]
    assert any(line.startswith(name) for line in table)
    assert name in [i["config"]["name"] for i in ok(cli.run("--json", "stream", "ls")).json()]
    assert f"Stream {name}" in ok(cli.run("stream", "info", name)).stdout
    edited = ok(cli.run("--json", "stream", "edit", name, "--max-msgs", "5")).json()
    assert edited["config"]["max_msgs"] == 5 and edited["config"]["storage"] == "memory"
    assert ok(cli.run("stream", "rm", name, "-f")).stdout == f"Deleted stream {name}\n"
    gone = cli.run("stream", "info", name)
    assert gone.code == 1 and "stream not found" in gone.stderr


def test_stream_add_feature_flags_set_their_config_fields(cli, name):
    """--allow-batched, --allow-msg-counter and the other feature flags reach the config;
    a stream made with --allow-batched takes pub --fast-batch."""
    flags = ["--allow-msg-ttl", "--allow-atomic", "--allow-msg-schedules", "--allow-batched"]
    doc = ok(cli.run("--json", "stream", "add", name, "--subjects", f"{name}.>", *flags)).json()
    config = doc["config"]
    assert [config.get(f) for f in ("allow_msg_ttl", "allow_atomic", "allow_msg_schedules",
                                    "allow_batched")] == [True] * 4  # fmt: skip
    assert not config.get("allow_msg_counter")
    acked = ok(cli.run("--json", "pub", f"{name}.x", "m", "--fast-batch", "--count", "3")).json()
    assert acked["batch_size"] == 3
    counters = f"{name}C"
    try:
        made = ok(cli.run("--json", "stream", "add", counters, "--allow-msg-counter")).json()
        assert made["config"]["allow_msg_counter"] is True
        assert ok(cli.run("counter", "add", counters, counters, "5")).stdout.strip().endswith("5")
    finally:
        cli.run("stream", "rm", counters, "-f")


def test_stream_add_subjects_default_to_its_name(cli, name):
    """Without --subjects the stream captures its own name, as in the nats CLI."""
    doc = ok(cli.run("--json", "stream", "add", name)).json()
    assert doc["config"]["subjects"] == [name]


def test_stream_get_view_purge(cli, name):
    """get by sequence and --last-for, view in order (--count, --subject, --since), purge."""
    ok(cli.run("stream", "add", name, "--subjects", f"{name}.>"))
    ok(cli.run("pub", f"{name}.a", "a{{Count}}", "--count", "3", "-J"))
    ack = ok(cli.run("--json", "pub", f"{name}.b", "b1", "-J", "-H", "X:1")).json()
    assert ack["stream"] == name and ack["seq"] == 4
    second = ok(cli.run("--json", "stream", "get", name, "2")).json()
    assert second["seq"] == 2 and second["data"] == "a2" and second["subject"] == f"{name}.a"
    last = ok(cli.run("--json", "stream", "get", name, "--last-for", f"{name}.b")).json()
    assert last["data"] == "b1" and last["headers"] == {"X": ["1"]}
    assert "[4]" in ok(cli.run("stream", "get", name, "4")).stdout
    assert cli.run("stream", "get", name).code == 1  # neither a sequence nor --last-for
    assert "no message found" in cli.run("stream", "get", name, "99").stderr
    viewed = ok(cli.run("--json", "stream", "view", name)).json_lines()
    assert [m["data"] for m in viewed] == ["a1", "a2", "a3", "b1"]
    some = ok(cli.run("--json", "stream", "view", name, "--count", "2", "--since", "2"))
    assert [m["seq"] for m in some.json_lines()] == [2, 3]
    only_b = ok(cli.run("--json", "stream", "view", name, "--subject", f"{name}.b"))
    assert [m["data"] for m in only_b.json_lines()] == ["b1"]
    refused = cli.run("stream", "purge", name, "--subject", "")  # never "the whole stream"
    assert refused.code == 1 and "subject" in refused.stderr
    purged = ok(cli.run("--json", "stream", "purge", name, "--subject", f"{name}.a")).json()
    assert purged == {"stream": name, "purged": 3}
    assert ok(cli.run("--json", "stream", "purge", name)).json()["purged"] == 1
    empty = ok(cli.run("stream", "view", name))
    assert empty.stdout == "" and "no messages" in empty.stderr


# -- consumer -------------------------------------------------------------------------


def test_consumer_add_ls_info_next_rm(cli, name):
    """add a filtered pull consumer, next acks (confirmed), --no-ack leaves them pending."""
    ok(cli.run("stream", "add", name, "--subjects", f"{name}.>"))
    ok(cli.run("pub", f"{name}.in", "m{{Count}}", "--count", "4", "-J"))
    ok(cli.run("pub", f"{name}.other", "skip", "-J"))
    doc = ok(cli.run("--json", "consumer", "add", name, "WORK", "--filter", f"{name}.in",
                     "--ack", "explicit", "--pull", "--defaults")).json()  # fmt: skip
    assert doc["config"]["durable_name"] == "WORK"
    assert doc["config"]["filter_subject"] == f"{name}.in" and doc["num_pending"] == 4
    assert ok(cli.run("consumer", "ls", name, "--names")).stdout == "WORK\n"
    assert [c["name"] for c in ok(cli.run("--json", "consumer", "ls", name)).json()] == ["WORK"]
    got = ok(cli.run("--json", "consumer", "next", name, "WORK", "--count", "2")).json_lines()
    assert [m["data"] for m in got] == ["m1", "m2"] and got[0]["delivered"] == 1
    info = ok(cli.run("--json", "consumer", "info", name, "WORK")).json()
    assert info["ack_floor"]["stream_seq"] == 2 and info["num_ack_pending"] == 0
    text = ok(cli.run("consumer", "next", name, "WORK", "--no-ack"))
    assert "m3" in text.stdout
    info = ok(cli.run("--json", "consumer", "info", name, "WORK")).json()
    assert info["num_ack_pending"] == 1
    ok(cli.run("consumer", "rm", name, "WORK", "-f"))
    assert cli.run("consumer", "info", name, "WORK").code == 1


def test_consumer_next_count_past_max_batch_pulls_in_turns(cli, js, name):
    """next --count 7 on a consumer whose max_batch is 3 fetches 3, 3 and 1 (one fetch of
    7 was refused: "409 Exceeded MaxRequestBatch of 3", exit 1)."""
    ok(cli.run("stream", "add", name, "--subjects", f"{name}.>"))
    ok(cli.run("pub", f"{name}.in", "m{{Count}}", "--count", "8", "-J"))
    js.create_consumer(name, durable_name="SMALL", max_batch=3)
    got = ok(cli.run("--json", "consumer", "next", name, "SMALL", "--count", "7")).json_lines()
    assert [m["data"] for m in got] == [f"m{i}" for i in range(1, 8)]


def test_consumer_next_with_nothing_to_fetch_exits_1(cli, name):
    """next when no message comes within --wait: exit 1, "no message received"."""
    ok(cli.run("stream", "add", name))
    ok(cli.run("consumer", "add", name, "IDLE"))
    result = cli.run("consumer", "next", name, "IDLE", "--wait", "0.3")
    assert result.code == 1 and "no message received" in result.stderr


def test_consumer_priority_groups_add_next_and_unpin(cli, name):
    """add with a pinned_client group; next pulls in the group (and refuses none or a bad
    priority before sending); unpin clears the pin."""
    ok(cli.run("stream", "add", name, "--subjects", f"{name}.>"))
    ok(cli.run("pub", f"{name}.in", "m{{Count}}", "--count", "3", "-J"))
    doc = ok(cli.run("--json", "consumer", "add", name, "PIN", "--pull", "--defaults",
                     "--priority-policy", "pinned_client", "--priority-group", "jobs",
                     "--priority-timeout", "30s")).json()  # fmt: skip
    assert doc["config"]["priority_policy"] == "pinned_client"
    assert doc["config"]["priority_groups"] == ["jobs"]
    assert doc["config"]["priority_timeout"] == 30 * 10**9
    got = ok(cli.run("--json", "consumer", "next", name, "PIN", "--group", "jobs")).json_lines()
    assert [m["data"] for m in got] == ["m1"]
    without = cli.run("consumer", "next", name, "PIN", "--wait", "0.5")
    assert without.code == 1 and "group" in without.stderr
    bad = cli.run("consumer", "next", name, "PIN", "--group", "jobs", "--priority", "12")
    assert bad.code == 1 and "priority" in bad.stderr
    unpinned = ok(cli.run("--json", "consumer", "unpin", name, "PIN", "jobs")).json()
    assert unpinned == {"stream": name, "consumer": "PIN", "group": "jobs", "unpinned": True}
    assert "Unpinned group jobs" in ok(cli.run("consumer", "unpin", name, "PIN", "jobs")).stdout
    assert cli.run("consumer", "unpin", name, "PIN", "other").code == 1


def test_consumer_info_shows_priority_groups_and_the_pin(cli, js, name):
    """info (text) names the policy, groups and timeout, and the client pinned now: what
    an operator checks before and after ``consumer unpin``."""
    ok(cli.run("stream", "add", name, "--subjects", f"{name}.>"))
    ok(cli.run("pub", f"{name}.in", "m", "-J"))
    ok(cli.run("consumer", "add", name, "PIN", "--pull", "--defaults",
               "--priority-policy", "pinned_client", "--priority-group", "jobs",
               "--priority-timeout", "30s"))  # fmt: skip
    text = ok(cli.run("consumer", "info", name, "PIN")).stdout
    assert "priority: pinned_client, groups: jobs, timeout 30s" in text
    assert "group jobs: no client pinned" in text
    consumer = js.consumer(name, "PIN")
    assert len(consumer.fetch(1, timeout=2, group="jobs")) == 1
    text = ok(cli.run("consumer", "info", name, "PIN")).stdout
    assert f"group jobs: pinned {consumer.pin_id('jobs')} since " in text
    ok(cli.run("consumer", "unpin", name, "PIN", "jobs"))
    assert "group jobs: no client pinned" in ok(cli.run("consumer", "info", name, "PIN")).stdout


def test_consumer_pause_and_resume(cli, name):
    """pause until a duration from now, then resume; info shows the state."""
    ok(cli.run("stream", "add", name))
    ok(cli.run("consumer", "add", name, "P", "--ack", "all", "--deliver", "new"))
    paused = ok(cli.run("--json", "consumer", "pause", name, "P", "1h")).json()
    assert paused["paused"] is True and paused["pause_until"]
    assert ok(cli.run("--json", "consumer", "info", name, "P")).json()["paused"] is True
    resumed = ok(cli.run("--json", "consumer", "resume", name, "P")).json()
    assert resumed["paused"] is False


# -- kv --------------------------------------------------------------------------------


def test_kv_add_put_get_history_del_ls_rm(cli, name):
    """The Key-Value round trip, with stdin values, --raw, revisions, history and deletes."""
    status = ok(cli.run("--json", "kv", "add", name, "--history", "3", "--ttl", "1h")).json()
    assert status["bucket"] == name and status["history"] == 3 and status["ttl"] == 3600
    assert ok(cli.run("--json", "kv", "put", name, "color", "red")).json()["revision"] == 1
    ok(cli.run("kv", "put", name, "color", input=b"blue\xff"))
    entry = ok(cli.run("--json", "kv", "get", name, "color")).json()
    assert entry["revision"] == 2 and entry["value_b64"] == base64.b64encode(b"blue\xff").decode()
    assert ok(cli.run("kv", "get", name, "color", "--revision", "1", "--raw")).stdout == "red"
    history = ok(cli.run("--json", "kv", "history", name, "color")).json()
    assert [e["revision"] for e in history] == [1, 2]
    assert ok(cli.run("kv", "ls", name)).stdout == "color\n"
    assert name in [b["bucket"] for b in ok(cli.run("--json", "kv", "ls")).json()]
    assert ok(cli.run("--json", "kv", "info", name)).json()["values"] == 2
    ok(cli.run("kv", "del", name, "color"))
    deleted = cli.run("kv", "get", name, "color")
    assert deleted.code == 1 and "deleted" in deleted.stderr
    ok(cli.run("kv", "rm", name))
    missing = cli.run("kv", "get", name, "color")
    assert missing.code == 1 and "Traceback" not in missing.stderr


def test_kv_watch(cli, name):
    """watch prints the current value, then updates, and stops after --count."""
    ok(cli.run("kv", "add", name))
    ok(cli.run("kv", "put", name, "a", "1"))
    watcher = cli.start("--json", "kv", "watch", name, "--count", "3")
    assert watcher.stderr.readline(LISTEN_TIMEOUT).startswith("Watching")
    first = watcher.stdout.readline(LISTEN_TIMEOUT)
    assert '"value":"1"' in first
    ok(cli.run("kv", "put", name, "b", "2"))
    ok(cli.run("kv", "del", name, "a"))
    done = watcher.wait()
    assert done.code == 0
    update, delete = done.json_lines()
    assert (update["key"], update["value"], update["operation"]) == ("b", "2", "PUT")
    assert (delete["key"], delete["operation"]) == ("a", "DEL")


def test_kv_watch_from_a_revision(cli, name):
    """watch --revision N prints every revision from N on, superseded ones too; it cannot
    go with --updates-only, and a revision past 64 bits is a one-line error."""
    ok(cli.run("kv", "add", name, "--history", "5"))
    for value in ("1", "2", "3"):
        ok(cli.run("kv", "put", name, "a", value))
    done = ok(cli.run("--json", "kv", "watch", name, "--revision", "2", "--count", "2"))
    assert [(e["revision"], e["value"]) for e in done.json_lines()] == [(2, "2"), (3, "3")]
    both = cli.run("kv", "watch", name, "--revision", "2", "--updates-only")
    assert both.code == 2 and "not allowed with" in both.stderr
    past = cli.run("kv", "watch", name, "--revision", str(2**64))
    assert past.code == 1 and "resume_from_revision" in past.stderr
    assert "Traceback" not in past.stderr


# -- object ------------------------------------------------------------------------------


def test_object_add_put_ls_info_get_rm(cli, name, tmp_path):
    """A multi-chunk file goes in and comes out the same, with progress lines; rm object, bucket."""
    data = os.urandom(300_000)
    source = tmp_path / "in" / "report.bin"
    source.parent.mkdir()
    source.write_bytes(data)
    status = ok(cli.run("--json", "object", "add", name, "--description", "reports")).json()
    assert status["bucket"] == name and status["description"] == "reports"
    put = ok(cli.run("--json", "--progress", "object", "put", name, str(source),
                     "--name", "2024/report.bin"))  # fmt: skip
    stored = put.json()
    assert stored["name"] == "2024/report.bin" and stored["size"] == len(data)
    assert stored["chunks"] > 1 and "100.0%" in put.stderr
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()
    assert stored["digest"] == f"SHA-256={digest}"
    listed = ok(cli.run("--json", "object", "ls", name)).json()
    assert [o["name"] for o in listed] == ["2024/report.bin"]
    assert name in [b["bucket"] for b in ok(cli.run("--json", "object", "ls")).json()]
    assert "report.bin" in ok(cli.run("object", "info", name, "2024/report.bin")).stdout
    assert ok(cli.run("--json", "object", "info", name)).json()["size"] > len(data)
    got = ok(cli.run("--progress", "object", "get", name, "2024/report.bin"))
    assert (cli.cwd / "report.bin").read_bytes() == data and "100.0%" in got.stderr
    again = cli.run("object", "get", name, "2024/report.bin")
    assert again.code == 1 and "--force" in again.stderr
    out = tmp_path / "copy.bin"
    doc = ok(cli.run("--json", "object", "get", name, "2024/report.bin", "-O", str(out))).json()
    assert out.read_bytes() == data and doc["file"] == str(out)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    ok(cli.run("object", "rm", name, "2024/report.bin"))
    assert cli.run("object", "info", name, "2024/report.bin").code == 1
    ok(cli.run("object", "rm", name))
    assert cli.run("object", "ls", name).code == 1


def test_object_put_from_stdin_and_get_to_stdout(cli, name):
    """'-' reads stdin (which needs --name) and writes stdout."""
    ok(cli.run("object", "add", name, "--storage", "memory"))
    refused = cli.run("object", "put", name, "-", input=b"x")
    assert refused.code == 1 and "--name" in refused.stderr
    ok(cli.run("object", "put", name, "-", "--name", "note", input=b"hello object"))
    assert ok(cli.run("object", "get", name, "note", "-O", "-")).stdout == "hello object"
    missing = cli.run("object", "get", name, "nope", "-O", "-")
    assert missing.code == 1 and "Traceback" not in missing.stderr


def test_object_get_into_a_directory_says_so(cli, name, tmp_path):
    """-O naming a directory exits 1 saying it is one (not "use --force", nor a temporary
    file's name), with or without --force; the directory is left as it was."""
    ok(cli.run("object", "add", name, "--storage", "memory"))
    ok(cli.run("object", "put", name, "-", "--name", "note", input=b"hello"))
    directory = tmp_path / "downloads"
    directory.mkdir()
    for force in ((), ("--force",)):
        refused = cli.run("object", "get", name, "note", "-O", str(directory), *force)
        assert refused.code == 1
        assert f"{directory} is a directory: give --output a file name" in refused.stderr
    assert list(directory.iterdir()) == []


def test_object_get_into_a_missing_directory_names_the_file_asked_for(cli, name, tmp_path):
    """-O in a directory that does not exist exits 1 naming the file given (as ``object
    put`` of a missing file does), not the hidden temporary file written first."""
    ok(cli.run("object", "add", name, "--storage", "memory"))
    ok(cli.run("object", "put", name, "-", "--name", "note", input=b"hello"))
    target = tmp_path / "missing" / "note.txt"
    refused = cli.run("object", "get", name, "note", "-O", str(target))
    assert refused.code == 1
    assert refused.stderr.splitlines() == [
        f"jetstream-sync: error: No such file or directory: {target}"
    ]
