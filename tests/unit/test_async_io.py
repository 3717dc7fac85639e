"""Async I/O (``AsyncDataStream``) on the in-process executor: ordered and unordered output,
the capacity, timeouts, retries, watermarks as barriers, errors, and in-flight inputs
restored from a checkpoint after a crash."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from cairn.common import Configuration, Duration, Time, Types, WatermarkStrategy
from cairn.common.exceptions import JobExecutionException
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.serialization import Encoder
from cairn.common.watermark_strategy import TimestampAssigner
from cairn.datastream import (
    AsyncDataStream,
    AsyncFunction,
    AsyncRetryStrategy,
    CheckpointingMode,
    ProcessFunction,
    ResultFuture,
    StreamExecutionEnvironment,
    async_retry_predicates,
)
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.file_system import FileSink
from cairn.testing.sequence_jobs import read_visible_lines


def _env(**conf: str) -> StreamExecutionEnvironment:
    configuration = Configuration()
    for k, v in {"cairn.executor": "inprocess", **conf}.items():
        configuration.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(1)
    return env


def _collect(stream: Any) -> list[Any]:
    with stream.execute_and_collect() as results:
        return list(results)


class _SlowerFirst(AsyncFunction):
    """Answers input ``v`` of ``n`` after ``(n - v) * step`` seconds: later inputs sooner."""

    def __init__(self, n: int, step: float = 0.02) -> None:
        self.n, self.step = n, step

    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.sleep((self.n - value) * self.step)
        return [value * 10]


def test_ordered_wait_emits_in_input_order_unordered_as_completed() -> None:
    env = _env()
    ordered = AsyncDataStream.ordered_wait(
        env.from_collection([1, 2, 3, 4]), _SlowerFirst(5), Time.seconds(5), 4, Types.INT()
    )
    assert _collect(ordered) == [10, 20, 30, 40]
    env = _env()
    unordered = AsyncDataStream.unordered_wait(
        env.from_collection([1, 2, 3, 4]), _SlowerFirst(5), Time.seconds(5), 4, Types.INT()
    )
    assert _collect(unordered) == [40, 30, 20, 10]


class _Concurrency(AsyncFunction):
    """Counts how many calls run at once (all on the one loop thread of the subtask)."""

    def open(self, runtime_context: Any) -> None:
        self.running = self.most = 0
        self.threads: set[int] = {threading.get_ident()}  # open runs on the loop's thread

    async def async_invoke(self, value: int) -> list[Any]:
        self.running += 1
        self.most = max(self.most, self.running)
        self.threads.add(threading.get_ident())
        await asyncio.sleep(0.005)
        self.running -= 1
        return [(value, self.most, len(self.threads))]


def test_capacity_bounds_the_requests_in_flight() -> None:
    env = _env()
    out = AsyncDataStream.unordered_wait(
        env.from_collection(list(range(60))), _Concurrency(), Time.seconds(5), capacity=3
    )
    results = _collect(out)
    assert sorted(v for v, _, _ in results) == list(range(60))
    assert max(most for _, most, _ in results) == 3, "never more than the capacity at once"
    assert {threads for _, _, threads in results} == {1}, "one event loop thread per subtask"


class _SleepsOnOdd(AsyncFunction):
    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.sleep(5 if value % 2 else 0)
        return [value]

    def timeout(self, value: int) -> list[int]:
        return [-value]


class _OldForm(AsyncFunction):
    """PyFlink's older form: the results go to a ``ResultFuture``, from another thread too."""

    async def async_invoke(self, value: int, result_future: ResultFuture[int]) -> None:  # type: ignore[override]
        if value % 2:
            return  # never completed: times out
        threading.Timer(0.01, result_future.complete, ([value],)).start()

    def timeout(self, value: int, result_future: ResultFuture[int]) -> None:  # type: ignore[override]
        result_future.complete([-value])


@pytest.mark.parametrize("function", [_SleepsOnOdd(), _OldForm()], ids=["returns", "future"])
def test_a_timeout_gives_the_timeout_functions_results(function: AsyncFunction) -> None:
    env = _env()
    out = AsyncDataStream.ordered_wait(
        env.from_collection([1, 2, 3, 4]), function, Time.milliseconds(500), 10
    )
    assert _collect(out) == [-1, 2, -3, 4]


