"""A deterministic data generator source for benchmarks and demos (Flink's ``DataGeneratorSource``).

Invariant: record ``i`` is a pure function of its global index ``i``, and the split states
partition the index space into strided sets ``{next, next + stride, ...} < end`` that only
move forward; so the multiset of records is the same at every parallelism and across
restores, whatever the rate limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.api.connectors import Source, SourceReader, SourceReaderContext
from cairn.ids import CheckpointId

__all__ = [
    "DataGenSplit",
    "DataGeneratorSource",
    "KeyedValuesGenerator",
    "RateLimiter",
    "RateLimiterStrategy",
    "SkewedGenerator",
]

Clock = Callable[[], float]

# Fibonacci hashing: the high bits of ``i * 2**64/phi mod 2**64`` are well mixed, so keys
# do not follow the index stride (and thus not the subtask) of a record.
_GOLDEN64 = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1
_TABLE_BITS = 20  # resolution of the skewed key distribution: 2**20 quantiles


# ---- rate limiting -----------------------------------------------------------------------


class RateLimiter:
    """A token bucket: at most ``rate`` records per second, bursts of at most one second.

    Starts empty, so no record is emitted before ``1 / rate`` seconds have passed. Grants
    come in batches of at least ``min_batch`` records (the rate's worth of ``batch_s``, 1 ms
    by default, at least one record, never more than asked for): a task that polls whenever
    it is idle gets a batch per poll instead of a record or two, and ``seconds_until_ready``
    tells it how long to sleep until the next batch is due.

    >>> clock = iter([0.0, 0.0005, 0.0005, 0.001]).__next__
    >>> limiter = RateLimiter(100_000, clock)  # 100 records per 1 ms batch
    >>> limiter.acquire(1024), round(limiter.seconds_until_ready(1024), 4)
    (0, 0.0005)
    >>> limiter.acquire(1024)
    100
    """

    def __init__(
        self,
        records_per_second: float | None,
        clock: Clock = time.monotonic,
        batch_s: float = 0.001,
    ) -> None:
        self._rate = records_per_second
        self._clock = clock
        self._capacity = max(1.0, records_per_second or 0.0)
        self._min_batch = max(1, int((records_per_second or 0.0) * batch_s))
        self._tokens = 0.0
        self._last = clock()

    def _refill(self) -> float:
        assert self._rate is not None
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._rate)
        self._last = now
        return self._tokens

    def acquire(self, wanted: int) -> int:
        """How many of ``wanted`` records may be emitted now (never blocks)."""
        if self._rate is None:
            return wanted
        tokens = self._refill()
        if tokens < min(wanted, self._min_batch):
            return 0
        granted = min(wanted, int(tokens))
        self._tokens -= granted
        return granted

    def seconds_until_ready(self, wanted: int) -> float:
        """Seconds until ``acquire(wanted)`` grants a batch (0.0: now)."""
        if self._rate is None:
            return 0.0
        missing = min(wanted, self._min_batch) - self._refill()
        return max(0.0, missing / self._rate)


@dataclass(frozen=True)
class RateLimiterStrategy:
    """How fast a ``DataGeneratorSource`` emits, for the whole source.

    >>> RateLimiterStrategy.per_second(1000).create_rate_limiter(4)._rate
    250.0
    """

    records_per_second: float | None = None

    @staticmethod
    def no_limit() -> RateLimiterStrategy:
        return RateLimiterStrategy(None)

    @staticmethod
    def per_second(records_per_second: float) -> RateLimiterStrategy:
        if records_per_second <= 0:
            raise ValueError(f"records_per_second must be > 0, got {records_per_second}")
        return RateLimiterStrategy(float(records_per_second))

    def create_rate_limiter(self, parallelism: int, clock: Clock = time.monotonic) -> RateLimiter:
        """The limiter of one subtask: the source's rate divided by ``parallelism``."""
        rate = None if self.records_per_second is None else self.records_per_second / parallelism
        return RateLimiter(rate, clock)


# ---- built-in generators (picklable, with a per-batch fast path) -------------------------


class SkewedGenerator:
    """Record ``i`` is ``2`` if ``i % skewed_ratio == 0`` else ``1`` (a hot key ``1``).

    >>> SkewedGenerator(3).generate_batch(range(7))
    [2, 1, 1, 2, 1, 1, 2]
    """

    def __init__(self, skewed_ratio: int) -> None:
        if skewed_ratio < 1:
            raise ValueError(f"skewed_ratio must be >= 1, got {skewed_ratio}")
        self.skewed_ratio = skewed_ratio

    def __call__(self, index: int) -> int:
        return 2 if index % self.skewed_ratio == 0 else 1

    def generate_batch(self, indices: range) -> list[int]:
        r = self.skewed_ratio
        return [2 if i % r == 0 else 1 for i in indices]


