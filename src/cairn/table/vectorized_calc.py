"""The runtime of a ``PythonCalc``: pandas (vectorized) scalar functions, a batch at a time.

Invariant: one output record per input record, in order, keeping its kind and timestamp: the
input row followed by one value per call. A batch of records is cut into chunks of at most
``batch_size`` rows (``python.fn-execution.arrow.batch.size``, 10000 by default); each
function is called once per chunk with one ``pandas.Series`` per argument
(``pandas_series.to_series``) and must return a Series of the chunk's length, whose values are
checked against its declared result type (``pandas_series.from_series``). A wrong result
fails naming the function; an exception the function raises passes unchanged (the user's
frames innermost) with a note naming the function and the chunk's first arguments.

>>> from cairn.table.analysis import Rex
>>> from cairn.table.types import DataTypes
>>> from cairn.table.udf import udf
>>> seen = []
>>> def double(s):
...     seen.append(len(s))
...     return s * 2
>>> f = udf(double, result_type=DataTypes.BIGINT(), func_type="pandas")
>>> arg = Rex("input", DataTypes.BIGINT(), index=0)
>>> calc = PandasCalcFunction([Rex("call", DataTypes.BIGINT(), op="udf", operands=(arg,),
...     value=f)], batch_size=2)
>>> calc.flat_map_batch([(0, (1,)), (0, (None,)), (3, (5,))], None)
([(0, (1, 2)), (0, (None, None)), (3, (5, 10))], None)
>>> seen
[2, 1]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cairn.api.functions import FlatMapFunction
from cairn.common.configuration import Configuration
from cairn.common.exceptions import ConfigurationError
from cairn.table.analysis import Rex
from cairn.table.operators import open_functions
from cairn.table.pandas_series import from_series, to_series
from cairn.table.pandas_split import DEFAULT_BATCH_SIZE

__all__ = ["ARROW_BATCH_SIZE", "PandasCalcFunction", "arrow_batch_size"]

#: PyFlink's option bounding the rows a pandas function gets per call.
ARROW_BATCH_SIZE = "python.fn-execution.arrow.batch.size"


def arrow_batch_size(configuration: Configuration | None) -> int:
    """The ``python.fn-execution.arrow.batch.size`` of a table configuration (10000 unset).

    >>> arrow_batch_size(Configuration({"python.fn-execution.arrow.batch.size": "100"}))
    100
    """
    raw = None if configuration is None else configuration.get_string(ARROW_BATCH_SIZE, None)
    if raw is None:
        return DEFAULT_BATCH_SIZE
    text = str(raw).strip()
    if not text.isdigit() or int(text) < 1:
        raise ConfigurationError(f"{ARROW_BATCH_SIZE} must be a positive integer, got {raw!r}")
    return int(text)


class _Call:
    """One pandas function call: the function, its argument columns and types."""

    __slots__ = ("arg_types", "args", "result_type", "wrapper")

    def __init__(self, rex: Rex) -> None:
        self.wrapper = rex.value
        self.args = tuple(o.index for o in rex.operands)
        self.arg_types = tuple(o.data_type for o in rex.operands)
        self.result_type = rex.data_type


class PandasCalcFunction(FlatMapFunction):
    """The calls of a ``PythonCalc`` (pandas calls over input columns), appended to each row:
    whole batches through ``flat_map_batch``, a single record through ``flat_map``."""

    def __init__(self, calls: Sequence[Rex], batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.calls = [_Call(c) for c in calls]
        self.batch_size = batch_size

    def open(self, runtime_context: Any) -> None:
        open_functions([c.wrapper for c in self.calls], runtime_context)

    def close(self) -> None:
        for call in self.calls:
            call.wrapper.function.close()

    def flat_map(self, value: tuple[int, tuple[Any, ...]]) -> Iterable[Any]:
        out, _ = self.flat_map_batch([value], None)
        return out

    def flat_map_batch(
        self, records: list[Any], stamps: list[int | None] | None
    ) -> tuple[list[Any], list[int | None] | None]:
        """Each record with the calls' results appended; the timestamps unchanged (one
        output per input)."""
        if not records:
            return [], stamps
        rows = [r for _, r in records]
        columns = [self._column(call, rows) for call in self.calls]
        out = [
            (record[0], record[1] + tail)
            for record, tail in zip(records, zip(*columns, strict=True), strict=True)
        ]
        return out, stamps

    def _column(self, call: _Call, rows: list[tuple[Any, ...]]) -> list[Any]:
        values: list[Any] = []
        size = self.batch_size
        for start in range(0, len(rows), size):
            chunk = rows[start : start + size]
            values.extend(_call(call, chunk))
        return values


def _call(call: _Call, chunk: list[tuple[Any, ...]]) -> list[Any]:
    """``call`` over the rows of ``chunk``: its result's values, checked."""
    import pandas as pd

    wrapper = call.wrapper
    series = [
        to_series([row[i] for row in chunk], t)
        for i, t in zip(call.args, call.arg_types, strict=True)
    ]
    try:
        result = wrapper.function.eval(*series)
    except Exception as e:
        if hasattr(e, "add_note"):  # Python 3.11+
            first = tuple(chunk[0][i] for i in call.args)
            e.add_note(
                f"in pandas user-defined function {wrapper.name} over {len(chunk)} rows,"
                f" the first with arguments {first!r}"
            )
        raise
    if isinstance(result, pd.Series | pd.DataFrame) and len(result) != len(chunk):
        raise ValueError(
            f"The result length {len(result)} of pandas function {wrapper.name} is not equal"
            f" to the input length {len(chunk)}"
        )
    return from_series(result, call.result_type, wrapper.name)
