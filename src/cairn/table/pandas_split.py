"""Splitting a calc that calls pandas (vectorized) functions: Flink's ``PythonCalcSplitRule``.

Invariant: pure, and the split computes what the calc computed — the same rows, in the same
kinds, under the same column names. A ``Calc`` calling pandas functions becomes three nodes:
a ``Calc`` computing the calls' arguments (and the columns needed later; it also checks the
conjuncts of the condition that call no pandas function, so those rows never reach a pandas
function, as in Flink), a ``PythonCalc`` appending one column per call, and a ``Calc`` doing
the rest over those columns. Equal calls are computed once; a call whose argument calls
another pandas function is split again above the first (the inner one runs first). A
``PythonCalc`` is no ``Calc``, so the optimizer never merges it into its neighbours.

>>> from cairn.table.analysis import Columns, resolve
>>> from cairn.table.expressions import col
>>> from cairn.table.plan import Values
>>> from cairn.table.plan_text import explain
>>> from cairn.table.types import DataType, DataTypes
>>> from cairn.table.udf import udf
>>> plus = udf(lambda a, b: a + b, result_type=DataTypes.BIGINT(), func_type="pandas", name="plus")
>>> cols = Columns.of([("a", DataTypes.BIGINT()), ("b", DataTypes.BIGINT())])
>>> calc = Calc(columns=Columns.of([("s", DataTypes.BIGINT())]), input=Values(((1, 2),), cols),
...     projections=(resolve(plus(col("a"), col("b") * 2), cols),),
...     condition=resolve(col("a") > 0, cols))
>>> print(explain(split_pandas_calc(calc)))
Calc(select=[f1 AS s]) changelogMode=[I]
+- PythonCalc(select=[a, f0, plus(a, f0) AS f1]) changelogMode=[I]
   +- Calc(select=[a, times(b, 2) AS f0], where=[greater_than(a, 0)]) changelogMode=[I]
      +- Values(tuples=[1 rows], fields=[a, b]) changelogMode=[I]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from cairn.table.analysis import Columns, Rex, conjuncts, input_references
from cairn.table.plan import Calc, PlanNode, PythonCalc
from cairn.table.types import DataType, DataTypes
from cairn.table.udf import is_pandas

__all__ = ["calls_pandas", "split_pandas_calc"]

#: ``python.fn-execution.arrow.batch.size``'s default: at most this many rows per call.
DEFAULT_BATCH_SIZE = 10000


def calls_pandas(calc: Calc) -> bool:
    """Whether a projection or the condition of ``calc`` calls a pandas function."""
    return any(_contains(r) for r in calc.expressions)


def split_pandas_calc(calc: Calc, batch_size: int = DEFAULT_BATCH_SIZE) -> PlanNode:
    """``calc`` as calcs around ``PythonCalc`` nodes (see the module docstring); ``calc``
    itself when it calls no pandas function."""
    if not calls_pandas(calc):
        return calc
    source = calc.input
    width = len(source.columns)
    projections = calc.projections
    if projections is None:
        projections = tuple(_ref(i, t) for i, t in enumerate(source.columns.types))
    parts = conjuncts(calc.condition)
    plain = [c for c in parts if not _contains(c)]
    vectorized = [c for c in parts if _contains(c)]
    ready = _innermost_calls([*projections, *vectorized])
    # over the source's columns, then the calls' results (``width + i`` is call ``i``)
    upper_projections = [_replace(p, ready, width) for p in projections]
    upper_conditions = [_replace(c, ready, width) for c in vectorized]
    needed = sorted(
        {i for i in input_references([*upper_projections, *upper_conditions]) if i < width}
    )

    taken = set(source.columns.names) | set(calc.columns.names)
    lower_rexes = [_ref(i, source.columns.types[i]) for i in needed]
    lower_columns = [(source.columns.names[i], source.columns.types[i]) for i in needed]
    calls = []
    for call in ready:
        positions = []
        for operand in call.operands:  # an argument computed once, however often passed
            if operand not in lower_rexes:
                lower_rexes.append(operand)
                lower_columns.append(
                    (_name(operand, source, lower_columns, taken), operand.data_type)
                )
            positions.append(lower_rexes.index(operand))
        operands = tuple(
            _ref(p, o.data_type) for p, o in zip(positions, call.operands, strict=True)
        )
        calls.append(dataclasses.replace(call, operands=operands))
    lower = Calc(
        columns=Columns.of(lower_columns),
        input=source,
        projections=tuple(lower_rexes),
        condition=_all(plain),
    )
    identity = plain == [] and lower.projections == tuple(
        _ref(i, t) for i, t in enumerate(source.columns.types)
    )
    results = [(_fresh(taken), c.data_type) for c in calls]
    python_calc = PythonCalc(
        columns=Columns.of([*lower_columns, *results]),
        input=source if identity else lower,
        calls=tuple(calls),
        batch_size=batch_size,
    )
    mapping = {i: k for k, i in enumerate(needed)}
    mapping.update({width + j: len(lower.columns) + j for j in range(len(ready))})
    upper = Calc(
        columns=calc.columns,
        input=python_calc,
        projections=tuple(_remap(p, mapping) for p in upper_projections),
        condition=_all([_remap(c, mapping) for c in upper_conditions]),
    )
    return split_pandas_calc(upper, batch_size)


def _is_call(rex: Rex) -> bool:
    return rex.kind == "call" and rex.op == "udf" and is_pandas(rex.value)


def _contains(rex: Rex) -> bool:
    return _is_call(rex) or any(_contains(o) for o in rex.operands)


def _innermost_calls(rexes: Iterable[Rex]) -> list[Rex]:
    """The distinct pandas calls whose arguments call no pandas function, in order."""
    found: list[Rex] = []

    def walk(rex: Rex) -> None:
        if _is_call(rex) and not any(_contains(o) for o in rex.operands):
            if rex not in found:
                found.append(rex)
            return
        for o in rex.operands:
            walk(o)

    for r in rexes:
        walk(r)
    return found


def _replace(rex: Rex, calls: Sequence[Rex], base: int) -> Rex:
    """``rex`` with each of ``calls`` replaced by a reference to column ``base + i``."""
    for i, call in enumerate(calls):
        if rex == call:
            return _ref(base + i, call.data_type)
    if not rex.operands:
        return rex
    return dataclasses.replace(rex, operands=tuple(_replace(o, calls, base) for o in rex.operands))


def _remap(rex: Rex, mapping: dict[int, int]) -> Rex:
    if rex.kind == "input":
        return dataclasses.replace(rex, index=mapping[rex.index])
    if not rex.operands:
        return rex
    return dataclasses.replace(rex, operands=tuple(_remap(o, mapping) for o in rex.operands))


def _all(conditions: Sequence[Rex]) -> Rex | None:
    """The ``AND`` of ``conditions`` in order (None for none)."""
    if not conditions:
        return None
    result = conditions[0]
    for c in conditions[1:]:
        result = Rex("call", DataTypes.BOOLEAN(), op="and", operands=(result, c))
    return result


def _ref(index: int, data_type: DataType) -> Rex:
    return Rex("input", data_type, index=index)


def _name(
    operand: Rex, source: PlanNode, columns: list[tuple[str, DataType]], taken: set[str]
) -> str:
    """An argument's column: its source column's name for a plain column, else ``f<k>``."""
    if operand.kind == "input":
        name = source.columns.names[operand.index]
        if all(name != n for n, _ in columns):
            return name
    return _fresh(taken)


def _fresh(taken: set[str]) -> str:
    """Flink's name for a computed column, ``f0``, ``f1``..., one not ``taken`` yet."""
    k = 0
    while f"f{k}" in taken:
        k += 1
    taken.add(f"f{k}")
    return f"f{k}"
