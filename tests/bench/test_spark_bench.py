"""The Spark benchmark family runs end to end; its figures are printed, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_split_covers_the_range_once():
    """The nats-py baseline's partition ranges cover first..last exactly once."""
    from benchmarks.spark_natspy import split

    for first, last, parts in ((1, 10, 3), (5, 5, 4), (1, 1_000_000, 2), (7, 100, 1)):
        ranges = split(first, last, parts)
        seqs = [seq for lo, hi in ranges for seq in range(lo, hi + 1)]
        assert seqs == list(range(first, last + 1)), (first, last, parts)
        assert len(ranges) == min(parts, last - first + 1)


READS = {(s, k, c, "classic") for s in ("read-count", "read-agg")
         for k in ("default", "direct") for c in ("ours", "nats-py")}  # fmt: skip
WRITES = (
    {("write", "-", c, "classic") for c in ("ours", "nats-py", "nats-py-window")}
    | {("write-fast", "-", c, "classic") for c in ("ours", "nats-py-window")}
    | {(s, "-", "ours", "classic") for s in ("write-nodedupe", "batch-step", "batch-step-read")}
)
CONNECT = {("read-count", k, "ours", "connect") for k in ("default", "direct")} | {
    ("write", "-", "ours", "connect")
}
EVERY_CELL = READS | WRITES | CONNECT  # (scenario, stream, client, session)


def _plan(*options: str) -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    from benchmarks.spark_bench import parse_args, plan

    return plan(parse_args(list(options)))


def test_plan_gives_each_client_and_stream_kind_a_classic_session_of_its_own():
    """Every cell is planned once: a classic session (a cold first query) per client and
    stream kind, one Connect session; ``--one-session`` puts every classic cell in one."""
    sessions = _plan()
    cells = [(s, k, c, session) for session, _, group in sessions for s, k, c in group]
    assert sorted(cells) == sorted(EVERY_CELL)
    classic = [{(c, k) for _, k, c in group} for session, _, group in sessions
               if session == "classic"]  # fmt: skip
    assert all(len(pairs) == 1 for pairs in classic)
    assert len(classic) == 4 + 3 and [s for s, _, _ in sessions].count("connect") == 1
    smoke = _plan("--one-session")
    assert [(session, len(group)) for session, _, group in smoke] == [
        ("classic", len(READS | WRITES)), ("connect", len(CONNECT))
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_small_spark_benchmark_reports_every_cell(tmp_path: Path):
    """`python -m benchmarks spark --n 3000 --one-session` exits 0 with a checked row per
    cell, the first query of each session cold and the rest warm.

    A cell is a scenario on a kind of stream, by a client, in a classic or a Connect session.
    One classic session runs them all (the smoke run: each runner runs and reports); the
    session per client and stream kind of a measuring run is checked by the test above.
    """
    pytest.importorskip("pyspark")
    out = tmp_path / "spark.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "spark", "--n", "3000", "--one-session",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1700,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| scenario | stream | session | client |" in done.stdout
    rows = json.loads(out.read_text())["rows"]
    assert {(r["scenario"], r["stream"], r["client"], r["session"]) for r in rows} == EVERY_CELL
    assert all(isinstance(r["msgs_per_s"], int) for r in rows)
    for r in rows:  # the CPU per message, split by kind of process, adds up to the total
        split = r["cpu_split_us_per_msg"]
        assert list(split) == ["server", "workers", "jvm", "driver"]
        assert sum(split.values()) == pytest.approx(r["cpu_us_per_msg"], abs=0.05), r
    firsts = [r for r in rows if "cold_secs" in r]  # the first query of each session
    assert [r["session"] for r in firsts] == ["classic", "connect"]
    assert all(r["cold_msgs_per_s"] > 0 for r in firsts)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(900)
def test_first_query_probe_reports_each_kind(tmp_path: Path):
    """`python -m benchmarks spark-cold` times a fresh session's first and warm queries.

    Each kind counts its 1,000 rows in each of its three queries, or the session fails.
    """
    pytest.importorskip("pyspark")
    out = tmp_path / "cold.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "spark-cold", "--reps", "1", "--kinds", "trivial,ours",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=800,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| kind | sessions | session start s |" in done.stdout
    runs = json.loads(out.read_text())["runs"]
    assert [r["kind"] for r in runs] == ["trivial", "ours"]
    assert all(len(r["runs"]) == 3 and min(r["runs"]) > 0 for r in runs)


def test_process_kind_tells_the_server_a_jvm_the_workers_and_the_driver(tmp_path: Path):
    """The CPU split's kinds: the server's pid, a program named java, a process whose argv
    holds pyspark.daemon or pyspark.worker, anything else (and a pid that is gone)."""
    from benchmarks.spark_bench import process_kind

    java = tmp_path / "java"
    java.symlink_to(sys.executable)
    code = "print('ready', flush=True); input()"  # 'ready': it runs its own argv, not ours
    argvs = {
        "jvm": [str(java), "-c", code],
        "workers": [sys.executable, "-c", code, "pyspark.worker"],
        "driver": [sys.executable, "-c", code],
    }
    children = {
        kind: subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for kind, argv in argvs.items()
    }
    for child in children.values():
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    try:
        for kind, child in children.items():
            assert process_kind(child.pid, server_pid=0) == kind
            assert process_kind(child.pid, server_pid=child.pid) == "server"
    finally:
        for child in children.values():
            child.communicate(b"\n", timeout=30)
    assert process_kind(children["jvm"].pid, server_pid=0) == "driver"  # gone: no argv


def test_cpu_meter_leaves_out_an_excluded_process_and_its_descendants():
    """A server the measuring process started is not counted with Spark's processes."""
    from benchmarks.spark_bench import _tree_times

    code = ("import subprocess, sys\n"
            "g = subprocess.Popen([sys.executable, '-c', 'input()'], stdin=subprocess.PIPE)\n"
            "print(g.pid, flush=True)\n"
            "input()\n"
            "g.communicate(b'\\n')\n")  # fmt: skip
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        counted = {pid for pid, _start in _tree_times([os.getpid()])}
        assert {os.getpid(), child.pid, grandchild} <= counted
        kept = {pid for pid, _start in _tree_times([os.getpid()], frozenset([child.pid]))}
        assert os.getpid() in kept and not {child.pid, grandchild} & kept
    finally:
        child.communicate(b"\n", timeout=30)
