"""Flink's collection functions and value constructors (``ARRAY[...]``, ``MAP[...]``,
``CARDINALITY``, ``ARRAY_CONTAINS``, ``MAP_KEYS``...).

Invariant: an ARRAY value is a Python ``list`` and a MAP a ``dict``; positions are 1-based
(``a[1]`` is the first element, out of range is NULL); an implementation never changes its
arguments. A NULL array or map gives NULL; NULL elements are values like any other (found by
``ARRAY_CONTAINS``, kept by ``ARRAY_DISTINCT``).

>>> array_slice([1, 2, 3, 4], 2, -1), array_distinct([1, None, 1, None]), at({"k": 1}, "k")
([2, 3, 4], [1, None], 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.table.functions.definition import BuiltinFunction, returns, same_as
from cairn.table.type_merging import wider
from cairn.table.types import ArrayType, DataType, DataTypes, MapType

__all__ = ["FUNCTIONS", "array_distinct", "array_slice", "at"]


def at(container: Any, key: Any) -> Any:
    if isinstance(container, dict):
        return container.get(key)
    if not isinstance(key, int) or not 1 <= key <= len(container):
        return None
    return container[key - 1]


def element(array: list[Any]) -> Any:
    if len(array) > 1:
        raise ValueError(f"ELEMENT of an array of {len(array)} elements: it must have one")
    return array[0] if array else None


def array_of(*values: Any) -> list[Any]:
    return list(values)


def map_of(*values: Any) -> dict[Any, Any]:
    return dict(zip(values[::2], values[1::2], strict=True))


def array_contains(array: list[Any] | None, needle: Any) -> bool | None:
    return None if array is None else needle in array


def array_distinct(array: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in array:
        if v not in out:
            out.append(v)
    return out


def array_position(array: list[Any], needle: Any) -> int:
    return array.index(needle) + 1 if needle in array else 0


def array_remove(array: list[Any] | None, needle: Any) -> list[Any] | None:
    return None if array is None else [v for v in array if v != needle]


def array_slice(array: list[Any], start: int, end: int | None = None) -> list[Any]:
    n = len(array)
    first = start + n + 1 if start < 0 else max(start, 1)
    last = n if end is None else (end + n + 1 if end < 0 else min(end, n))
    return array[first - 1 : last] if first <= last else []


def array_union(a: list[Any], b: list[Any]) -> list[Any]:
    return array_distinct(a + b)


def array_concat(*arrays: Any) -> list[Any] | None:
    if any(a is None for a in arrays):
        return None
    return [v for a in arrays for v in a]


def array_join(array: list[Any], delimiter: str, null_replacement: str | None = None) -> str:
    parts = [v if v is not None else null_replacement for v in array]
    return delimiter.join(str(p) for p in parts if p is not None)


def _element_type(t: DataType) -> DataType:
    return t.element_type if isinstance(t, ArrayType) else DataTypes.NULL()


def _array_type(types: Sequence[DataType]) -> DataType:
    element_type = DataTypes.NULL()
    for t in types:
        element_type = wider(element_type, t) if element_type.root != "NULL" else t
    if element_type.root == "NULL":
        element_type = DataTypes.NULL()
    elif any(t.nullable for t in types):
        element_type = element_type.nullable_()
    return DataTypes.ARRAY(element_type, False)


def _map_type(types: Sequence[DataType]) -> DataType:
    keys = _array_type(types[::2])
    values = _array_type(types[1::2])
    assert isinstance(keys, ArrayType) and isinstance(values, ArrayType)
    return DataTypes.MAP(keys.element_type, values.element_type, False)


def _item_type(types: Sequence[DataType]) -> DataType:
    t = types[0]
    if isinstance(t, MapType):
        return t.value_type.nullable_()
    return _element_type(t).nullable_()


def _fn(name: str, signature: str, description: str, **kwargs: Any) -> BuiltinFunction:
    sql = kwargs.pop("sql", (name.upper(),))
    result = kwargs.pop("result", same_as(0))
    return BuiltinFunction(name, sql, signature, description, "collection", result, **kwargs)


FUNCTIONS = [
    _fn(
        "array",
        "ARRAY[value1, value2, ...]",
        "An array of the values.",
        sql=(),
        implementation=array_of,
        inputs="*+",
        arity=(1, None),
        strict=False,
        result=_array_type,
        examples=(("ARRAY[1, 2, 3]", [1, 2, 3]), ("ARRAY['a', CAST(NULL AS STRING)]", ["a", None])),
    ),
    _fn(
        "map",
        "MAP[key1, value1, key2, value2, ...]",
        "A map of the pairs.",
        sql=(),
        implementation=map_of,
        inputs="*+",
        arity=(2, None),
        strict=False,
        result=_map_type,
        examples=(("MAP['a', 1, 'b', 2]", {"a": 1, "b": 2}),),
    ),
    _fn(
        "at",
        "array[index], map[key]",
        "The element at the 1-based index, or the key's value.",
        sql=(),
        implementation=at,
        inputs="c*",
        method="at",
        result=_item_type,
        examples=(("ARRAY[10, 20][2]", 20), ("ARRAY[10, 20][3]", None), ("MAP['a', 1]['a']", 1)),
    ),
    _fn(
        "cardinality",
        "CARDINALITY(array | map)",
        "The number of elements or entries.",
        implementation=len,
        inputs="c",
        method="cardinality",
        method_is_property=True,
        result=returns(DataTypes.INT),
        examples=(("CARDINALITY(ARRAY[1, 2, 3])", 3), ("CARDINALITY(MAP['a', 1])", 1)),
    ),
    _fn(
        "element",
        "ELEMENT(array)",
        "The only element (NULL if empty; an error if more).",
        implementation=element,
        inputs="a",
        method="element",
        method_is_property=True,
        result=lambda t: _element_type(t[0]).nullable_(),
        examples=(("ELEMENT(ARRAY[7])", 7),),
    ),
    _fn(
        "array_contains",
        "ARRAY_CONTAINS(array, value)",
        "TRUE when the array has the value.",
        implementation=array_contains,
        inputs="a*",
        strict=False,
        method="array_contains",
        result=lambda t: DataTypes.BOOLEAN(t[0].nullable),
        examples=(
            ("ARRAY_CONTAINS(ARRAY[1, 2], 2)", True),
            ("ARRAY_CONTAINS(ARRAY[1, CAST(NULL AS INT)], CAST(NULL AS INT))", True),
        ),
    ),
    _fn(
        "array_distinct",
        "ARRAY_DISTINCT(array)",
        "The array without repeated elements.",
        implementation=array_distinct,
        inputs="a",
        method="array_distinct",
        method_is_property=True,
        examples=(("ARRAY_DISTINCT(ARRAY[1, 2, 1])", [1, 2]),),
    ),
    _fn(
        "array_position",
        "ARRAY_POSITION(array, value)",
        "The 1-based position of the value's first occurrence, 0 if absent.",
        implementation=array_position,
        inputs="a*",
        method="array_position",
        result=returns(DataTypes.INT),
        examples=(("ARRAY_POSITION(ARRAY[5, 6, 5], 5)", 1), ("ARRAY_POSITION(ARRAY[5, 6], 7)", 0)),
    ),
    _fn(
        "array_remove",
        "ARRAY_REMOVE(array, value)",
        "The array without the value.",
        implementation=array_remove,
        inputs="a*",
        strict=False,
        method="array_remove",
        result=lambda t: t[0],
        examples=(("ARRAY_REMOVE(ARRAY[1, 2, 1], 1)", [2]),),
    ),
    _fn(
        "array_reverse",
        "ARRAY_REVERSE(array)",
        "The array in reverse order.",
        implementation=lambda a: a[::-1],
        inputs="a",
        method="array_reverse",
        method_is_property=True,
        examples=(("ARRAY_REVERSE(ARRAY[1, 2, 3])", [3, 2, 1]),),
    ),
    _fn(
        "array_slice",
        "ARRAY_SLICE(array, start[, end])",
        "The elements from start to end (1-based, inclusive; negative counts from the end).",
        implementation=array_slice,
        inputs="aii",
        arity=(2, 3),
        method="array_slice",
        examples=(
            ("ARRAY_SLICE(ARRAY[1, 2, 3, 4], 2, 3)", [2, 3]),
            ("ARRAY_SLICE(ARRAY[1, 2, 3, 4], -2)", [3, 4]),
        ),
    ),
    _fn(
        "array_union",
        "ARRAY_UNION(array1, array2)",
        "The distinct elements of both arrays.",
        implementation=array_union,
        inputs="aa",
        method="array_union",
        examples=(("ARRAY_UNION(ARRAY[1, 2], ARRAY[2, 3])", [1, 2, 3]),),
    ),
    _fn(
        "array_concat",
        "ARRAY_CONCAT(array1, ...)",
        "The arrays one after another.",
        implementation=array_concat,
        inputs="a+",
        arity=(1, None),
        method="array_concat",
        examples=(("ARRAY_CONCAT(ARRAY[1], ARRAY[2, 3])", [1, 2, 3]),),
    ),
    _fn(
        "array_join",
        "ARRAY_JOIN(array, delimiter[, nullReplacement])",
        "The elements joined by the delimiter (NULLs skipped or replaced).",
        implementation=array_join,
        inputs="ass",
        arity=(2, 3),
        method="array_join",
        result=returns(lambda n: DataTypes.STRING(n)),
        examples=(
            ("ARRAY_JOIN(ARRAY['a', CAST(NULL AS STRING), 'b'], '-')", "a-b"),
            ("ARRAY_JOIN(ARRAY['a', CAST(NULL AS STRING)], '-', '?')", "a-?"),
        ),
    ),
    _fn(
        "array_max",
        "ARRAY_MAX(array)",
        "The greatest non-NULL element (NULL if none).",
        implementation=lambda a: max((v for v in a if v is not None), default=None),
        inputs="a",
        method="array_max",
        method_is_property=True,
        result=lambda t: _element_type(t[0]).nullable_(),
        examples=(("ARRAY_MAX(ARRAY[1, 5, 3])", 5),),
    ),
    _fn(
        "array_min",
        "ARRAY_MIN(array)",
        "The least non-NULL element (NULL if none).",
        implementation=lambda a: min((v for v in a if v is not None), default=None),
        inputs="a",
        method="array_min",
        method_is_property=True,
        result=lambda t: _element_type(t[0]).nullable_(),
        examples=(("ARRAY_MIN(ARRAY[4, 1, 3])", 1),),
    ),
    _fn(
        "map_keys",
        "MAP_KEYS(map)",
        "The keys as an array.",
        implementation=lambda m: list(m),
        inputs="m",
        method="map_keys",
        method_is_property=True,
        result=lambda t: DataTypes.ARRAY(
            t[0].key_type if isinstance(t[0], MapType) else DataTypes.NULL(), t[0].nullable
        ),
        examples=(("MAP_KEYS(MAP['a', 1, 'b', 2])", ["a", "b"]),),
    ),
    _fn(
        "map_values",
        "MAP_VALUES(map)",
        "The values as an array.",
        implementation=lambda m: list(m.values()),
        inputs="m",
        method="map_values",
        method_is_property=True,
        result=lambda t: DataTypes.ARRAY(
            t[0].value_type if isinstance(t[0], MapType) else DataTypes.NULL(), t[0].nullable
        ),
        examples=(("MAP_VALUES(MAP['a', 1, 'b', 2])", [1, 2]),),
    ),
    _fn(
        "map_entries",
        "MAP_ENTRIES(map)",
        "The entries as an array of ROW(key, value).",
        implementation=lambda m: [(k, v) for k, v in m.items()],
        inputs="m",
        method="map_entries",
        method_is_property=True,
        result=lambda t: DataTypes.ARRAY(
            DataTypes.ROW(
                [
                    DataTypes.FIELD(
                        "key", t[0].key_type if isinstance(t[0], MapType) else DataTypes.NULL()
                    ),
                    DataTypes.FIELD(
                        "value", t[0].value_type if isinstance(t[0], MapType) else DataTypes.NULL()
                    ),
                ]
            ),
            t[0].nullable,
        ),
        examples=(("MAP_ENTRIES(MAP['a', 1])", [("a", 1)]),),
    ),
    _fn(
        "map_from_arrays",
        "MAP_FROM_ARRAYS(keys, values)",
        "A map of the paired arrays.",
        implementation=lambda k, v: dict(zip(k, v, strict=True)),
        inputs="aa",
        result=lambda t: DataTypes.MAP(
            _element_type(t[0]), _element_type(t[1]), t[0].nullable or t[1].nullable
        ),
        examples=(("MAP_FROM_ARRAYS(ARRAY['a', 'b'], ARRAY[1, 2])", {"a": 1, "b": 2}),),
    ),
]
