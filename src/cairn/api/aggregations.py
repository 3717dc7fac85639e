"""Rolling aggregations of ``KeyedStream`` (sum/min/max/min_by/max_by) as reduce functions.

Invariant: PyFlink's semantics, without mutating inputs: ``sum``/``min``/``max`` return the
first record of the key with the aggregated field replaced; ``min_by``/``max_by`` return the
whole record holding the extreme value, keeping the earlier record on ties. Fields are picked
by index (tuples, lists, ``Row``), by name (``Row``, ``dict``, or tuples typed ``ROW_NAMED``),
and a scalar record counts as one field at position 0.

>>> AccumulateReduceFunction(1, "sum").reduce(("a", 1), ("a", 2))
('a', 3)
>>> AccumulateReduceFunction(0, "max_by").reduce(3, 7)
7
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

from cairn.api.functions import ReduceFunction
from cairn.common.types import Row

__all__ = ["AGGREGATIONS", "AccumulateReduceFunction"]

AGGREGATIONS = ("sum", "min", "max", "min_by", "max_by")

_PICK: dict[str, Callable[[Any, Any], bool]] = {
    # True: take the second value.
    "min": operator.lt,
    "max": operator.gt,
    "min_by": operator.lt,
    "max_by": operator.gt,
}


class AccumulateReduceFunction(ReduceFunction):
    """``ReduceFunction`` behind ``KeyedStream.sum(position)`` and friends.

    ``field_names`` (from a ``ROW_NAMED`` type hint) lets a name select a tuple position.
    """

    def __init__(
        self, position: int | str, aggregation: str, field_names: Sequence[str] | None = None
    ) -> None:
        if isinstance(position, bool) or not isinstance(position, int | str):
            raise TypeError(
                "The field position must be of int or str type to locate the value to calculate "
                f"for min, max, min_by, max_by and sum. The given type is: {type(position)}"
            )
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {aggregation!r}; expected one of {AGGREGATIONS}")
        self.position = position
        self.aggregation = aggregation
        self.field_names = list(field_names) if field_names is not None else None

    def reduce(self, value1: Any, value2: Any) -> Any:
        field1, field2 = self._field(value1), self._field(value2)
        if self.aggregation == "sum":
            return self._replace(value1, field1 + field2)
        take_second = _PICK[self.aggregation](field2, field1)
        if self.aggregation in ("min_by", "max_by"):
            return value2 if take_second else value1
        return self._replace(value1, field2 if take_second else field1)

    def fold(self, values: list[Any]) -> Any:
        """``reduce`` over ``values`` left to right (at least one), in one pass for a sum
        over records of one type: the fields added up, then put into the first record.

        >>> AccumulateReduceFunction(1, "sum").fold([("a", 1), ("a", 2), ("a", 4)])
        ('a', 7)
        """
        first = values[0]
        kind = type(first)
        if self.aggregation != "sum" or not all(type(v) is kind for v in values):
            return functools.reduce(self.reduce, values)
        if _is_scalar(first):
            self._field(first)  # the position check
            return functools.reduce(operator.add, values)
        key = self._key(first)
        total = functools.reduce(operator.add, [v[key] for v in values])
        return self._replace(first, total)

    def _key(self, value: Any) -> int | str:
        """Index or name that selects the field in ``value``."""
        if isinstance(value, dict | Row) or isinstance(self.position, int):
            return self.position
        if self.field_names is not None and self.position in self.field_names:
            return self.field_names.index(self.position)
        raise TypeError(
            f"Cannot select field {self.position!r} of a {type(value).__name__} record: use an "
            "int position, Row/dict records, or declare the field names with Types.ROW_NAMED"
        )

    def _field(self, value: Any) -> Any:
        if _is_scalar(value):
            if self.position != 0:
                raise TypeError(
                    f"The {self.position} field selected on a basic type. A field expression on "
                    "a basic type can only select the 0th field (which means selecting the "
                    "entire basic type)."
                )
            return value
        return value[self._key(value)]

    def _replace(self, value: Any, field: Any) -> Any:
        if _is_scalar(value):
            return field
        key = self._key(value)
        if isinstance(value, tuple):
            assert isinstance(key, int)
            items = list(value)
            items[key] = field
            # Named tuples rebuild from fields; plain tuples from the list.
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, Row):
            copy = Row(*value)
            names = value.get_field_names()
            if names is not None:
                copy.set_field_names(names)
            copy.set_row_kind(value.get_row_kind())
            copy[key] = field
            return copy
        if isinstance(value, list):
            assert isinstance(key, int)
            return [*value[:key], field, *value[key + 1 :]]
        if isinstance(value, dict):
            return {**value, key: field}
        raise TypeError(f"Cannot aggregate a field of a {type(value).__name__} record")

    def __repr__(self) -> str:
        return f"{self.aggregation}({self.position!r})"


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, tuple | list | dict | Row)
