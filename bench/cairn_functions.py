"""The user code of the Cairn benchmark jobs: generators, the keyed sum, and measuring sinks.

Invariant: the sinks only observe — they discard every record after counting it (and timing
it) — and leave their observations in files named by subtask and attempt under ``out_dir``,
appended and flushed as they go, so a SIGKILLed worker loses at most one mark interval.
"""

from __future__ import annotations

import gc
import json
import os
import time
from array import array
from collections import Counter
from collections.abc import Iterator
from itertools import repeat
from operator import floordiv
from typing import Any

from cairn.common import Types
from cairn.datastream import KeyedProcessFunction
from cairn.datastream.connectors.datagen import KeyedValuesGenerator
from cairn.datastream.functions import SinkFunction
from cairn.datastream.state import ValueStateDescriptor

__all__ = [
    "MARK_EVERY",
    "CoveringKeysGenerator",
    "HotKeysGenerator",
    "KeyedSum",
    "LatencySink",
    "ProgressSink",
    "TimedKeyedSum",
    "TimedKeyedValuesGenerator",
    "progress_file",
]

MARK_EVERY = 2048  # records between two progress marks of one sink subtask
LATENCY_BUCKET_NS = 100_000  # 0.1 ms resolution of the latency histogram
TIMELINE_WINDOW_NS = 50_000_000  # 50 ms windows of the latency timeline
_UNSET = 1 << 63  # no record seen yet: every creation time is below it
_time_ns = time.time_ns


def progress_file(out_dir: str, subtask: int, attempt: int) -> str:
    return os.path.join(out_dir, f"progress-{subtask}-{attempt}.log")


def latency_file(out_dir: str, subtask: int, attempt: int) -> str:
    return os.path.join(out_dir, f"latency-{subtask}-{attempt}.json")


# ---- generators (picklable, batch fast path) ----------------------------------------------


class CoveringKeysGenerator:
    """Record ``i`` is ``(key(i % num_keys), 1)``: the first ``num_keys`` records touch every key.

    >>> CoveringKeysGenerator(3).generate_batch(range(4))
    [('k000000', 1), ('k000001', 1), ('k000002', 1), ('k000000', 1)]
    """

    def __init__(self, num_keys: int) -> None:
        if num_keys < 1:
            raise ValueError(f"num_keys must be >= 1, got {num_keys}")
        self.num_keys = num_keys
        self._keys: list[str] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_keys": None}  # rebuilt on the worker, not shipped

    def __call__(self, index: int) -> tuple[str, int]:
        return self.generate_batch(range(index, index + 1))[0]

    def generate_batch(self, indices: range) -> list[tuple[str, int]]:
        keys = self._keys
        if keys is None:
            width = max(6, len(str(self.num_keys - 1)))
            keys = self._keys = [f"k{r:0{width}d}" for r in range(self.num_keys)]
        n = self.num_keys
        return [(keys[i % n], 1) for i in indices]


class HotKeysGenerator:
    """The first ``num_keys`` records touch every key once; after them every record updates
    one of the first ``hot`` keys (``hot_fraction`` of them, at least one), so each
    checkpoint interval after the fill changes at most that fraction of the state. Only the
    hot keys are kept as strings (the fill's are formatted once each), so a worker's memory
    shows its state, not the generator's key list.

    >>> HotKeysGenerator(4, 0.5).generate_batch(range(7))
    [('k000000', 1), ('k000001', 1), ('k000002', 1), ('k000003', 1), ('k000000', 1), \
('k000001', 1), ('k000000', 1)]
    """

    def __init__(self, num_keys: int, hot_fraction: float) -> None:
        if num_keys < 1:
            raise ValueError(f"num_keys must be >= 1, got {num_keys}")
        if not 0 < hot_fraction <= 1:
            raise ValueError(f"hot_fraction must be in (0, 1], got {hot_fraction}")
        self.num_keys = num_keys
        self.hot = max(1, int(num_keys * hot_fraction))
        self._width = max(6, len(str(num_keys - 1)))
        self._hot_keys: list[str] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_hot_keys": None}  # rebuilt on the worker, not shipped

    def __call__(self, index: int) -> tuple[str, int]:
        return self.generate_batch(range(index, index + 1))[0]

    def generate_batch(self, indices: range) -> list[tuple[str, int]]:
        width, n, hot = self._width, self.num_keys, self.hot
        keys = self._hot_keys
        if keys is None:
            keys = self._hot_keys = [f"k{r:0{width}d}" for r in range(hot)]
        return [(f"k{i:0{width}d}" if i < n else keys[(i - n) % hot], 1) for i in indices]


