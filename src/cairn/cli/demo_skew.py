"""``cairn demo skew``: seed 000's checkpoint-alignment experiment, four ways, side by side.

The command only orchestrates and prints: each variant of ``cairn.experiments.skew`` runs
for a fixed time and is cancelled (``run_variant``), then the checkpoint statistics of all
variants are printed as one table (``table_rows``, ``format_table``). See that package for
the job, the variants and how the figures are defined.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from cairn.experiments.skew import (
    DEFAULT_ALIGNMENT_TIMEOUT_MS,
    DEFAULT_INTERVAL_MS,
    DEFAULT_RECORD_COST_MS,
    SKEW_RATIO,
    VARIANTS,
    VariantRun,
    format_table,
    run_variant,
    summarize,
    table_rows,
    variant_label,
)

__all__ = ["parse_variants", "run_skew_demo"]


def parse_variants(text: str) -> list[str]:
    """``"aligned,unaligned"`` -> ``["aligned", "unaligned"]``; unknown names raise.

    >>> parse_variants("aligned, debloat")
    ['aligned', 'debloat']
    """
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or not names:
        raise ValueError(
            f"unknown variant(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(VARIANTS)}"
        )
    return list(dict.fromkeys(names))


def run_skew_demo(
    seconds: int,
    variants: Sequence[str],
    master: str | None,
    parallelism: int = 2,
    alignment_timeout_ms: int = DEFAULT_ALIGNMENT_TIMEOUT_MS,
    interval_ms: int = DEFAULT_INTERVAL_MS,
    record_cost_ms: float = DEFAULT_RECORD_COST_MS,
    say: Callable[[str], None] | None = None,
) -> int:
    """Run each variant for ``seconds``, then print the table; 0 if every variant completed
    at least one checkpoint, else 1.

    Example (not a doctest: it needs a running system)::

        run_skew_demo(20, ["aligned", "unaligned"], None)
        # 0
    """
    out = say or (lambda text: print(text, flush=True))
    for variant in variants:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    labels = {v: variant_label(v, alignment_timeout_ms) for v in variants}
    out(
        f"Cairn skew demo (checkpoint alignment under skew): skewed source "
        f"(a 2 once per {SKEW_RATIO:,} records, "
        f"else 1) -> key_by(v % 2 == 0) -> map1 ({record_cost_ms:g} ms busy loop per "
        f"record) -> map2 (operator-state counter); parallelism {parallelism}, a checkpoint "
        f"every {interval_ms / 1000:g} s, {seconds} s per variant: {', '.join(variants)}"
    )
    from cairn.deploy.spark_session import get_or_create_spark

    out("Starting local Spark ..." if not master else f"Connecting to Spark at {master} ...")
    get_or_create_spark(master, parallelism, {}).sparkContext.setLogLevel("FATAL")
    runs: dict[str, VariantRun] = {}
    for variant in variants:
        out(f"- {labels[variant]}: running {seconds} s ...")
        run = run_variant(
            variant, seconds, parallelism, master, alignment_timeout_ms, interval_ms, record_cost_ms
        )
        runs[variant] = run
        row = summarize(variant, run.samples)
        out(
            f"  {row.completed} completed, {row.failed} failed, {row.in_progress} in progress"
            + (f"; {run.error}" if run.error else "")
        )
    rows = table_rows(
        {v: r.samples for v, r in runs.items()}, {v: r.records_per_s for v, r in runs.items()}
    )
    out("")
    out(format_table(rows, labels))
    out("")
    out(
        "e2e: trigger -> last acknowledgement; align: first -> last barrier at the slowest "
        "subtask; start delay: trigger -> first barrier; persisted: in-flight data written "
        "with one checkpoint; open: still in progress when the time was up; percentiles "
        "over completed checkpoints; map rec/s: records through the map subtasks."
    )
    for row in rows:
        if row.variant != "aligned" and row.completed and not row.unaligned:
            out(
                f"note: no checkpoint of '{labels[row.variant]}' was taken unaligned (this "
                "runtime aligned every barrier)"
            )
    ok = all(r.completed > 0 for r in rows) and not any(r.error for r in runs.values())
    if not ok:
        out(
            "some variant completed no checkpoint or failed: "
            + "; ".join(
                f"{v}: {r.error or 'no completed checkpoint'}"
                for v, r in runs.items()
                if r.error or not summarize(v, r.samples).completed
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover - use ``cairn demo skew``
    sys.exit(run_skew_demo(20, list(VARIANTS), None))
