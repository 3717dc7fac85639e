"""Built-in aggregate functions with accumulators that accumulate and retract.

Invariant: an accumulator is a plain picklable value (a number, a list, a dict) kept in keyed
state; ``add`` and ``retract`` of the same value leave it as it was, so a group's result after
any changelog (``+I``/``+U`` add, ``-U``/``-D`` retract) equals the result over the rows that
remain — what Flink's retractable aggregates guarantee. NULL arguments are ignored, as SQL
ignores them (``COUNT(*)`` counts every row).

>>> from cairn.table.analysis import AggCall
>>> from cairn.table.types import DataTypes
>>> agg = accumulator_for(AggCall("max", 0, DataTypes.INT(), DataTypes.INT()))
>>> acc = agg.create()
>>> for v in (3, 7, 5):
...     acc = agg.add(acc, v)
>>> agg.result(agg.retract(acc, 7))
5
"""

from __future__ import annotations

import decimal
import math
from dataclasses import replace
from typing import Any

from cairn.common.types import Row
from cairn.table.analysis import AggCall

__all__ = ["Accumulator", "accumulator_for", "unfiltered"]


class Accumulator:
    """One aggregate function: ``create`` an accumulator, ``add``/``retract`` a value,
    read its ``result``. ``takes_row``: ``add``/``retract`` receive the whole input row."""

    takes_row = False

    def create(self) -> Any:
        raise NotImplementedError

    def add(self, acc: Any, value: Any) -> Any:
        raise NotImplementedError

    def retract(self, acc: Any, value: Any) -> Any:
        raise NotImplementedError

    def result(self, acc: Any) -> Any:
        raise NotImplementedError

    def merge(self, acc: Any, other: Any) -> Any:
        """``acc`` with ``other``'s values added (session windows merging)."""
        raise NotImplementedError

    # Python source doing the same, for generated code (``group_agg_code``): ``acc`` is an
    # assignable expression holding the accumulator, ``value`` the argument's expression,
    # ``this`` the name this object has in the generated code. By default, calls to it.

    def inline_create(self, this: str) -> str:
        return f"{this}.create()"

    def inline_add(self, acc: str, value: str, this: str) -> str:
        return f"{acc} = {this}.add({acc}, {value})"

    def inline_retract(self, acc: str, value: str, this: str) -> str:
        return f"{acc} = {this}.retract({acc}, {value})"

    def inline_result(self, acc: str, this: str) -> str:
        return f"{this}.result({acc})"

    def inline_merge(self, acc: str, other: str, this: str) -> str:
        """``acc`` with ``other`` merged into it (``other`` left as it was)."""
        return f"{acc} = {this}.merge({acc}, {other})"


class _CountStar(Accumulator):
    def create(self) -> int:
        return 0

    def inline_create(self, this: str) -> str:
        return "0"

    def inline_add(self, acc: str, value: str, this: str) -> str:
        return f"{acc} += 1"

    def inline_retract(self, acc: str, value: str, this: str) -> str:
        return f"{acc} -= 1"

    def inline_result(self, acc: str, this: str) -> str:
        return acc

    def inline_merge(self, acc: str, other: str, this: str) -> str:
        return f"{acc} += {other}"

    def add(self, acc: int, value: Any) -> int:
        return acc + 1

    def retract(self, acc: int, value: Any) -> int:
        return acc - 1

    def result(self, acc: int) -> int:
        return acc

    def merge(self, acc: int, other: int) -> int:
        return acc + other


class _Count(_CountStar):
    def add(self, acc: int, value: Any) -> int:
        return acc if value is None else acc + 1

    def retract(self, acc: int, value: Any) -> int:
        return acc if value is None else acc - 1

    def inline_add(self, acc: str, value: str, this: str) -> str:
        return f"if {value} is not None: {acc} += 1"

    def inline_retract(self, acc: str, value: str, this: str) -> str:
        return f"if {value} is not None: {acc} -= 1"