class TimedKeyedValuesGenerator:
    """``(key, 1, created_ns)``: the keys of ``keyed_values``, stamped with their schedule.

    ``created_ns`` is when record ``i`` was due at ``rate`` records/s, not when it was
    generated: a source that falls behind its schedule (backpressure) shows up as latency
    instead of hiding it (no coordinated omission). The schedule is the latest one that no
    batch ran ahead of — a rate-limited batch is granted when its last record is due — so no
    record is stamped later than it was generated (to within the rounding of the stride to
    whole nanoseconds: under a microsecond per batch).
    """

    def __init__(self, num_keys: int, rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.keys = KeyedValuesGenerator(num_keys)
        self.ns_per_record = 1e9 / rate
        self._t0_ns: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_t0_ns": None}

    def __call__(self, index: int) -> tuple[str, int, int]:
        return self.generate_batch(range(index, index + 1))[0]

    def generate_batch(self, indices: range) -> list[tuple[str, int, int]]:
        if not indices:
            return []
        step = self.ns_per_record
        anchor = time.time_ns() - int(indices[-1] * step)
        if self._t0_ns is None or anchor < self._t0_ns:
            self._t0_ns = anchor
        first = self._t0_ns + int(indices[0] * step)
        stride = max(1, round(step * indices.step))
        # The same keys as KeyedValuesGenerator (uniform); stamps and tuples built in C, so
        # the probe's own cost stays small next to the job it measures.
        batch_keys = self.keys.keys_of(indices)
        stamps = range(first, first + len(indices) * stride, stride)
        return list(zip(batch_keys, repeat(1), stamps))


# ---- the keyed sum, as a user writes it ---------------------------------------------------


class KeyedSum(KeyedProcessFunction):
    """Running sum per key in a ``ValueState``; emits ``(key, sum)``."""

    def open(self, runtime_context: Any) -> None:
        self.sum_state = runtime_context.get_state(ValueStateDescriptor("sum", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Iterator[tuple[str, int]]:
        current_sum = self.sum_state.value() or 0
        updated_sum = current_sum + value[1]
        self.sum_state.update(updated_sum)
        yield value[0], updated_sum


class TimedKeyedSum(KeyedSum):
    """The same sum, passing the creation timestamp through: ``(key, sum, created_ns)``."""

    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        current_sum = self.sum_state.value() or 0
        updated_sum = current_sum + value[1]
        self.sum_state.update(updated_sum)
        yield value[0], updated_sum, value[2]


# ---- measuring sinks ----------------------------------------------------------------------


class ProgressSink(SinkFunction):
    """Discards records; every ``MARK_EVERY`` records appends ``"<epoch s> <count>"``.

    The first record and the end of input are marked too, so the files give each subtask's
    first-output time, progress curve and total.
    """

    def __init__(self, out_dir: str, mark_every: int = MARK_EVERY) -> None:
        self.out_dir = out_dir
        self.mark_every = mark_every

    def open(self, runtime_context: Any) -> None:
        self._subtask = runtime_context.get_index_of_this_subtask()
        self._attempt = runtime_context.get_attempt_number()
        path = progress_file(self.out_dir, self._subtask, self._attempt)
        self._file = open(path, "a", encoding="ascii")  # noqa: SIM115 - closed in close()
        self._file.write(f"{time.time():.6f} 0\n")
        self._file.flush()
        self._count = 0
        self._next_mark = 1

    def invoke(self, value: Any, context: Any) -> None:
        self._count += 1
        if self._count >= self._next_mark:
            self._mark()

    def _mark(self) -> None:
        n = self._count
        self._file.write(f"{time.time():.6f} {n}\n")
        self._file.flush()  # a killed worker keeps its marks up to here
        self._next_mark = (n // self.mark_every + 1) * self.mark_every

    def close(self) -> None:
        f = getattr(self, "_file", None)
        if f is not None and not f.closed:
            f.write(f"{time.time():.6f} {self._count} end\n")
            f.close()


class GcPauses:
    """The cyclic collector's pauses in this process while started: per collection its start
    (``time_ns``), generation, wall and CPU time of the collecting thread (ns). One sink
    subtask per worker process records them, so each process is counted once."""

    def __init__(self) -> None:
        self.events: list[tuple[int, int, int, int]] = []
        self._began = (0, 0)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = (time.time_ns(), time.thread_time_ns())
        else:
            t0, c0 = self._began
            wall, cpu = time.time_ns() - t0, time.thread_time_ns() - c0
            self.events.append((t0, int(info["generation"]), wall, cpu))

    def start(self) -> None:
        gc.callbacks.append(self._callback)

    def stop(self) -> list[tuple[int, int, int, int]]:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
        return self.events


class LatencySink(ProgressSink):
    """Also histograms ``now - created_ns`` per record (0.1 ms buckets), skipping warm-up.

    Records created less than ``warmup_s`` after the first record this subtask saw are
    counted but not timed (connections and caches settling). Per record the sink only reads
    the clock and keeps the latency (8 bytes); at every progress mark the largest latency
    since the last mark goes into the timeline (per 50 ms window of sink time, to tell by
    when a tail happened what it came from). The histogram is made from the kept latencies
    when the sink closes and written as JSON with the timeline.
    """

    def __init__(self, out_dir: str, warmup_s: float = 1.0, mark_every: int = MARK_EVERY) -> None:
        super().__init__(out_dir, mark_every)
        self.warmup_ns = int(warmup_s * 1e9)

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self._latencies = array("q")  # 8 bytes per timed record, histogrammed at close
        self._keep = self._latencies.append
        self._folded = 0  # latencies[:folded] are in the timeline already
        self._skipped = 0
        self._timed_from_ns = _UNSET  # set by the first record: created + warm-up
        self._timeline: dict[int, int] = {}
        self._gc = GcPauses()
        self._gc.start()

    def invoke(self, value: Any, context: Any) -> None:
        created = value[2]
        if created >= self._timed_from_ns:
            self._keep(_time_ns() - created)
        else:
            if self._timed_from_ns == _UNSET:
                self._timed_from_ns = created + self.warmup_ns
            self._skipped += 1
        self._count += 1
        if self._count >= self._next_mark:
            self._mark()

    def _mark(self) -> None:
        self._fold()
        super()._mark()

    def _fold(self) -> None:
        latencies = self._latencies
        if len(latencies) > self._folded:
            window = _time_ns() // TIMELINE_WINDOW_NS
            worst = max(latencies[self._folded :])
            self._timeline[window] = max(self._timeline.get(window, 0), worst)
            self._folded = len(latencies)

    def close(self) -> None:
        if getattr(self, "_file", None) is not None:
            self._fold()
            summary = {
                "bucket_ns": LATENCY_BUCKET_NS,
                "counts": {
                    str(k): v
                    for k, v in Counter(
                        map(floordiv, self._latencies, repeat(LATENCY_BUCKET_NS))
                    ).items()
                },
                "max_ns": max(self._timeline.values(), default=0),
                "skipped": self._skipped,
                "timeline_window_ns": TIMELINE_WINDOW_NS,
                "timeline": sorted(self._timeline.items()),
                "gc": self._gc.stop(),
            }
            path = latency_file(self.out_dir, self._subtask, self._attempt)
            with open(path, "w", encoding="ascii") as f:
                json.dump(summary, f)
        super().close()
