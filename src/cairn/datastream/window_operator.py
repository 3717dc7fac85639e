"""The window operator: Flink's ``WindowOperator`` (and ``EvictingWindowOperator``) as a
keyed process function, so it runs on the keyed runtime operator with its state and timers.

Invariant: per key, ``contents`` holds exactly the windows that are neither purged nor past
their cleanup time (``max_timestamp + allowed_lateness`` in event time, ``max_timestamp`` in
processing time), each with one accumulator (``reduce``/``aggregate`` without evictor) or its
elements; merging assigners keep their live windows in ``sessions`` (pairwise
non-intersecting). Decisions follow Flink's: a window is late when its cleanup time is at or
below the watermark, an element only when all its windows are late *and* its timestamp plus
the allowed lateness is at or below the watermark; late elements go to the late side output.
In the common case (``window_batch``) whole batches skip ``process_element`` and accumulators
are cached between batches: ``contents`` is as above whenever timers fire or a snapshot is
taken.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from cairn.api.functions import KeyedProcessFunction
from cairn.api.output_tag import OutputTag
from cairn.api.runtime_context import RuntimeContext
from cairn.api.time_domain import TimeDomain
from cairn.api.window_functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from cairn.datastream.window import MAX_LONG, MergingWindowAssigner, TimeWindow, WindowAssigner
from cairn.datastream.window_batch import WindowBatchPath, WindowOperatorParts
from cairn.datastream.window_state import (
    LEGACY_PREFIX,
    SessionWindows,
    WindowScope,
    WindowStateFormatError,
    WindowStateStore,
    WindowTimers,
    window_of,
)
from cairn.datastream.window_triggers import (
    EventTimeTrigger,
    Evictor,
    ProcessingTimeTrigger,
    TimestampedValue,
    Trigger,
)

__all__ = ["WindowOperatorFunction", "WindowSpec"]

_log = logging.getLogger(__name__)
_TRIGGER = "trigger/"


@dataclass(frozen=True)
class WindowSpec:
    """Everything ``WindowedStream`` collected; ``incremental`` is ``("reduce", f)``,
    ``("aggregate", f)`` or ``None`` (keep the elements)."""

    assigner: WindowAssigner
    trigger: Trigger
    evictor: Evictor | None
    allowed_lateness: int
    late_tag: OutputTag | None
    incremental: tuple[str, Any] | None
    window_function: Any
    all_windows: bool


class WindowOperatorFunction(KeyedProcessFunction[Any, Any, Any]):
    """Runs one ``WindowSpec`` per key (see the module's invariant)."""

    # Its batch path sets the key once per (key, window) of a batch: a hash edge into it need
    # not carry the records' key groups (``runtime.operators.takes_key_groups``).
    sets_keys_per_batch = True

    def __init__(self, spec: WindowSpec) -> None:
        self.spec = spec

    def open(self, runtime_context: RuntimeContext) -> None:
        spec = self.spec
        self._rc = runtime_context
        _refuse_legacy_state(runtime_context)
        self._scope = WindowScope(runtime_context)
        self._contents = self._scope.windows("contents")
        self._timers = WindowTimers(self._scope)
        self._merging = isinstance(spec.assigner, MergingWindowAssigner)
        self._sessions = (
            SessionWindows(self._scope.map("sessions"), self._current_key)
            if self._merging
            else None
        )
        self._event_time = spec.assigner.is_event_time()
        self._trigger = spec.trigger
        self._default_path = (
            self._event_time
            and not self._merging
            and spec.evictor is None
            and type(spec.trigger) is EventTimeTrigger
        )
        self._ctx: Any = None
        # A process window function's own ``clear`` (the base classes' does nothing).
        f = spec.window_function
        overridden = isinstance(f, ProcessWindowFunction | ProcessAllWindowFunction) and (
            type(f).clear not in (ProcessWindowFunction.clear, ProcessAllWindowFunction.clear)
        )
        self._clear_function = f.clear if overridden else None
        # The keyed operator runs whole stamped batches through ``keyed_batch`` when it is
        # set, and calls ``keyed_flush`` before timers fire, before a snapshot and before
        # records take another path (``window_batch``'s invariant).
        self._default_processing_path = (
            not self._event_time
            and not self._merging
            and spec.evictor is None
            and type(spec.trigger) is ProcessingTimeTrigger
        )
        self.keyed_batch: WindowBatchPath | None = None
        if (self._default_path or self._default_processing_path) and spec.incremental:
            self.keyed_batch = WindowBatchPath(
                WindowOperatorParts(
                    assigner=spec.assigner,
                    incremental=spec.incremental,
                    allowed_lateness=spec.allowed_lateness,
                    contents=self._contents.raw,
                    register_timer=self._timers.register,
                    use_context=self._use_context,
                    process_one=self._process_default,
                )
            )
        # Processing-time windows take plain (unstamped) batches through it too.
        self.keyed_batch_plain = self._default_processing_path
        self.keyed_flush = None if self.keyed_batch is None else self.keyed_batch.write_back
        for f in (spec.incremental[1] if spec.incremental else None, spec.window_function):
            opener = getattr(f, "open", None)
            if callable(opener):
                opener(runtime_context)

    def close(self) -> None:
        for f in (self.spec.incremental[1] if self.spec.incremental else None,):
            closer = getattr(f, "close", None)
            if callable(closer):
                closer()
        closer = getattr(self.spec.window_function, "close", None)
        if callable(closer):
            closer()

    # -- time -------------------------------------------------------------------------------

    def get_current_processing_time(self) -> int:
        """The assigners' context (processing-time assigners read the clock here)."""
        return int(self._ctx.timer_service().current_processing_time())

    def _use_context(self, ctx: Any) -> WindowOperatorFunction:
        """Make ``ctx`` the context of what follows (the batch path's batch); the assigners'
        context (this operator)."""
        self._ctx = ctx
        return self

    def get_current_watermark(self) -> int:
        """The evictors' context reads the watermark here (and the trigger and process
        contexts)."""
        return int(self._ctx.timer_service().current_watermark())

    # -- what the trigger and process contexts reach (``WindowOperatorView``) -----------------

    @property
    def runtime_context(self) -> RuntimeContext:
        return self._rc

    def register_window_timer(self, event_time: bool, time: int, window: Any) -> None:
        self._timers.register(self._ctx.timer_service(), event_time, time, window)

    def delete_window_timer(self, event_time: bool, time: int, window: Any) -> None:
        self._timers.delete(self._ctx.timer_service(), event_time, time, window)

    def trigger_state(self, state_descriptor: Any, window: Any) -> Any:
        """A trigger's state ``state_descriptor`` in ``window``, for the current key."""
        return self._scope.state(state_descriptor, window, _TRIGGER)

    def merge_trigger_state(self, state_descriptor: Any, window: Any, merged: Any) -> None:
        """Merge the trigger state of the ``merged`` windows into ``window``."""
        self._scope.merge(state_descriptor, window, merged, _TRIGGER)

    def window_state_store(self, window: Any) -> WindowStateStore:
        """A process window function's per-window state of ``window``."""
        return WindowStateStore(self._scope, window)

    def _cleanup_time(self, window: Any) -> int:
        if not self._event_time:
            return int(window.max_timestamp())
        end = window.max_timestamp() + self.spec.allowed_lateness
        return end if end >= window.max_timestamp() and end <= MAX_LONG else MAX_LONG

    def _current_key(self) -> Any:
        return self._ctx.get_current_key()

    def _is_window_late(self, window: Any) -> bool:
        return self._event_time and self._cleanup_time(window) <= self.get_current_watermark()

    # -- elements ---------------------------------------------------------------------------

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        self._ctx = ctx
        ts = ctx.timestamp()
        if self._default_path:
            return self._process_default(value, ts, ctx)
        out: list[Any] = []
        skipped = True
        for assigned in self.spec.assigner.assign_windows(value, ts, self):
            window: Any = assigned
            if self._merging:
                window = self._merge(assigned)
                if window is None:
                    continue
            elif self._is_window_late(window):
                continue
            skipped = False
            self._add(window, value, ts)
            result = self._trigger.on_element(value, ts, window, _TriggerContext(self, window))
            if result.is_fire():
                contents = self._contents.get(window)
                if contents is None:
                    continue
                self._emit(window, contents, out)
            if result.is_purge():
                self._contents.remove(window)
            self._register_cleanup(window)
        late = (
            skipped
            and self._event_time
            and ts + self.spec.allowed_lateness <= self.get_current_watermark()
        )
        if late and self.spec.late_tag is not None:
            out.append((self.spec.late_tag, value))
        return out

    def _add(self, window: Any, value: Any, ts: int | None) -> None:
        self._contents.put(window, self._accumulate(self._contents.get(window), value, ts))

    def _accumulate(self, contents: Any, value: Any, ts: int | None) -> Any:
        """``contents`` (``None``: a new window) with ``value`` added."""
        incremental = self.spec.incremental
        if self.spec.evictor is not None:
            contents = [] if contents is None else contents
            contents.append(TimestampedValue(value, ts))
            return contents
        if incremental is None:
            contents = [] if contents is None else contents
            contents.append(value)
            return contents
        if incremental[0] == "reduce":
            return value if contents is None else _reduce(incremental[1], contents, value)
        agg = incremental[1]
        return agg.add(value, agg.create_accumulator() if contents is None else contents)

    def _process_default(self, value: Any, ts: Any, ctx: Any) -> list[Any]:
        """``process_element`` for event-time, non-merging windows with the default
        ``EventTimeTrigger`` and no evictor, with the trigger's decisions inlined: a window
        that has contents already has its end and cleanup timers (its first element set
        them, and they fire only when the watermark passes them), so only a new window
        registers timers. ``ts`` is the record's timestamp (the batch path passes it without
        setting it on ``ctx``)."""
        timer_service = ctx.timer_service()
        watermark = timer_service.current_watermark()
        lateness = self.spec.allowed_lateness
        contents_state = self._contents
        out: list[Any] = []
        skipped = True
        for window in self.spec.assigner.assign_windows(value, ts, self):
            end = window.max_timestamp()
            cleanup = min(end + lateness, MAX_LONG)
            if cleanup <= watermark:
                continue
            skipped = False
            contents = contents_state.get(window)
            new = contents is None
            contents = self._accumulate(contents, value, ts)
            contents_state.put(window, contents)
            if end <= watermark:
                self._emit(window, contents, out)  # late within the allowed lateness
            elif new:
                self._timers.register(timer_service, True, end, window)
            if new and cleanup != end and cleanup != MAX_LONG:
                self._timers.register(timer_service, True, cleanup, window)
        if skipped and ts + lateness <= watermark and self.spec.late_tag is not None:
            out.append((self.spec.late_tag, value))
        return out

    def _merge(self, window: Any) -> Any:
        """Merge ``window`` into the key's sessions; the window the element goes to, or
        ``None`` when it is a new window that is already late."""
        sessions = self._sessions
        assert sessions is not None
        if type(window) is TimeWindow:
            merged, cover = _time_window_group(window, sessions.namespaces())
        else:
            existing = set(sessions.keys())
            cover, members = next(
                (c, m) for c, m in TimeWindow.merge_windows([*existing, window]) if window in m
            )
            merged = sorted({m for m in members if m in existing})
        if not merged:
            if self._is_window_late(window):
                return None
            sessions.put(window, True)
            return window
        if merged == [cover]:
            return cover
        sessions.put(cover, True)
        combined: Any = None
        for m in merged:
            sessions.remove(m)
            contents = self._contents.get(m)
            if contents is not None:
                self._contents.remove(m)
                combined = (
                    contents if combined is None else self._merge_contents(combined, contents)
                )
        if combined is not None:
            self._contents.put(cover, combined)
        self._trigger.on_merge(cover, _TriggerContext(self, cover, merged))
        for m in merged:
            self._trigger.clear(m, _TriggerContext(self, m))
            self._delete_cleanup(m)
        return cover

    def _merge_contents(self, a: Any, b: Any) -> Any:
        incremental = self.spec.incremental
        if self.spec.evictor is not None or incremental is None:
            return [*a, *b]
        if incremental[0] == "reduce":
            return _reduce(incremental[1], a, b)
        merge = getattr(incremental[1], "merge", None)
        if not callable(merge):
            raise TypeError("session windows with aggregate() need AggregateFunction.merge")
        return merge(a, b)

    # -- timers -----------------------------------------------------------------------------

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        self._ctx = ctx
        event_time = ctx.time_domain() == TimeDomain.EVENT_TIME
        if event_time and self._default_path:
            return self._on_event_timer_default(timestamp)
        out: list[Any] = []
        for window in self._timers.pop(event_time, timestamp):
            if self._sessions is not None and not self._sessions.contains(window):
                continue  # merged away
            contents = self._contents.get(window)
            tctx = _TriggerContext(self, window)
            result = (
                self._trigger.on_event_time(timestamp, window, tctx)
                if event_time
                else self._trigger.on_processing_time(timestamp, window, tctx)
            )
            if result.is_fire() and contents is not None:
                self._emit(window, contents, out)
            if result.is_purge():
                self._contents.remove(window)
            if event_time == self._event_time and timestamp == self._cleanup_time(window):
                self._clear_all(window)
        return out

    def _on_event_timer_default(self, timestamp: int) -> list[Any]:
        """``on_timer`` of the default path (``EventTimeTrigger``, no evictor, not merging)
        with the trigger inlined: fire a window whose end is ``timestamp`` (if it has
        contents), clear one whose cleanup time it is. The trigger's ``clear`` (delete the
        end timer) is left out: that timer has fired and was popped, and nothing registers
        it again (a window registers timers only while its end is ahead of the watermark)."""
        contents_state = self._contents.raw
        out: list[Any] = []
        for ns in self._timers.pop_namespaces(True, timestamp):
            window = window_of(ns)
            if timestamp == window.max_timestamp():
                contents = contents_state.get(ns)
                if contents is not None:
                    self._emit(window, contents, out)
            if timestamp == self._cleanup_time(window):
                contents_state.remove(ns)
                if self._clear_function is not None:
                    self._clear_function(_ProcessContext(self, window))
        return out

    def _register_cleanup(self, window: Any) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup != MAX_LONG:
            self._timers.register(self._ctx.timer_service(), self._event_time, cleanup, window)

    def _delete_cleanup(self, window: Any) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup != MAX_LONG:
            self._timers.delete(self._ctx.timer_service(), self._event_time, cleanup, window)

    def _clear_all(self, window: Any) -> None:
        self._contents.remove(window)
        self._trigger.clear(window, _TriggerContext(self, window))
        f = self.spec.window_function
        if isinstance(f, ProcessWindowFunction | ProcessAllWindowFunction):
            f.clear(_ProcessContext(self, window))
        if self._sessions is not None:
            self._sessions.remove(window)

    # -- firing -----------------------------------------------------------------------------

    def _emit(self, window: Any, contents: Any, out: list[Any]) -> None:
        spec = self.spec
        evictor = spec.evictor
        if evictor is not None:
            elements: list[TimestampedValue] = list(contents)
            evictor.evict_before(elements, len(elements), window, self)
            inputs = self._window_input([e.value for e in elements])
            self._apply(window, inputs, out)
            evictor.evict_after(elements, len(elements), window, self)
            if elements:
                self._contents.put(window, elements)
            else:
                self._contents.remove(window)
            return
        if spec.incremental is None:
            self._apply(window, list(contents), out)
        elif spec.incremental[0] == "reduce":
            self._apply(window, [contents], out)
        else:
            self._apply(window, [spec.incremental[1].get_result(contents)], out)

    def _window_input(self, values: list[Any]) -> list[Any]:
        """What the window function gets from evicted-to elements (reduce/aggregate fold)."""
        incremental = self.spec.incremental
        if incremental is None or not values:
            return values
        f = incremental[1]
        if incremental[0] == "reduce":
            acc = values[0]
            for v in values[1:]:
                acc = _reduce(f, acc, v)
            return [acc]
        acc = f.create_accumulator()
        for v in values:
            acc = f.add(v, acc)
        return [f.get_result(acc)]

    def _apply(self, window: Any, inputs: list[Any], out: list[Any]) -> None:
        f = self.spec.window_function
        if f is None:
            out.extend(inputs)
            return
        key = self._ctx.get_current_key()
        if isinstance(f, ProcessWindowFunction):
            result = f.process(key, _ProcessContext(self, window), inputs)
        elif isinstance(f, ProcessAllWindowFunction):
            result = f.process(_ProcessContext(self, window), inputs)
        elif isinstance(f, WindowFunction):
            result = f.apply(key, window, inputs)
        elif isinstance(f, AllWindowFunction):
            result = f.apply(window, inputs)
        else:
            result = f(key, window, inputs)
        if result is not None:
            out.extend(result)


def _refuse_legacy_state(runtime_context: RuntimeContext) -> None:
    """A snapshot from before window namespaces keeps its windows under other state names:
    restoring it would drop every window in flight silently, so refuse it."""
    legacy = sorted(
        n for n in runtime_context.restored_keyed_state_names() if n.startswith(LEGACY_PREFIX)
    )
    if legacy:
        raise WindowStateFormatError(
            f"{runtime_context.get_task_name()}: the snapshot holds window state in the format "
            f"of an earlier Cairn build ({', '.join(legacy)}: windows stored as objects); this "
            "build stores them as (start, end) and cannot restore it. Stop the job with "
            "--drain on the build that took the snapshot (windows fire, none stays in "
            "state), or start without this operator's state"
        )


def _reduce(f: Any, a: Any, b: Any) -> Any:
    reduce = getattr(f, "reduce", None)
    return reduce(a, b) if callable(reduce) else f(a, b)


class WindowOperatorView(Protocol):
    """What the trigger and process contexts may ask of the window operator."""

    def get_current_processing_time(self) -> int: ...

    def get_current_watermark(self) -> int: ...

    @property
    def runtime_context(self) -> RuntimeContext: ...

    def register_window_timer(self, event_time: bool, time: int, window: Any) -> None: ...

    def delete_window_timer(self, event_time: bool, time: int, window: Any) -> None: ...

    def trigger_state(self, state_descriptor: Any, window: Any) -> Any: ...

    def merge_trigger_state(self, state_descriptor: Any, window: Any, merged: Any) -> None: ...

    def window_state_store(self, window: Any) -> WindowStateStore: ...


class _TriggerContext(Trigger.OnMergeContext):
    """A trigger's view of the current key and one window (and, merging, its sources)."""

    def __init__(self, op: WindowOperatorView, window: Any, merged: Any = ()) -> None:
        self._op, self._window, self._merged = op, window, merged

    def get_current_processing_time(self) -> int:
        return self._op.get_current_processing_time()

    def get_current_watermark(self) -> int:
        return self._op.get_current_watermark()

    def get_metric_group(self) -> Any:
        return self._op.runtime_context.get_metrics_group()

    def register_processing_time_timer(self, time: int) -> None:
        self._op.register_window_timer(False, int(time), self._window)

    def register_event_time_timer(self, time: int) -> None:
        self._op.register_window_timer(True, int(time), self._window)

    def delete_processing_time_timer(self, time: int) -> None:
        self._op.delete_window_timer(False, int(time), self._window)

    def delete_event_time_timer(self, time: int) -> None:
        self._op.delete_window_timer(True, int(time), self._window)

    def get_partitioned_state(self, state_descriptor: Any) -> Any:
        return self._op.trigger_state(state_descriptor, self._window)

    def merge_partitioned_state(self, state_descriptor: Any) -> None:
        self._op.merge_trigger_state(state_descriptor, self._window, self._merged)


class _ProcessContext(ProcessWindowFunction.Context[Any], ProcessAllWindowFunction.Context[Any]):
    def __init__(self, op: WindowOperatorView, window: Any) -> None:
        self._op, self._window = op, window

    def window(self) -> Any:
        return self._window

    def current_processing_time(self) -> int:
        return self._op.get_current_processing_time()

    def current_watermark(self) -> int:
        return self._op.get_current_watermark()

    def window_state(self) -> WindowStateStore:
        return self._op.window_state_store(self._window)

    def global_state(self) -> Any:
        return self._op.runtime_context


def _time_window_group(
    window: TimeWindow, namespaces: Iterable[tuple[int, int]]
) -> tuple[list[TimeWindow], TimeWindow]:
    """The key's sessions that ``window`` merges with (sorted) and the window covering them
    all and ``window``: what ``TimeWindow.merge_windows`` gives for the group of ``window``,
    in one pass over namespaces and without sorting every session of the key.

    The sessions of a key never intersect one another (every insertion merges the group it
    touches), so the group of ``window`` is exactly the sessions intersecting ``window``
    itself: a session touching only the cover would touch a member.

    >>> _time_window_group(TimeWindow(10, 20), [(0, 5), (19, 30), (12, 15), (40, 50)])
    ([TimeWindow(start=12, end=15), TimeWindow(start=19, end=30)], TimeWindow(start=10, end=30))
    """
    start, end = window.start, window.end
    hits = sorted(ns for ns in namespaces if ns[0] <= end and ns[1] >= start)
    if not hits:
        return [], window
    return [TimeWindow(s, e) for s, e in hits], TimeWindow(
        min(start, hits[0][0]), max(end, max(e for _, e in hits))
    )