class _Sum(Accumulator):
    """``[sum, count of non-NULL values]``; ``SUM`` of no value is NULL, ``SUM0`` 0."""

    def __init__(self, zero_when_empty: bool, zero: Any) -> None:
        self.zero_when_empty = zero_when_empty
        self.zero = zero

    def create(self) -> list[Any]:
        return [self.zero, 0]

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        if value is not None:
            acc[0] += value
            acc[1] += 1
        return acc

    def retract(self, acc: list[Any], value: Any) -> list[Any]:
        if value is not None:
            acc[0] -= value
            acc[1] -= 1
        return acc

    def result(self, acc: list[Any]) -> Any:
        if acc[1] == 0:
            return self.zero if self.zero_when_empty else None
        return acc[0]

    def merge(self, acc: list[Any], other: list[Any]) -> list[Any]:
        acc[0] += other[0]
        acc[1] += other[1]
        return acc

    def _inlined(self) -> bool:
        """Inlined when the zero is a literal (an int or a float; a Decimal goes through the
        object) and the result is the plain sum (``AVG`` divides: through the object)."""
        return type(self) is _Sum and type(self.zero) in (int, float)

    def inline_create(self, this: str) -> str:
        return f"[{self.zero!r}, 0]" if self._inlined() else super().inline_create(this)

    def inline_add(self, acc: str, value: str, this: str) -> str:
        if not self._inlined():
            return super().inline_add(acc, value, this)
        return f"if {value} is not None: {acc}[0] += {value}; {acc}[1] += 1"

    def inline_retract(self, acc: str, value: str, this: str) -> str:
        if not self._inlined():
            return super().inline_retract(acc, value, this)
        return f"if {value} is not None: {acc}[0] -= {value}; {acc}[1] -= 1"

    def inline_result(self, acc: str, this: str) -> str:
        if not self._inlined():
            return super().inline_result(acc, this)
        empty = repr(self.zero) if self.zero_when_empty else "None"
        return f"({acc}[0] if {acc}[1] else {empty})"

    def inline_merge(self, acc: str, other: str, this: str) -> str:
        if not self._inlined():
            return super().inline_merge(acc, other, this)
        return f"{acc}[0] += {other}[0]; {acc}[1] += {other}[1]"


class _Avg(_Sum):
    """The mean, in the argument's type: integral arguments divide as Java does (truncated)."""

    def __init__(self, integral: bool, scale: int | None) -> None:
        super().__init__(False, 0)
        self.integral = integral
        self.scale = scale

    def result(self, acc: list[Any]) -> Any:
        total, n = acc
        if n == 0:
            return None
        if self.integral:
            q = abs(total) // n
            return q if total >= 0 else -q
        if self.scale is not None:
            return (decimal.Decimal(total) / n).quantize(decimal.Decimal(1).scaleb(-self.scale))
        return total / n


class _Extreme(Accumulator):
    """``MIN``/``MAX`` with retraction: a count per distinct value."""

    def __init__(self, pick: Any) -> None:
        self.pick = pick

    def create(self) -> dict[Any, int]:
        return {}

    def add(self, acc: dict[Any, int], value: Any) -> dict[Any, int]:
        if value is not None:
            acc[value] = acc.get(value, 0) + 1
        return acc

    def retract(self, acc: dict[Any, int], value: Any) -> dict[Any, int]:
        if value is not None and value in acc:
            left = acc[value] - 1
            if left:
                acc[value] = left
            else:
                del acc[value]
        return acc

    def result(self, acc: dict[Any, int]) -> Any:
        return self.pick(acc) if acc else None

    def merge(self, acc: dict[Any, int], other: dict[Any, int]) -> dict[Any, int]:
        for value, n in other.items():
            acc[value] = acc.get(value, 0) + n
        return acc


class _CountDistinct(_Extreme):
    def __init__(self) -> None:
        super().__init__(len)

    def result(self, acc: dict[Any, int]) -> Any:
        return len(acc)


