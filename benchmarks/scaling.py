"""``python -m benchmarks scaling``: how cost grows with the work, one curve per dimension.

Five curves, each a set of points (x values) measured for each client:

- ``threads``: 1 to 64 threads share one client, each publishing and waiting for its
  PubAck (msgs/s, p50/p99); raw opens one socket per thread; nats-py bridges the
  threads into one event loop (as S8);
- ``subs``: 1, 100 and 10,000 subscriptions on one client, messages published round
  robin across them and received (msgs/s), and the memory each subscription costs
  (client RSS and tracemalloc, the server's RSS);
- ``payload``: 16 B to 1 MiB, async publish with an ack window and fetch (msgs/s, MB/s);
- ``batch``: fetch batch 1 to 10,000 from a prefilled stream, AckNone (msgs/s, CPU/msg);
- ``spark``: the ``jetstream`` data source reading a stream of 10,000,000 messages into
  ``count()`` with 1, 2, 4, 8 partitions on ``local[2]``.

Every point of the first four runs its client as its own process
(``benchmarks.scaling_ours``, ``scaling_raw``, ``scaling_natspy``) against a fresh
loopback nats-server, prefilled when the point consumes; the Spark curve runs in this
process with one Spark session and one server. ``--scale`` multiplies every count (and
the seconds of ``threads``). Each curve gets a markdown table on stdout and a PNG drawn
from the results (``benchmarks/scaling_plot.py``, matplotlib's Agg backend) in
``--out``, beside ``<curve>.json`` with every row. Without matplotlib the tables and the
JSON are still written and the plots are skipped with a note. The exit code is 1 when a
point crashed, else 0: figures are information, never a verdict.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._wire import RawConn, create_stream
from .prefill import pipelined_publish
from .server import BenchServer, server_binary, server_version

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "img" / "scaling"
WORKERS = {"raw": "benchmarks.scaling_raw", "ours": "benchmarks.scaling_ours",
           "nats-py": "benchmarks.scaling_natspy"}  # fmt: skip
SIZE = 128  # payload bytes, except on the payload curve
MIB = 1 << 20
THREAD_SECONDS = 5.0  # each point of the threads curve, at full scale
SUBS_MESSAGES = 200_000
SUBS_ROUND = 1000  # messages published per round before they are received (at least one each)
PAYLOAD_BYTES = 256 * MIB  # payload curve: bytes per point at full scale...
PAYLOAD_MESSAGES = 200_000  # ...and at most this many messages
BATCH_MESSAGES = 200_000  # batch curve: at most this many messages per point...
BATCH_ROUNDS = 2_000  # ...and no more fetches than this (batch 1 is a round trip each)
SPARK_MESSAGES = 10_000_000


@dataclass(frozen=True)
class Column:
    """One column of a curve's table: header, row field, digits."""

    header: str
    field: str
    digits: int = 0


@dataclass(frozen=True)
class Panel:
    """One plot of a curve's figure: a y metric per series, log or linear."""

    title: str
    ylabel: str
    fields: tuple[tuple[str, str], ...]  # (row field, series suffix; "" for none)
    log_y: bool = False


@dataclass(frozen=True)
class Curve:
    """One dimension of the work, as the orchestrator schedules and reports it."""

    name: str
    title: str
    xlabel: str
    xs: tuple[int, ...]
    clients: tuple[str, ...]
    columns: tuple[Column, ...]
    panels: tuple[Panel, ...]
    modes: tuple[str, ...] = ("",)
    prefilled: tuple[str, ...] = ()  # the modes whose points consume a prefilled stream


RATE = Column("msgs/s", "msgs_per_s")
CPU = Column("client CPU us/msg", "cpu_us_per_msg", 2)
SERVER_CPU = Column("server CPU us/msg", "server_cpu_us_per_msg", 2)
# on a shared machine the steadiest figure: every curve plots it beside the rates
CPU_PANEL = Panel("client CPU per message", "us", (("cpu_us_per_msg", ""),), log_y=True)

