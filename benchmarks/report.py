"""Medians over repetitions, same-run ratios, the issue's targets, markdown and JSON.

Ratios pair each repetition with the baseline's result from the same repetition (the
same minute on the same machine) and take the median of those ratios, so drift between
repetitions cancels out. Targets are informational: nothing here decides an exit code.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import ALL_CLIENTS, ROW_LABELS

Row = dict[str, Any]
METRICS = (
    "n", "secs", "msgs_per_s", "mb_per_s", "cpu_us_per_msg", "client_cpu_pct",
    "p50_us", "p99_us", "rss_mb", "server_cpu_us_per_msg",
)  # fmt: skip


def _median(values: Iterable[Any]) -> float | None:
    nums = [v for v in values if isinstance(v, int | float)]
    return statistics.median(nums) if nums else None


def _ok(rows: Iterable[Row], label: str, client: str) -> list[Row]:
    return [
        r for r in rows if r["scenario"] == label and r["client"] == client and "error" not in r
    ]


def paired_ratio(
    rows: list[Row], label: str, metric: str, client: str, base: str, base_label: str = ""
) -> float | None:
    """Median over repetitions of ``client``'s ``metric`` divided by ``base``'s (in
    scenario ``base_label`` when given: FASTB against ours' S2)."""
    mine = {r["rep"]: r.get(metric) for r in _ok(rows, label, client)}
    theirs = {r["rep"]: r.get(metric) for r in _ok(rows, base_label or label, base)}
    ratios = [
        mine[rep] / theirs[rep]
        for rep in mine
        if isinstance(mine[rep], int | float) and isinstance(theirs.get(rep), int | float)
        and theirs[rep] > 0
    ]  # fmt: skip
    return statistics.median(ratios) if ratios else None


def summarize(rows: list[Row], labels: list[str], clients: list[str]) -> list[Row]:
    """One row per (scenario, client): medians, spread, ratios vs nats-py and vs raw."""
    out = []
    for label in [x for x in ROW_LABELS if x in labels]:
        for client in [c for c in ALL_CLIENTS if c in clients]:
            ok = _ok(rows, label, client)
            summary: Row = {"scenario": label, "client": client, "reps": len(ok)}
            if not ok:
                errors = [r.get("error", "") for r in rows
                          if r["scenario"] == label and r["client"] == client]  # fmt: skip
                summary["error"] = errors[0] if errors else "not run"
                summary["msgs_per_s"] = None
                out.append(summary)
                continue
            for metric in METRICS:
                value = _median(r.get(metric) for r in ok)
                if value is not None:
                    summary[metric] = value
            rates = [r["msgs_per_s"] for r in ok]
            summary["msgs_per_s_min"], summary["msgs_per_s_max"] = min(rates), max(rates)
            for base, key in (("nats-py", "x_natspy"), ("raw", "x_raw")):
                summary[key] = paired_ratio(rows, label, "msgs_per_s", client, base)
            out.append(summary)
    return out


@dataclass(frozen=True)
class Target:
    """One goal from the issue, checked against jetstream_sync ("ours")."""

    scenario: str
    want: str
    measure: Callable[[list[Row], Row], float | None]  # (all rows, ours' summary) -> value
    passes: Callable[[float], bool]
    unit: str  # how to print the measured value


def _ratio(metric: str) -> Callable[[list[Row], Row], float | None]:
    return lambda rows, s: paired_ratio(rows, s["scenario"], metric, "ours", "raw")


def _vs_natspy(metric: str) -> Callable[[list[Row], Row], float | None]:
    return lambda rows, s: paired_ratio(rows, s["scenario"], metric, "ours", "nats-py")


def _vs_scenario(metric: str, label: str) -> Callable[[list[Row], Row], float | None]:
    return lambda rows, s: paired_ratio(rows, s["scenario"], metric, "ours", "ours", label)


def _vs_natsjs(metric: str) -> Callable[[list[Row], Row], float | None]:
    return lambda rows, s: paired_ratio(rows, s["scenario"], metric, "ours", "nats.js")


def _field(metric: str) -> Callable[[list[Row], Row], float | None]:
    return lambda rows, s: s.get(metric)


def _at_least(limit: float) -> Callable[[float], bool]:
    return lambda v: v >= limit


def _at_most(limit: float) -> Callable[[float], bool]:
    return lambda v: v <= limit


# Issue 13: every throughput, latency and CPU target is a ratio to the raw client's
# figure in the same repetition (absolute figures move with the machine's load).
TARGETS = (
    Target("S1", "msgs/s >= 0.85x raw", _ratio("msgs_per_s"), _at_least(0.85), "x"),
    Target("S2", "msgs/s >= 0.6x raw", _ratio("msgs_per_s"), _at_least(0.6), "x"),
    Target("S2", "client CPU/msg <= 5x raw's", _ratio("cpu_us_per_msg"), _at_most(5), "x"),
    Target("S3", "msgs/s >= 0.85x raw", _ratio("msgs_per_s"), _at_least(0.85), "x"),
    Target("S3", "client CPU/msg <= 4x raw's", _ratio("cpu_us_per_msg"), _at_most(4), "x"),
    Target("S4", "msgs/s >= 0.85x raw", _ratio("msgs_per_s"), _at_least(0.85), "x"),
    Target("S5", "p50 <= 1.2x raw", _ratio("p50_us"), _at_most(1.2), "x"),
    Target("S5", "p99 <= 1.4x raw", _ratio("p99_us"), _at_most(1.4), "x"),
    # Issue 30: a request answered in the same process no slower than nats.js's.
    Target("S5", "p50 <= nats.js's", _vs_natsjs("p50_us"), _at_most(1), "x nats.js"),
    Target("S5info", "p50 <= 1.5x raw", _ratio("p50_us"), _at_most(1.5), "x"),
    Target("S5info", "p50 <= 0.8x nats-py", _vs_natspy("p50_us"), _at_most(0.8), "x nats-py"),
    Target("S6_64k", "MB/s >= 0.7x raw", _ratio("mb_per_s"), _at_least(0.7), "x"),
    Target("S7", "msgs/s >= 0.85x raw", _ratio("msgs_per_s"), _at_least(0.85), "x"),
    Target("MEM", "RSS growth <= 50 MB", _field("rss_mb"), _at_most(50), "MB"),
    Target("S8", "msgs/s >= 3x nats-py", _vs_natspy("msgs_per_s"), _at_least(3), "x nats-py"),
    Target("S8", "p99 below nats-py's", _vs_natspy("p99_us"), lambda v: v < 1, "x nats-py"),
    Target("KVput", "ops/s >= 1.5x nats-py", _vs_natspy("msgs_per_s"), _at_least(1.5),
           "x nats-py"),
    Target("KVget", "ops/s >= 1.5x nats-py", _vs_natspy("msgs_per_s"), _at_least(1.5),
           "x nats-py"),
    Target("KVwatch", ">= 100,000 keys/s", _field("msgs_per_s"), _at_least(100_000), "msgs/s"),
    Target("OBJput", "MB/s >= 2x nats-py", _vs_natspy("mb_per_s"), _at_least(2), "x nats-py"),
    Target("OBJget", "MB/s >= 2x nats-py", _vs_natspy("mb_per_s"), _at_least(2), "x nats-py"),
    # Issue 19: a fast batch against our own publish_async (S2), and ahead of nats.js.
    Target("FASTB", "msgs/s >= 1.5x ours' S2", _vs_scenario("msgs_per_s", "S2"), _at_least(1.5),
           "x S2"),
    Target("FASTB", "msgs/s above nats.js's", _vs_natsjs("msgs_per_s"), lambda v: v > 1,
           "x nats.js"),
)  # fmt: skip


def check_targets(rows: list[Row], summary: list[Row]) -> list[Row]:
    """Each target of a scenario that ran: its measured value and PASS / short / n/a."""
    ours = {s["scenario"]: s for s in summary if s["client"] == "ours"}
    out = []
    for t in TARGETS:
        s = ours.get(t.scenario)
        if s is None:
            continue
        value = None if "error" in s else t.measure(rows, s)
        status = "n/a" if value is None else ("PASS" if t.passes(value) else "short")
        out.append({"scenario": t.scenario, "target": t.want, "measured": value,
                    "unit": t.unit, "status": status})  # fmt: skip
    return out


# ------------------------------------------------------------------ formatting


def _num(value: Any, digits: int = 0) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:,.{digits}f}"