class _Deviation(Accumulator):
    """``VAR_POP``/``VAR_SAMP``/``STDDEV_POP``/``STDDEV_SAMP``: ``[sum, sum of squares,
    count]``, the result as Flink computes it after Calcite's rewrite,
    ``(SUM(x*x) - SUM(x)*SUM(x)/COUNT(x)) / (COUNT(x) [- 1])`` (its square root for
    ``STDDEV_*``) in the argument's type: integral arguments divide as Java does (truncated),
    the result cast back to it; ``*_SAMP`` of one value is NULL."""

    def __init__(self, sample: bool, root: bool, kind: str, scale: int | None) -> None:
        self.sample = sample
        self.root = root
        self.kind = kind  # "int", "decimal" or "float"
        self.scale = scale

    def create(self) -> list[Any]:
        zero: Any = decimal.Decimal(0) if self.kind == "decimal" else 0
        return [zero, zero, 0]

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        if value is not None:
            acc[0] += value
            acc[1] += value * value
            acc[2] += 1
        return acc

    def retract(self, acc: list[Any], value: Any) -> list[Any]:
        if value is not None:
            acc[0] -= value
            acc[1] -= value * value
            acc[2] -= 1
        return acc

    def merge(self, acc: list[Any], other: list[Any]) -> list[Any]:
        return [a + b for a, b in zip(acc, other, strict=True)]

    def _divide(self, a: Any, b: int) -> Any:
        if self.kind == "int":
            q = abs(a) // b
            return q if a >= 0 else -q
        return a / b

    def result(self, acc: list[Any]) -> Any:
        total, squares, n = acc
        denominator = n - 1 if self.sample else n
        if n == 0 or denominator == 0:
            return None
        variance = self._divide(squares - self._divide(total * total, n), denominator)
        value: Any = math.sqrt(max(variance, 0)) if self.root else variance
        if self.kind == "int":
            return int(value)
        if self.kind == "decimal":
            quantum = decimal.Decimal(1).scaleb(-(self.scale or 0))
            return decimal.Decimal(value).quantize(quantum)
        return float(value)


class _Ordered(Accumulator):
    """``FIRST_VALUE``/``LAST_VALUE``/``LISTAGG`` with retraction: the non-NULL values in
    arrival order; a retraction removes the earliest equal value (Flink's
    ``*WithRetractAggFunction`` keep the same multiset, by arrival order)."""

    def __init__(self, pick: str, separator: str = ",") -> None:
        self.pick = pick  # "first", "last" or "join"
        self.separator = separator

    def create(self) -> list[Any]:
        return []

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        if value is not None:
            acc.append(value)
        return acc

    def retract(self, acc: list[Any], value: Any) -> list[Any]:
        if value is not None and value in acc:
            acc.remove(value)
        return acc

    def merge(self, acc: list[Any], other: list[Any]) -> list[Any]:
        return acc + other

    def result(self, acc: list[Any]) -> Any:
        if not acc:
            return None
        if self.pick == "first":
            return acc[0]
        if self.pick == "last":
            return acc[-1]
        return self.separator.join(acc)


class _Distinct(Accumulator):
    """``AGG(DISTINCT a)``: ``[inner accumulator, {value: count}]``; a value reaches the
    inner aggregate when its count becomes 1 and leaves it when its count returns to 0 (the
    distinct-value counts Flink's ``DistinctAggCodeGen`` keeps)."""

    def __init__(self, inner: Accumulator) -> None:
        self.inner = inner

    def create(self) -> list[Any]:
        return [self.inner.create(), {}]

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        if value is not None:
            seen = acc[1]
            n = seen.get(value, 0)
            seen[value] = n + 1
            if n == 0:
                acc[0] = self.inner.add(acc[0], value)
        return acc

    def retract(self, acc: list[Any], value: Any) -> list[Any]:
        seen = acc[1]
        if value is not None and value in seen:
            left = seen[value] - 1
            if left:
                seen[value] = left
            else:
                del seen[value]
                acc[0] = self.inner.retract(acc[0], value)
        return acc

    def merge(self, acc: list[Any], other: list[Any]) -> list[Any]:
        seen = acc[1]
        for value, n in other[1].items():
            if value not in seen:
                acc[0] = self.inner.add(acc[0], value)
            seen[value] = seen.get(value, 0) + n
        return acc

    def result(self, acc: list[Any]) -> Any:
        return self.inner.result(acc[0])


