"""Flink's built-in pattern matching: ``LIKE`` (with ``ESCAPE``), ``SIMILAR TO``,
``REGEXP``, ``REGEXP_EXTRACT`` and ``REGEXP_REPLACE``.

Invariant: each implementation is a pure function of non-NULL arguments (the registry's NULL
rule runs first); a pattern is compiled once per process and kept (patterns are nearly
always literals); Java regular expressions keep Java's meaning where it differs (``$1`` group
references in a replacement, ``\\p{Alpha}``), and an invalid pattern or a group index out of
range gives NULL, as Flink's does.

>>> regexp_extract("foothebar", "foo(.*?)(bar)", 2), like("h%", "h!%", "!")
('bar', True)
"""

from __future__ import annotations

import re
from typing import Any

from cairn.table.functions.definition import BuiltinFunction, always_nullable, returns
from cairn.table.types import DataTypes

__all__ = ["FUNCTIONS", "like", "regexp_extract"]

_PATTERNS: dict[str, re.Pattern[str] | None] = {}


def _regex(pattern: str) -> re.Pattern[str] | None:
    """A Java regular expression compiled for Python (``None``: invalid, Flink's NULL)."""
    compiled = _PATTERNS.get(pattern, False)
    if compiled is False:
        try:
            compiled = re.compile(pattern.replace("\\p{Alpha}", "[A-Za-z]"))
        except re.error:
            compiled = None
        _PATTERNS[pattern] = compiled
    return compiled  # type: ignore[return-value]


def regexp_replace(s: str, pattern: str, replacement: str) -> str | None:
    compiled = _regex(pattern)
    if compiled is None:
        return None
    python = re.sub(r"\$(\d+)", r"\\g<\1>", replacement.replace("\\", "\\\\"))
    return compiled.sub(python, s)


def regexp_extract(s: str, pattern: str, index: int = 0) -> str | None:
    compiled = _regex(pattern)
    if compiled is None or index < 0 or index > compiled.groups:
        return None
    found = compiled.search(s)
    return None if found is None else found.group(index)


def regexp(s: str, pattern: str) -> bool | None:
    compiled = _regex(pattern)
    return None if compiled is None else compiled.search(s) is not None


_LIKES: dict[tuple[str, str | None], re.Pattern[str]] = {}


def like(s: str, pattern: str, escape: str | None = None) -> bool:
    compiled = _LIKES.get((pattern, escape))
    if compiled is None:
        parts, i = [], 0
        while i < len(pattern):
            c = pattern[i]
            if escape is not None and c == escape and i + 1 < len(pattern):
                parts.append(re.escape(pattern[i + 1]))
                i += 2
                continue
            parts.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
            i += 1
        compiled = _LIKES[(pattern, escape)] = re.compile("".join(parts), re.S)
    return compiled.fullmatch(s) is not None


_SIMILARS: dict[str, re.Pattern[str]] = {}


def similar(s: str, pattern: str) -> bool:
    compiled = _SIMILARS.get(pattern)
    if compiled is None:
        regex = "".join(".*" if c == "%" else "." if c == "_" else c for c in pattern)
        compiled = _SIMILARS[pattern] = re.compile(regex, re.S)
    return compiled.fullmatch(s) is not None


def _fn(name: str, signature: str, description: str, **kwargs: Any) -> BuiltinFunction:
    sql = kwargs.pop("sql", (name.upper(),))
    result = kwargs.pop("result", returns(DataTypes.STRING))
    return BuiltinFunction(name, sql, signature, description, "string", result, **kwargs)


FUNCTIONS = [
    _fn(
        "regexp_replace",
        "REGEXP_REPLACE(string, regex, replacement)",
        "Every match of the Java regular expression replaced ($n names a group).",
        implementation=regexp_replace,
        inputs="sss",
        method="regexp_replace",
        result=always_nullable(DataTypes.STRING),
        examples=(
            ("REGEXP_REPLACE('foobar', 'oo|ar', '')", "fb"),
            ("REGEXP_REPLACE('ab12', '([a-z]+)([0-9]+)', '$2$1')", "12ab"),
        ),
    ),
    _fn(
        "regexp_extract",
        "REGEXP_EXTRACT(string, regex[, group])",
        "The group (0: the whole match) of the first match; NULL without a match.",
        implementation=regexp_extract,
        inputs="ssi",
        arity=(2, 3),
        method="regexp_extract",
        result=always_nullable(DataTypes.STRING),
        examples=(
            ("REGEXP_EXTRACT('foothebar', 'foo(.*?)(bar)', 2)", "bar"),
            ("REGEXP_EXTRACT('a=1&channel_id=7', '(&|^)channel_id=([^&]*)', 2)", "7"),
            ("REGEXP_EXTRACT('abc', 'x(.)', 1)", None),
        ),
    ),
    _fn(
        "regexp",
        "REGEXP(string, regex)",
        "TRUE when a substring matches the Java regular expression.",
        implementation=regexp,
        inputs="ss",
        method="regexp",
        result=returns(DataTypes.BOOLEAN),
        examples=(("REGEXP('abc1', '[0-9]')", True), ("REGEXP('abc', '^b')", False)),
    ),
    _fn(
        "like",
        "string1 [NOT] LIKE string2 [ESCAPE char]",
        "TRUE when string1 matches the pattern (% any characters, _ one).",
        sql=(),
        implementation=like,
        inputs="sss",
        arity=(2, 3),
        result=returns(DataTypes.BOOLEAN),
        examples=(
            ("'hello' LIKE 'h%o'", True),
            ("'h%' LIKE 'h!%' ESCAPE '!'", True),
            ("'hx' LIKE 'h!%' ESCAPE '!'", False),
            ("'abc' NOT LIKE 'a_c'", False),
        ),
    ),
    _fn(
        "similar",
        "string1 [NOT] SIMILAR TO string2",
        "TRUE when string1 matches the SQL regular expression.",
        sql=(),
        implementation=similar,
        inputs="ss",
        method="similar",
        result=returns(DataTypes.BOOLEAN),
        examples=(("'abc' SIMILAR TO 'a(b|x)%'", True), ("'abc' NOT SIMILAR TO 'a_'", True)),
    ),
]
