"""Flink's ``STATE_TTL`` query hint: a state TTL per input of the joins and of the group
aggregate of one query block, instead of ``table.exec.state.ttl``.

Invariant: ``SELECT /*+ STATE_TTL('o' = '1d', 'c' = '12 h') */ ...`` maps names of the block's
``FROM`` relations (table, view or subquery; its alias if it has one) to TTLs. A regular join
of the block takes the TTL of its right relation for its right side, and of the ``FROM``
relation for the left side of the first join (a later join's left input is a join, which has
no name: it keeps the configured TTL); a group aggregate of a block without joins takes the
``FROM`` relation's TTL. The hint does not reach into subqueries or views, nor out of them. A
name that is not one of the block's relations, an empty hint or a bad duration fails with
Flink's message; with several options or hints for one name the last wins.

>>> from sqlglot import parse_one
>>> state_ttl_hints(parse_one("SELECT /*+ STATE_TTL('o' = '1d') */ * FROM o"), None)
{'o': 86400000}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from sqlglot import exp

from cairn.table.errors import ValidationError
from cairn.table.plan import Aggregate, Calc, Join, PlanNode
from cairn.table.state_ttl import parse_state_ttl

__all__ = ["HINT", "check_hint_names", "state_ttl_hints", "with_aggregate_ttl", "with_join_ttl"]

HINT = "STATE_TTL"


def _fail(errors: Any, node: exp.Expr, message: str) -> Exception:
    return ValidationError(message) if errors is None else errors.at(node, message)


def state_ttl_hints(select: exp.Expr, errors: Any) -> dict[str, int]:
    """The ``STATE_TTL`` options of ``select``'s hint: relation name -> TTL in milliseconds
    (empty without the hint). ``errors`` (``SqlErrors``) places a failure in the SQL text."""
    hint = select.args.get("hint")
    if not isinstance(hint, exp.Hint):
        return {}
    ttls: dict[str, int] = {}
    for call in hint.expressions:
        name = call.name if isinstance(call, exp.Anonymous | exp.Func) else ""
        if name.upper() != HINT:
            continue
        options = list(call.expressions)
        if not options:
            raise _fail(
                errors,
                call,
                "Invalid STATE_TTL hint, expecting at least one key-value options specified.",
            )
        for option in options:
            if not (
                isinstance(option, exp.EQ)
                and isinstance(option.this, exp.Literal | exp.Identifier | exp.Column)
                and isinstance(option.expression, exp.Literal)
            ):
                raise _fail(errors, option, "Invalid STATE_TTL hint: expected 'name' = 'ttl'")
            key = option.this.name
            try:
                ttls[key] = parse_state_ttl(option.expression.name, key)
            except ValueError as e:
                raise _fail(errors, option, f"Invalid {HINT} hint: {e}") from None
    return ttls


def check_hint_names(ttls: dict[str, int], names: Iterable[str], errors: Any, at: Any) -> None:
    """Fail in Flink's words when a hint names no relation of the block (``names``)."""
    known = set(names)
    unknown = [k for k in ttls if k not in known]
    if unknown:
        raise _fail(
            errors,
            at,
            "The options of following hints cannot match the name of input tables or views: "
            f"\n`{', '.join(unknown)}` in `{HINT}`",
        )


def _under_calcs(plan: PlanNode, kind: type[PlanNode], update: dict[str, Any]) -> PlanNode:
    """``plan`` with ``update`` applied to its top node of ``kind`` (under calcs only)."""
    if isinstance(plan, kind):
        return dataclasses.replace(plan, **update)
    if isinstance(plan, Calc):
        inner = _under_calcs(plan.input, kind, update)
        return plan if inner is plan.input else dataclasses.replace(plan, input=inner)
    return plan


def with_join_ttl(plan: PlanNode, left_ms: int | None, right_ms: int | None) -> PlanNode:
    """The join just built (``plan``'s top join, under calcs) with the hinted TTL of each side
    (``None``: the configured TTL)."""
    update = {
        k: v for k, v in (("left_ttl_ms", left_ms), ("right_ttl_ms", right_ms)) if v is not None
    }
    return _under_calcs(plan, Join, update) if update else plan


def with_aggregate_ttl(plan: PlanNode, ttl_ms: int | None) -> PlanNode:
    """The group aggregate just built (``plan``'s top aggregate, under calcs) with the hinted
    TTL."""
    return plan if ttl_ms is None else _under_calcs(plan, Aggregate, {"state_ttl_ms": ttl_ms})