class _Filtered(Accumulator):
    """``AGG(a) FILTER (WHERE c)``: only rows whose column ``c`` is TRUE reach the inner
    aggregate (NULL and FALSE do not); it takes the row to read ``c``."""

    takes_row = True

    def __init__(self, inner: Accumulator, arg: int, filter_arg: int) -> None:
        self.inner = inner
        self.arg = arg
        self.filter_arg = filter_arg

    def _value(self, row: Any) -> Any:
        if self.inner.takes_row:
            return row
        return None if self.arg < 0 else row[self.arg]

    def create(self) -> Any:
        return self.inner.create()

    def add(self, acc: Any, row: Any) -> Any:
        if row[self.filter_arg] is True:
            return self.inner.add(acc, self._value(row))
        return acc

    def retract(self, acc: Any, row: Any) -> Any:
        if row[self.filter_arg] is True:
            return self.inner.retract(acc, self._value(row))
        return acc

    def merge(self, acc: Any, other: Any) -> Any:
        return self.inner.merge(acc, other)

    def result(self, acc: Any) -> Any:
        return self.inner.result(acc)


class _UserDefined(Accumulator):
    """A user's ``AggregateFunction``: its accumulator is mutated in place, as in PyFlink;
    ``add``/``retract`` receive the whole input row and pick the call's arguments."""

    takes_row = True

    def __init__(self, call: AggCall) -> None:
        self.function = call.wrapper.function
        self.args = call.args
        self.row_names = list(call.row_names)

    def create(self) -> Any:
        return self.function.create_accumulator()

    def _arguments(self, row: Any) -> tuple[Any, ...]:
        if self.row_names:  # row-based: the whole row, with its names
            named = Row(*row)
            named.set_field_names(self.row_names)
            return (named,)
        return tuple(row[i] for i in self.args)

    def add(self, acc: Any, row: Any) -> Any:
        self.function.accumulate(acc, *self._arguments(row))
        return acc

    def retract(self, acc: Any, row: Any) -> Any:
        self.function.retract(acc, *self._arguments(row))
        return acc

    def result(self, acc: Any) -> Any:
        return self.function.get_value(acc)

    def merge(self, acc: Any, other: Any) -> Any:
        self.function.merge(acc, [other])
        return acc


def unfiltered(call: AggCall) -> AggCall:
    """``call`` without its ``FILTER``: what its accumulator is once a row passes it."""
    return replace(call, filter_arg=-1) if call.filter_arg >= 0 else call


def accumulator_for(call: AggCall) -> Accumulator:
    """The accumulator of one aggregate call (its ``DISTINCT`` and ``FILTER`` included)."""
    if call.filter_arg >= 0:
        return _Filtered(accumulator_for(unfiltered(call)), call.arg, call.filter_arg)
    if call.distinct:
        return _Distinct(_plain_accumulator(call))
    return _plain_accumulator(call)


def _plain_accumulator(call: AggCall) -> Accumulator:
    fn = call.function
    if fn == "udaf":
        return _UserDefined(call)
    if fn == "count_star":
        return _CountStar()
    if fn == "count":
        return _Count()
    if fn in ("sum", "sum0"):
        is_decimal = call.data_type.root == "DECIMAL"
        is_float = call.data_type.root in ("FLOAT", "DOUBLE")
        zero: Any = decimal.Decimal(0) if is_decimal else 0.0 if is_float else 0
        return _Sum(fn == "sum0", zero)
    if fn == "avg":
        t = call.data_type
        integral = t.root in ("TINYINT", "SMALLINT", "INT", "BIGINT")
        return _Avg(integral, t.params[1] if t.root == "DECIMAL" else None)
    if fn == "min":
        return _Extreme(min)
    if fn == "max":
        return _Extreme(max)
    if fn == "count_distinct":
        return _CountDistinct()
    if fn in ("stddev_pop", "stddev_samp", "var_pop", "var_samp"):
        t = call.data_type
        kind = {"DECIMAL": "decimal", "FLOAT": "float", "DOUBLE": "float"}.get(t.root, "int")
        scale = t.params[1] if t.root == "DECIMAL" else None
        return _Deviation(fn.endswith("samp"), fn.startswith("stddev"), kind, scale)
    if fn in ("first_value", "last_value"):
        return _Ordered(fn.split("_")[0])
    if fn == "listagg":
        return _Ordered("join", call.extra_args[0] if call.extra_args else ",")
    raise ValueError(f"Unsupported aggregate function {fn}")
