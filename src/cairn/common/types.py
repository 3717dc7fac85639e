"""``Row`` and ``RowKind`` with PyFlink's names (``pyflink.common.types``).

Invariant: a ``Row`` is a mutable, picklable sequence of values with optional field names,
with PyFlink's semantics: named arguments make fields sorted by name; two rows are equal when
their kinds, values and field names (or both having none) are equal.

>>> r = Row(word="flink", count=2)
>>> r
Row(count=2, word='flink')
>>> r.word, r[1], r["count"]
('flink', 'flink', 2)
>>> r.as_dict()
{'count': 2, 'word': 'flink'}
>>> Row(1, "a"), Row(1, "a") == Row(f0=1, f1="a")
(<Row(1, 'a')>, False)
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["Row", "RowKind"]


class RowKind(enum.Enum):
    """The change a row describes in a changelog; printed in Flink's short form (``+I``)."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def short_string(self) -> str:
        return _SHORT[self]

    def __str__(self) -> str:
        return _SHORT[self]


_SHORT = {
    RowKind.INSERT: "+I",
    RowKind.UPDATE_BEFORE: "-U",
    RowKind.UPDATE_AFTER: "+U",
    RowKind.DELETE: "-D",
}


class Row:
    """A fixed-length row: ``Row(1, "a")`` or ``Row(id=1, name="a")`` (fields sorted by name).

    A row of names only works as a factory, as in PyFlink:

    >>> Person = Row("name", "age")
    >>> Person("Alice", 11)
    Row(name='Alice', age=11)
    """

    __slots__ = ("_fields", "_row_kind", "_values")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("Row accepts positional values or named values, not both")
        names = sorted(kwargs)
        self._fields: list[str] | None = names if kwargs else None
        self._values: list[Any] = [kwargs[n] for n in names] if kwargs else list(args)
        self._row_kind = RowKind.INSERT

    def __call__(self, *args: Any) -> Row:
        """Use a row of field names as a factory of rows with those names."""
        if len(args) != len(self._values):
            raise ValueError(f"expected {len(self._values)} values, got {len(args)}")
        row = Row(*args)
        row._fields = [str(v) for v in self._values]
        return row

    def as_dict(self, recursive: bool = False) -> dict[str, Any]:
        if self._fields is None:
            raise TypeError("Cannot convert a Row without field names into a dict")

        def conv(v: Any) -> Any:
            if recursive and isinstance(v, Row):
                return v.as_dict(True)
            if recursive and isinstance(v, list):
                return [conv(x) for x in v]
            if recursive and isinstance(v, dict):
                return {k: conv(x) for k, x in v.items()}
            return v

        return {k: conv(v) for k, v in zip(self._fields, self._values, strict=True)}

    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        self._row_kind = row_kind

    def set_field_names(self, field_names: Sequence[str]) -> None:
        if len(field_names) != len(self._values):
            raise ValueError(f"expected {len(self._values)} field names, got {len(field_names)}")
        self._fields = list(field_names)

    def get_field_names(self) -> list[str] | None:
        return list(self._fields) if self._fields is not None else None

    def _index(self, item: str) -> int:
        if self._fields is None or item not in self._fields:
            raise KeyError(item)
        return self._fields.index(item)

    def __getitem__(self, item: int | slice | str) -> Any:
        if isinstance(item, str):
            return self._values[self._index(item)]
        return self._values[item]

    def __setitem__(self, item: int | str, value: Any) -> None:
        index = self._index(item) if isinstance(item, str) else item
        self._values[index] = value

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_"):
            raise AttributeError(item)
        try:
            return self._values[self._index(item)]
        except KeyError:
            raise AttributeError(item) from None

    def __setattr__(self, key: str, value: Any) -> None:
        if key in Row.__slots__:
            object.__setattr__(self, key, value)
            return
        try:
            self._values[self._index(key)] = value
        except KeyError:
            raise AttributeError(f"Row has no field {key!r}") from None

    def __getstate__(self) -> tuple[Any, ...]:
        return (self._fields, self._values, self._row_kind)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        object.__setattr__(self, "_fields", state[0])
        object.__setattr__(self, "_values", state[1])
        object.__setattr__(self, "_row_kind", state[2])

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, item: object) -> bool:
        return item in self._values

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row):
            return NotImplemented
        return (
            self._row_kind == other._row_kind
            and self._fields == other._fields
            and self._values == other._values
        )

    def __hash__(self) -> int:
        return hash((self._row_kind, tuple(self._values)))

    def __repr__(self) -> str:
        if self._fields is not None:
            body = ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values, strict=True))
            return f"Row({body})"
        return "<Row(" + ", ".join(repr(v) for v in self._values) + ")>"
