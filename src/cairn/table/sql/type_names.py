"""Flink SQL type names to ``DataTypes``: ``BIGINT``, ``DECIMAL(10, 2)``, ``ROW<a INT>``...

Invariant: pure; the text of one type (as written in ``CAST`` or a ``CREATE TABLE`` column)
becomes one ``DataType``, nullable unless ``NOT NULL`` follows it, or ``ValueError`` names the
part that is not a Flink type.

>>> str(parse_type("MAP<STRING, ARRAY<DECIMAL(10, 2) NOT NULL>>"))
'MAP<STRING, ARRAY<DECIMAL(10, 2) NOT NULL>>'
>>> str(parse_type("ROW<a INT, `b c` TIMESTAMP(3) WITH LOCAL TIME ZONE> NOT NULL"))
'ROW<`a` INT, `b c` TIMESTAMP_LTZ(3)> NOT NULL'
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cairn.table.types import DataType, DataTypes, RowField

__all__ = ["parse_type"]

_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z_0-9]*|\d+|[(),<>])")

_SIMPLE: dict[str, Callable[[bool], DataType]] = {
    "STRING": DataTypes.STRING,
    "BOOLEAN": DataTypes.BOOLEAN,
    "BYTES": DataTypes.BYTES,
    "TINYINT": DataTypes.TINYINT,
    "SMALLINT": DataTypes.SMALLINT,
    "INT": DataTypes.INT,
    "INTEGER": DataTypes.INT,
    "BIGINT": DataTypes.BIGINT,
    "FLOAT": DataTypes.FLOAT,
    "REAL": DataTypes.FLOAT,
    "DOUBLE": DataTypes.DOUBLE,
    "DATE": DataTypes.DATE,
}


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text.rstrip()):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"Not a Flink type: {text!r} (at {text[pos:].strip()!r})")
            self.tokens.append(m.group(1))
            pos = m.end()
        self.i = 0

    def peek(self) -> str:
        return self.tokens[self.i].upper() if self.i < len(self.tokens) else ""

    def take(self) -> str:
        if self.i >= len(self.tokens):
            raise ValueError(f"Not a Flink type: {self.text!r} (it ends too early)")
        self.i += 1
        return self.tokens[self.i - 1]

    def expect(self, token: str) -> None:
        got = self.take()
        if got.upper() != token:
            raise ValueError(f"Not a Flink type: {self.text!r} (expected {token!r}, got {got!r})")

    def accept(self, *words: str) -> bool:
        n = len(words)
        if [t.upper() for t in self.tokens[self.i : self.i + n]] == list(words):
            self.i += n
            return True
        return False

    def numbers(self) -> list[int]:
        if not self.accept("("):
            return []
        out = [int(self.take())]
        while self.accept(","):
            out.append(int(self.take()))
        self.expect(")")
        return out


def parse_type(text: str) -> DataType:
    """The ``DataType`` that Flink SQL's type text ``text`` names."""
    reader = _Reader(text)
    t = _type(reader)
    if reader.i != len(reader.tokens):
        raise ValueError(f"Not a Flink type: {text!r} (unexpected {reader.tokens[reader.i]!r})")
    return t


def _type(r: _Reader) -> DataType:
    t = _base(r)
    if r.accept("NOT", "NULL"):
        return t.not_null()
    r.accept("NULL")
    return t


def _base(r: _Reader) -> DataType:
    name = r.take().upper()
    if name in _SIMPLE:
        if name == "DOUBLE":
            r.accept("PRECISION")
        return _SIMPLE[name](True)
    if name in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        args = r.numbers() or [1 if name in ("CHAR", "BINARY") else 2147483647]
        if name == "VARCHAR" and args[0] == 2147483647:
            return DataTypes.STRING()
        if name == "VARBINARY" and args[0] == 2147483647:
            return DataTypes.BYTES()
        factory: Callable[[int], DataType] = getattr(DataTypes, name)
        return factory(args[0])
    if name in ("DECIMAL", "DEC", "NUMERIC"):
        args = r.numbers()
        precision = args[0] if args else 10
        return DataTypes.DECIMAL(precision, args[1] if len(args) > 1 else 0)
    if name == "TIME":
        args = r.numbers()
        r.accept("WITHOUT", "TIME", "ZONE")
        return DataTypes.TIME(args[0] if args else 0)
    if name in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        args = r.numbers()
        precision = args[0] if args else 6
        if name == "TIMESTAMP_LTZ" or r.accept("WITH", "LOCAL", "TIME", "ZONE"):
            return DataTypes.TIMESTAMP_LTZ(precision)
        r.accept("WITHOUT", "TIME", "ZONE")
        return DataTypes.TIMESTAMP(precision)
    if name in ("ARRAY", "MULTISET"):
        r.expect("<")
        element = _type(r)
        r.expect(">")
        return DataTypes.ARRAY(element) if name == "ARRAY" else DataTypes.MULTISET(element)
    if name == "MAP":
        r.expect("<")
        key = _type(r)
        r.expect(",")
        value = _type(r)
        r.expect(">")
        return DataTypes.MAP(key, value)
    if name == "ROW":
        close = ">" if r.accept("<") else ")"
        if close == ")":
            r.expect("(")
        fields: list[RowField] = []
        while not r.accept(close):
            if fields:
                r.expect(",")
            field = r.take()
            field_name = field[1:-1].replace("``", "`") if field.startswith("`") else field
            fields.append(DataTypes.FIELD(field_name, _type(r)))
        return DataTypes.ROW(fields)
    raise ValueError(f"Not a Flink type: {r.text!r} (unknown type {name!r})")
