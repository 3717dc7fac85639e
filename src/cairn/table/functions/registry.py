"""The registry of built-in scalar functions: lookups by tree name, SQL name and DSL method,
and the namespace of runtime functions generated code calls.

Invariant: every name is unique — a tree name (``split_index``), a SQL name (``SPLIT_INDEX``)
and a PyFlink method name each find at most one function, checked when this module loads; the
runtime namespace holds, for each function with an implementation, ``_fn_<name>`` (the
implementation itself, called when no argument can be NULL or the function handles NULL) and
``_fnn_<name>`` (behind Flink's NULL rule), so the code generator never wraps a call itself.

>>> by_sql_name("split_index").name, by_method("regexp_extract").name, lookup("hour").family
('split_index', 'regexp_extract', 'temporal')
>>> RUNTIME["_fnn_upper"](None), RUNTIME["_fn_upper"]("a")
(None, 'A')
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cairn.table.functions import (
    collection,
    conditional,
    hashing,
    json,
    numeric,
    pattern,
    string,
    temporal,
)
from cairn.table.functions.definition import BuiltinFunction, strict

__all__ = ["FAMILIES", "RUNTIME", "all_functions", "by_method", "by_sql_name", "lookup"]

#: The families in the order the docs list them.
FAMILIES = ("comparison", "numeric", "string", "temporal", "conditional", "conversion", "json",
            "collection", "hash")  # fmt: skip

_ALL: tuple[BuiltinFunction, ...] = (
    *conditional.FUNCTIONS,
    *numeric.FUNCTIONS,
    *string.FUNCTIONS,
    *pattern.FUNCTIONS,
    *temporal.FUNCTIONS,
    *json.FUNCTIONS,
    *collection.FUNCTIONS,
    *hashing.FUNCTIONS,
)


def _index() -> tuple[dict[str, BuiltinFunction], dict[str, BuiltinFunction],
                      dict[str, BuiltinFunction]]:  # fmt: skip
    names: dict[str, BuiltinFunction] = {}
    sql: dict[str, BuiltinFunction] = {}
    methods: dict[str, BuiltinFunction] = {}
    for f in _ALL:
        for table, key in (
            [(names, f.name)]
            + [(sql, s) for s in f.sql_names]
            + ([(methods, f.method)] if f.method else [])
        ):
            if key in table:
                raise AssertionError(f"Built-in function name {key!r} is registered twice")
            table[key] = f
        if f.family not in FAMILIES:
            raise AssertionError(f"{f.name}: unknown family {f.family!r}")
    return names, sql, methods


_BY_NAME, _BY_SQL, _BY_METHOD = _index()


def lookup(name: str) -> BuiltinFunction | None:
    """The function whose calls are named ``name`` in expression trees."""
    return _BY_NAME.get(name)


def by_sql_name(name: str) -> BuiltinFunction | None:
    """The function SQL calls ``name`` (any case)."""
    return _BY_SQL.get(name.upper())


def by_method(name: str) -> BuiltinFunction | None:
    """The function PyFlink's ``Expression.<name>`` calls."""
    return _BY_METHOD.get(name)


def all_functions() -> Iterator[BuiltinFunction]:
    """Every registered function, family by family."""
    for family in FAMILIES:
        yield from (f for f in _ALL if f.family == family)


RUNTIME: dict[str, Any] = {}
for _f in _ALL:
    if _f.implementation is not None:
        RUNTIME[f"_fn_{_f.name}"] = _f.implementation
        RUNTIME[f"_fnn_{_f.name}"] = strict(_f.implementation) if _f.strict else _f.implementation
