"""Nexmark's user-defined functions in Python (nexmark-flink's ``udf`` package is Java).

Invariant: each function returns what nexmark-flink's Java function of the same name returns
for the same arguments; q14 registers ``CountChar`` with ``CREATE FUNCTION ... LANGUAGE
PYTHON``.

>>> count_char.function.eval("abcabc", "c"), count_char.function.eval(None, "c")
(2, 0)
"""

from __future__ import annotations

from cairn.table.types import DataTypes
from cairn.table.udf import udf

__all__ = ["CountChar", "count_char"]


def _count_char(s: str | None, character: str | None) -> int:
    """How often ``character``'s first character occurs in ``s`` (0 for a NULL ``s``)."""
    if s is None or not character:
        return 0
    return s.count(character[0])


count_char = udf(_count_char, result_type=DataTypes.BIGINT(False), name="count_char")


#: nexmark-flink's class name (``com.github.nexmark.flink.udf.CountChar``).
CountChar = count_char