class KeyedValuesGenerator:
    """Record ``i`` is ``(key, value)``; see ``DataGeneratorSource.keyed_values``.

    Keys are strings ``"k" + zero-padded rank`` (at least 6 digits, so they sort like their
    rank); with ``skew`` the key of rank ``r`` has probability proportional to
    ``1 / (r + 1) ** skew`` (Zipf), with a resolution of ``2**-20``.

    >>> KeyedValuesGenerator(num_keys=3).generate_batch(range(4))
    [('k000000', 1), ('k000000', 1), ('k000002', 1), ('k000000', 1)]
    """

    def __init__(
        self,
        num_keys: int,
        value: int | Callable[[int], Any] = 1,
        skew: float | None = None,
    ) -> None:
        if num_keys < 1:
            raise ValueError(f"num_keys must be >= 1, got {num_keys}")
        if skew is not None and skew < 0:
            raise ValueError(f"skew must be >= 0, got {skew}")
        self.num_keys = num_keys
        self.value = value
        self.skew = skew
        self._keys: list[str] | None = None
        self._table: list[str] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The lookup tables are rebuilt on the worker rather than shipped in the plan.
        return {**self.__dict__, "_keys": None, "_table": None}

    def _build(self) -> tuple[list[str], list[str] | None]:
        if self._keys is None:
            width = max(6, len(str(self.num_keys - 1)))
            self._keys = [f"k{r:0{width}d}" for r in range(self.num_keys)]
            if self.skew is not None:
                self._table = _zipf_table(self._keys, self.skew)
        return self._keys, self._table

    def __call__(self, index: int) -> tuple[str, Any]:
        return self.generate_batch(range(index, index + 1))[0]

    def keys_of(self, indices: range) -> list[str]:
        """The keys of records ``indices``, without their values: for generators that pair
        this generator's keys with values of their own (e.g. timestamps).

        >>> gen = KeyedValuesGenerator(num_keys=1000, skew=1.0)
        >>> gen.keys_of(range(5, 9)) == [key for key, _ in gen.generate_batch(range(5, 9))]
        True
        """
        keys, table = self._build()
        g, m, n = _GOLDEN64, _MASK64, self.num_keys
        if table is not None:
            shift = 64 - _TABLE_BITS
            return [table[((i * g) & m) >> shift] for i in indices]
        return [keys[(((i * g) & m) >> 32) % n] for i in indices]

    def generate_batch(self, indices: range) -> list[tuple[str, Any]]:
        keys, table = self._build()
        g, m, n = _GOLDEN64, _MASK64, self.num_keys
        value = self.value
        if table is not None:
            shift = 64 - _TABLE_BITS
            if callable(value):
                return [(table[((i * g) & m) >> shift], value(i)) for i in indices]
            return [(table[((i * g) & m) >> shift], value) for i in indices]
        if callable(value):
            return [(keys[(((i * g) & m) >> 32) % n], value(i)) for i in indices]
        return [(keys[(((i * g) & m) >> 32) % n], value) for i in indices]


def _zipf_table(keys: list[str], skew: float) -> list[str]:
    """``2**_TABLE_BITS`` entries; key ``r`` fills a share proportional to its weight."""
    size = 1 << _TABLE_BITS
    weights = [(r + 1) ** -skew for r in range(len(keys))]
    total = math.fsum(weights)
    table: list[str] = []
    cumulative = 0.0
    for key, weight in zip(keys, weights, strict=True):
        cumulative += weight
        table.extend([key] * (round(size * cumulative / total) - len(table)))
    table.extend([keys[-1]] * (size - len(table)))  # rounding slack, if any
    return table[:size]


# ---- the source --------------------------------------------------------------------------


