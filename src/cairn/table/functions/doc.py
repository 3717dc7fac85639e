"""``docs/sql-functions.md``, generated from the registry: ``python -m
cairn.table.functions.doc > docs/sql-functions.md``.

Invariant: the page is a pure function of the registered functions — one table per family,
one row per function (signature, SQL names, PyFlink method, what it returns, a checked
example) — so a test can regenerate it and compare it with the file.

>>> page().splitlines()[0]
'# Flink SQL built-in functions in Cairn'
"""

from __future__ import annotations

from typing import Any

from cairn.table.functions.definition import BuiltinFunction
from cairn.table.functions.registry import FAMILIES, all_functions

__all__ = ["page"]

_TITLES = {
    "comparison": "Comparison and logical",
    "numeric": "Arithmetic and numeric",
    "string": "String",
    "temporal": "Temporal",
    "conditional": "Conditional",
    "conversion": "Type conversion",
    "json": "JSON",
    "collection": "Collection and value construction",
    "hash": "Hash",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return repr(v)
    return str(v)


def _row(f: BuiltinFunction) -> str:
    sql, result = f.examples[0] if f.examples else ("", None)
    method = f"`.{f.method}`" if f.method else ""
    if f.method and not f.method_is_property:
        method = f"`.{f.method}(...)`"
    example = f"`{_cell(sql)}` → `{_cell(_value(result))}`" if sql else ""
    how = "inline" if f.implementation is None else "built"
    if not f.deterministic:
        how += ", per row"
    return f"| `{_cell(f.signature)}` | {_cell(f.description)} | {method} | {example} | {how} |"


def page() -> str:
    lines = [
        "# Flink SQL built-in functions in Cairn",
        "",
        "Generated from `cairn.table.functions` by `python -m cairn.table.functions.doc`;"
        " do not edit",
        "by hand (`tests/unit/test_table_functions.py` fails when this page is stale). Every"
        " example",
        "is evaluated through SQL by that test. Semantics are Flink's: NULL in, NULL out unless"
        " a row",
        "says otherwise; the session time zone is UTC. Status *inline*: generated code computes it",
        "without a call; *built*: a registered Python implementation; *per row*: not"
        " deterministic.",
        "",
    ]
    functions = list(all_functions())
    for family in FAMILIES:
        members = [f for f in functions if f.family == family]
        if not members:
            continue
        lines += [
            f"## {_TITLES[family]}",
            "",
            "| Function | Returns | Table API | Example | Status |",
            "|---|---|---|---|---|",
            *(_row(f) for f in members),
            "",
        ]
    lines.append(
        f"{len(functions)} functions. Not built yet: `CURRENT_WATERMARK`, `JSON_OBJECTAGG`/"
        "`JSON_ARRAYAGG` (aggregates), `OVERLAPS`, `INTERVAL ... TO ...` ranges, `JSON_VALUE`'s"
        " `ON EMPTY`/`ON ERROR` clauses, a session time zone other than UTC."
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(page(), end="")
