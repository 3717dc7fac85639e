"""Flink's JSON functions (``IS JSON``, ``JSON_VALUE``, ``JSON_QUERY``, ``JSON_OBJECT``...).

Invariant: a JSON path is SQL/JSON's (``[lax|strict] $.a.b[0]``, ``$.['a b']``, ``[*]``),
evaluated by ``path_values``; lax mode (the default) makes a missing member empty, strict mode
an error. Errors and empty results become NULL (Flink's default ``NULL ON EMPTY`` / ``NULL ON
ERROR``); ``JSON_EXISTS`` gives FALSE on error. JSON text is written compactly, as Flink's
Jackson writes it (``{"K1":"V1"}``); a value built by ``JSON_OBJECT``/``JSON_ARRAY`` is a
``JsonText`` and nests as JSON rather than as a string.

>>> json_value('{"a": {"b": [1, 2]}}', "$.a.b[1]"), json_query('{"a": [{"c": 1}]}', "$.a")
('2', '[{"c":1}]')
>>> json_object("NULL", "K1", "V1", "K2", json_array("ABSENT", 1, None))
'{"K1":"V1","K2":[1]}'
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
from typing import Any

from cairn.table.functions.definition import BuiltinFunction, always_nullable, returns
from cairn.table.types import DataTypes

__all__ = ["FUNCTIONS", "JsonText", "json_array", "json_object", "json_query", "json_value"]


class JsonText(str):
    """JSON text a JSON constructor built: nested into another as JSON, not as a string."""

    __slots__ = ()


_MISSING = object()
_STEP = re.compile(r"\.([A-Za-z_$][\w$]*)|\.?\[\s*'([^']*)'\s*\]|\.?\[\s*\"([^\"]*)\"\s*\]"
                   r"|\[(\d+)\]|\[\*\]|\.\*")  # fmt: skip


class _PathError(ValueError):
    pass


def path_values(document: Any, path: str) -> list[Any]:
    """The values at ``path`` in a parsed document (empty in lax mode when missing)."""
    text = path.strip()
    strict = False
    if text[:6].lower() == "strict":
        strict, text = True, text[6:].strip()
    elif text[:3].lower() == "lax":
        text = text[3:].strip()
    if not text.startswith("$"):
        raise _PathError(f"A JSON path starts with $: {path!r}")
    nodes = [document]
    position = 1
    while position < len(text):
        step = _STEP.match(text, position)
        if step is None:
            raise _PathError(f"Invalid JSON path {path!r} at {position}")
        position = step.end()
        name = step.group(1) or step.group(2) or step.group(3)
        index = step.group(4)
        out: list[Any] = []
        for node in nodes:
            if name is not None:
                if isinstance(node, dict) and name in node:
                    out.append(node[name])
                elif strict:
                    raise _PathError(f"No member {name!r}")
            elif index is not None:
                if isinstance(node, list) and int(index) < len(node):
                    out.append(node[int(index)])
                elif strict:
                    raise _PathError(f"No element {index}")
            elif isinstance(node, list):
                out.extend(node)
            elif isinstance(node, dict):
                out.extend(node.values())
        nodes = out
    return nodes


def _parse(text: Any) -> Any:
    if isinstance(text, dict | list):
        return text
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return _MISSING


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else str(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"Cannot write {value!r} as JSON")


def is_json(text: Any, kind: str = "VALUE") -> bool:
    if not isinstance(text, str):
        return False
    value = _parse(text)
    if value is _MISSING:
        return False
    kind = kind.upper()
    if kind == "OBJECT":
        return isinstance(value, dict)
    if kind == "ARRAY":
        return isinstance(value, list)
    if kind == "SCALAR":
        return not isinstance(value, dict | list)
    return True


def json_exists(text: str, path: str) -> bool:
    document = _parse(text)
    if document is _MISSING:
        return False
    try:
        return bool(path_values(document, path))
    except _PathError:
        return False


def json_value(text: str, path: str) -> str | None:
    """The scalar at ``path`` as text; NULL when empty, not a scalar, or on error."""
    document = _parse(text)
    if document is _MISSING:
        return None
    try:
        found = path_values(document, path)
    except _PathError:
        return None
    if len(found) != 1 or isinstance(found[0], dict | list) or found[0] is None:
        return None
    value = found[0]
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def json_query(text: str, path: str, wrapper: str = "WITHOUT") -> str | None:
    """The JSON at ``path`` (an object or array unless wrapped); NULL when empty or on error."""
    document = _parse(text)
    if document is _MISSING:
        return None
    try:
        found = path_values(document, path)
    except _PathError:
        return None
    wildcard = "*" in path
    value: Any = found if wildcard else (found[0] if found else _MISSING)
    if value is _MISSING:
        return None
    mode = wrapper.upper()
    if mode == "UNCONDITIONAL" or (mode == "CONDITIONAL" and not isinstance(value, list)):
        value = [value]
    if not isinstance(value, dict | list):
        return None
    return dumps(value)


def _json_of(value: Any) -> Any:
    return json.loads(value) if isinstance(value, JsonText) else value


def json_string(value: Any) -> str:
    return dumps(_json_of(value))


def json_object(on_null: str, *pairs: Any) -> str:
    out: dict[str, Any] = {}
    for key, value in zip(pairs[::2], pairs[1::2], strict=True):
        if key is None:
            raise ValueError("JSON_OBJECT keys must not be NULL")
        if value is None and on_null.upper() == "ABSENT":
            continue
        out[str(key)] = _json_of(value)
    return JsonText(dumps(out))


def json_array(on_null: str, *values: Any) -> str:
    kept = [_json_of(v) for v in values if v is not None or on_null.upper() == "NULL"]
    return JsonText(dumps(kept))


def _fn(name: str, signature: str, description: str, **kwargs: Any) -> BuiltinFunction:
    sql = kwargs.pop("sql", (name.upper(),))
    result = kwargs.pop("result", always_nullable(DataTypes.STRING))
    return BuiltinFunction(name, sql, signature, description, "json", result, **kwargs)


FUNCTIONS = [
    _fn(
        "is_json",
        "string IS JSON [VALUE | SCALAR | ARRAY | OBJECT]",
        "TRUE when the string is JSON (of that kind); FALSE for NULL.",
        sql=(),
        implementation=is_json,
        inputs="ss",
        arity=(1, 2),
        strict=False,
        method="is_json",
        result=lambda _: DataTypes.BOOLEAN(False),
        examples=(
            ("'1' IS JSON", True),
            ("'abc' IS JSON", False),
            ("'{}' IS JSON OBJECT", True),
            ("'1' IS JSON ARRAY", False),
            ("'[]' IS NOT JSON", False),
            ("CAST(NULL AS STRING) IS JSON", False),
        ),
    ),
    _fn(
        "json_exists",
        "JSON_EXISTS(json, path)",
        "TRUE when the path finds a value.",
        implementation=json_exists,
        inputs="ss",
        method="json_exists",
        result=returns(lambda n: DataTypes.BOOLEAN(n)),
        examples=(
            ("JSON_EXISTS('{\"a\": true}', '$.a')", True),
            ("JSON_EXISTS('{\"a\": true}', '$.b')", False),
            ("JSON_EXISTS('{\"a\": [{ \"b\": 1 }]}', '$.a[0].b')", True),
        ),
    ),
    _fn(
        "json_string",
        "JSON_STRING(value)",
        "The value written as JSON.",
        implementation=json_string,
        inputs="*",
        result=returns(DataTypes.STRING),
        examples=(
            ("JSON_STRING(1)", "1"),
            ("JSON_STRING(TRUE)", "true"),
            ("JSON_STRING('Hello, World!')", '"Hello, World!"'),
            ("JSON_STRING(ARRAY[1, 2])", "[1,2]"),
            ("JSON_STRING(CAST(NULL AS INT))", None),
        ),
    ),
    _fn(
        "json_value",
        "JSON_VALUE(json, path [RETURNING type])",
        "The scalar at the path as a STRING (or the RETURNING type); NULL when empty.",
        implementation=json_value,
        inputs="ss",
        literal_arguments=(1,),
        method=None,
        examples=(
            ("JSON_VALUE('{\"a\": true}', '$.a')", "true"),
            ("JSON_VALUE('{\"a\": true}', '$.a' RETURNING BOOLEAN)", True),
            ("JSON_VALUE('{\"a.b\": [0.998,0.996]}', '$.[\"a.b\"][0]' RETURNING DOUBLE)", 0.998),
            ("JSON_VALUE('{\"a\": true}', 'lax $.b')", None),
        ),
    ),
    _fn(
        "json_query",
        "JSON_QUERY(json, path [WITH [CONDITIONAL | UNCONDITIONAL] [ARRAY] WRAPPER])",
        "The JSON object or array at the path, as text; NULL when empty.",
        implementation=json_query,
        inputs="sss",
        arity=(2, 3),
        literal_arguments=(1, 2),
        method="json_query",
        examples=(
            ("JSON_QUERY('{ \"a\": { \"b\": 1 } }', '$.a')", '{"b":1}'),
            ("JSON_QUERY('[1, 2]', '$')", "[1,2]"),
            ('JSON_QUERY(\'{"a":[{"c":"c1"},{"c":"c2"}]}\', \'lax $.a[*].c\')', '["c1","c2"]'),
            ("JSON_QUERY('{}', '$' WITH CONDITIONAL ARRAY WRAPPER)", "[{}]"),
            ("JSON_QUERY('[1, 2]', '$' WITH UNCONDITIONAL ARRAY WRAPPER)", "[[1,2]]"),
            ("JSON_QUERY('1', '$')", None),
        ),
    ),
    _fn(
        "json_object",
        "JSON_OBJECT([[KEY] key VALUE value]* [{NULL | ABSENT} ON NULL])",
        "A JSON object of the pairs (NULL ON NULL by default).",
        implementation=json_object,
        inputs="s*+",
        arity=(1, None),
        strict=False,
        literal_arguments=(0,),
        result=lambda _: DataTypes.STRING(False),
        examples=(
            ("JSON_OBJECT()", "{}"),
            ("JSON_OBJECT('K1' VALUE 'V1', 'K2' VALUE 'V2')", '{"K1":"V1","K2":"V2"}'),
            ("JSON_OBJECT(KEY 'K1' VALUE CAST(NULL AS STRING) NULL ON NULL)", '{"K1":null}'),
            ("JSON_OBJECT(KEY 'K1' VALUE CAST(NULL AS STRING) ABSENT ON NULL)", "{}"),
            ("JSON_OBJECT(KEY 'K1' VALUE JSON_OBJECT(KEY 'K2' VALUE 'V'))", '{"K1":{"K2":"V"}}'),
        ),
    ),
    _fn(
        "json_array",
        "JSON_ARRAY([value]* [{NULL | ABSENT} ON NULL])",
        "A JSON array of the values (ABSENT ON NULL by default).",
        implementation=json_array,
        inputs="s*+",
        arity=(1, None),
        strict=False,
        literal_arguments=(0,),
        result=lambda _: DataTypes.STRING(False),
        examples=(
            ("JSON_ARRAY()", "[]"),
            ("JSON_ARRAY(1, '2')", '[1,"2"]'),
            ("JSON_ARRAY(CAST(NULL AS STRING) NULL ON NULL)", "[null]"),
            ("JSON_ARRAY(CAST(NULL AS STRING) ABSENT ON NULL)", "[]"),
            ("JSON_ARRAY(JSON_ARRAY(1))", "[[1]]"),
        ),
    ),
]
