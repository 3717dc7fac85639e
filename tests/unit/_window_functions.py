"""Window functions for the window operator's tests, and the operator function a window
definition builds (``window_function``), to drive with ``_operator_harness.OperatorHarness``."""

from __future__ import annotations

from typing import Any

from cairn.api.window_functions import ProcessWindowFunction, WindowFunction
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.state import ValueStateDescriptor

__all__ = ["Describe", "WithKey", "window_function"]


def window_function(build: Any) -> Any:
    """The operator function ``build(keyed_stream)`` defines (the API builds it)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    keyed = env.from_collection([("a", 0)]).key_by(lambda r: r[0])
    return build(keyed).get_transformation().operator.function


_FIRED = ValueStateDescriptor("fired")


class Describe(ProcessWindowFunction[Any, Any, str, Any]):
    """Emits ``(key, start, end, sorted values, n)``: the n-th firing of the window (counted in
    per-window state, cleared with the window)."""

    def process(self, key: str, context: Any, elements: Any) -> Any:
        w = context.window()
        fired = context.window_state().get_state(_FIRED)
        fired.update((fired.value() or 0) + 1)
        yield key, w.start, w.end, sorted(e[1] for e in elements), fired.value()

    def clear(self, context: Any) -> None:
        context.window_state().get_state(_FIRED).clear()


class WithKey(WindowFunction[Any, Any, str, Any]):
    """Emits ``(key, window start, *inputs)``."""

    def apply(self, key: str, window: Any, inputs: Any) -> Any:
        return [(key, getattr(window, "start", None), *inputs)]
