"""``table.exec.state.ttl``: how long a table operator keeps the state of a key nobody touches.

Invariant: a stateful non-windowed table operator (group aggregate, regular join, table
aggregate, limit, deduplicate, Top-N rank, an upsert source's ``ChangelogNormalize``) gets
the TTL of its plan node — a ``STATE_TTL`` hint's when one was given, else
``table.exec.state.ttl`` (``with_state_ttl`` fills in the nodes without one); ``0`` (the
default) keeps state forever. A positive TTL becomes Flink's
``StateConfigUtil.createTtlConfig``: processing time, refreshed when the state is created or
written (``OnCreateAndWrite``, not on read), never returning an expired value
(``NeverReturnExpired``) — so a key idle for longer than the TTL starts from scratch. Window
aggregates and over windows are cleaned by watermarks and take no TTL, as in Flink. Cairn
cleans expired values when they are touched and leaves them out of full snapshots; it has no
background cleanup of keys never touched again.

>>> parse_state_ttl("1 h"), parse_state_ttl("100 ms"), parse_state_ttl("2500")
(3600000, 100, 2500)
>>> ttl_config(0) is None, ttl_config(1000).ttl_ms
(True, 1000)
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from cairn.api.state import StateDescriptor, StateTtlConfig
from cairn.common.config_registry import ConfigOption, register_option
from cairn.common.config_values import DURATION_HINT, parse_duration_ms
from cairn.common.exceptions import ConfigurationError
from cairn.common.time import Duration
from cairn.table.plan import (
    Aggregate,
    Deduplicate,
    Join,
    Limit,
    PlanNode,
    Rank,
    StreamScan,
    TableAggregate,
    with_inputs,
)
from cairn.table.plan_text import describe

__all__ = [
    "STATE_TTL",
    "join_state_advice",
    "parse_state_ttl",
    "ttl_config",
    "with_state_ttl",
    "with_ttl",
]

STATE_TTL = register_option(
    ConfigOption(
        "table.exec.state.ttl",
        "duration",
        0,
        "How long the state of a key of a stateful non-windowed table operator (group "
        "aggregate, regular join, table aggregate, limit, deduplicate, rank,"
        " ChangelogNormalize) is kept after it "
        "was last written; 0 (the default) keeps it forever, so the state grows with the "
        "number of distinct keys.",
    )
)

_D = TypeVar("_D", bound=StateDescriptor)


def parse_state_ttl(value: Any, key: str = STATE_TTL.key) -> int:
    """Milliseconds of a TTL (a Flink duration string, a plain number of milliseconds or a
    ``timedelta``); ``ConfigurationError`` in Flink's words naming ``key`` otherwise.

    >>> parse_state_ttl("1 hx")
    Traceback (most recent call last):
    ...
    cairn.common.exceptions.ConfigurationError: Could not parse value '1 hx' for key \
'table.exec.state.ttl'. Expected a duration such as '10 s', '500 ms', '1 min', '2 h' or a \
plain number of milliseconds.
    """
    try:
        return parse_duration_ms(value)
    except ValueError:
        raise ConfigurationError(
            f"Could not parse value '{value}' for key '{key}'. Expected {DURATION_HINT}."
        ) from None


def ttl_config(ttl_ms: int) -> StateTtlConfig | None:
    """Flink's ``createTtlConfig``: ``None`` (no TTL) unless ``ttl_ms`` is positive. Expired
    values are also left out of full snapshots (Cairn's nearest to Flink's default background
    cleanup: a restored job does not bring them back into memory)."""
    if ttl_ms <= 0:
        return None
    return (
        StateTtlConfig.new_builder(Duration.of_millis(ttl_ms))
        .set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)
        .set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
        .cleanup_full_snapshot()
        .build()
    )


def with_ttl(descriptor: _D, ttl_ms: int | None) -> _D:
    """``descriptor`` with ``ttl_config(ttl_ms)`` enabled (unchanged for no TTL)."""
    config = ttl_config(ttl_ms or 0)
    if config is not None:
        descriptor.enable_time_to_live(config)
    return descriptor


def with_state_ttl(node: PlanNode, ttl_ms: int) -> PlanNode:
    """``node``'s plan with ``ttl_ms`` as the TTL of every stateful node that has none yet (a
    hint's TTL is kept)."""
    inputs = node.inputs
    if inputs:
        filled = tuple(with_state_ttl(i, ttl_ms) for i in inputs)
        if any(f is not i for f, i in zip(filled, inputs, strict=True)):
            node = with_inputs(node, filled)
    if isinstance(node, Join):
        left = ttl_ms if node.left_ttl_ms is None else node.left_ttl_ms
        right = ttl_ms if node.right_ttl_ms is None else node.right_ttl_ms
        if (left, right) != (node.left_ttl_ms, node.right_ttl_ms):
            return dataclasses.replace(node, left_ttl_ms=left, right_ttl_ms=right)
        return node
    stateful = isinstance(node, Aggregate | TableAggregate | Limit | Deduplicate | Rank) or (
        isinstance(node, StreamScan) and node.stateful
    )
    if stateful and node.state_ttl_ms is None:  # type: ignore[attr-defined]
        return dataclasses.replace(node, state_ttl_ms=ttl_ms)  # type: ignore[call-arg]
    return node


def join_state_advice(node: PlanNode, ttl_ms: int) -> list[str]:
    """A warning per regular join of ``node``'s plan that keeps a side's rows without a TTL
    (its own hint's, else ``ttl_ms``): that state only grows — Flink's plan advice, in the
    spirit of its ``[WARNING]`` lines. An interval join's state is bounded by its interval.

    >>> from cairn.table.analysis import Columns
    >>> from cairn.table.plan import Values
    >>> from cairn.table.types import DataTypes
    >>> side = Values((), Columns.of([("a", DataTypes.INT())]))
    >>> other = Values((), Columns.of([("b", DataTypes.INT())]))
    >>> join = Join(Columns.of([("a", DataTypes.INT()), ("b", DataTypes.INT())]), side, other,
    ...     (0,), (0,), join_type="FULL", right_ttl_ms=60000)
    >>> advice = join_state_advice(join, 0)
    >>> advice[0].split(" keeps")[0]
    '[WARNING] Join(joinType=[FullOuterJoin], where=[a = b], select=[a, b])'
    >>> "the left side's rows in state without a TTL" in advice[0]
    True
    >>> join_state_advice(join, 3600000)
    []
    """
    found: list[str] = []
    for child in node.inputs:
        found += join_state_advice(child, ttl_ms)
    if isinstance(node, Join):
        sides = [
            name
            for name, own in (("left", node.left_ttl_ms), ("right", node.right_ttl_ms))
            if not (own if own is not None else ttl_ms)
        ]
        if sides:
            found.append(
                f"[WARNING] {describe(node)} keeps the {' and '.join(sides)} side's rows in state"
                " without a TTL: it grows with every distinct row. Set 'table.exec.state.ttl' or"
                " a STATE_TTL hint if rows may be forgotten."
            )
    return found
