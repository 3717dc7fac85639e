"""User-defined functions with PyFlink's names (``pyflink.table.udf``): ``udf``, ``udtf``,
``udaf`` and the classes behind them.

Invariant: a user-defined function runs in the same Python process as the operator that calls
it — no JVM hop, no serialization per row; it is pickled with the job (cloudpickle) and
``open``-ed once per subtask with a ``FunctionContext`` (metric group, job parameters). Its
declared result type is what the planner types its column with; an exception it raises fails
the job with the function's name and the row's values, the user's frames first.

>>> from cairn.table.types import DataTypes
>>> @udf(result_type=DataTypes.BIGINT())
... def add_one(x):
...     return x + 1
>>> str(add_one(1))
'add_one(1)'
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cairn.table.expressions import Expression, as_expression
from cairn.table.types import DataType, RowType, as_data_type

__all__ = [
    "AggregateFunction",
    "AsyncScalarFunction",
    "FunctionContext",
    "PandasAggregateFunction",
    "ScalarFunction",
    "TableAggregateFunction",
    "TableFunction",
    "UserDefinedFunction",
    "UserDefinedFunctionWrapper",
    "is_pandas",
    "udaf",
    "udf",
    "udtaf",
    "udtf",
]


class FunctionContext:
    """What a function sees of its task in ``open`` (PyFlink's ``FunctionContext``)."""

    def __init__(self, runtime_context: Any) -> None:
        self._runtime_context = runtime_context

    def get_metric_group(self) -> Any:
        return self._runtime_context.get_metrics_group()

    def get_job_parameter(self, key: str, default_value: str) -> str:
        value: str = self._runtime_context.get_job_parameter(key, default_value)
        return value


class UserDefinedFunction:
    """Base of user-defined functions: ``open`` and ``close`` around a subtask's life."""

    def open(self, function_context: FunctionContext) -> None:
        pass

    def close(self) -> None:
        pass

    def is_deterministic(self) -> bool:
        return True


class ScalarFunction(UserDefinedFunction):
    """One value per row: implement ``eval(*args)``."""

    def eval(self, *args: Any) -> Any:
        raise NotImplementedError


class AsyncScalarFunction(UserDefinedFunction):
    """One value per row, computed by a coroutine: implement ``async def eval(*args)``. Rows
    of a query that calls one wait for their results on an event loop per subtask, many at a
    time, and leave in their input order (Flink's ``AsyncScalarFunction``)."""

    async def eval(self, *args: Any) -> Any:
        raise NotImplementedError


class TableFunction(UserDefinedFunction):
    """Zero or more rows per row: ``eval(*args)`` yields them."""

    def eval(self, *args: Any) -> Iterable[Any]:
        raise NotImplementedError


class AggregateFunction(UserDefinedFunction):
    """An aggregate: ``create_accumulator``, ``accumulate``, ``retract`` (for updating
    input), ``merge``, ``get_value``."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def accumulate(self, accumulator: Any, *args: Any) -> None:
        raise NotImplementedError

    def retract(self, accumulator: Any, *args: Any) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} has no retract(): it cannot aggregate an updating input"
        )

    def merge(self, accumulator: Any, accumulators: Iterable[Any]) -> None:
        raise NotImplementedError

    def get_value(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def get_result_type(self) -> DataType | None:
        return None

    def get_accumulator_type(self) -> DataType | None:
        return None


class PandasAggregateFunction(AggregateFunction):
    """A vectorized aggregate (``udaf(f, func_type='pandas')``): the group's values are kept
    (retracted values removed) and ``f`` gets them as one ``pandas.Series`` per argument."""

    def __init__(self, f: Callable[..., Any]) -> None:
        self.f = f

    def create_accumulator(self) -> list[tuple[Any, ...]]:
        return []

    def accumulate(self, accumulator: list[tuple[Any, ...]], *args: Any) -> None:
        accumulator.append(args)

    def retract(self, accumulator: list[tuple[Any, ...]], *args: Any) -> None:
        accumulator.remove(args)

    def merge(self, accumulator: list[tuple[Any, ...]], accumulators: Iterable[Any]) -> None:
        for other in accumulators:
            accumulator.extend(other)

    def get_value(self, accumulator: list[tuple[Any, ...]]) -> Any:
        import pandas as pd

        if not accumulator:
            return None
        columns = list(zip(*accumulator, strict=True))
        value = self.f(*(pd.Series(c) for c in columns))
        return value.item() if hasattr(value, "item") else value


class TableAggregateFunction(UserDefinedFunction):
    """An aggregate that emits rows: ``create_accumulator``, ``accumulate``, ``retract``
    (for updating input), ``emit_value`` yielding the rows of the current result."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def accumulate(self, accumulator: Any, *args: Any) -> None:
        raise NotImplementedError

    def retract(self, accumulator: Any, *args: Any) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} has no retract(): it cannot aggregate an updating input"
        )

    def emit_value(self, accumulator: Any) -> Iterable[Any]:
        raise NotImplementedError

    def get_result_type(self) -> DataType | None:
        return None

    def get_accumulator_type(self) -> DataType | None:
        return None


