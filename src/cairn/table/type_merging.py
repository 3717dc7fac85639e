"""The common type of two SQL types, as Flink's ``LogicalTypeMerging`` finds it.

Invariant: pure; ``wider(a, b)`` is the type both ``a`` and ``b`` convert to without loss
(integers widen to the larger integer, an integer and a DECIMAL to a DECIMAL with room for
both, anything with DOUBLE to DOUBLE, strings to STRING), nullable when either is, and NULL
takes the other's type.

>>> from cairn.table.types import DataTypes
>>> str(wider(DataTypes.INT(False), DataTypes.BIGINT(False)))
'BIGINT NOT NULL'
>>> str(wider(DataTypes.INT(), DataTypes.DECIMAL(2, 1)))
'DECIMAL(11, 1)'
"""

from __future__ import annotations

from cairn.table.types import DataType, DataTypes

__all__ = ["as_decimal", "wider"]

_NUMERIC_ORDER = ["TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL", "FLOAT", "DOUBLE"]


def wider(a: DataType, b: DataType) -> DataType:
    """The common type of two numeric operands (``INT`` and ``BIGINT`` → ``BIGINT``)."""
    if a.root == "NULL":
        return b
    if b.root == "NULL":
        return a
    nullable = a.nullable or b.nullable
    if a.root == b.root and a.params == b.params:
        return a if a.nullable == nullable else a.nullable_()
    if a.root == "DECIMAL" and b.root == "DECIMAL":
        scale = max(a.params[1], b.params[1])
        digits = max(a.params[0] - a.params[1], b.params[0] - b.params[1])
        return DataTypes.DECIMAL(min(38, digits + scale), scale, nullable)
    if a.is_numeric and b.is_numeric:
        ra, rb = _NUMERIC_ORDER.index(a.root), _NUMERIC_ORDER.index(b.root)
        top = a if ra >= rb else b
        if top.root == "DECIMAL" and (a.root in ("FLOAT", "DOUBLE") or b.root in ("FLOAT",)):
            return DataTypes.DOUBLE(nullable)
        da, db = as_decimal(a), as_decimal(b)
        if top.root == "DECIMAL" and da is not None and db is not None:
            # an integer and a DECIMAL: room for the integer's digits (INT, DECIMAL(2, 1) →
            # DECIMAL(11, 1)), as Flink's common type
            scale = max(da[1], db[1])
            digits = max(da[0] - da[1], db[0] - db[1])
            return DataTypes.DECIMAL(min(38, digits + scale), scale, nullable)
        return DataType(top.root, top.params, nullable)
    if a.is_string and b.is_string:
        return DataTypes.STRING(nullable)
    return DataType(a.root, a.params, nullable)


_EXACT_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}


def as_decimal(t: DataType) -> tuple[int, int] | None:
    """An exact numeric type's (precision, scale), as Flink widens ``INT`` to DECIMAL(10, 0)."""
    if t.root == "DECIMAL":
        return t.params[0], t.params[1]
    if t.root in _EXACT_DIGITS:
        return _EXACT_DIGITS[t.root], 0
    return None