CURVES: dict[str, Curve] = {
    c.name: c
    for c in (
        Curve(
            "threads", "threads sharing one client, each publishing and waiting for its PubAck",
            "threads", (1, 2, 4, 8, 16, 64), ("raw", "ours", "nats-py"),
            (RATE, Column("p50 us", "p50_us"), Column("p99 us", "p99_us"), CPU, SERVER_CPU),
            (Panel("throughput", "msgs/s", (("msgs_per_s", ""),)),
             Panel("latency of one publish", "us", (("p50_us", "p50"), ("p99_us", "p99")),
                   log_y=True),
             CPU_PANEL),
        ),
        Curve(
            "subs", "subscriptions on one client: publish round robin, receive every message",
            "subscriptions", (1, 100, 10_000), ("raw", "ours"),
            (RATE, CPU, SERVER_CPU, Column("client RSS B/sub", "rss_bytes_per_sub"),
             Column("client traced B/sub", "traced_bytes_per_sub"),
             Column("server RSS B/sub", "server_rss_bytes_per_sub")),
            (Panel("throughput", "msgs/s", (("msgs_per_s", ""),)),
             CPU_PANEL,
             Panel("memory per subscription", "bytes",
                   (("rss_bytes_per_sub", "client RSS"),
                    ("traced_bytes_per_sub", "client tracemalloc"),
                    ("server_rss_bytes_per_sub", "server RSS")), log_y=True)),
        ),
        Curve(
            "payload", "payload size: async publish with an ack window, and fetch (AckNone)",
            "payload bytes", (16, 256, 4096, 65536, MIB), ("raw", "ours"),
            (Column("window / batch", "depth"), RATE, Column("MB/s", "mb_per_s", 1), CPU,
             SERVER_CPU),
            (Panel("messages", "msgs/s", (("msgs_per_s", ""),), log_y=True),
             Panel("bytes", "MB/s", (("mb_per_s", ""),), log_y=True),
             CPU_PANEL),
            modes=("publish", "fetch"), prefilled=("fetch",),
        ),
        Curve(
            "batch", "fetch batch size, AckNone, from a prefilled stream", "fetch batch",
            (1, 10, 100, 1000, 10_000), ("raw", "ours"), (RATE, CPU, SERVER_CPU),
            (Panel("throughput", "msgs/s", (("msgs_per_s", ""),), log_y=True), CPU_PANEL),
            prefilled=("",),
        ),
        Curve(
            "spark", "the Spark source reading a stream into count(), local[2]", "partitions",
            (1, 2, 4, 8), ("ours",),
            (RATE, Column("seconds", "secs", 1),
             Column("Spark CPU us/msg", "cpu_us_per_msg", 2), SERVER_CPU),
            (Panel("throughput", "msgs/s", (("msgs_per_s", ""),)),
             Panel("CPU per message", "us", (("cpu_us_per_msg", "Spark"),
                                             ("server_cpu_us_per_msg", "server")))),
        ),
    )
}  # fmt: skip


# ------------------------------------------------------------------ counts


