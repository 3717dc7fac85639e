"""``UNNEST(array | map | multiset) [WITH ORDINALITY]``: a collection's elements as rows
(Flink's built-in ``$UNNEST_ROWS$`` table function, joined laterally).

Invariant: an array gives one row per element in order (an element of ``ROW`` type becomes
its fields), a map one ``(key, value)`` row per entry, a multiset (a ``{element: count}``
mapping) each element as many times as it counts; ``WITH ORDINALITY`` appends the element's
1-based position (``INT NOT NULL``). A NULL collection gives no rows, as in Flink.

>>> list(UnnestFunction("array", False, True).eval(["a", "b"]))
[('a', 1), ('b', 2)]
>>> list(UnnestFunction("map", False, False).eval({"k": 1}))
[('k', 1)]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cairn.table.errors import ValidationError
from cairn.table.types import ArrayType, DataType, DataTypes, MapType, MultisetType, RowType
from cairn.table.udf import TableFunction, udtf

__all__ = ["UnnestFunction", "unnest_function"]


class UnnestFunction(TableFunction):
    """The rows of one collection value (see the module's invariant)."""

    def __init__(self, kind: str, row_elements: bool, ordinality: bool) -> None:
        self.kind = kind
        self.row_elements = row_elements
        self.ordinality = ordinality

    def eval(self, *args: Any) -> Iterator[tuple[Any, ...]]:
        (value,) = args
        if value is None:
            return
        if self.kind == "map":
            items: Any = list(value.items()) if isinstance(value, Mapping) else list(value)
        elif self.kind == "multiset" and isinstance(value, Mapping):
            items = [e for e, n in value.items() for _ in range(int(n))]
        else:
            items = list(value)
        for i, item in enumerate(items, start=1):
            fields = tuple(item) if self.kind == "map" or self.row_elements else (item,)
            yield (*fields, i) if self.ordinality else fields


def unnest_function(collection: DataType, ordinality: bool, names: list[str]) -> Any:
    """The table function unnesting values of type ``collection`` into columns ``names``
    (Flink's names when none are given: ``f0``... for a row element, ``EXPR$0`` otherwise)."""
    if isinstance(collection, MapType):
        kind, types = "map", [collection.key_type, collection.value_type]
        row_elements = False
    elif isinstance(collection, ArrayType | MultisetType):
        kind = "array" if isinstance(collection, ArrayType) else "multiset"
        element = collection.element_type
        row_elements = isinstance(element, RowType)
        types = list(element.field_types()) if isinstance(element, RowType) else [element]
    else:
        raise ValidationError(f"UNNEST takes an ARRAY, a MAP or a MULTISET, got {collection}")
    if ordinality:
        types.append(DataTypes.INT(False))
    if names and len(names) != len(types):
        raise ValidationError(
            f"UNNEST gives {len(types)} column(s) ({', '.join(str(t) for t in types)}),"
            f" the alias names {len(names)}"
        )
    names = names or [f"EXPR${i}" for i in range(len(types))]
    row = DataTypes.ROW([DataTypes.FIELD(n, t) for n, t in zip(names, types, strict=True)])
    return udtf(UnnestFunction(kind, row_elements, ordinality), result_types=row, name="UNNEST")
