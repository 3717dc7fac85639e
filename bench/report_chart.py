"""The PNG chart of RESULTS.md: keyed-sum steady records/s per system, with and without
checkpoints, as medians with min-max error bars on a log scale.

Invariant: matplotlib is optional; without it, or without keyed-sum figures, nothing is
written and the reason is returned instead of raised (the markdown never depends on it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from bench.report_tables import Cell, Group, system_name

__all__ = ["write_chart"]


def write_chart(groups: Sequence[Group], path: str, title: str = "keyed-sum") -> str | None:
    """Bar chart of keyed-sum steady records/s per system, with and without checkpoints.

    Returns why no chart was written, or ``None`` on success (matplotlib is optional:
    ``pip install -r bench/requirements.txt``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -r bench/requirements.txt)"
    series = {
        "keyed-sum/checkpoints-1s": "1 s exactly-once checkpoints",
        "keyed-sum/no-checkpoints": "no checkpoints",
    }
    systems = [s for s in dict.fromkeys(g.system for g in groups if g.case in series)]
    if not systems:
        return "no keyed-sum results to chart"
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    all_values: list[float] = []
    width = 0.38
    for j, (case, label) in enumerate(series.items()):
        xs, meds, lo, hi = [], [], [], []
        for i, system in enumerate(systems):
            g = next((g for g in groups if g.case == case and g.system == system), None)
            cell = g.cell("steady_records_per_s") if g else Cell.of([])
            if cell.median is None:
                continue
            xs.append(i + (j - 0.5) * width)
            meds.append(cell.median)
            lo.append(cell.median - cell.values[0])
            hi.append(cell.values[-1] - cell.median)
        all_values.extend(meds)
        bars = ax.bar(
            xs, meds, width, yerr=[lo, hi], capsize=3, label=label, color=("#2b6cb0", "#90cdf4")[j]
        )
        for bar, value in zip(bars, meds, strict=True):
            ax.annotate(
                f"{value / 1000:,.0f}k" if value >= 1000 else f"{value:,.0f}",
                (bar.get_x() + bar.get_width() / 2, value),
                ha="center",
                va="bottom",
                fontsize=8,
                xytext=(0, 2),
                textcoords="offset points",
            )
    if not all_values:
        plt.close(fig)
        return "no keyed-sum figures to chart"
    ax.set_yscale("log")
    # Whole decades, so bars of very different systems stay comparable at a glance.
    ax.set_ylim(
        10 ** math.floor(math.log10(min(all_values) / 2)),
        10 ** math.ceil(math.log10(max(all_values) * 1.5)),
    )
    ax.yaxis.set_major_formatter(FuncFormatter(_si))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(-0.7, len(systems) - 0.3)
    ax.set_xticks(range(len(systems)), [system_name(s) for s in systems])
    ax.set_ylabel("steady-state records/s (log scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


def _si(value: float, _pos: int) -> str:
    """``1000 -> '1k'``, ``1e6 -> '1M'`` for axis ticks."""
    for factor, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:g}{suffix}"
    return f"{value:g}"