def count_for(curve: str, x: int, scale: float) -> float:
    """What one point does: messages, or seconds for ``threads``; never below one round."""
    if curve == "threads":
        return round(max(0.2, THREAD_SECONDS * scale), 3)
    if curve == "subs":
        per_round = x * max(1, SUBS_ROUND // x)
        rounds = max(1, math.ceil(SUBS_MESSAGES * scale / per_round))
        return rounds * per_round
    if curve == "payload":
        return max(10, int(min(PAYLOAD_MESSAGES, PAYLOAD_BYTES // x) * scale))
    if curve == "batch":
        return max(x, int(min(BATCH_MESSAGES, BATCH_ROUNDS * x) * scale))
    return max(1000, int(SPARK_MESSAGES * scale))


def publish_window(size: int) -> int:
    """Acks in flight for async publishes of ``size`` bytes: 4,000, at most 32 MiB of payload."""
    return max(4, min(4000, 32 * MIB // size))


def fetch_batch(size: int) -> int:
    """Fetch batch for ``size``-byte messages: 500, at most 8 MiB of payload."""
    return max(1, min(500, 8 * MIB // size))


def depth_for(curve: str, x: int, mode: str) -> int:
    """The ack window or fetch batch a point uses (the payload curve bounds both by bytes)."""
    if curve == "payload":
        return publish_window(x) if mode == "publish" else fetch_batch(x)
    return x if curve == "batch" else 0


# ------------------------------------------------------------------ a point's process


def point_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of a point's process (``benchmarks.scaling_<client>``)."""
    ap = argparse.ArgumentParser(description="Measure one point of a scaling curve; print JSON.")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--curve", choices=[c for c in CURVES if c != "spark"], required=True)
    ap.add_argument("--x", type=int, required=True, help="threads, subscriptions, bytes, batch")
    ap.add_argument("--n", type=float, required=True, help="messages (threads: seconds)")
    ap.add_argument("--mode", default="", help="payload curve: publish or fetch")
    ap.add_argument("--server-pid", type=int, default=0, help="to read the server's RSS")
    args = ap.parse_args(argv)
    args.depth = depth_for(args.curve, args.x, args.mode)
    return args


def point_row(client: str, args: argparse.Namespace, n: int, size: int, timed: Any,
              **extra: object) -> dict[str, object]:  # fmt: skip
    """One point's result as every worker prints it."""
    from . import result

    return result(client, args.curve, n, size, timed, curve=args.curve, x=args.x,
                  mode=args.mode, depth=args.depth, **extra)  # fmt: skip


def process_rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` in bytes (0 when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# ------------------------------------------------------------------ orchestration


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The orchestrator's command line; ``curves`` and ``client_set`` are added to it."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks scaling",
        description="How cost grows with the work: one table and one PNG per curve.",
    )
    ap.add_argument("--only", default="", help="curves, e.g. threads,batch (default: all)")
    ap.add_argument("--clients", default="raw,ours,nats-py", help="among each curve's own")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every count")
    ap.add_argument("--reps", type=int, default=1, help="repetitions (medians)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNGs and <curve>.json")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per point")
    ap.add_argument("--master", default="local[2]", help="the Spark curve's master")
    args = ap.parse_args(argv)
    if args.scale <= 0 or args.reps < 1:
        ap.error("--scale must be > 0 and --reps >= 1")
    words = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in words if w not in CURVES]
    if unknown:
        ap.error(f"unknown curve {unknown[0]!r}; choose from {', '.join(CURVES)}")
    args.curves = [c for c in CURVES if not words or c in words]
    args.client_set = {w.strip() for w in args.clients.split(",") if w.strip()}
    return args


def progress(text: str) -> None:
    """One progress line on stderr (stdout carries the tables)."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def prefill_stream(port: int, n: int, size: int) -> None:
    """Create stream "S" (file storage, defaults) and store ``n`` messages of ``size`` bytes."""
    conn = RawConn(port)
    try:
        create_stream(conn, "file")
        pipelined_publish(conn, n, size, publish_window(size), check=True)
    finally:
        conn.close()


def run_point(curve: Curve, client: str, x: int, mode: str, n: float,
              timeout: float) -> tuple[list[dict[str, Any]], str]:  # fmt: skip
    """One point in its own process against a fresh server: its rows and a crash reason."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with BenchServer() as server:
        assert server.proc is not None
        if mode in curve.prefilled:
            size = x if curve.name == "payload" else SIZE
            prefill_stream(server.port, int(n), size)
        cmd = [sys.executable, "-m", WORKERS[client], "--port", str(server.port),
               "--curve", curve.name, "--x", str(x), "--n", str(n), "--mode", mode,
               "--server-pid", str(server.proc.pid)]  # fmt: skip
        cpu0 = server.cpu_seconds()
        try:
            done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout)  # fmt: skip
        except subprocess.TimeoutExpired as e:
            return [], f"timed out after {timeout:.0f} s: {(e.stderr or b'')[-1500:]!r}"
        server_cpu = server.cpu_seconds() - cpu0
        log = server.log_tail(6)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    for row in rows:
        row.update(curve=curve.name, x=x, mode=mode)  # an "unavailable" row names neither
        if "error" not in row:
            row["server_cpu_us_per_msg"] = round(server_cpu / row["n"] * 1e6, 3)
    if done.returncode != 0 or not rows:
        reason = f"exit code {done.returncode}" if done.returncode else "no result printed"
        return rows, f"{reason}\n{done.stderr[-2500:]}\nserver log:\n{log}"
    return rows, ""


def describe(row: dict[str, Any]) -> str:
    """A point's row in one progress line."""
    if "error" in row:
        return str(row["error"])
    text = f"{row['msgs_per_s']:,.0f} msgs/s, {row['cpu_us_per_msg']:.2f} us CPU/msg"
    if "p99_us" in row:
        text += f", p99 {row['p99_us']:,.0f} us"
    if row.get("size", 0) >= 4096:
        text += f", {row['mb_per_s']:,.1f} MB/s"
    if "rss_bytes_per_sub" in row:
        text += f", {row['rss_bytes_per_sub']:,.0f} B RSS/sub"
    return text


def measure_point(curve: Curve, client: str, x: int, mode: str, rep: int,
                  args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:  # fmt: skip
    """One point of one client, with a progress line: its rows and a crash reason."""
    n = count_for(curve.name, x, args.scale)
    head = f"rep {rep} {curve.name} {mode or '-'} x={x:,} {client} n={n:,}"
    t0 = time.perf_counter()
    try:
        rows, crash = run_point(curve, client, x, mode, n, args.timeout)
    except Exception as e:  # a server or prefill failure: reported as a crash
        rows, crash = [], f"{type(e).__name__}: {e}"
    secs = time.perf_counter() - t0
    for row in rows:
        row["rep"] = rep
    if crash:
        error = "crashed: " + crash.splitlines()[0]
        rows.append({"curve": curve.name, "client": client, "x": x, "mode": mode, "rep": rep,
                     "error": error})  # fmt: skip
        progress(f"{head}: CRASHED ({secs:.1f} s): {crash}")
        return rows, f"{head}: {crash}"
    progress(f"{head}: " + "; ".join(describe(r) for r in rows) + f" ({secs:.1f} s)")
    return rows, ""


def run_curve(curve: Curve, args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[str]]:
    """Every point of a client-process curve, ``--reps`` times; clients alternate per point."""
    rows: list[dict[str, Any]] = []
    crashes: list[str] = []
    clients = [c for c in curve.clients if c in args.client_set]
    for rep in range(1, args.reps + 1):
        for mode in curve.modes:
            for x in curve.xs:
                for client in clients:
                    got, crash = measure_point(curve, client, x, mode, rep, args)
                    rows += got
                    if crash:
                        crashes.append(crash)
    return rows, crashes


def summarize(rows: list[dict[str, Any]], curve: Curve) -> list[dict[str, Any]]:
    """One row per (mode, x, client) of ``curve``: the median of each figure over reps."""
    out = []
    fields = {c.field for c in curve.columns} | {f for p in curve.panels for f, _ in p.fields}
    for mode in curve.modes:
        for x in curve.xs:
            for client in curve.clients:
                mine = [r for r in rows if r.get("curve") == curve.name and r["client"] == client
                        and r["x"] == x and r.get("mode", "") == mode]  # fmt: skip
                if not mine:
                    continue
                ok = [r for r in mine if "error" not in r]
                point: dict[str, Any] = {"curve": curve.name, "client": client, "x": x,
                                         "mode": mode, "reps": len(ok)}  # fmt: skip
                if not ok:
                    point["error"] = mine[0]["error"]
                for name in sorted(fields | {"n"}):
                    values = [r[name] for r in ok if isinstance(r.get(name), int | float)]
                    if values:
                        point[name] = statistics.median(values)
                out.append(point)
    return out


def _cell(value: Any, digits: int) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, int | float) else "-"


def markdown(curve: Curve, summary: list[dict[str, Any]]) -> str:
    """The curve's table: one line per point and client (and mode)."""
    modes = curve.modes != ("",)
    head = [curve.xlabel, "client", *(["mode"] if modes else []), "n"]
    head += [c.header for c in curve.columns]
    lines = [f"**{curve.name}**: {curve.title}", "", "| " + " | ".join(head) + " |",
             "|" + "|".join(["--:", "---", *(["---"] if modes else []), "--:"]
                            + ["--:"] * len(curve.columns)) + "|"]  # fmt: skip
    for p in summary:
        cells = [f"{p['x']:,}", p["client"], *([p["mode"]] if modes else [])]
        if "error" in p:
            cells += [str(p["error"])[:60]] + [""] * len(curve.columns)
        else:
            cells += [_cell(p.get("n"), 0)]
            cells += [_cell(p.get(c.field), c.digits) for c in curve.columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def draw(curves: list[Curve], summaries: dict[str, list[dict[str, Any]]], out: Path,
         meta: dict[str, Any]) -> dict[str, str]:  # fmt: skip
    """The PNG file name in ``out`` of each curve, or none and a note in ``meta`` why not."""
    try:
        from .scaling_plot import plot_curve
    except ImportError as e:
        progress(f"# plots skipped: {e} (pip install '.[bench]' for matplotlib)")
        meta["plots"] = f"skipped: {e}"
        return {}
    paths = {c.name: plot_curve(c, summaries[c.name], out, meta).name for c in curves}
    meta["plots"] = "drawn"
    return paths


def machine_meta(args: argparse.Namespace) -> dict[str, Any]:
    """The main suite's machine and version facts, and the load average before the run."""
    from .__main__ import machine_meta as bench_meta

    shape = argparse.Namespace(quick=False, reps=args.reps, scale=args.scale,
                               labels=args.curves, client_list=sorted(args.client_set))  # fmt: skip
    meta = bench_meta(shape)
    meta.pop("mode")
    meta["loadavg_before"] = round(os.getloadavg()[0], 1)
    return meta


def main(argv: list[str] | None = None) -> int:
    """Run the curves, print their tables, write a PNG and a JSON file per curve."""
    args = parse_args(argv)
    server_binary()  # fail early, and clearly, without a server
    meta = machine_meta(args)
    progress(f"# scaling: {', '.join(args.curves)}; scale {args.scale}, {args.reps} rep(s); "
             f"nats-server {server_version()}, {meta['nproc']} CPUs, "
             f"load {meta['loadavg_before']}")  # fmt: skip
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    crashes: list[str] = []
    for name in args.curves:
        curve = CURVES[name]
        if name == "spark":
            from .scaling_spark import run_spark_curve

            got, crashed = run_spark_curve(curve, args, count_for(name, 0, args.scale))
        else:
            got, crashed = run_curve(curve, args)
        rows += got
        crashes += crashed
    meta["total_s"] = round(time.perf_counter() - started, 1)
    meta["loadavg_after"] = round(os.getloadavg()[0], 1)
    meta["date_end"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    curves = [CURVES[name] for name in args.curves]
    summaries = {c.name: summarize(rows, c) for c in curves}
    args.out.mkdir(parents=True, exist_ok=True)
    pngs = draw(curves, summaries, args.out, meta)
    for curve in curves:  # one file per curve: runs of different curves share --out
        doc = {"meta": meta, "summary": summaries[curve.name], "png": pngs.get(curve.name),
               "rows": [r for r in rows if r.get("curve") == curve.name]}  # fmt: skip
        (args.out / f"{curve.name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    sys.stdout.write(
        f"Scaling curves - {meta['date']} - scale {args.scale}, medians of {args.reps} rep(s); "
        f"{meta['nproc']} CPUs, {meta['cpu_model']}, load {meta['loadavg_before']} -> "
        f"{meta['loadavg_after']}; nats-server {meta['nats_server']}, Python {meta['python']}\n\n"
        + "\n\n".join(markdown(c, summaries[c.name]) for c in curves)
        + "\n"
    )
    progress(f"# {meta['total_s']:.0f} s; results and plots in {args.out}")
    if crashes:
        progress(f"# {len(crashes)} point(s) crashed:\n" + "\n".join(crashes))
        return 1
    return 0
