"""The skew experiment shared by ``cairn demo skew`` and ``python -m bench --workloads skew``.

Layers: ``samples`` turns checkpoint statistics into one row per variant and a text table
(pure); ``experiment`` holds seed 000's job, its four variants and :func:`run_variant`, which
runs one variant for a fixed time on the public API and collects its checkpoints. The CLI
command and the benchmark only orchestrate and print.

>>> summarize("aligned", [CheckpointSample(1, "COMPLETED", 120)]).e2e_p50_ms
120
"""

from cairn.experiments.skew.experiment import (
    DEFAULT_ALIGNMENT_TIMEOUT_MS,
    DEFAULT_INTERVAL_MS,
    DEFAULT_RECORD_COST_MS,
    SKEW_RATIO,
    VARIANTS,
    BusyMap,
    CheckpointMapper,
    DiscardingSink,
    VariantRun,
    build_skew_job,
    configure_variant,
    run_variant,
    variant_label,
)
from cairn.experiments.skew.samples import (
    HEADERS,
    CheckpointSample,
    SkewRow,
    format_table,
    summarize,
    table_rows,
)

__all__ = [
    "DEFAULT_ALIGNMENT_TIMEOUT_MS",
    "DEFAULT_INTERVAL_MS",
    "DEFAULT_RECORD_COST_MS",
    "HEADERS",
    "SKEW_RATIO",
    "VARIANTS",
    "BusyMap",
    "CheckpointMapper",
    "CheckpointSample",
    "DiscardingSink",
    "SkewRow",
    "VariantRun",
    "build_skew_job",
    "configure_variant",
    "format_table",
    "run_variant",
    "summarize",
    "table_rows",
    "variant_label",
]