def _x(value: Any) -> str:
    return f"{value:.2f}x" if isinstance(value, int | float) else "-"


def _measured(t: Row) -> str:
    v = t["measured"]
    if v is None:
        return "n/a"
    if t["unit"] == "x":
        return f"{v:.2f}x raw"
    if t["unit"] in ("x nats-py", "x nats.js", "x S2"):
        return f"{v:.2f}{t['unit']}"
    if t["unit"] == "msgs/s":
        return f"{v:,.0f} msgs/s"
    return f"{v:.2f} {t['unit']}"


def markdown(summary: list[Row], targets: list[Row], meta: dict[str, Any]) -> str:
    """The results table, then the targets table, as markdown."""
    lines = [
        f"jetstream_sync benchmarks - {meta.get('date', '')} - {meta.get('mode', '')}, "
        f"medians of {meta.get('reps', '?')} rep(s)",
        "",
        f"Machine: {meta.get('nproc', '?')} CPUs, {meta.get('cpu_model', '?')}; "
        f"nats-server {meta.get('nats_server', '?')}, nats-py {meta.get('nats_py', '?')}, "
        f"Python {meta.get('python', '?')}, jetstream_sync {meta.get('jetstream_sync', '?')}",
        "",
        "| scenario | client | reps | n | msgs/s | MB/s | p50 us | p99 us | client CPU us/msg "
        "| server CPU us/msg | RSS growth MB | x nats-py | x raw |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for s in summary:
        if "error" in s:
            reason = "n/a (" + str(s["error"]).split(":", 1)[0] + ")"
            lines.append(f"| {s['scenario']} | {s['client']} | 0 | - | {reason} |"
                         " - | - | - | - | - | - | - | - |")  # fmt: skip
            continue
        latency = s["scenario"].startswith(("S5", "S8", "KVput", "KVget"))
        lines.append(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                s["scenario"],
                s["client"],
                s["reps"],
                _num(s.get("n")),
                _num(s.get("msgs_per_s")),
                _num(s.get("mb_per_s"), 1),
                _num(s.get("p50_us")) if latency else "-",
                _num(s.get("p99_us")) if latency else "-",
                _num(s.get("cpu_us_per_msg"), 2),
                _num(s.get("server_cpu_us_per_msg"), 2),
                _num(s.get("rss_mb"), 1) if s["scenario"] == "MEM" else "-",
                "-" if s["client"] == "nats-py" else _x(s.get("x_natspy")),
                "-" if s["client"] == "raw" else _x(s.get("x_raw")),
            )
        )
    lines += [
        "",
        "x nats-py / x raw: msgs/s over the same repetition's nats-py / raw result (median)."
        " Targets are ratios within a repetition too: of msgs/s, of p50/p99 latency (S5*,"
        " S8) or of client CPU per message, as each says.",
        "",
    ]
    if targets:
        lines += ["| target (jetstream_sync) | wanted | measured | |", "|---|---|--:|---|"]
        for t in targets:
            lines.append(f"| {t['scenario']} | {t['target']} | {_measured(t)} | {t['status']} |")
        lines.append("")
    return "\n".join(lines)


def write_json(path: Path, meta: dict[str, Any], rows: list[Row], summary: list[Row],
               targets: list[Row]) -> None:  # fmt: skip
    """Everything of a run in one JSON file: meta, every raw row, the summary, targets."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"meta": meta, "summary": summary, "targets": targets, "rows": rows}
    path.write_text(json.dumps(doc, indent=1) + "\n")
