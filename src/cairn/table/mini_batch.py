"""``table.exec.mini-batch.*``: which aggregates buffer their input, and the plan's
``MiniBatchAssigner`` nodes.

Invariant: pure. ``mini_batch_settings`` reads the three options as Flink validates them
(enabled needs ``allow-latency`` > 0 and ``size`` > 0, else a ``ConfigurationError`` naming
the option); ``with_mini_batch`` marks every streaming group aggregate with ``(latency,
size)`` — the operator then buffers and folds per key (``mini_batch_agg``) — and puts a
``MiniBatchAssigner`` above each source leaf (a scan, or the watermark assigner over it) as
Flink's ``MiniBatchIntervalInferRule`` does: every root asks for ``ProcTime`` batches of the
latency; below a node that needs watermarks the mode turns ``RowTime``; below a group window
aggregate there is no mini-batch. Neither changes an operator's uid: the assigner runs no
operator (``translate.plan_uid`` skips it) and the aggregate keeps its state layout, so a
savepoint restores with mini-batch on or off.

>>> from cairn.common.configuration import Configuration
>>> conf = Configuration({"table.exec.mini-batch.enabled": "true",
...     "table.exec.mini-batch.allow-latency": "2 s", "table.exec.mini-batch.size": "50000"})
>>> mini_batch_settings(conf)
(2000, 50000)
>>> mini_batch_settings(Configuration()) is None
True
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cairn.common.config_registry import parse_value
from cairn.common.configuration import Configuration
from cairn.common.exceptions import ConfigurationError
from cairn.table.plan import (
    Aggregate,
    IntervalJoin,
    MiniBatchAssigner,
    OverAggregate,
    PlanNode,
    StreamScan,
    TemporalJoin,
    TemporalSort,
    WatermarkAssigner,
    WindowAggregate,
    WindowDeduplicate,
    WindowJoin,
    WindowRank,
    with_inputs,
)

__all__ = ["mini_batch_settings", "with_mini_batch"]

ENABLED = "table.exec.mini-batch.enabled"
ALLOW_LATENCY = "table.exec.mini-batch.allow-latency"
SIZE = "table.exec.mini-batch.size"

#: Nodes that need watermarks: below them a mini-batch is ``RowTime`` (Flink's
#: ``requireWatermark``). Group window aggregates take none (``NO_MINIBATCH``).
_NEEDS_WATERMARK = (
    IntervalJoin,
    TemporalJoin,
    WindowJoin,
    WindowRank,
    WindowDeduplicate,
    OverAggregate,
    TemporalSort,
)


def _option(configuration: Configuration, key: str, default: Any) -> Any:
    raw = configuration.get_string(key, None)
    return default if raw is None else parse_value(key, raw)[1]


def mini_batch_settings(configuration: Configuration | None) -> tuple[int, int] | None:
    """``(allow-latency ms, size)`` when ``table.exec.mini-batch.enabled``, else ``None``.

    Raises:
        ConfigurationError: enabled with a latency or a size that is not positive.
    """
    if configuration is None or not _option(configuration, ENABLED, False):
        return None
    latency = int(_option(configuration, ALLOW_LATENCY, 0))
    size = int(_option(configuration, SIZE, -1))
    if latency <= 0:
        raise ConfigurationError(
            f"{ALLOW_LATENCY} must be greater than 0 ms when {ENABLED} is true"
            f" (got {latency} ms): set it, e.g. to '2 s'"
        )
    if size <= 0:
        raise ConfigurationError(
            f"{SIZE} must be greater than 0 when {ENABLED} is true (got {size}):"
            " set it, e.g. to 5000"
        )
    return latency, size


def with_mini_batch(node: PlanNode, settings: tuple[int, int] | None) -> PlanNode:
    """``node``'s plan with mini-batch on (see the module docstring); itself when off.

    >>> from cairn.table.analysis import AggCall, Columns
    >>> from cairn.table.plan_text import explain
    >>> from cairn.table.types import DataTypes
    >>> cols = Columns.of([("k", DataTypes.STRING())])
    >>> scan = StreamScan(cols, name="t")
    >>> n = AggCall("count_star", -1, DataTypes.BIGINT(False))
    >>> agg = Aggregate(scan, (0,), (n,), Columns.of([("k", DataTypes.STRING()),
    ...     ("n", n.data_type)]))
    >>> print(explain(with_mini_batch(agg, (2000, 100))))
    GroupAggregate(groupBy=[k], select=[k, COUNT(*) AS n]) changelogMode=[I,UB,UA,D]
    +- MiniBatchAssigner(interval=[2000ms], mode=[ProcTime]) changelogMode=[I]
       +- DataStreamScan(table=[t], fields=[k]) changelogMode=[I]
    """
    if settings is None:
        return node
    return _rewrite(node, settings, "ProcTime")


def _rewrite(node: PlanNode, settings: tuple[int, int], mode: str | None) -> PlanNode:
    """``node`` with its aggregates marked and assigners over its leaves; ``mode`` is the
    mini-batch mode its consumers ask for (``None``: no mini-batch, below a window)."""
    if isinstance(node, MiniBatchAssigner):
        return node  # rewritten already
    if mode is not None and isinstance(node, StreamScan | WatermarkAssigner):
        return MiniBatchAssigner(node.columns, node, settings[0], mode)
    if isinstance(node, WindowAggregate):
        child_mode: str | None = None
    elif isinstance(node, _NEEDS_WATERMARK) and mode is not None:
        child_mode = "RowTime"
    else:
        child_mode = mode
    inputs = node.inputs
    if inputs:
        rewritten = tuple(_rewrite(i, settings, child_mode) for i in inputs)
        if any(r is not i for r, i in zip(rewritten, inputs, strict=True)):
            node = with_inputs(node, rewritten)
    if isinstance(node, Aggregate) and not node.final_only and node.mini_batch is None:
        return dataclasses.replace(node, mini_batch=settings)
    return node
