"""``GROUP BY`` an expression (``GROUP BY DATE_FORMAT(ts, 'yyyy-MM-dd')``), as Calcite plans
it: the expression becomes a column of the aggregate's input (``$f<n>``, after the input's
columns), the aggregate groups by that column, and wherever the select list or ``HAVING``
repeats the expression it reads the column.

Invariant: two expressions are the same key when their trees print the same (``str``), so
``SELECT UPPER(k) ... GROUP BY UPPER(k)`` reads the key and ``UPPER(j)`` stays unresolved
(then refused as not grouped).

>>> from cairn.table.expressions import col
>>> keyed = computed_keys([col("k").upper_case, col("j")], 2)
>>> [str(k) for k in keyed.keys], [str(c) for c in keyed.columns]
(['$f2', 'j'], ['as(upper(k), $f2)'])
>>> str(keyed.rewrite(col("k").upper_case.alias("u")))
'as($f2, u)'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cairn.table.expressions import Expression, col

__all__ = ["ComputedKeys", "computed_keys"]


@dataclass(frozen=True)
class ComputedKeys:
    """The keys to group by, the computed columns to add first, and the rewrite."""

    keys: tuple[Expression, ...]
    columns: tuple[Expression, ...]
    names: tuple[tuple[str, str], ...]  # (the expression's text, its column's name)

    def rewrite(self, expr: Expression, top: bool = True) -> Expression:
        """``expr`` with each key expression in it read from its column."""
        for text, name in self.names:
            if str(expr) == text:
                return col(name)
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


def computed_keys(keys: Sequence[Expression], width: int) -> ComputedKeys:
    """``keys`` with each non-column key as a column ``$f<n>`` after the ``width`` input
    columns (a key given twice is one column)."""
    out: list[Expression] = []
    columns: list[Expression] = []
    names: dict[str, str] = {}
    for key in keys:
        if key.kind == "field":
            out.append(key)
            continue
        text = str(key)
        if text not in names:
            names[text] = f"$f{width + len(columns)}"
            columns.append(key.alias(names[text]))
        out.append(col(names[text]))
    return ComputedKeys(tuple(out), tuple(columns), tuple(names.items()))
