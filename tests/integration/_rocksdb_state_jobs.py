"""A job with every kind of keyed state, for reading its checkpoints with the state processor.

``EveryState`` (uid ``every-state``) keeps, per key, of the sequence numbers it saw: the
largest (value state ``top``), all of them (list ``seqs``), how many per residue mod 3 (map
``mods``), their sum (reducing ``total``) and ``(count, sum)`` (aggregating ``avg``). In a
consistent snapshot these agree with each other (``consistency_problems``); once the input
is done they are the same whatever backend kept them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cairn.api.functions import AggregateFunction
from cairn.common import Types
from cairn.datastream.checkpoint_config import ExternalizedCheckpointRetention
from cairn.datastream.functions import KeyedProcessFunction
from cairn.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from tests.integration.jobs import environment, file_sink, generated

UID = "every-state"
TOP = ValueStateDescriptor("top", Types.LONG())
SEQS = ListStateDescriptor("seqs", Types.LONG())
MODS = MapStateDescriptor("mods", Types.LONG(), Types.LONG())


def _add(a: int, b: int) -> int:
    return a + b


class CountSum(AggregateFunction):
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + 1, accumulator[1] + value)

    def get_result(self, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator


TOTAL = ReducingStateDescriptor("total", _add, Types.LONG())
AVG = AggregatingStateDescriptor("avg", CountSum(), None)  # a pickled tuple
DESCRIPTORS = (TOP, SEQS, MODS, TOTAL, AVG)


class EveryState(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.top = runtime_context.get_state(TOP)
        self.seqs = runtime_context.get_list_state(SEQS)
        self.mods = runtime_context.get_map_state(MODS)
        self.total = runtime_context.get_reducing_state(TOTAL)
        self.avg = runtime_context.get_aggregating_state(AVG)

    def process_element(self, value: Any, ctx: Any) -> Iterator[str]:
        key, seq = value
        self.top.update(max(seq, self.top.value() or 0))
        self.seqs.add(seq)
        self.mods.put(seq % 3, (self.mods.get(seq % 3) or 0) + 1)
        self.total.add(seq)
        self.avg.add(seq)
        yield f"{key},{seq}"


class Sequence:
    """``(key, seq)`` for the first ``records`` indices (all if ``None``), ``None`` after."""

    def __init__(self, keys: int, records: int | None) -> None:
        self.keys, self.records = keys, records

    def generate_batch(self, indices: range) -> list[Any]:
        k, n = self.keys, self.records
        return [(f"k{i % k:04d}", i // k + 1) if n is None or i < n else None for i in indices]

    def __call__(self, index: int) -> Any:
        return self.generate_batch(range(index, index + 1))[0]


def _not_none(record: Any) -> bool:
    return record is not None


def every_state_job(
    conf: dict[str, str],
    chk: str,
    out: str,
    *,
    keys: int,
    records: int | None,
    rate: float,
    interval_ms: int = 200,
) -> Any:
    """The job on ``conf`` (backend, executor), checkpoints every ``interval_ms`` under
    ``chk`` (kept when cancelled), output lines ``key,seq`` under ``out``."""
    env = environment(conf, 2)
    env.enable_checkpointing(interval_ms)
    cp = env.get_checkpoint_config()
    cp.set_checkpoint_storage("file://" + chk)
    cp.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    (
        generated(env, Sequence(keys, records), None, "sequence", rate=rate, uid="source")
        .filter(_not_none)
        .key_by(lambda r: r[0])
        .process(EveryState())
        .uid(UID)
        .sink_to(file_sink(out))
        .uid("file-sink")
    )
    return env


def read_every_state(reader: Any) -> dict[str, Any]:
    """Each state of ``UID`` collected: name -> sorted rows (pickled values unpickled)."""
    from cairn.state_processor import unpickle

    out: dict[str, Any] = {}
    for d in DESCRIPTORS:
        rows = [tuple(r) for r in reader.read_keyed_state(UID, d).collect()]
        if d is AVG:
            rows = [(k, unpickle(v)) for k, v in rows]
        out[d.name] = sorted(rows)
    return out


def consistency_problems(state: dict[str, Any]) -> list[str]:
    """Where the five states of a key disagree (empty: one consistent snapshot)."""
    seqs: dict[str, list[int]] = {}
    for key, seq in state["seqs"]:
        seqs.setdefault(key, []).append(seq)
    problems = []
    top, total, avg = dict(state["top"]), dict(state["total"]), dict(state["avg"])
    mods: dict[str, int] = {}
    for key, _mod, count in state["mods"]:
        mods[key] = mods.get(key, 0) + count
    for key, s in seqs.items():
        want = (max(s), sum(s), (len(s), sum(s)), len(s))
        got = (top.get(key), total.get(key), avg.get(key), mods.get(key))
        if got != want:
            problems.append(f"{key}: {got} != {want}")
    if set(top) != set(seqs):
        problems.append(f"keys of top and seqs differ: {sorted(set(top) ^ set(seqs))[:5]}")
    return problems
