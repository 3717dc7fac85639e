"""Flink's mini-batch and two-phase aggregation options.

Invariant: ``table.exec.mini-batch.enabled`` (streaming only) makes every group aggregate
buffer its input and update each key's accumulators once per batch, emitting at most one
change per key (``cairn.table.mini_batch`` reads and validates the three keys: enabled needs
``allow-latency`` > 0 and ``size`` > 0; ``cairn.table.mini_batch_agg`` runs it). Off (the
default), nothing changes. ``table.optimizer.agg-phase-strategy`` is validated and recorded
and changes nothing yet: Cairn plans an aggregate in one phase (no local pre-aggregation
before the shuffle).

>>> from cairn.common.config_registry import parse_value
>>> parse_value("table.optimizer.agg-phase-strategy", "two_phase")
('table.optimizer.agg-phase-strategy', 'TWO_PHASE')
"""

from __future__ import annotations

from cairn.common.config_registry import ConfigOption, register_option

__all__ = ["ACCEPTED_EXEC_OPTIONS"]

_NOTE = " Accepted for Flink compatibility; Cairn does not change its plan for it yet."
_MINI = " Streaming group aggregates; enabled, allow-latency and size must be positive."

ACCEPTED_EXEC_OPTIONS = (
    register_option(
        ConfigOption(
            "table.exec.mini-batch.enabled",
            "bool",
            False,
            "Buffer input records to update each key's aggregate once per batch." + _MINI,
        )
    ),
    register_option(
        ConfigOption(
            "table.exec.mini-batch.allow-latency",
            "duration",
            0,
            "The longest a mini-batch buffers records (a batch ends at its multiples)." + _MINI,
        )
    ),
    register_option(
        ConfigOption(
            "table.exec.mini-batch.size",
            "int",
            -1,
            "The most records a mini-batch buffers." + _MINI,
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
