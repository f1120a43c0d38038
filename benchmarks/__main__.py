"""``python -m benchmarks``: every scenario for every client, each in its own process.

``python -m benchmarks spark [...]`` runs the Spark data source family instead
(``benchmarks/spark_bench.py``); ``python -m benchmarks spark-cold [...]`` what the first
query of a Spark session costs beside code that does nothing (``benchmarks/spark_cold.py``);
``python -m benchmarks scaling [...]`` the curves of how cost grows with the work
(``benchmarks/scaling.py``).

For each repetition, scenario and client: start a fresh loopback nats-server, prefill
the stream when the scenario consumes, run the client's driver as a subprocess, charge
the server's CPU to it, stop the server. Progress goes to stderr, the markdown table to
stdout, everything to a JSON file. The exit code is 1 when a driver crashed (or timed
out), else 0: the figures and targets are information, never a verdict.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import ALL_CLIENTS, CLIENTS, S5_EXTRA, SCENARIOS, count_for
from .kv_prefill import prefill_kv
from .prefill import prefill
from .report import check_targets, markdown, summarize, write_json
from .server import BenchServer, server_binary, server_version

ROOT = Path(__file__).resolve().parent.parent
DRIVERS = {"raw": "benchmarks.driver_raw", "ours": "benchmarks.driver_ours",
           "ours-gevent": "benchmarks.driver_ours_gevent",
           "nats-py": "benchmarks.driver_natspy",
           "nats.js": "benchmarks.driver_natsjs"}  # fmt: skip
CLIENT_ALIASES = {"natspy": "nats-py", "nats_py": "nats-py", "nats": "nats-py",
                  "jetstream_sync": "ours", "limit": "raw", "natsjs": "nats.js",
                  "nats-js": "nats.js"}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmark jetstream_sync against nats-py and a raw-socket limit.",
    )
    ap.add_argument("--quick", action="store_true", help="small counts: about a minute")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (3 full, 1 quick)")
    ap.add_argument("--only", default="", help="scenarios, e.g. S1,S3 (S6 = all of S6_*)")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="ours,nats-py,raw (default), nats.js (FASTB, S5, S5x), "
                         "ours-gevent (ours under gevent's monkey-patch)")  # fmt: skip
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every message count")
    ap.add_argument(
        "--json",
        type=Path,
        default=None,
        help="results file (default benchmarks/results/run-<timestamp>.json)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds one driver may run (default 120 quick, 600 full)",
    )
    args = ap.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    if args.timeout is None:
        args.timeout = 120.0 if args.quick else 600.0
    labels: list[str] = []
    for word in filter(None, (w.strip() for w in args.only.split(","))):
        match = [s for s in SCENARIOS if s == word or (word == "S6" and s.startswith("S6_"))]
        if not match:
            ap.error(f"unknown scenario {word!r}; choose from {', '.join(SCENARIOS)}")
        labels += [m for m in match if m not in labels]
    args.labels = [s for s in SCENARIOS if s in labels] if labels else list(SCENARIOS)
    clients = []
    for word in filter(None, (w.strip() for w in args.clients.split(","))):
        name = CLIENT_ALIASES.get(word, word)
        if name not in ALL_CLIENTS:
            ap.error(f"unknown client {word!r}; choose from {', '.join(ALL_CLIENTS)}")
        clients.append(name)
    args.client_list = [c for c in ALL_CLIENTS if c in clients]
    return args


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_meta(args: argparse.Namespace) -> dict[str, Any]:
    cpu_model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full",
        "reps": args.reps,
        "scale": args.scale,
        "scenarios": args.labels,
        "clients": args.client_list,
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model,
        "python": platform.python_version(),
        "nats_server": server_version(),
        "nats_py": _version("nats-py"),
        "jetstream_sync": _version("jetstream_sync"),
    }


def progress(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def run_step(label: str, client: str, n: int, rep: int, timeout: float) -> tuple[list[dict], str]:
    """Run one driver against a fresh server; return its rows and a crash reason ("" if none)."""
    sc = SCENARIOS[label]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", DRIVERS[client], "--port", "0", "--scenario", label,
           "--n", str(n), "--size", str(sc.size), "--storage", sc.storage]  # fmt: skip
    with BenchServer() as server:
        cmd[4] = str(server.port)
        if sc.prefilled and sc.base == "KVwatch":
            prefill_kv(server.port, n, sc.size)
        elif sc.prefilled:
            prefill(server.port, n, sc.size, sc.storage)
        cpu0, t0 = server.cpu_seconds(), time.perf_counter()
        try:
            done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout)  # fmt: skip
        except subprocess.TimeoutExpired as e:
            tail = (e.stderr or b"")[-2000:]
            return [], f"timed out after {timeout:.0f} s\n{tail!r}"
        wall = time.perf_counter() - t0
        server_cpu = server.cpu_seconds() - cpu0
        log = server.log_tail(8)
    rows = []
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            row["rep"] = rep
            row["wall_s"] = round(wall, 3)
            row["server_cpu_s"] = round(server_cpu, 3)
            if "error" not in row and not row["scenario"].startswith("S5"):
                # S5 shares one process between S5 and S5info...: no per-message split
                row["server_cpu_us_per_msg"] = round(server_cpu / row["n"] * 1e6, 3)
            rows.append(row)
    if done.returncode != 0 or not rows:
        reason = f"exit code {done.returncode}" if done.returncode else "no result printed"
        return rows, f"{reason}\n{done.stderr[-3000:]}\nserver log:\n{log}"
    return rows, ""


def describe(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['scenario']}: {row['error']}"
    text = f"{row['scenario']}: {row['msgs_per_s']:,.0f} msgs/s"
    if row["scenario"].startswith(("S5", "S8", "KVput", "KVget")):
        text += f", p50 {row['p50_us']:.0f} us, p99 {row['p99_us']:.0f} us"
    elif row.get("size", 0) >= 1024:
        text += f", {row['mb_per_s']:,.1f} MB/s"
    text += f", {row['cpu_us_per_msg']:.2f} us CPU/msg"
    if "rss_mb" in row:
        text += f", RSS +{row['rss_mb']:.1f} MB"
    return text


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["spark"]:  # the Spark data source family: benchmarks/spark_bench.py
        from .spark_bench import main as spark_main

        return spark_main(argv[1:])
    if argv[:1] == ["spark-cold"]:  # what the first query of a Spark session costs, and whose
        from .spark_cold import main as spark_cold_main

        return spark_cold_main(argv[1:])
    if argv[:1] == ["scaling"]:  # threads, subscriptions, payload, batch, Spark partitions
        from .scaling import main as scaling_main

        return scaling_main(argv[1:])
    args = parse_args(argv)
    server_binary()  # fail early, and clearly, without a server
    meta = machine_meta(args)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    json_path = args.json or ROOT / "benchmarks" / "results" / f"run-{stamp}.json"
    steps = [(rep, label, client) for rep in range(1, args.reps + 1)
             for label in args.labels for client in args.client_list]  # fmt: skip
    progress(f"# {len(steps)} steps ({meta['mode']}, {args.reps} rep(s)); "
             f"nats-server {meta['nats_server']}, nats-py {meta['nats_py']}, "
             f"Python {meta['python']}, {meta['nproc']} CPUs")  # fmt: skip
    rows: list[dict[str, Any]] = []
    crashes: list[str] = []
    started = time.perf_counter()
    width = len(str(len(steps)))
    for i, (rep, label, client) in enumerate(steps, 1):
        n = count_for(label, client, args.quick, args.scale)
        t0 = time.perf_counter()
        head = f"[{i:>{width}}/{len(steps)}] rep {rep} {label:<6} {client:<7} n={n:<9,}"
        try:
            got, crash = run_step(label, client, n, rep, args.timeout)
        except Exception as e:  # a server or prefill failure: report it like a crash
            got, crash = [], f"{type(e).__name__}: {e}"
        secs = time.perf_counter() - t0
        rows += got
        if crash:
            crashes.append(f"{label} {client} rep {rep}: {crash}")
            rows.append({"client": client, "scenario": label, "rep": rep,
                         "error": "crashed: " + crash.splitlines()[0]})  # fmt: skip
            progress(f"{head} CRASHED ({secs:.1f} s): {crash}")
            continue
        progress(f"{head} " + "; ".join(describe(r) for r in got) + f" ({secs:.1f} s)")
    meta["total_s"] = round(time.perf_counter() - started, 1)
    labels = [
        x for label in args.labels for x in ((label, *S5_EXTRA) if label == "S5" else (label,))
    ]
    summary = summarize(rows, labels, args.client_list)
    targets = check_targets(rows, summary)
    meta["crashed"] = len(crashes)
    write_json(json_path, meta, rows, summary, targets)
    sys.stdout.write(markdown(summary, targets, meta) + "\n")
    sys.stdout.flush()
    progress(f"# {len(steps)} steps in {meta['total_s']:.0f} s; results in {json_path}")
    if crashes:
        progress(f"# {len(crashes)} step(s) crashed:\n" + "\n".join(crashes))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
