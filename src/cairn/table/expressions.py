"""The Table API's expression DSL with PyFlink's names (``pyflink.table.expressions``).

Invariant: an ``Expression`` is an immutable, unresolved tree — a field reference, a literal,
a call of a named function over expressions, an alias or a cast. It knows no schema and runs
nothing; the analyzer (``cairn.table.analysis``) resolves it against a table's schema, and the
code generator compiles it once per operator. Operators and properties build calls with the
SQL function names of Flink's built-in function catalog (``plus``, ``equals``, ``sum``...).

>>> str(col("price") * 2 + lit(1))
'plus(times(price, 2), 1)'
>>> str(col("id").count.alias("n"))
'as(count(id), n)'
>>> str(col("a").cast(DataTypes.BIGINT()))
'cast(a, BIGINT)'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cairn.table.functions import registry
from cairn.table.types import DataType, DataTypes

__all__ = [
    "AGGREGATES",
    "AGGREGATE_MODIFIERS",
    "CURRENT_RANGE",
    "CURRENT_ROW",
    "UNBOUNDED_RANGE",
    "UNBOUNDED_ROW",
    "Expression",
    "and_",
    "as_expression",
    "call",
    "coalesce",
    "col",
    "concat",
    "if_then_else",
    "lit",
    "not_",
    "or_",
    "row_interval",
]

#: Aggregate functions by name: what ``GROUP BY`` / ``group_by`` may compute.
AGGREGATES = frozenset(
    {
        "count",
        "count_star",
        "count_distinct",
        "sum",
        "sum0",
        "avg",
        "min",
        "max",
        "stddev_pop",
        "stddev_samp",
        "var_pop",
        "var_samp",
        "first_value",
        "last_value",
        "listagg",
    }
)

#: Calls that modify the aggregate call they wrap: ``distinct(sum(a))`` is ``SUM(DISTINCT a)``,
#: ``agg_filter(count(a), c)`` is ``COUNT(a) FILTER (WHERE c)``.
AGGREGATE_MODIFIERS = frozenset({"distinct", "agg_filter"})

_MILLIS = {"milli": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


@dataclass(frozen=True, eq=False)
class Expression:
    """A node of an unresolved expression tree.

    ``kind`` is ``field``, ``literal``, ``call``, ``alias``, ``cast`` or ``star``; a call names
    its function in ``name`` and its operands in ``args``.
    """

    kind: str
    name: str = ""
    args: tuple[Expression, ...] = ()
    value: Any = None
    data_type: DataType | None = None
    names: tuple[str, ...] = ()

    # -- printing ----------------------------------------------------------------------------

    def __str__(self) -> str:
        if self.kind == "field":
            return self.name
        if self.kind == "star":
            return "*"
        if self.kind == "literal":
            return repr(self.value) if isinstance(self.value, str) else str(self.value)
        if self.kind == "alias":
            return f"as({self.args[0]}, {', '.join(self.names)})"
        if self.kind == "cast":
            fn = "try_cast" if self.name == "try" else "cast"
            return f"{fn}({self.args[0]}, {self.data_type})"
        name = self.value.name if self.name == "udf" else self.name
        return f"{name}({', '.join(str(a) for a in self.args)})"

    def __repr__(self) -> str:
        return str(self)

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        raise TypeError(
            "An expression has no truth value: use & | ~ instead of and, or, not"
            " (and parenthesize comparisons: (col('a') > 1) & (col('b') < 2))"
        )

    # -- arithmetic and comparison -----------------------------------------------------------

    def _call(self, name: str, *others: Any) -> Expression:
        return Expression("call", name, (self, *(as_expression(o) for o in others)))

    def __add__(self, o: Any) -> Expression:
        return self._call("plus", o)

    def __radd__(self, o: Any) -> Expression:
        return as_expression(o)._call("plus", self)

    def __sub__(self, o: Any) -> Expression:
        return self._call("minus", o)

    def __rsub__(self, o: Any) -> Expression:
        return as_expression(o)._call("minus", self)

    def __mul__(self, o: Any) -> Expression:
        return self._call("times", o)

    def __rmul__(self, o: Any) -> Expression:
        return as_expression(o)._call("times", self)

    def __truediv__(self, o: Any) -> Expression:
        return self._call("divide", o)

    def __rtruediv__(self, o: Any) -> Expression:
        return as_expression(o)._call("divide", self)

    def __mod__(self, o: Any) -> Expression:
        return self._call("mod", o)

    def __pow__(self, o: Any) -> Expression:
        return self._call("power", o)

    def __neg__(self) -> Expression:
        return self._call("minus_prefix")

    def __eq__(self, o: Any) -> Expression:  # type: ignore[override]
        return self._call("equals", o)

    def __ne__(self, o: Any) -> Expression:  # type: ignore[override]
        return self._call("not_equals", o)

    def __lt__(self, o: Any) -> Expression:
        return self._call("less_than", o)

    def __le__(self, o: Any) -> Expression:
        return self._call("less_than_or_equal", o)

    def __gt__(self, o: Any) -> Expression:
        return self._call("greater_than", o)

    def __ge__(self, o: Any) -> Expression:
        return self._call("greater_than_or_equal", o)

    def __and__(self, o: Any) -> Expression:
        return self._call("and", o)

    def __rand__(self, o: Any) -> Expression:
        return as_expression(o)._call("and", self)

    def __or__(self, o: Any) -> Expression:
        return self._call("or", o)

    def __ror__(self, o: Any) -> Expression:
        return as_expression(o)._call("or", self)

    def __invert__(self) -> Expression:
        return self._call("not")

    # -- naming and types --------------------------------------------------------------------

    def alias(self, name: str, *extra_names: str) -> Expression:
        """Name the result column(s): ``col('a').alias('b')``."""
        return Expression("alias", args=(self,), names=(name, *extra_names))

    def cast(self, data_type: DataType) -> Expression:
        """``CAST(expr AS type)``: a value that does not convert fails the job, naming it."""
        return Expression("cast", "cast", (self,), data_type=data_type)

    def try_cast(self, data_type: DataType) -> Expression:
        """``TRY_CAST``: a value that does not convert becomes NULL."""
        return Expression("cast", "try", (self,), data_type=data_type)

    # -- aggregates (properties, as in PyFlink) ----------------------------------------------

    @property
    def count(self) -> Expression:
        return self._call("count")

    @property
    def sum(self) -> Expression:
        return self._call("sum")

    @property
    def sum0(self) -> Expression:
        return self._call("sum0")

    @property
    def min(self) -> Expression:
        return self._call("min")

    @property
    def max(self) -> Expression:
        return self._call("max")

    @property
    def avg(self) -> Expression:
        return self._call("avg")

    @property
    def stddev_pop(self) -> Expression:
        return self._call("stddev_pop")

    @property
    def stddev_samp(self) -> Expression:
        return self._call("stddev_samp")

    @property
    def var_pop(self) -> Expression:
        return self._call("var_pop")

    @property
    def var_samp(self) -> Expression:
        return self._call("var_samp")

    @property
    def first_value(self) -> Expression:
        return self._call("first_value")

    @property
    def last_value(self) -> Expression:
        return self._call("last_value")

    def list_agg(self, separator: str = ",") -> Expression:
        """``LISTAGG(a, separator)``: the non-NULL values joined, in arrival order."""
        return self._call("listagg", separator)

    @property
    def distinct(self) -> Expression:
        """The aggregate over each distinct value once, as SQL's ``DISTINCT`` in a call:
        ``col('b').sum.distinct`` is ``SUM(DISTINCT b)`` (as PyFlink's ``distinct``)."""
        return self._call("distinct")

    @property
    def count_distinct(self) -> Expression:
        return self._call("count_distinct")

    # -- predicates and scalar functions -----------------------------------------------------

    @property
    def is_null(self) -> Expression:
        return self._call("is_null")

    @property
    def is_not_null(self) -> Expression:
        return self._call("is_not_null")

    @property
    def is_true(self) -> Expression:
        return self._call("is_true")

    @property
    def is_false(self) -> Expression:
        return self._call("is_false")

    def in_(self, *values: Any) -> Expression:
        return self._call("in", *values)

    def between(self, lower: Any, upper: Any) -> Expression:
        return self._call("between", lower, upper)

    def not_between(self, lower: Any, upper: Any) -> Expression:
        return self._call("not_between", lower, upper)

    def if_then_else(self, if_true: Any, if_false: Any) -> Expression:
        return self._call("if", if_true, if_false)

    def like(self, pattern: Any) -> Expression:
        return self._call("like", pattern)

    @property
    def upper_case(self) -> Expression:
        return self._call("upper")

    @property
    def lower_case(self) -> Expression:
        return self._call("lower")

    @property
    def char_length(self) -> Expression:
        return self._call("char_length")

    @property
    def trim(self) -> Expression:
        return self._call("trim")

    def substring(self, begin_index: Any, length: Any = None) -> Expression:
        if length is None:
            return self._call("substring", begin_index)
        return self._call("substring", begin_index, length)

    @property
    def abs(self) -> Expression:
        return self._call("abs")

    @property
    def floor(self) -> Expression:
        return self._call("floor")

    @property
    def ceil(self) -> Expression:
        return self._call("ceil")

    def round(self, places: Any = 0) -> Expression:
        return self._call("round", places)

    def json_value(self, path: str, returning_type: DataType | None = None) -> Expression:
        """``JSON_VALUE(expr, path)``: the scalar at a JSON path, as ``returning_type``
        (``STRING`` by default); NULL when the path is missing or the text is not JSON."""
        call = self._call("json_value", path)
        return call.cast(returning_type) if returning_type is not None else call

    def get(self, name_or_index: str | int) -> Expression:
        """A field of a ``ROW`` value, by name or 0-based position (PyFlink's ``get``; SQL's
        ``person.id``); NULL when the row is NULL."""
        return self._call("get", name_or_index)

    # -- the other built-in functions, by PyFlink's method names -----------------------------

    def __getattr__(self, name: str) -> Any:
        """A built-in function by PyFlink's ``Expression`` method name (``regexp_extract``,
        ``split_index``, ``md5``...), as the registry (``cairn.table.functions``) lists it:
        a property for a function of the expression alone, else a method.

        >>> print(col("url").split_index("/", 3), col("s").md5)
        split_index(url, '/', 3) md5(s)
        """
        if name.startswith("_"):
            raise AttributeError(name)
        builtin = registry.by_method(name)
        if builtin is None:
            raise AttributeError(f"'Expression' object has no attribute '{name}'")
        if builtin.method_is_property:
            return self._call(builtin.name)
        return lambda *args: self._call(builtin.name, *args)

    # -- time intervals: lit(5).seconds ------------------------------------------------------

    def _interval(self, unit: str) -> Expression:
        if self.kind != "literal" or not isinstance(self.value, int):
            raise ValueError(f"An interval needs an integer literal, got {self}")
        return Expression(
            "literal",
            value=self.value * _MILLIS[unit],
            data_type=DataTypes.INTERVAL(DataTypes.SECOND()),
        )

    @property
    def milli(self) -> Expression:
        return self._interval("milli")

    millis = milli

    @property
    def second(self) -> Expression:
        return self._interval("second")

    seconds = second

    @property
    def minute(self) -> Expression:
        return self._interval("minute")

    minutes = minute

    @property
    def hour(self) -> Expression:
        return self._interval("hour")

    hours = hour

    @property
    def day(self) -> Expression:
        return self._interval("day")

    days = day

    def over(self, alias: Any) -> Expression:
        """An aggregate over an over window: ``col('price').max.over(col('w'))``."""
        return self._call("over", alias)

    # -- window properties: col('w').start ---------------------------------------------------

    @property
    def start(self) -> Expression:
        return self._call("window_start")

    @property
    def end(self) -> Expression:
        return self._call("window_end")

    @property
    def rowtime(self) -> Expression:
        return self._call("window_rowtime")

    @property
    def proctime(self) -> Expression:
        return self._call("window_proctime")


def as_expression(value: Any) -> Expression:
    """``value`` as an expression: an expression as it is, anything else a literal."""
    if isinstance(value, Expression):
        return value
    return lit(value)


def col(name: str) -> Expression:
    """A reference to a column by name."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"A column name must be a non-empty string, got {name!r}")
    if name == "*":
        return Expression("star")
    return Expression("field", name)


def lit(value: Any, data_type: DataType | None = None) -> Expression:
    """A literal value; its SQL type is inferred (``1`` is INT, ``1.5`` DOUBLE) or given."""
    return Expression("literal", value=value, data_type=data_type)


def call(f: str | Any, *args: Any) -> Expression:
    """A call of a built-in function by name, or of a user-defined function."""
    if isinstance(f, str):
        return Expression("call", f.lower(), tuple(as_expression(a) for a in args))
    return Expression("call", "udf", tuple(as_expression(a) for a in args), value=f)


def and_(first: Any, second: Any, *more: Any) -> Expression:
    result = as_expression(first) & as_expression(second)
    for m in more:
        result = result & as_expression(m)
    return result


def or_(first: Any, second: Any, *more: Any) -> Expression:
    result = as_expression(first) | as_expression(second)
    for m in more:
        result = result | as_expression(m)
    return result


def not_(expression: Any) -> Expression:
    return ~as_expression(expression)


def if_then_else(condition: Any, if_true: Any, if_false: Any) -> Expression:
    return as_expression(condition).if_then_else(if_true, if_false)


def concat(first: Any, *others: Any) -> Expression:
    return as_expression(first)._call("concat", *others)


def coalesce(first: Any, *others: Any) -> Expression:
    """The first argument that is not NULL (``COALESCE``)."""
    return as_expression(first)._call("coalesce", *others)


def row_interval(rows: int) -> Expression:
    """A count of rows, for over windows (``preceding(row_interval(2))``)."""
    return Expression("literal", value=rows, data_type=DataTypes.BIGINT(), names=("rows",))


def _bound(name: str) -> Expression:
    return Expression("literal", value=0, data_type=DataTypes.BIGINT(), names=(name,))


#: Over window bounds, as PyFlink's ``pyflink.table.expressions`` names them.
UNBOUNDED_ROW = _bound("unbounded_row")
UNBOUNDED_RANGE = _bound("unbounded_range")
CURRENT_ROW = _bound("current_row")
CURRENT_RANGE = _bound("current_range")


def expressions(items: Sequence[Any]) -> list[Expression]:
    """Strings name columns (``"a"``), as PyFlink's ``select("a")`` accepted before 1.14."""
    out: list[Expression] = []
    for item in items:
        out.append(col(item) if isinstance(item, str) else as_expression(item))
    return out