class _Hangs(AsyncFunction):
    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.sleep(5)
        return [value]


class _Fails(AsyncFunction):
    async def async_invoke(self, value: int) -> list[int]:
        if value == 3:
            raise LookupError(f"no such user {value}")
        return [value]


class _NotAList(AsyncFunction):
    async def async_invoke(self, value: int) -> Any:
        return value


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (_Hangs(), r"TimeoutError: Async function call has timed out for input: 1"),
        (_Fails(), r"LookupError: no such user 3"),
        (_NotAList(), r"The result of AsyncFunction should be of list type, got int: 1"),
    ],
    ids=["default-timeout", "raises", "not-a-list"],
)
def test_errors_fail_the_job_with_the_users_exception_and_traceback(
    function: AsyncFunction, message: str
) -> None:
    env = _env()
    out = AsyncDataStream.unordered_wait(
        env.from_collection([1, 2, 3]), function, Time.milliseconds(300), 5
    )
    with pytest.raises(JobExecutionException) as info:
        _collect(out)
    text = f"{info.value}\n{info.value.__cause__}"
    assert __import__("re").search(message, text), text
    if isinstance(function, _Fails):
        assert 'raise LookupError(f"no such user {value}")' in text, "the user's traceback"


class _FlakyThenWrong(AsyncFunction):
    """First attempt raises, second returns an odd (wrong) result, third the right one."""

    def open(self, runtime_context: Any) -> None:
        self.attempts: dict[int, int] = {}

    async def async_invoke(self, value: int) -> list[int]:
        n = self.attempts[value] = self.attempts.get(value, 0) + 1
        if n == 1:
            raise ConnectionError(f"reset by peer ({value})")
        return [value * 2 + (1 if n == 2 else 0), n]


def _even(result: list[int]) -> bool:
    return result[0] % 2 == 1  # retry while the result is odd


@pytest.mark.parametrize(
    "strategy",
    [
        AsyncRetryStrategy.fixed_delay(
            5,
            10,
            _even,
            functools.partial(
                async_retry_predicates.exception_type_predicate,
                expected_error_type=ConnectionError,
            ),
        ),
        AsyncRetryStrategy.exponential_backoff(
            5, 5, 40, 2.0, _even, async_retry_predicates.has_exception_predicate
        ),
    ],
    ids=["fixed", "exponential"],
)
def test_retries_on_exceptions_and_results_as_the_predicates_say(strategy: Any) -> None:
    env = _env()
    out = AsyncDataStream.ordered_wait_with_retry(
        env.from_collection([1, 2, 3]), _FlakyThenWrong(), Time.seconds(5), strategy, 10
    )
    assert _collect(out) == [2, 3, 4, 3, 6, 3], "each input: the third attempt's results"


def test_retries_end_after_max_attempts_with_the_last_error() -> None:
    env = _env()
    strategy = AsyncRetryStrategy.fixed_delay(
        1, 5, exception_predicate=async_retry_predicates.has_exception_predicate
    )
    out = AsyncDataStream.unordered_wait_with_retry(
        env.from_collection([7]), _FlakyThenWrong(), Time.seconds(5), strategy, 10
    )
    assert _collect(out) == [15, 2], "one retry allowed: the second attempt's (odd) result"
    env = _env()
    strategy = AsyncRetryStrategy.fixed_delay(1, 5, exception_predicate=lambda e: False)
    out = AsyncDataStream.unordered_wait_with_retry(
        env.from_collection([7]), _FlakyThenWrong(), Time.seconds(5), strategy, 10
    )
    with pytest.raises(JobExecutionException, match=r"reset by peer \(7\)"):
        _collect(out)


class _OldFormFlaky(AsyncFunction):
    """The older form failing its future on a first attempt; ``close`` is ``async def``."""

    def open(self, runtime_context: Any) -> None:
        self.tried: set[int] = set()

    async def async_invoke(self, value: int, result_future: ResultFuture[int]) -> None:  # type: ignore[override]
        if value not in self.tried:
            self.tried.add(value)
            result_future.complete_exceptionally(ConnectionError("refused"))
        else:
            result_future.complete([value, len(self.tried)])

    async def close(self) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        self.tried.clear()


