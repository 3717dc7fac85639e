"""The window operator's batch path: whole input batches for the common case of non-merging
windows with the default trigger (``EventTimeTrigger``, ``ProcessingTimeTrigger``), no evictor
and ``reduce``/``aggregate`` (incremental aggregation), with a write-back cache of
accumulators. Processing-time windows read the clock once per batch: the batch is processed
at one instant, so its records go to that instant's windows (the per-record path reads the
clock per record; with a clock that does not move within a batch the two agree).

Invariant: what the keyed state holds whenever anything but this path can see it — before
timers fire, before a snapshot, before a record takes the per-record path (``write_back``
runs at each of those) — and the timers (and the order they are registered in), outputs
and their order and timestamps are exactly what calling ``process_element`` per record in
input order gives. The watermark only changes between batches, so a record none of whose
windows has reached it only folds into its windows' accumulators and, for a new window,
registers its timers; such records fold into a plain dict keyed by ``(key, window)``: the
accumulator is read from keyed state at the group's first record since the last write-back
(its timers registered there, in first-appearance order, as per record) and written back
once. Every other record (late; late within the allowed lateness: it fires its window;
without a timestamp) writes the cache back first and then goes through
``process_element``, so the adds to any one window stay in input order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from cairn.api.state import MapState
from cairn.datastream.window import MAX_LONG, TimeWindow, TumblingEventTimeWindows, WindowAssigner
from cairn.datastream.window_state import namespace

__all__ = ["KeyedBatchContext", "WindowBatchPath", "WindowOperatorParts"]

_MISSING: Any = object()


def _unused(a: Any, b: Any) -> Any:
    raise AssertionError("an aggregate() window has no reduce function")


#: Write the cache back at the end of a batch once it holds this many windows.
MAX_CACHED = 100_000


class KeyedBatchContext(Protocol):
    """What the batch path uses of the keyed operator's context (the one
    ``process_element`` gets): its timer service, for the watermark, the clock and the
    timers of the current key."""

    def timer_service(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class WindowOperatorParts:
    """The parts of a window operator its batch path works with, handed over once in the
    operator's ``open``; the batch path sees nothing else of the operator.

    ``contents`` is the operator's window contents of the current key, keyed by window
    namespace; ``register_timer(timer_service, event_time, timestamp, namespace)`` registers
    a window's timer as the operator's own timers do; ``use_context(ctx)`` makes ``ctx`` the
    operator's context for a batch and returns the assigners' context; ``process_one(value,
    timestamp, ctx)`` is the operator's per-record path of the default event-time case (what
    ``process_element`` does for a record with ``timestamp``), for the records the batch
    path does not fold itself.
    """

    assigner: WindowAssigner
    incremental: tuple[str, Any]
    allowed_lateness: int
    contents: MapState[Any, Any]
    register_timer: Callable[[Any, bool, int, Any], None]
    use_context: Callable[[KeyedBatchContext], Any]
    process_one: Callable[[Any, int | None, KeyedBatchContext], Iterable[Any]]


class WindowBatchPath:
    """``process_batch`` of one window operator and its accumulator cache (see the module's
    invariant); built in the operator's ``open``, from its ``WindowOperatorParts``, only
    when its spec is of the common case."""

    def __init__(self, parts: WindowOperatorParts) -> None:
        self._parts = parts
        kind, f = parts.incremental
        self._is_reduce = kind == "reduce"
        # aggregate: ``add(value, acc)``, called directly; reduce: ``fold(acc, value)``
        self._add: Callable[[Any, Any], Any] | None = None
        self._fold: Callable[[Any, Any], Any] = _unused
        self._create: Callable[[], Any] | None = None
        if self._is_reduce:
            reduce = getattr(f, "reduce", None)
            self._fold = reduce if callable(reduce) else f
        else:
            self._add = f.add
            self._create = f.create_accumulator
        # ``step(value, accumulator)``: aggregate's ``add`` itself (called directly); for
        # reduce, the first value, then ``fold``.
        self._step: Callable[[Any, Any], Any] = self._add or self._reduce_step
        assigner = parts.assigner
        self._tumbling = type(assigner) is TumblingEventTimeWindows
        self._size = getattr(assigner, "size", 0)
        self._offset = getattr(assigner, "offset", 0)
        self._window_cache: dict[int, tuple[int, int]] = {}  # start -> namespace
        self.processing_time = not assigner.is_event_time()
        # (key, window start or namespace) -> [key, namespace, accumulator], not yet in state
        self._pending: dict[tuple[Any, Any], list[Any]] = {}
        self._set_key: Callable[[Any], None] | None = None

    def _reduce_step(self, value: Any, acc: Any) -> Any:
        return value if acc is _MISSING else self._fold(acc, value)

    def _first_of_group(
        self, set_key: Callable[[Any], None], timer_service: Any, lateness: int | None
    ) -> Callable[[Any, Any, int], list[Any]]:
        """``first(key, namespace, end)`` for one batch: a group's first record since the
        last write-back; its cache entry ``[key, namespace, accumulator]``, the accumulator
        read from state or, for a window new to the key, started here with its timers (the
        end timer, and in event time (``lateness`` not ``None``) the cleanup timer when it
        differs), as the per-record path registers them."""
        contents = self._parts.contents.get
        register = self._parts.register_timer
        create = self._create
        event_time = lateness is not None
        late_by = lateness or 0

        def first(key: Any, window: Any, end: int) -> list[Any]:
            set_key(key)
            acc = contents(window)
            if acc is None:
                acc = _MISSING if create is None else create()
                register(timer_service, event_time, end, window)
                if event_time:
                    cleanup = min(end + late_by, MAX_LONG)
                    if cleanup != end and cleanup != MAX_LONG:
                        register(timer_service, True, cleanup, window)
            return [key, window, acc]

        return first

    def write_back(self) -> None:
        """Put every cached accumulator into keyed state and empty the cache (leaves the
        current key at the last one written)."""
        pending = self._pending
        if not pending:
            return
        set_key = self._set_key
        assert set_key is not None
        put = self._parts.contents.put
        for key, window, acc in pending.values():
            set_key(key)
            put(window, acc)
        pending.clear()

    def __call__(
        self,
        records: list[Any],
        timestamps: list[int | None],
        select: Callable[[Any], Any],
        set_key: Callable[[Any], None],
        ctx: KeyedBatchContext,
    ) -> tuple[list[Any], list[int | None]]:
        """Process ``records`` (with ``timestamps``); their outputs and each one's timestamp."""
        if self.processing_time:
            self._process_in_processing_time(records, select, set_key, ctx)
            return [], []
        parts = self._parts
        assigner_context = parts.use_context(ctx)
        timer_service = ctx.timer_service()
        watermark = timer_service.current_watermark()
        process_one = parts.process_one
        tumbling, size, offset = self._tumbling, self._size, self._offset
        cache = self._window_cache
        if len(cache) > 64:
            cache.clear()
        assign = parts.assigner.assign_windows
        self._set_key = set_key
        pending = self._pending
        flush = self.write_back
        first = self._first_of_group(set_key, timer_service, parts.allowed_lateness)
        out: list[Any] = []
        stamps: list[int | None] = []

        def one_by_one(r: Any, key: Any, t: int | None) -> None:
            if pending:
                flush()
            set_key(key)
            n = len(out)
            out.extend(process_one(r, t, ctx))
            stamps.extend([t] * (len(out) - n))

        step = self._step
        # Two loops on purpose: a tumbling window is computed inline (no assigner call, no
        # window object, one cache entry per (key, start)), the hottest case; any other
        # assigner goes through its windows. What a group does is ``first`` in both.
        if tumbling:
            # One window per record, computed inline. A record is late iff its window's end
            # (start + size - 1) <= watermark, i.e. start <= last_late_start.
            last_late_start = watermark - size + 1
            for r, t in zip(records, timestamps, strict=True):
                key = select(r)
                if t is None:
                    one_by_one(r, key, t)
                    continue
                start = t - (t - offset) % size
                if start <= last_late_start:
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
                        window = cache[start] = (start, start + size)
                    group = pending[(key, start)] = first(key, window, start + size - 1)
                group[2] = step(r, group[2])
        else:
            for r, t in zip(records, timestamps, strict=True):
                key = select(r)
                if t is None:
                    one_by_one(r, key, t)
                    continue
                windows = assign(r, t, assigner_context)
                if any(w.max_timestamp() <= watermark for w in windows):
                    one_by_one(r, key, t)
                    continue
                for w in windows:
                    ns = namespace(w)
                    try:
                        group = pending.get((key, ns))
                    except TypeError:
                        set_key(key)
                        raise
                    if group is None:
                        group = pending[(key, ns)] = first(key, ns, w.max_timestamp())
                    group[2] = step(r, group[2])
        if len(pending) > MAX_CACHED:
            flush()
        return out, stamps

    def _process_in_processing_time(
        self,
        records: list[Any],
        select: Callable[[Any], Any],
        set_key: Callable[[Any], None],
        ctx: KeyedBatchContext,
    ) -> None:
        """Processing-time windows: the clock is read once for the whole batch (the batch is
        processed at one instant), so every record goes to the windows of that instant; none
        is late (a window ends after the instant it is assigned at) and none fires here
        (its timer fires once the clock passes its end, between batches). The accumulator of
        a window new to its key starts here, with its one processing-time timer."""
        parts = self._parts
        assigner_context = parts.use_context(ctx)
        self._set_key = set_key
        timer_service = ctx.timer_service()
        now = int(timer_service.current_processing_time())
        windows = [
            (w.start, namespace(w), w.max_timestamp())
            for w in cast(
                "list[TimeWindow]", parts.assigner.assign_windows(None, now, assigner_context)
            )
        ]
        first = self._first_of_group(set_key, timer_service, None)
        step = self._step
        pending = self._pending
        for r in records:
            key = select(r)
            for start, window, end in windows:
                try:
                    group = pending.get((key, start))
                except TypeError:
                    set_key(key)  # raises the backend's error for an unhashable key
                    raise
                if group is None:
                    group = pending[(key, start)] = first(key, window, end)
                group[2] = step(r, group[2])
        if len(pending) > MAX_CACHED:
            self.write_back()
