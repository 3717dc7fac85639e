"""The plot of the cost-at-a-rate benchmark: cores and p99 latency against the offered rate,
log-log, a line per system.

Invariant: it draws the medians of :func:`bench.cost_measure.summarize` (the table's figures);
saturated points are drawn hollow; matplotlib is optional (``False``: no plot written).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.cost_measure import summarize

__all__ = ["plot_cost"]


def plot_cost(results: Iterable[Mapping[str, Any]], systems: Sequence[str], path: Path) -> bool:
    """Write the two panels (total cores; p99 ms) to ``path``; ``False`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        return False
    summary = summarize(results)
    fig, (cores_ax, p99_ax) = plt.subplots(1, 2, figsize=(12, 4.8))
    panels = (
        (cores_ax, "cores", "CPU cores (all processes)"),
        (p99_ax, "latency_p99_ms", "p99 ms"),
    )
    for ax, figure, label in panels:
        for system in systems:
            points = sorted(
                (rate, row[figure], row["saturated"])
                for (rate, s), row in summary.items()
                if s == system and row[figure]
            )
            if not points:
                continue
            (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], "-", label=system)
            for rate, value, saturated in points:
                face = "none" if saturated else line.get_color()
                ax.plot(rate, value, "o", color=line.get_color(), markerfacecolor=face)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered records/s")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    cores_ax.set_title("CPU at a rate (hollow: saturated)")
    p99_ax.set_title("p99 latency, scheduled creation -> sink")
    cores_ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
