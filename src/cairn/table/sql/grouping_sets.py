"""``GROUP BY GROUPING SETS (...)``, ``ROLLUP (...)`` and ``CUBE (...)``, as Flink plans them:
each input row once per grouping set (Flink's ``Expand``, here a ``UNION ALL`` of one
projection per set), the keys a set leaves out NULL, and a BIGINT set id ``$e``; then one
aggregate keyed by the keys and ``$e``.

Invariant: the set id is Flink's expand id — a bit per grouping column, the column first in
the input the highest bit, 1 where the set leaves the column out — so ``GROUPING(a)`` and
``GROUPING_ID(a, b)`` are functions of ``$e`` alone, and two sets never share a group; outside
aggregate calls a grouping column reads its nulled copy, inside them the original column (so
``COUNT(a)`` in the grand total still counts every ``a``).

>>> expand_sets([[("k",)], rollup([("a",), ("b",)])])
[('k', 'a', 'b'), ('k', 'a'), ('k',)]
>>> rollup([("a",), ("b",)])
[('a', 'b'), ('a',), ()]
>>> expand_id(["a", "b", "c"], ("b",))
5
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from sqlglot import exp

from cairn.table.expressions import AGGREGATE_MODIFIERS, AGGREGATES, Expression, col, lit
from cairn.table.sql.errors import SqlErrors
from cairn.table.table import Table
from cairn.table.types import DataTypes

__all__ = ["GroupingSets", "cube", "expand_id", "expand_sets", "rollup"]

KeySet = tuple[str, ...]
SET_ID = "$e"


def rollup(keys: Sequence[KeySet]) -> list[KeySet]:
    """``ROLLUP (a, b)``: ``(a, b)``, ``(a)``, ``()``."""
    return [tuple(itertools.chain(*keys[:n])) for n in range(len(keys), -1, -1)]


def cube(keys: Sequence[KeySet]) -> list[KeySet]:
    """``CUBE (a, b)``: every subset, the largest first: ``(a, b)``, ``(a)``, ``(b)``, ``()``."""
    out = []
    for mask in range(2 ** len(keys) - 1, -1, -1):
        chosen = [keys[i] for i in range(len(keys)) if mask >> (len(keys) - 1 - i) & 1]
        out.append(tuple(itertools.chain(*chosen)))
    return out


def expand_sets(items: Sequence[Sequence[KeySet]]) -> list[KeySet]:
    """The grouping sets of a ``GROUP BY`` list: the cross product of its items' sets (a plain
    column is the one set of itself), each set's columns once, in order."""
    result: list[KeySet] = [()]
    for options in items:
        result = [tuple(dict.fromkeys((*done, *extra))) for done in result for extra in options]
    return result


def expand_id(keys: Sequence[str], present: KeySet) -> int:
    """Flink's expand id of the set ``present`` over all grouping columns ``keys`` (in input
    order): bit ``len(keys) - 1 - i`` set when ``keys[i]`` is left out."""
    n = len(keys)
    return sum(1 << (n - 1 - i) for i, k in enumerate(keys) if k not in present)