class _FunctionAdapter(ScalarFunction):
    def __init__(self, f: Callable[..., Any]) -> None:
        self.f = f

    def eval(self, *args: Any) -> Any:
        return self.f(*args)


class _AsyncFunctionAdapter(AsyncScalarFunction):
    def __init__(self, f: Callable[..., Any]) -> None:
        self.f = f

    async def eval(self, *args: Any) -> Any:
        return await self.f(*args)


def direct_callable(wrapper: Any) -> Callable[..., Any]:
    """What a scalar function's ``eval`` calls, without the adapter: the user's Python
    function given to ``udf``, else the ``ScalarFunction``'s bound ``eval``."""
    function = wrapper.function
    if type(function) is _FunctionAdapter:
        return function.f
    eval_: Callable[..., Any] = function.eval
    return eval_


def is_async(wrapper: Any) -> bool:
    """A scalar function whose ``eval`` is a coroutine function."""
    return isinstance(wrapper.function, AsyncScalarFunction)


def is_pandas(wrapper: Any) -> bool:
    """A vectorized scalar function (``udf(..., func_type='pandas')``): called with a
    ``pandas.Series`` per argument, a batch of rows at a time (``cairn.table.vectorized_calc``)."""
    return wrapper.kind == "scalar" and getattr(wrapper, "func_type", "general") == "pandas"


class _TableFunctionAdapter(TableFunction):
    def __init__(self, f: Callable[..., Any]) -> None:
        self.f = f

    def eval(self, *args: Any) -> Iterable[Any]:
        result: Iterable[Any] = self.f(*args)
        return result


class UserDefinedFunctionWrapper:
    """What ``udf``/``udtf``/``udaf`` return: call it with expressions to use it in a query.

    ``kind`` is ``scalar``, ``table`` or ``aggregate``; ``result_type`` the declared type (a
    table function's is a ``ROW`` of its ``result_types``); ``func_type`` ``pandas`` for a
    vectorized scalar function (``is_pandas``).
    """

    def __init__(
        self,
        function: UserDefinedFunction,
        kind: str,
        result_type: DataType,
        name: str,
        input_types: Sequence[DataType] | None = None,
        aliases: tuple[str, ...] = (),
        func_type: str = "general",
    ) -> None:
        self.function = function
        self.kind = kind
        self.result_type = result_type
        self.name = name
        self.input_types = None if input_types is None else list(input_types)
        self.aliases = aliases
        self.func_type = func_type

    def __call__(self, *args: Any) -> Expression:
        return Expression("call", "udf", tuple(as_expression(a) for a in args), value=self)

    def alias(self, *names: str) -> UserDefinedFunctionWrapper:
        """Name a table function's result columns (``join_lateral(split.alias('word'))``)."""
        return UserDefinedFunctionWrapper(
            self.function,
            self.kind,
            self.result_type,
            self.name,
            self.input_types,
            names,
            self.func_type,
        )

    def __repr__(self) -> str:
        return f"{self.kind} function {self.name}"


def _name_of(f: Any, name: str | None) -> str:
    if name:
        return name
    return str(getattr(f, "__name__", None) or type(f).__name__)


def _with_decorator(make: Callable[[Any], UserDefinedFunctionWrapper], f: Any) -> Any:
    if f is None:
        return make
    return make(f)


def udf(
    f: Callable[..., Any] | ScalarFunction | None = None,
    input_types: Sequence[DataType | str] | DataType | str | None = None,
    result_type: DataType | str | None = None,
    deterministic: bool | None = None,
    name: str | None = None,
    func_type: str = "general",
    udf_type: str | None = None,
) -> Any:
    """A scalar function from a Python function or a ``ScalarFunction``: as a decorator
    (``@udf(result_type=DataTypes.BIGINT())``) or a call (``udf(f, result_type=...)``).

    With ``func_type='pandas'`` (PyFlink's vectorized functions; ``udf_type`` is its old
    name) the function gets one ``pandas.Series`` per argument (a ``pandas.DataFrame`` for a
    ``ROW`` argument), up to ``python.fn-execution.arrow.batch.size`` rows at a time, and
    returns a ``pandas.Series`` of the same length:

    >>> from cairn.table.types import DataTypes
    >>> @udf(result_type=DataTypes.BIGINT(), func_type="pandas")
    ... def add(i, j):
    ...     return i + j
    >>> str(add(1, 2)), add.func_type
    ('add(1, 2)', 'pandas')
    """
    kind = func_type if udf_type is None else udf_type
    if kind not in ("general", "pandas"):
        raise ValueError(f"func_type is 'general' or 'pandas', got {kind!r}")

    def make(fn: Any) -> UserDefinedFunctionWrapper:
        if result_type is None:
            raise ValueError(f"udf {_name_of(fn, name)}: give result_type")
        function: UserDefinedFunction
        if isinstance(fn, ScalarFunction | AsyncScalarFunction):
            function = fn
        elif inspect.iscoroutinefunction(fn):
            function = _AsyncFunctionAdapter(fn)
        else:
            function = _FunctionAdapter(fn)
        if kind == "pandas" and isinstance(function, AsyncScalarFunction):
            raise ValueError(f"udf {_name_of(fn, name)}: a pandas function cannot be async")
        return UserDefinedFunctionWrapper(
            function,
            "scalar",
            as_data_type(result_type),
            _name_of(fn, name),
            _inputs(input_types),
            func_type=kind,
        )

    return _with_decorator(make, f)