@dataclass(frozen=True)
class DataGenSplit:
    """Indices ``next_index, next_index + stride, ...`` below ``end`` (``None``: no end)."""

    split_id: int
    next_index: int
    stride: int
    end: int | None

    def remaining(self) -> float:
        if self.end is None:
            return math.inf
        return max(0, -(-(self.end - self.next_index) // self.stride))


class DataGeneratorSource(Source):
    """Emits ``generator_function(i)`` for ``i = 0, 1, ...`` (``count`` records, or forever).

    Split ``j`` of ``p`` takes the indices ``i ≡ j (mod p)``, so at any parallelism the
    subtasks advance through the index space side by side; restored splits keep their
    stride. A rescale redistributes whole splits: raising the parallelism above the number of
    splits of the first run leaves the extra subtasks idle.

    >>> source = DataGeneratorSource(lambda i: i * i, 5)
    >>> [(s.next_index, s.stride) for s in source.create_splits(2)]
    [(0, 2), (1, 2)]

    ``rate_limiter_strategy`` caps the rate of the whole source (split evenly over the
    subtasks) and emits in batches of at least 1 ms worth of records; a reader ahead of
    schedule returns ``[]`` instead of sleeping and tells the task (``available_in_s``) when
    the next batch is due.
    ``generator_function`` must be picklable (cloudpickle) and pure; an object with a
    ``generate_batch(indices: range) -> list`` method is called once per batch instead.
    """

    split_redistribution = "split"

    def __init__(
        self,
        generator_function: Callable[[int], Any],
        count: int | None,
        rate_limiter_strategy: RateLimiterStrategy | None = None,
        type_info: Any = None,
    ) -> None:
        if count is not None and count < 0:
            raise ValueError(f"count must be >= 0 or None, got {count}")
        self.generator_function = generator_function
        self.count = count
        self.rate_limiter_strategy = rate_limiter_strategy or RateLimiterStrategy.no_limit()
        self.type_info = type_info

    @staticmethod
    def keyed_values(
        count: int | None,
        num_keys: int,
        value: int | Callable[[int], Any] = 1,
        skew: float | None = None,
        rate_limiter_strategy: RateLimiterStrategy | None = None,
    ) -> DataGeneratorSource:
        """``(key, value)`` tuples over ``num_keys`` string keys ``"k000000"``, ...

        ``value`` is a constant or a pure function of the record index. ``skew=None`` spreads
        keys uniformly (by a hash of the index); ``skew=s`` draws them from a Zipf law with
        exponent ``s`` (``"k000000"`` hottest). Typical use: ``.key_by(lambda r: r[0]).sum(1)``.
        """
        generator = KeyedValuesGenerator(num_keys, value, skew)
        return DataGeneratorSource(generator, count, rate_limiter_strategy)

    @staticmethod
    def skewed(
        skewed_ratio: int = 1000,
        count: int | None = None,
        rate_limiter_strategy: RateLimiterStrategy | None = None,
    ) -> DataGeneratorSource:
        """The skewed stream of the checkpoint-alignment demo: ``2`` once per ``skewed_ratio``
        records (index 0 included), ``1`` otherwise; ``key_by(lambda v: v % 2 == 0)`` sends
        almost everything to one subtask."""
        return DataGeneratorSource(SkewedGenerator(skewed_ratio), count, rate_limiter_strategy)

    def is_bounded(self) -> bool:
        return self.count is not None

    def create_splits(self, parallelism: int) -> list[DataGenSplit]:
        if parallelism < 1:
            raise ValueError(f"parallelism must be >= 1, got {parallelism}")
        n = parallelism if self.count is None else min(parallelism, self.count)
        return [DataGenSplit(j, j, n, self.count) for j in range(n)]

    def create_reader(
        self,
        splits: Sequence[DataGenSplit],
        context: SourceReaderContext,
        clock: Clock = time.monotonic,
    ) -> DataGeneratorReader:
        limiter = self.rate_limiter_strategy.create_rate_limiter(context.parallelism, clock)
        return DataGeneratorReader(splits, self.generator_function, limiter)


class DataGeneratorReader(SourceReader):
    """Polls the split that is furthest behind, so its splits advance together."""

    def __init__(
        self,
        splits: Sequence[DataGenSplit],
        generator_function: Callable[[int], Any],
        rate_limiter: RateLimiter,
    ) -> None:
        self._splits = [s for s in splits if s.remaining() > 0]
        batch_fn = getattr(generator_function, "generate_batch", None)
        self._generate: Callable[[range], list[Any]] = (
            batch_fn if batch_fn is not None else lambda r: [generator_function(i) for i in r]
        )
        self._limiter = rate_limiter
        self._wanted = 1

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if not self._splits:
            return None
        splits = self._splits
        pos = 0 if len(splits) == 1 else min(range(len(splits)), key=lambda k: splits[k].next_index)
        split = splits[pos]
        wanted = int(min(max_records, split.remaining()))
        self._wanted = wanted
        granted = self._limiter.acquire(wanted) if wanted > 0 else 0
        if granted <= 0:
            return []
        stop = split.next_index + granted * split.stride
        batch = self._generate(range(split.next_index, stop, split.stride))
        advanced = DataGenSplit(split.split_id, stop, split.stride, split.end)
        if advanced.remaining() > 0:
            self._splits[pos] = advanced
        else:
            del self._splits[pos]
        return batch

    def available_in_s(self) -> float | None:
        if not self._splits:
            return None
        return self._limiter.seconds_until_ready(self._wanted)

    def records_due_in_s(self) -> float | None:
        # Exact: the limiter grants nothing before then (0.0 without a rate: poll at will).
        return self.available_in_s()

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[DataGenSplit]:
        return list(self._splits)
