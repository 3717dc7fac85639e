"""Flink's mini-batch and two-phase aggregation options, accepted so that Flink SQL scripts
that set them run unchanged.

Invariant: none of them changes what Cairn computes or emits. Flink's mini-batch buffers
input records for ``allow-latency`` or ``size`` records and then updates each key's
accumulators once (fewer state accesses and fewer intermediate ``-U``/``+U``), and
``TWO_PHASE`` splits an aggregate into a local pre-aggregation before the shuffle and a
global one after it (for skewed keys). Cairn's group aggregate already runs a whole input
batch per call through generated code (``group_agg_code``), one state access per record, and
plans one phase: these keys are validated and recorded, and change nothing yet.

>>> from cairn.common.config_registry import parse_value
>>> parse_value("table.optimizer.agg-phase-strategy", "two_phase")
('table.optimizer.agg-phase-strategy', 'TWO_PHASE')
"""

from __future__ import annotations

from cairn.common.config_registry import ConfigOption, register_option

__all__ = ["ACCEPTED_EXEC_OPTIONS"]

_NOTE = " Accepted for Flink compatibility; Cairn does not change its plan for it yet."

ACCEPTED_EXEC_OPTIONS = (
    register_option(
        ConfigOption(
            "table.exec.mini-batch.enabled",
            "bool",
            False,
            "Flink: buffer input records to update each key's aggregate once per batch." + _NOTE,
        )
    ),
    register_option(
        ConfigOption(
            "table.exec.mini-batch.allow-latency",
            "duration",
            0,
            "Flink: the longest a mini-batch buffers records." + _NOTE,
        )
    ),
    register_option(
        ConfigOption(
            "table.exec.mini-batch.size",
            "int",
            -1,
            "Flink: the most records a mini-batch buffers." + _NOTE,
        )
    ),
    register_option(
        ConfigOption(
            "table.optimizer.agg-phase-strategy",
            "enum",
            "AUTO",
            "Flink: AUTO, ONE_PHASE or TWO_PHASE (local pre-aggregation before the shuffle)."
            + _NOTE,
            choices={"auto": "AUTO", "one_phase": "ONE_PHASE", "two_phase": "TWO_PHASE"},
        )
    ),
)
