"""The window operator's batch path: a whole input batch at once for the common case of
event-time, non-merging windows with the default ``EventTimeTrigger``, no evictor and
``reduce``/``aggregate`` (incremental aggregation).

Invariant: the result — window state, timers (and the order they are registered in), outputs
and their order and timestamps — is exactly what calling ``process_element`` per record in
input order gives. The watermark is constant over a batch (watermarks arrive between
batches), so a record none of whose windows has reached the watermark only folds into its
windows' accumulators and, for a new window, registers its timers; such records are folded
per ``(key, window)`` in a plain dict, the accumulator read from keyed state at the group's
first record (timers registered there too, in first-appearance order, as per record) and
written back once. Every other record (late, or late within the allowed lateness: it fires
its window; or without a timestamp) first writes the pending groups back and then goes
through ``process_element``, so the adds to any one window stay in input order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cairn.datastream.window import MAX_LONG, TimeWindow, TumblingEventTimeWindows

if TYPE_CHECKING:
    from cairn.datastream.window_operator import WindowOperatorFunction

__all__ = ["WindowBatchPath"]

_MISSING: Any = object()


class WindowBatchPath:
    """``process_batch`` of one ``WindowOperatorFunction`` (see the module's invariant);
    built in ``open`` only when the operator's spec is of the common case."""

    def __init__(self, op: WindowOperatorFunction) -> None:
        self._op = op
        spec = op.spec
        assert spec.incremental is not None
        kind, f = spec.incremental
        self._is_reduce = kind == "reduce"
        if self._is_reduce:
            reduce = getattr(f, "reduce", None)
            self._fold: Callable[[Any, Any], Any] = reduce if callable(reduce) else f
        else:
            add = f.add
            self._fold = lambda acc, value: add(value, acc)
            self._create: Callable[[], Any] = f.create_accumulator
        assigner = spec.assigner
        self._tumbling = type(assigner) is TumblingEventTimeWindows
        self._size = getattr(assigner, "size", 0)
        self._offset = getattr(assigner, "offset", 0)
        self._window_cache: dict[int, TimeWindow] = {}

    def __call__(
        self,
        records: list[Any],
        timestamps: list[int | None],
        select: Callable[[Any], Any],
        set_key: Callable[[Any], None],
        ctx: Any,
    ) -> tuple[list[Any], list[int | None]]:
        """Process ``records`` (with ``timestamps``); their outputs and each one's timestamp."""
        op = self._op
        op._ctx = ctx
        timer_service = ctx.timer_service()
        watermark = timer_service.current_watermark()
        lateness = op.spec.allowed_lateness
        contents = op._contents
        register = op._timers.register
        fold = self._fold
        create = None if self._is_reduce else self._create
        tumbling, size, offset = self._tumbling, self._size, self._offset
        cache = self._window_cache
        if len(cache) > 64:
            cache.clear()
        assign = op.spec.assigner.assign_windows
        # (key, window id) -> [key, window, accumulator]
        pending: dict[tuple[Any, Any], list[Any]] = {}
        out: list[Any] = []
        stamps: list[int | None] = []

        def first(key: Any, window: Any, end: int) -> list[Any]:
            """A group's first record: its accumulator from state, timers if new."""
            set_key(key)
            acc = contents.get(window)
            if acc is None:
                acc = _MISSING if create is None else create()
                register(timer_service, True, end, window)
                cleanup = min(end + lateness, MAX_LONG)
                if cleanup != end and cleanup != MAX_LONG:
                    register(timer_service, True, cleanup, window)
            return [key, window, acc]

        def flush() -> None:
            for key, window, acc in pending.values():
                set_key(key)
                contents.put(window, acc)
            pending.clear()

        def one_by_one(r: Any, key: Any, t: int | None) -> None:
            if pending:
                flush()
            set_key(key)
            ctx._timestamp = t
            result = op.process_element(r, ctx)
            ctx._timestamp = None
            n = len(out)
            out.extend(result)
            stamps.extend([t] * (len(out) - n))

        for r, t in zip(records, timestamps, strict=True):
            key = select(r)
            if t is None:
                one_by_one(r, key, t)
                continue
            if tumbling:
                start = t - (t - offset) % size
                end = start + size - 1
                if end <= watermark:
                    one_by_one(r, key, t)
                    continue
                try:
                    group = pending.get((key, start))
                except TypeError:
                    set_key(key)  # raises the backend's error for an unhashable key
                    raise
                if group is None:
                    window = cache.get(start)
                    if window is None:
                        window = cache[start] = TimeWindow(start, start + size)
                    group = pending[(key, start)] = first(key, window, end)
                acc = group[2]
                group[2] = r if acc is _MISSING else fold(acc, r)
                continue
            windows = assign(r, t, op)
            if any(w.max_timestamp() <= watermark for w in windows):
                one_by_one(r, key, t)
                continue
            for w in windows:
                try:
                    group = pending.get((key, w))
                except TypeError:
                    set_key(key)
                    raise
                if group is None:
                    group = pending[(key, w)] = first(key, w, w.max_timestamp())
                acc = group[2]
                group[2] = r if acc is _MISSING else fold(acc, r)
        if pending:
            flush()
        return out, stamps
