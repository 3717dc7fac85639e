"""``WindowedStream`` (``key_by(...).window(assigner)``) and ``AllWindowedStream``
(``window_all(assigner)``) with PyFlink's methods.

Invariant: these only collect and validate the window's parts (assigner, trigger, evictor,
allowed lateness, late-data tag) and turn them, with the window function, into one keyed
operator (``window_operator``); every check that can fail does so here, at job definition.
``window_all`` is a window keyed by a constant on one subtask, as in Flink.

>>> from cairn.common import Time
>>> from cairn.datastream import StreamExecutionEnvironment
>>> from cairn.datastream.window import TumblingEventTimeWindows
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> keyed = env.from_collection([("a", 1)]).key_by(lambda r: r[0])
>>> keyed.window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(
...     lambda a, b: (a[0], a[1] + b[1])).get_name()
'Window(TumblingEventTimeWindows, EventTimeTrigger, reduce)'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cairn.api.functions import AggregateFunction, ReduceFunction
from cairn.api.output_tag import OutputTag
from cairn.api.window_functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from cairn.common.time import Duration, Time
from cairn.common.typeinfo import TypeInformation
from cairn.datastream.data_stream import DataStream
from cairn.datastream.window import (
    CountSlidingWindowAssigner,
    MergingWindowAssigner,
    WindowAssigner,
)
from cairn.datastream.window_operator import WindowOperatorFunction, WindowSpec
from cairn.datastream.window_triggers import CountEvictor, Evictor, Trigger
from cairn.graph.transformations import OperatorKind

if TYPE_CHECKING:
    # typing.Self is 3.11+; typing_extensions is only read by mypy here (annotations are
    # not evaluated at runtime), so it is no runtime dependency on 3.10.
    from typing_extensions import Self

    from cairn.datastream.keyed_stream import KeyedStream

__all__ = ["AllWindowedStream", "WindowedStream"]


class WindowedStream:
    """A keyed stream cut into windows; ``reduce``/``aggregate``/``apply``/``process`` end it."""

    _all = False

    def __init__(self, keyed_stream: KeyedStream, window_assigner: WindowAssigner) -> None:
        if not isinstance(window_assigner, WindowAssigner):
            raise TypeError(
                f"window() needs a WindowAssigner, got {type(window_assigner).__name__}"
            )
        self._keyed = keyed_stream
        self._assigner = window_assigner
        self._trigger: Trigger = window_assigner.get_default_trigger()
        self._evictor: Evictor | None = (
            CountEvictor.of(window_assigner.window_size)
            if isinstance(window_assigner, CountSlidingWindowAssigner)
            else None
        )
        self._lateness = 0
        self._late_tag: OutputTag | None = None

    def get_execution_environment(self) -> Any:
        return self._keyed.get_execution_environment()

    def get_input_type(self) -> TypeInformation:
        return self._keyed.get_type()

    def trigger(self, trigger: Trigger) -> Self:
        """Replace the assigner's default trigger."""
        if not isinstance(trigger, Trigger):
            raise TypeError(f"trigger() needs a Trigger, got {type(trigger).__name__}")
        if isinstance(self._assigner, MergingWindowAssigner) and not trigger.can_merge():
            raise TypeError(
                "A merging window assigner cannot be used with a trigger that does not support "
                f"merging ({type(trigger).__name__}.can_merge() is False)."
            )
        self._trigger = trigger
        return self

    def allowed_lateness(self, time_ms: int | Time | Duration) -> Self:
        """Keep event-time windows this long after their end: late elements re-fire them."""
        ms = time_ms if isinstance(time_ms, int) else time_ms.to_milliseconds()
        if isinstance(ms, bool) or ms < 0:
            raise ValueError(f"The allowed lateness cannot be negative, got {time_ms!r}")
        self._lateness = ms
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> Self:
        """Send elements that arrive after their windows' allowed lateness to ``output_tag``
        (read it with ``get_side_output`` on the result)."""
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"side_output_late_data() needs an OutputTag, got {output_tag!r}")
        self._late_tag = output_tag
        return self

    def evictor(self, evictor: Evictor) -> Self:
        """Remove elements before/after the window function (windows then keep elements)."""
        if not isinstance(evictor, Evictor):
            raise TypeError(f"evictor() needs an Evictor, got {type(evictor).__name__}")
        self._evictor = evictor
        return self

    # -- the window function ----------------------------------------------------------------

    def reduce(
        self,
        reduce_function: ReduceFunction | Any,
        window_function: Any = None,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """Incremental: one value per window, combined as elements arrive."""
        if not isinstance(reduce_function, ReduceFunction) and not callable(reduce_function):
            raise TypeError("reduce() needs a ReduceFunction or a callable of two arguments")
        self._check_window_function(window_function, optional=True)
        hint = output_type if window_function is not None else self._keyed.get_type()
        return self._build(("reduce", reduce_function), window_function, hint, "reduce")

    def aggregate(
        self,
        aggregate_function: AggregateFunction[Any, Any, Any],
        window_function: Any = None,
        accumulator_type: TypeInformation | None = None,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """Incremental: one accumulator per window; ``get_result`` when it fires."""
        if not isinstance(aggregate_function, AggregateFunction):
            raise TypeError(
                f"aggregate() needs an AggregateFunction, got {type(aggregate_function).__name__}"
            )
        self._check_window_function(window_function, optional=True)
        return self._build(
            ("aggregate", aggregate_function), window_function, output_type, "aggregate"
        )

    def apply(self, window_function: Any, output_type: TypeInformation | None = None) -> DataStream:
        """All elements of a firing window to a ``WindowFunction`` (``AllWindowFunction``)."""
        self._check_window_function(window_function, optional=False, process=False)
        return self._build(None, window_function, output_type, "apply")

    def process(
        self, process_window_function: Any, output_type: TypeInformation | None = None
    ) -> DataStream:
        """All elements of a firing window to a ``ProcessWindowFunction`` with its context."""
        self._check_window_function(process_window_function, optional=False, process=True)
        return self._build(None, process_window_function, output_type, "process")

    def _check_window_function(
        self, f: Any, *, optional: bool, process: bool | None = None
    ) -> None:
        if f is None and optional:
            return
        keyed = (ProcessWindowFunction, WindowFunction)
        everything = (ProcessAllWindowFunction, AllWindowFunction)
        allowed: tuple[type, ...] = everything if self._all else keyed
        if process is True:
            allowed = allowed[:1]
        elif process is False:
            allowed = allowed[1:]
        if not isinstance(f, allowed):
            names = " or ".join(c.__name__ for c in allowed)
            raise TypeError(f"{names} is required here, got {type(f).__name__}")

    def _build(
        self,
        incremental: tuple[str, Any] | None,
        window_function: Any,
        output_type: TypeInformation | None,
        what: str,
    ) -> DataStream:
        spec = WindowSpec(
            assigner=self._assigner,
            trigger=self._trigger,
            evictor=self._evictor,
            allowed_lateness=self._lateness,
            late_tag=self._late_tag,
            incremental=incremental,
            window_function=window_function,
            all_windows=self._all,
        )
        # Class names only: the name makes the generated uid, which must not change with a
        # size or hold an address.
        parts = [type(self._assigner).__name__, type(self._trigger).__name__]
        if self._evictor is not None:
            parts.append(type(self._evictor).__name__)
        parts.append(what)
        name = ("AllWindow" if self._all else "Window") + "(" + ", ".join(parts) + ")"
        result = self._keyed.append_operator(
            name, OperatorKind.KEYED_PROCESS, WindowOperatorFunction(spec), output_type
        )
        if self._all:
            result.force_non_parallel()
        return result


def all_windows_key(_value: Any) -> int:
    """The one key of ``window_all``."""
    return 0


class AllWindowedStream(WindowedStream):
    """``window_all(assigner)``: windows over the whole stream, on one subtask."""

    _all = True

    def __init__(self, data_stream: DataStream, window_assigner: WindowAssigner) -> None:
        super().__init__(data_stream.key_by(all_windows_key), window_assigner)
