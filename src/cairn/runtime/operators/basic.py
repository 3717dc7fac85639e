"""Stateless record-at-a-time operators, executed a batch at a time.

Invariant: an operator builds a new output list per input batch and never mutates the input
batch (broadcast edges share one list between channels).
"""

from __future__ import annotations

from typing import Any

from cairn.runtime.operators.user_function import UserFunctionOperator, resolve_method


def extend_with_result(out: list[Any], result: Any, operator_name: str) -> None:
    """Append what a flat_map/process call produced: a generator, an iterable, or None."""
    if result is None:
        return
    try:
        out.extend(result)
    except TypeError as exc:
        raise TypeError(
            f"{operator_name}: the function must yield its outputs or return an iterable "
            f"(or None), got {type(result).__name__}"
        ) from exc


class MapOperator(UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._map = resolve_method(self.function, "map")

    def process_batch(self, records: list[Any]) -> None:
        f = self._map
        self.output([f(r) for r in records])


class FilterOperator(UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._filter = resolve_method(self.function, "filter")

    def process_batch(self, records: list[Any]) -> None:
        f = self._filter
        out = [r for r in records if f(r)]
        if out:
            self.output(out)


class FlatMapOperator(UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._flat_map = resolve_method(self.function, "flat_map")

    def process_batch(self, records: list[Any]) -> None:
        f = self._flat_map
        out: list[Any] = []
        name = self.name
        for r in records:
            extend_with_result(out, f(r), name)
        if out:
            self.output(out)


class _ProcessContext:
    """``ProcessFunction.Context`` for non-keyed streams: no timers (as in Flink)."""

    def __init__(self, operator: ProcessOperator) -> None:
        self._op = operator

    def timestamp(self) -> int | None:
        return None

    def timer_service(self) -> _NonKeyedTimerService:
        return _NonKeyedTimerService(self._op)


class _NonKeyedTimerService:
    def __init__(self, operator: ProcessOperator) -> None:
        self._op = operator

    def current_processing_time(self) -> int:
        return self._op.ctx.clock_ms()

    def current_watermark(self) -> int:
        return -(2**63)

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise RuntimeError(
            "Setting timers is only supported on a keyed stream (use key_by() before process())."
        )

    register_event_time_timer = register_processing_time_timer


class ProcessOperator(UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._process = resolve_method(self.function, "process_element")
        self._context = _ProcessContext(self)

    def process_batch(self, records: list[Any]) -> None:
        f = self._process
        ctx = self._context
        out: list[Any] = []
        name = self.name
        for r in records:
            extend_with_result(out, f(r, ctx), name)
        if out:
            self.output(out)
