"""``AsyncDataStream``: async I/O on a stream (``pyflink.datastream.async_data_stream``).

Invariant: each call appends one ``async_wait`` operator whose options are one frozen
``AsyncWaitConfig`` (``cairn.api.async_wait``: mode, timeout, capacity, retry strategy),
checked here, before the job runs: ``async_invoke`` must be ``async def``, the capacity
positive, a retry strategy needs a timeout. What the operator guarantees (order, watermarks,
checkpoints) is in ``cairn.runtime.operators.async_wait``.

>>> import asyncio
>>> from cairn.common import Time, Types
>>> from cairn.datastream import StreamExecutionEnvironment
>>> from cairn.api.async_functions import AsyncFunction
>>> class Square(AsyncFunction):
...     async def async_invoke(self, value):
...         await asyncio.sleep(0.001 * (5 - value))   # later inputs answer sooner
...         return [value * value]
>>> env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
>>> _ = env.set_parallelism(1)
>>> ds = env.from_collection([1, 2, 3, 4])
>>> out = AsyncDataStream.ordered_wait(ds, Square(), Time.seconds(5), 2, Types.INT())
>>> with out.execute_and_collect() as results:
...     list(results)
[1, 4, 9, 16]
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from cairn.api.async_functions import AsyncFunction
from cairn.api.async_retry import NO_RETRY_STRATEGY, AsyncRetryStrategy
from cairn.api.async_wait import ASYNC_CONFIG, AsyncWaitConfig
from cairn.common.time import Duration, Time
from cairn.graph.transformations import OneInputTransformation, OperatorKind, OperatorSpec

if TYPE_CHECKING:
    from cairn.common.typeinfo import TypeInformation
    from cairn.datastream.data_stream import DataStream

__all__ = ["ASYNC_CONFIG", "AsyncDataStream", "AsyncWaitConfig"]

_NAME = "async wait operator"  # PyFlink's (and Flink's) operator name


class AsyncDataStream:
    """Applies an ``AsyncFunction`` to a stream, many inputs in flight at once."""

    @staticmethod
    def unordered_wait(
        data_stream: DataStream,
        async_function: AsyncFunction[Any, Any],
        timeout: Time | Duration | int,
        capacity: int = 100,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """Results in the order they complete; a watermark still waits for every input before
        it (records never cross a watermark). ``timeout``: a ``Time`` (or ms)."""
        return AsyncDataStream.unordered_wait_with_retry(
            data_stream, async_function, timeout, NO_RETRY_STRATEGY, capacity, output_type
        )

    @staticmethod
    def unordered_wait_with_retry(
        data_stream: DataStream,
        async_function: AsyncFunction[Any, Any],
        timeout: Time | Duration | int,
        async_retry_strategy: AsyncRetryStrategy[Any],
        capacity: int = 100,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """``unordered_wait`` that retries as ``async_retry_strategy`` says; ``timeout``
        bounds all attempts of an input together."""
        return _async_wait(
            data_stream, async_function, timeout, async_retry_strategy, capacity, output_type, False
        )

    @staticmethod
    def ordered_wait(
        data_stream: DataStream,
        async_function: AsyncFunction[Any, Any],
        timeout: Time | Duration | int,
        capacity: int = 100,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """Results in the order of their inputs."""
        return AsyncDataStream.ordered_wait_with_retry(
            data_stream, async_function, timeout, NO_RETRY_STRATEGY, capacity, output_type
        )

    @staticmethod
    def ordered_wait_with_retry(
        data_stream: DataStream,
        async_function: AsyncFunction[Any, Any],
        timeout: Time | Duration | int,
        async_retry_strategy: AsyncRetryStrategy[Any],
        capacity: int = 100,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """``ordered_wait`` that retries as ``async_retry_strategy`` says."""
        return _async_wait(
            data_stream, async_function, timeout, async_retry_strategy, capacity, output_type, True
        )


def _timeout_ms(timeout: Time | Duration | int) -> int:
    if isinstance(timeout, Time | Duration):
        return int(timeout.to_milliseconds())
    if isinstance(timeout, int) and not isinstance(timeout, bool):
        return timeout
    raise TypeError(f"timeout must be a Time (e.g. Time.seconds(10)) or ms, got {timeout!r}")


def _check(function: Any, timeout_ms: int, retry: AsyncRetryStrategy[Any], capacity: int) -> None:
    invoke = getattr(function, "async_invoke", None)
    if not inspect.iscoroutinefunction(invoke):
        raise TypeError(
            f"Method 'async_invoke' of class '{type(function).__name__}' should be declared as "
            "'async def'."
        )
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
        raise ValueError(f"capacity must be a positive int, got {capacity!r}")
    if timeout_ms < 0:
        raise ValueError(f"timeout must not be negative, got {timeout_ms} ms")
    if retry is None:
        raise ValueError("Async retry strategy should not be None.")
    if retry is not NO_RETRY_STRATEGY and timeout_ms <= 0:
        raise ValueError("Timeout should be configured when do async with retry.")
    if retry.get_retry_predicate() is None:
        raise ValueError(
            f"Retry predicate of the async retry strategy '{type(retry).__name__}' is None."
        )


def _async_wait(
    data_stream: DataStream,
    function: AsyncFunction[Any, Any],
    timeout: Time | Duration | int,
    retry: AsyncRetryStrategy[Any],
    capacity: int,
    output_type: TypeInformation | None,
    ordered: bool,
) -> DataStream:
    from cairn.datastream.data_stream import DataStream

    timeout_ms = _timeout_ms(timeout)
    _check(function, timeout_ms, retry, capacity)
    config = AsyncWaitConfig(ordered, timeout_ms, capacity, retry)
    t = OneInputTransformation(
        name=_NAME,
        inputs=[data_stream.get_transformation()],
        output_type=output_type,
        operator=OperatorSpec(OperatorKind.ASYNC_WAIT, function, options={ASYNC_CONFIG: config}),
    )
    return DataStream(t, data_stream.get_execution_environment())