class GroupingSets:
    """One ``SELECT``'s grouping sets, when its ``GROUP BY`` has any (``active``); its
    ``GROUPING``/``GROUPING_ID`` calls (``call``, an ``ExpressionConverter`` hook)."""

    def __init__(
        self,
        errors: SqlErrors,
        group: Sequence[exp.Expr],
        columns: Sequence[str],
        column_name: Callable[[exp.Column], str],
    ) -> None:
        self.errors = errors
        self.columns = list(columns)
        self._column_name = column_name
        plain: list[list[KeySet]] = []
        constructs: list[list[KeySet]] = []
        self.active = any(isinstance(i, exp.GroupingSets | exp.Rollup | exp.Cube) for i in group)
        for item in group if self.active else []:
            if isinstance(item, exp.GroupingSets | exp.Rollup | exp.Cube):
                constructs.append(self._construct(item))
            else:
                plain.append([self._set_of(item)])
        self.sets = expand_sets([*plain, *constructs]) if self.active else []
        if len(set(self.sets)) != len(self.sets):
            raise errors.at(group[0], "Duplicate grouping sets are not supported yet")
        used = {k for s in self.sets for k in s}
        self.keys = [c for c in self.columns if c in used]  # input order, as Flink's
        self.copies = {k: f"$g{i}" for i, k in enumerate(self.keys)}

    def _construct(self, item: exp.Expr) -> list[KeySet]:
        members = [self._set_of(e) for e in item.expressions]
        if isinstance(item, exp.Rollup):
            return rollup(members)
        if isinstance(item, exp.Cube):
            return cube(members)
        return members

    def _set_of(self, item: exp.Expr) -> KeySet:
        if isinstance(item, exp.Tuple):
            return tuple(dict.fromkeys(k for e in item.expressions for k in self._set_of(e)))
        if isinstance(item, exp.Paren):
            return self._set_of(item.this)
        if isinstance(item, exp.GroupingSets | exp.Rollup | exp.Cube):
            raise self.errors.at(item, "Nested grouping set constructs are not supported yet")
        if not isinstance(item, exp.Column):
            raise self.errors.at(
                item, "GROUP BY an expression is not supported yet: group by a column"
            )
        name = self._column_name(item)
        if name not in self.columns:
            raise self.errors.at(item, f"Column '{item.name}' not found in any table")
        return (name,)

    def call(self, node: exp.Expr) -> Expression | None:
        """``GROUPING(a)``/``GROUPING_ID(a, b)``: a BIGINT of the set id (0 without sets)."""
        if not isinstance(node, exp.Anonymous):
            return None
        name = str(node.this).upper()
        if name not in ("GROUPING", "GROUPING_ID"):
            return None
        args = list(node.expressions)
        if not args or not all(isinstance(a, exp.Column) for a in args):
            raise self.errors.at(node, f"{name} takes grouping columns")
        names = tuple(self._column_name(a) for a in args)
        for a, n in zip(args, names, strict=True):
            if self.active and n not in self.keys:
                raise self.errors.at(a, f"Argument to {name} must be a grouping expression")
        if not self.active:
            return lit(0).cast(DataTypes.BIGINT(False))
        return self._grouping_id(names)

    def _grouping_id(self, names: KeySet) -> Expression:
        """The value per set id, as nested ``if``s over ``$e``."""
        result: Expression = lit(0).cast(DataTypes.BIGINT(False))
        for s in self.sets:
            value = expand_id(names, s)
            if value:
                result = (col(SET_ID) == expand_id(self.keys, s)).if_then_else(
                    lit(value).cast(DataTypes.BIGINT(False)), result
                )
        return result

    def expand(self, table: Table) -> Table:
        """Each row once per set: the input's columns, the grouping columns' copies
        (``$g<i>``, NULL where the set leaves the column out) and the set id ``$e``."""
        schema = table.get_schema()
        types = dict(zip(schema.names, schema.types, strict=True))
        branches = []
        for s in self.sets:
            copies = [
                (col(k) if k in s else lit(None)).cast(types[k].nullable_()).alias(self.copies[k])
                for k in self.keys
            ]
            set_id = lit(expand_id(self.keys, s)).cast(DataTypes.BIGINT(False)).alias(SET_ID)
            branches.append(table.select(*(col(n) for n in schema.names), *copies, set_id))
        expanded = branches[0]
        for branch in branches[1:]:
            expanded = expanded.union_all(branch)
        return expanded

    def group_keys(self) -> list[Expression]:
        return [*(col(self.copies[k]) for k in self.keys), col(SET_ID)]

    def rewrite(self, expr: Expression, top: bool = True) -> Expression:
        """``expr`` over the expanded input: grouping columns outside aggregate calls read
        their copies (a selected column keeps its name)."""
        if expr.kind == "field" and expr.name in self.copies:
            copy = col(self.copies[expr.name])
            return copy.alias(expr.name) if top else copy
        if expr.kind == "call" and (expr.name in AGGREGATE_MODIFIERS or _aggregate_name(expr)):
            return expr
        if not expr.args:
            return expr
        return Expression(
            expr.kind,
            expr.name,
            tuple(self.rewrite(a, False) for a in expr.args),
            expr.value,
            expr.data_type,
            expr.names,
        )


def _aggregate_name(expr: Expression) -> bool:
    if expr.name == "udf":
        return bool(expr.value.kind == "aggregate")
    return expr.name in AGGREGATES
