"""Resolved expressions evaluated on Arrow record batches (``pyarrow.compute``), for the scans
that project, filter and compute event time a batch at a time.

Invariant: ``arrow_supported(rex)`` is true only for expressions whose Arrow evaluation gives,
row for row, the value the generated Python code gives (``cairn.table.codegen``) under SQL's
NULL semantics: column references, non-null literals of a readable type, comparisons of two
numbers, two strings, two booleans or two timestamps, three-valued ``AND``/``OR``/``NOT``,
``IS [NOT] NULL`` and ``IF``/``CASE`` (a NULL condition takes the ``ELSE`` branch). Anything
else (arithmetic, casts, functions, user-defined functions) is not supported, and a caller
keeps its row-at-a-time path.

>>> import pyarrow as pa
>>> from cairn.table.types import DataTypes
>>> kind = Rex("input", DataTypes.INT(), index=0)
>>> two = Rex("literal", DataTypes.INT(False), value=2)
>>> is_bid = Rex("call", DataTypes.BOOLEAN(), op="equals", operands=(kind, two))
>>> arrow_supported(is_bid)
True
>>> batch = pa.table({"k": pa.array([2, 0, None], pa.int32())})
>>> evaluate(is_bid, batch).to_pylist()
[True, False, None]
"""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cairn.table.analysis import Rex
from cairn.table.types import DataType

__all__ = ["arrow_supported", "arrow_type", "evaluate"]

_COMPARISONS = {
    "equals": "equal",
    "not_equals": "not_equal",
    "less_than": "less",
    "less_than_or_equal": "less_equal",
    "greater_than": "greater",
    "greater_than_or_equal": "greater_equal",
}
_INTEGERS = {"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "BIGINT": pa.int64()}


def arrow_type(data_type: DataType) -> pa.DataType | None:
    """The Arrow type a column of ``data_type`` is read as, so that ``to_pylist`` gives the
    row path's Python values; ``None`` for a type no scan reads as Arrow. ``FLOAT`` is read
    as a double: the row path keeps Python's ``float`` of the text, not a 32-bit value."""
    root = data_type.root
    if root in _INTEGERS:
        return _INTEGERS[root]
    if root in ("FLOAT", "DOUBLE"):
        return pa.float64()
    if root == "BOOLEAN":
        return pa.bool_()
    if root in ("STRING", "VARCHAR", "CHAR"):
        return pa.string()
    if root == "DATE":
        return pa.date32()
    if root == "TIMESTAMP" and _precision(data_type) <= 6:
        return pa.timestamp("us")
    return None


def _precision(data_type: DataType) -> int:
    params = data_type.params
    return int(params[0]) if params else 6


def _family(data_type: DataType) -> str:
    root = data_type.root
    if root in _INTEGERS or root in ("FLOAT", "DOUBLE"):
        return "number"
    if root in ("STRING", "VARCHAR", "CHAR"):
        return "string"
    return root


def arrow_supported(rex: Rex) -> bool:
    """``rex`` evaluates on Arrow batches with the generated code's results."""
    if rex.kind == "input":
        return arrow_type(rex.data_type) is not None
    if rex.kind == "literal":
        return rex.value is not None and arrow_type(rex.data_type) is not None
    if rex.kind != "call" or not all(arrow_supported(o) for o in rex.operands):
        return False
    op, operands = rex.op, rex.operands
    if op in _COMPARISONS:
        left, right = (_family(o.data_type) for o in operands)
        return left == right and left in ("number", "string", "BOOLEAN", "TIMESTAMP", "DATE")
    if op in ("and", "or"):
        return all(o.data_type.root == "BOOLEAN" for o in operands)
    if op == "not":
        return operands[0].data_type.root == "BOOLEAN"
    if op in ("is_null", "is_not_null"):
        return len(operands) == 1
    if op == "if":
        _, then, otherwise = operands
        return (
            arrow_type(then.data_type)
            == arrow_type(otherwise.data_type)
            == arrow_type(rex.data_type)
        )
    return False


def evaluate(rex: Rex, batch: pa.Table) -> Any:
    """``rex`` over ``batch`` (its columns in the positions ``rex`` refers to): an Arrow array
    or scalar. Only for ``arrow_supported`` expressions."""
    if rex.kind == "input":
        return batch.column(rex.index)
    if rex.kind == "literal":
        value = rex.value
        if isinstance(value, datetime.datetime) and value.tzinfo is not None:
            raise TypeError(f"unsupported literal {value!r}")
        return pa.scalar(value, arrow_type(rex.data_type))
    op = rex.op
    args = [evaluate(o, batch) for o in rex.operands]
    if op in _COMPARISONS:
        return pc.call_function(_COMPARISONS[op], args)
    if op == "and":
        return pc.and_kleene(*args)
    if op == "or":
        return pc.or_kleene(*args)
    if op == "not":
        return pc.invert(args[0])
    if op == "is_null":
        return pc.is_null(args[0])
    if op == "is_not_null":
        return pc.is_valid(args[0])
    if op == "if":
        condition, then, otherwise = args
        return pc.if_else(pc.fill_null(condition, False), then, otherwise)
    raise TypeError(f"not evaluated on Arrow: {rex}")
