"""The PNG of one scaling curve, drawn from its own summary with matplotlib's Agg backend.

Importing this module raises ``ImportError`` when matplotlib is not installed (the
``bench`` extra brings it); ``benchmarks.scaling`` then skips the plots.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display, no GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogFormatter  # noqa: E402

if TYPE_CHECKING:
    from .scaling import Curve

COLORS = {"raw": "tab:gray", "ours": "tab:blue", "nats-py": "tab:orange"}
MARKERS = {"raw": "s", "ours": "o", "nats-py": "^"}
DASHES = ("-", "--", ":")  # a client's second and third line: a mode, or another metric


def _size(x: float, _pos: object = None) -> str:
    """1024 -> "1 KiB"; the payload curve's tick labels."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if x >= scale:
            return f"{x / scale:g} {unit}"
    return f"{x:g} B"


def _count(x: float, _pos: object = None) -> str:
    """12500 -> "12,500", 1.5 -> "1.5": whole numbers with separators, small ones as they are."""
    return f"{x:,.0f}" if x >= 10 or x == int(x) else f"{x:g}"


def series(summary: list[dict[str, Any]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """The (client, mode) lines of a curve, each with its points in x order."""
    keys: list[tuple[str, str]] = []
    for p in summary:
        if (p["client"], p["mode"]) not in keys:
            keys.append((p["client"], p["mode"]))
    return [
        (client, mode, sorted((p for p in summary if (p["client"], p["mode"]) == (client, mode)
                               and "error" not in p), key=lambda p: p["x"]))
        for client, mode in keys
    ]  # fmt: skip


def plot_curve(curve: Curve, summary: list[dict[str, Any]], out: Path,
               meta: dict[str, Any]) -> Path:  # fmt: skip
    """Draw ``curve`` (one panel per ``curve.panels``) into ``out/<name>.png``; return the path."""
    fig, axes = plt.subplots(1, len(curve.panels), figsize=(5.2 * len(curve.panels), 4.0))
    ticks = sorted({p["x"] for p in summary})
    for ax, panel in zip(axes, curve.panels, strict=True):
        for client, mode, points in series(summary):
            for i, (metric, suffix) in enumerate(panel.fields):
                have = [p for p in points if isinstance(p.get(metric), int | float)]
                if not have:
                    continue
                label = " ".join(filter(None, (client, mode, suffix)))
                dash = DASHES[(curve.modes.index(mode) + i) % len(DASHES)]
                ax.plot([p["x"] for p in have], [p[metric] for p in have], label=label,
                        color=COLORS.get(client), marker=MARKERS.get(client, "o"),
                        linestyle=dash)  # fmt: skip
        ax.set_xscale("log", base=2 if curve.name in ("threads", "spark") else 10)
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(FuncFormatter(_size if curve.name == "payload" else _count))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
        if panel.log_y:
            ax.set_yscale("log")
            # within about a decade, label some minor ticks too (plain numbers, no 10^x)
            ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
        else:
            ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(_count))
        ax.set_xlabel(curve.xlabel)
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(f"{curve.title}\n{meta.get('nproc', '?')} CPUs, {meta.get('date', '')}, "
                 f"scale {meta.get('scale', 1)}", fontsize=10)  # fmt: skip
    fig.tight_layout()
    path = out / f"{curve.name}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
