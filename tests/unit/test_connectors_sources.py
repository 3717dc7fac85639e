"""Number sequence, collection and data generator sources: splitting, resume, rescale."""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.base import Source, SourceReader
from cairn.datastream.connectors.collection import CollectionSource
from cairn.datastream.connectors.datagen import (
    DataGeneratorSource,
    KeyedValuesGenerator,
    RateLimiterStrategy,
)
from cairn.datastream.connectors.number_seq import NumberSequenceSource
from tests.unit._sources import ctx, drain


def round_robin(elements: Sequence[Any], parallelism: int) -> list[list[Any]]:
    return [list(elements[j::parallelism]) for j in range(parallelism)]


def readers_for(source: Source, states: Sequence[Any], parallelism: int) -> list[SourceReader]:
    parts = round_robin(states, parallelism)
    return [source.create_reader(parts[j], ctx(j, parallelism)) for j in range(parallelism)]


def poll_each(readers: Sequence[SourceReader], polls: int, max_records: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(polls):
        for reader in readers:
            batch = reader.poll_batch(max_records)
            assert batch is None or len(batch) <= max_records
            out.extend(batch or [])
    return out


def snapshot(readers: Sequence[SourceReader], checkpoint_id: int = 1) -> list[Any]:
    states = [s for r in readers for s in r.snapshot_state(checkpoint_id)]
    return pickle.loads(pickle.dumps(states))  # states travel through checkpoint storage


# ---- number sequence -------------------------------------------------------------------------


def test_number_sequence_splits_are_contiguous_and_balanced() -> None:
    splits = NumberSequenceSource(1, 10).create_splits(3)
    assert [(s.next_value, s.end) for s in splits] == [(1, 4), (5, 7), (8, 10)]
    assert len(NumberSequenceSource(0, 1).create_splits(8)) == 2  # never an empty split
    with pytest.raises(ValueError):
        NumberSequenceSource(5, 4)


def test_number_sequence_reads_every_number_in_order_per_split() -> None:
    source = NumberSequenceSource(-5, 994)
    readers = readers_for(source, source.create_splits(4), 4)
    per_reader = [drain([r], max_records=33) for r in readers]
    assert all(out == sorted(out) for out in per_reader)
    assert sorted(x for out in per_reader for x in out) == list(range(-5, 995))
    assert all(r.poll_batch(10) is None and r.snapshot_state(2) == [] for r in readers)


@pytest.mark.parametrize("new_parallelism", [1, 2, 3, 7])
def test_number_sequence_resumes_after_snapshot_at_any_parallelism(new_parallelism: int) -> None:
    source = NumberSequenceSource(0, 999)
    first = readers_for(source, source.create_splits(3), 3)
    before = poll_each(first, polls=4, max_records=50)
    states = snapshot(first)
    poll_each(first, polls=2, max_records=50)  # emitted after the checkpoint: lost in a crash
    after = drain(readers_for(source, states, new_parallelism), 7)
    assert sorted(before + after) == list(range(1000))


# ---- collection ------------------------------------------------------------------------------


def test_collection_is_one_split_read_in_order() -> None:
    source = CollectionSource(["a", "b", "c", "d", "e"])
    readers = readers_for(source, source.create_splits(3), 3)
    assert readers[1].poll_batch(10) is None and readers[2].poll_batch(10) is None
    assert [readers[0].poll_batch(2) for _ in range(4)] == [["a", "b"], ["c", "d"], ["e"], None]
    assert CollectionSource([]).create_splits(2) == []


def test_from_collection_reads_the_connector_source_and_an_empty_one_ends_at_once(
    tmp_path: Path,
) -> None:
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.get_checkpoint_config().set_checkpoint_storage(f"file://{tmp_path}")
    empty = env.from_collection([])
    source = empty.get_transformation().source  # type: ignore[attr-defined]
    assert isinstance(source, CollectionSource) and repr(source) == "CollectionSource(0 elements)"
    with empty.map(str).execute_and_collect() as results:
        assert list(results) == []


def test_collection_resumes_from_index_on_another_subtask() -> None:
    elements = list(range(100))
    source = CollectionSource(elements)
    first = readers_for(source, source.create_splits(1), 1)
    before = poll_each(first, polls=3, max_records=10)
    states = snapshot(first)
    assert len(states) == 1
    after = drain(readers_for(source, states, 4), 7)
    assert before + after == elements


# ---- data generator --------------------------------------------------------------------------


def square(i: int) -> int:
    return i * i


@pytest.mark.parametrize("parallelism", [1, 3, 4])
def test_datagen_output_is_the_same_at_every_parallelism(parallelism: int) -> None:
    source = DataGeneratorSource(square, 1000)
    out = drain(readers_for(source, source.create_splits(parallelism), parallelism), 64)
    assert Counter(out) == Counter(i * i for i in range(1000))


@pytest.mark.parametrize(("old", "new"), [(3, 2), (2, 5), (4, 1)])
def test_datagen_bounded_resume_after_rescale_is_exact(old: int, new: int) -> None:
    source = DataGeneratorSource(lambda i: i, 5000)
    first = readers_for(source, source.create_splits(old), old)
    before = poll_each(first, polls=5, max_records=100)
    after = drain(readers_for(source, snapshot(first), new), 128)
    assert sorted(before + after) == list(range(5000))


def test_datagen_unbounded_strided_splits_resume_without_gaps() -> None:
    source = DataGeneratorSource(lambda i: i, None)
    assert not source.is_bounded()
    first = readers_for(source, source.create_splits(3), 3)
    before = poll_each(first, polls=3, max_records=10)
    second = readers_for(source, snapshot(first), 2)  # one reader holds two splits
    after = poll_each(second, polls=6, max_records=10)
    seen = before + after
    assert len(seen) == len(set(seen)) == 90 + 120
    for residue in range(3):  # every split emitted a gap-free prefix of its stride
        mine = sorted(i for i in seen if i % 3 == residue)
        assert mine == list(range(residue, residue + 3 * len(mine), 3))
    # the reader with two splits alternates between them (the furthest behind first)
    assert abs(sum(i % 3 == 0 for i in after) - sum(i % 3 == 2 for i in after)) <= 10


def test_datagen_rate_limit_returns_empty_when_ahead() -> None:
    now = [0.0]
    source = DataGeneratorSource(square, None, RateLimiterStrategy.per_second(100))
    reader = source.create_reader(source.create_splits(2)[:1], ctx(0, 2), clock=lambda: now[0])
    assert reader.poll_batch(1000) == []  # 50/s per subtask: nothing due at t=0
    now[0] = 0.1
    assert len(reader.poll_batch(1000) or []) == 5
    assert reader.poll_batch(1000) == []
    now[0] = 0.15
    assert reader.poll_batch(2) == [i * i for i in (10, 12)]  # max_records wins, budget kept
    assert len(reader.poll_batch(1000) or []) == 0  # 2.5 tokens - 2 used = 0.5
    now[0] = 100.0
    assert len(reader.poll_batch(1000) or []) == 50  # bursts capped at one second


def test_datagen_keyed_values_are_deterministic_and_skewed() -> None:
    uniform = DataGeneratorSource.keyed_values(6000, num_keys=10, value=lambda i: i)
    out1 = drain(readers_for(uniform, uniform.create_splits(1), 1), 500)
    out3 = drain(readers_for(uniform, uniform.create_splits(3), 3), 500)
    assert sorted(out1, key=lambda kv: kv[1]) == sorted(out3, key=lambda kv: kv[1])
    assert [v for _, v in sorted(out1, key=lambda kv: kv[1])] == list(range(6000))
    counts = Counter(k for k, _ in out1)
    assert sorted(counts) == [f"k{r:06d}" for r in range(10)]
    assert max(counts.values()) < 700  # uniform: ~600 each

    skewed = DataGeneratorSource.keyed_values(20000, num_keys=10, skew=1.0)
    counts = Counter(k for k, v in drain(readers_for(skewed, skewed.create_splits(2), 2), 999))
    harmonic = sum(1 / r for r in range(1, 11))
    assert counts["k000000"] / 20000 == pytest.approx(1 / harmonic, abs=0.02)
    assert counts.most_common(1)[0][0] == "k000000"
    assert counts["k000001"] / 20000 == pytest.approx(0.5 / harmonic, abs=0.02)


def test_datagen_skewed_emits_one_two_per_ratio() -> None:
    source = DataGeneratorSource.skewed(skewed_ratio=1000, count=3000)
    out = drain(readers_for(source, source.create_splits(4), 4), 256)
    assert Counter(out) == {1: 2997, 2: 3}
    reader = readers_for(source, source.create_splits(1), 1)[0]
    first = reader.poll_batch(1001)
    assert first is not None and [i for i, v in enumerate(first) if v == 2] == [0, 1000]


def test_datagen_source_survives_pickling_with_the_same_output() -> None:
    source = DataGeneratorSource.keyed_values(100, num_keys=5, skew=0.8)
    before = drain(readers_for(source, source.create_splits(2), 2), 7)
    generator = source.generator_function
    assert isinstance(generator, KeyedValuesGenerator) and generator._table is not None
    copy = cloudpickle.loads(cloudpickle.dumps(source))
    assert copy.generator_function._table is None  # tables are rebuilt, not shipped
    assert drain(readers_for(copy, copy.create_splits(2), 2), 7) == before


def test_rate_limiter_grants_batches_of_a_millisecond_and_says_when_the_next_is_due() -> None:
    """A task polling whenever it is idle gets the rate's worth of 1 ms per grant, not a record
    or two, and sleeps until the next batch is due."""
    now = [0.0]
    limiter = RateLimiterStrategy.per_second(400_000).create_rate_limiter(2, lambda: now[0])
    now[0] = 0.0004  # 80 tokens, the batch is 200
    assert limiter.acquire(1024) == 0
    assert limiter.seconds_until_ready(1024) == pytest.approx(0.0006)
    assert limiter.acquire(50) == 50  # asking for less than a batch: granted when available
    now[0] = 0.0014  # 30 + 200 tokens
    assert limiter.acquire(1024) == 230
    assert limiter.seconds_until_ready(1024) == pytest.approx(0.001)
    unlimited = RateLimiterStrategy.no_limit().create_rate_limiter(2)
    assert unlimited.acquire(7) == 7 and unlimited.seconds_until_ready(7) == 0.0


def test_datagen_reader_tells_the_task_when_to_poll_again() -> None:
    now = [0.0]
    source = DataGeneratorSource(square, 10, RateLimiterStrategy.per_second(2000))
    reader = source.create_reader(source.create_splits(1), ctx(0, 1), clock=lambda: now[0])
    assert reader.poll_batch(1024) == []
    assert reader.available_in_s() == pytest.approx(0.001)  # 2 records per 1 ms batch
    now[0] = 0.01
    assert reader.poll_batch(1024) == [i * i for i in range(10)]
    assert reader.poll_batch(1024) is None
    assert reader.available_in_s() is None  # exhausted: nothing to wait for