def udtf(
    f: Callable[..., Any] | TableFunction | None = None,
    input_types: Sequence[DataType | str] | DataType | str | None = None,
    result_types: Sequence[DataType | str] | DataType | str | None = None,
    deterministic: bool | None = None,
    name: str | None = None,
) -> Any:
    """A table function (zero or more rows per row): its ``result_types`` are its columns."""
    from cairn.table.types import DataTypes

    def make(fn: Any) -> UserDefinedFunctionWrapper:
        if result_types is None:
            raise ValueError(f"udtf {_name_of(fn, name)}: give result_types")
        given = [result_types] if isinstance(result_types, DataType | str) else result_types
        types = [as_data_type(t) for t in given]
        if len(types) == 1 and isinstance(types[0], RowType):
            row = types[0]
        else:
            row = DataTypes.ROW([DataTypes.FIELD(f"f{i}", t) for i, t in enumerate(types)])
        function = fn if isinstance(fn, TableFunction) else _TableFunctionAdapter(fn)
        return UserDefinedFunctionWrapper(
            function, "table", row, _name_of(fn, name), _inputs(input_types)
        )

    return _with_decorator(make, f)


def udaf(
    f: AggregateFunction | None = None,
    input_types: Sequence[DataType | str] | DataType | str | None = None,
    result_type: DataType | str | None = None,
    accumulator_type: DataType | str | None = None,
    deterministic: bool | None = None,
    name: str | None = None,
    func_type: str = "general",
) -> Any:
    """An aggregate function from an ``AggregateFunction``, or with ``func_type='pandas'``
    from a function of the group's values as ``pandas.Series`` (one per argument)."""
    if func_type not in ("general", "pandas"):
        raise ValueError(f"func_type is 'general' or 'pandas', got {func_type!r}")

    def make(fn: Any) -> UserDefinedFunctionWrapper:
        if func_type == "pandas":
            if result_type is None:
                raise ValueError(f"udaf {_name_of(fn, name)}: give result_type")
            return UserDefinedFunctionWrapper(
                PandasAggregateFunction(fn),
                "aggregate",
                as_data_type(result_type),
                _name_of(fn, name),
                _inputs(input_types),
            )
        if not isinstance(fn, AggregateFunction):
            raise TypeError(f"udaf takes an AggregateFunction, got {type(fn).__name__}")
        declared = result_type or fn.get_result_type()
        if declared is None:
            raise ValueError(f"udaf {_name_of(fn, name)}: give result_type")
        return UserDefinedFunctionWrapper(
            fn, "aggregate", as_data_type(declared), _name_of(fn, name), _inputs(input_types)
        )

    return _with_decorator(make, f)


def _inputs(input_types: Sequence[DataType | str] | DataType | str | None) -> list[DataType] | None:
    if input_types is None:
        return None
    given = [input_types] if isinstance(input_types, DataType | str) else input_types
    return [as_data_type(t) for t in given]


def udtaf(
    f: TableAggregateFunction | None = None,
    input_types: Sequence[DataType | str] | DataType | str | None = None,
    result_type: DataType | str | None = None,
    accumulator_type: DataType | str | None = None,
    deterministic: bool | None = None,
    name: str | None = None,
    func_type: str = "general",
) -> Any:
    """A table aggregate function (``flat_aggregate``) from a ``TableAggregateFunction``."""
    if func_type != "general":
        raise NotImplementedError("pandas table aggregate functions are not built yet")

    def make(fn: Any) -> UserDefinedFunctionWrapper:
        if not isinstance(fn, TableAggregateFunction):
            raise TypeError(f"udtaf takes a TableAggregateFunction, got {type(fn).__name__}")
        declared = result_type or fn.get_result_type()
        if declared is None:
            raise ValueError(f"udtaf {_name_of(fn, name)}: give result_type")
        row = as_data_type(declared)
        if not isinstance(row, RowType):
            from cairn.table.types import DataTypes

            row = DataTypes.ROW([DataTypes.FIELD("f0", row)])
        return UserDefinedFunctionWrapper(
            fn, "table_aggregate", row, _name_of(fn, name), _inputs(input_types)
        )

    return _with_decorator(make, f)
