"""The RESULTS.md section of the ``window`` workload (issue 13), rendered with the others.

Invariant: a system's events/s count only in verified runs (its window results equal the
expected ones: ``bench.windows.verify``); the targets compare Cairn's median with 1,000,000
events/s and with the fastest verified peer of the same run, and every row shows the 1-minute
load average when its runs started (the machine is shared).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.report_tables import Group, empty_row, md_table, row_label, system_name
from bench.saved_runs import group_results, merge_saved

__all__ = ["TARGET_EVENTS_PER_S", "TARGET_RATIO", "window_section"]

TARGET_EVENTS_PER_S = 1_000_000
TARGET_RATIO = 3.0


def _verified(g: Group) -> str:
    flags = [r.get("verified") for r in g.runs if r.get("verified") is not None]
    if not flags:
        return "—"
    return "yes" if all(flags) else f"**no** ({flags.count(False)} of {len(flags)})"


def window_section(
    repeat: int, by_case: Mapping[str, list[Group]], cases: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """Section 6: one row per system, Cairn's latency, the targets."""
    groups = by_case.get("window", [])
    if not groups:
        return []
    spec = cases["window"]
    expected = spec.get("expected") or {}
    out = [
        "### 6. window: 1 s tumbling event-time windows (issue 13)",
        "",
        f"{spec['records']:,} events over {spec['keys']:,} keys, "
        f"{spec['events_per_second']:,} events per second of event time (up to 200 ms out of "
        "order), a 500 ms bounded-out-of-orderness watermark, 1 s tumbling event-time windows "
        "with `aggregate` (count and sum per key and window), 1 s exactly-once checkpoints, "
        "parallelism 2 (`bench/windows.py`, `bench/peers/*_window.py`). Verified: the run's "
        f"window results equal the expected ones ({expected.get('results', 0):,} results, "
        f"checksum {expected.get('checksum', '?')}); events/s: the events of the windows "
        "completed between 10 % and 90 % of the input over that time (Spark: from its "
        "micro-batches).",
        "",
    ]
    cairn = next((g for g in groups if g.system == "cairn"), None)
    ref = cairn.cell("steady_records_per_s").median if cairn else None
    rows = []
    for g in groups:
        empty = empty_row(g, repeat, 8)
        if empty:
            rows.append(empty)
            continue
        steady = g.cell("steady_records_per_s")
        ratio = f"{ref / steady.median:.1f}x" if ref and steady.median else "—"
        rows.append(
            (
                row_label(g, repeat),
                _verified(g),
                steady.format(),
                g.cell("startup_s").format(1),
                g.cell("checkpoint_p50_ms").format(),
                g.cell("checkpoint_p99_ms").format(),
                ratio,
                g.cell("load_1m").format(1),
            )
        )
    out += md_table(
        (
            "system",
            "verified",
            "events/s",
            "start-up s",
            "checkpoint p50 ms",
            "checkpoint p99 ms",
            "Cairn / this",
            "load (1 min) at start",
        ),
        rows,
    )
    out.append("")
    if cairn is not None and cairn.values("latency_p50_ms"):
        out += [
            "Cairn, watermark passing a window's end -> its results at the sink (the first "
            "result of the window fired on the subtask -> each result of it at the chained "
            "sink; every result timed): "
            f"p50 {cairn.cell('latency_p50_ms').format(1)} ms, "
            f"p99 {cairn.cell('latency_p99_ms').format(1)} ms, "
            f"max {cairn.cell('latency_max_ms').format(1)} ms.",
            "",
        ]
    out += _targets(groups, ref)
    return out


def _targets(groups: list[Group], cairn: float | None) -> list[str]:
    if not cairn:
        return []
    peers = [
        (g.cell("steady_records_per_s").median or 0.0, g.system)
        for g in groups
        if g.system != "cairn" and _verified(g) == "yes"
    ]
    rows = [
        (
            f"≥ {TARGET_EVENTS_PER_S:,} events/s",
            f"{cairn:,.0f} events/s",
            "yes" if cairn >= TARGET_EVENTS_PER_S else "**no**",
        )
    ]
    fastest = max(peers, default=None)
    if fastest and fastest[0] > 0:
        ratio = cairn / fastest[0]
        rows.append(
            (
                f"≥ {TARGET_RATIO:g}x the fastest peer ({system_name(fastest[1])})",
                f"{ratio:.2f}x",
                "yes" if ratio >= TARGET_RATIO else "**no**",
            )
        )
    return ["Targets of issue 13:", "", *md_table(("target", "measured (median)", "met"), rows), ""]


def main(argv: list[str] | None = None) -> int:
    """Print the section for saved runs (``results.json`` files, merged as ``--from-json``
    does), to paste into RESULTS.md by hand without re-rendering its generated block."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m bench.window_report", description=main.__doc__)
    parser.add_argument("results_json", nargs="+")
    args = parser.parse_args(argv)
    results, meta = merge_saved(args.results_json)
    by_case: dict[str, list[Group]] = {}
    for g in group_results([r for r in results if r.get("case") == "window"]):
        by_case.setdefault(g.case, []).append(g)
    sys.stdout.write("\n".join(window_section(meta["repeat"], by_case, meta["cases"])) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