def test_a_result_future_completed_exceptionally_is_retried() -> None:
    env = _env()
    strategy = AsyncRetryStrategy.exponential_backoff(
        2, 5, 20, 2.0, exception_predicate=lambda e: isinstance(e, ConnectionError)
    )
    out = AsyncDataStream.ordered_wait_with_retry(
        env.from_collection([1, 2]), _OldFormFlaky(), Time.seconds(5), strategy, 1
    )
    assert _collect(out) == [1, 1, 2, 2]


def test_the_api_checks_what_pyflink_checks() -> None:
    env = _env()
    ds = env.from_collection([1])

    class NotAsync(AsyncFunction):
        def async_invoke(self, value: int) -> list[int]:  # type: ignore[override]
            return [value]

    with pytest.raises(TypeError, match="'async_invoke' of class 'NotAsync' should be declared"):
        AsyncDataStream.unordered_wait(ds, NotAsync(), Time.seconds(1))
    retry = AsyncRetryStrategy.fixed_delay(3, 10, exception_predicate=lambda e: True)
    with pytest.raises(ValueError, match="Timeout should be configured when do async with retry"):
        AsyncDataStream.ordered_wait_with_retry(ds, _Fails(), Time.seconds(0), retry)
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        AsyncDataStream.ordered_wait(ds, _Fails(), Time.seconds(1), 0)
    with pytest.raises(ValueError, match="max_attempts should be greater than zero"):
        AsyncRetryStrategy.fixed_delay(0, 10)
    out = AsyncDataStream.ordered_wait(ds, _Fails(), Duration.of_seconds(1), 5, Types.INT())
    assert out.get_name() == "async wait operator" and out.get_type() == Types.INT()


class _Stamp(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value)


class _Jitter(AsyncFunction):
    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.sleep((value * 7919 % 13) / 1000)  # 0-12 ms, not in input order
        return [value]


class _LateCheck(ProcessFunction):
    """Marks each record with whether it arrived behind a watermark at or past its time."""

    def process_element(self, value: int, ctx: ProcessFunction.Context) -> Any:
        ts = ctx.timestamp()
        assert ts is not None, "results keep their input's timestamp"
        yield (value, ts <= ctx.timer_service().current_watermark())


def test_unordered_records_never_cross_a_watermark() -> None:
    env = _env(**{"pipeline.auto-watermark-interval": "5 ms"})
    n = 400
    source = DataGeneratorSource(lambda i: i + 1, n, RateLimiterStrategy.per_second(2000))
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Stamp())
    stream = env.from_source(source, strategy, "numbers")
    out = AsyncDataStream.unordered_wait(stream, _Jitter(), Time.seconds(5), 50)
    results = _collect(out.process(_LateCheck()))
    values = [v for v, _ in results]
    assert sorted(values) == list(range(1, n + 1))
    assert values != sorted(values), "unordered: some records overtook others"
    assert [v for v, late in results if late] == [], "no record came after a later watermark"


class _SlowLookup(AsyncFunction):
    async def async_invoke(self, value: int) -> list[str]:
        await asyncio.sleep(0.02 + (value % 5) * 0.01)
        return [f"{value},{value * value}"]


def test_inputs_in_flight_are_restored_and_issued_again_after_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker, out = tmp_path / "fault-marker", tmp_path / "out"
    faults = f"point=async-in-flight,attempt=0,records=5,marker={marker}"
    env = _env(**{"cairn.testing.faults": faults})
    env.enable_checkpointing(100, CheckpointingMode.EXACTLY_ONCE)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 50))
    n = 600
    source = DataGeneratorSource(lambda i: i, n, RateLimiterStrategy.per_second(1500))
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("src")
    looked_up = AsyncDataStream.unordered_wait(stream, _SlowLookup(), Time.seconds(5), 20)
    looked_up.uid("lookup").sink_to(
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    ).uid("sink")
    with caplog.at_level(logging.INFO, logger="cairn.runtime.operators.async_wait"):
        client = env.execute_async("async restore")
        client.get_job_execution_result(timeout=120)
    assert client.job_master.restarts == 1
    landed = marker.read_text()
    assert landed.startswith("async-in-flight of numbers -> async wait operator"), landed
    reissued = [r.getMessage() for r in caplog.records if "restored inputs again" in r.message]
    assert reissued and int(reissued[0].split("issuing ")[1].split()[0]) >= 5, reissued
    assert sorted(read_visible_lines(str(out))) == sorted(f"{i},{i * i}" for i in range(n))
