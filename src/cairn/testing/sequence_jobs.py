"""A per-key sequence source and an in-stream exactly-once checker: the job pieces of
``cairn demo``, of the exactly-once tests and of the fault campaign (``bench.chaos``).

Invariant: record ``i`` of ``SequenceGenerator(keys)`` is ``(key(i % keys), i // keys + 1)``;
with a ``DataGeneratorSource`` at any parallelism that divides ``keys``, every key is produced
by one source subtask in increasing sequence order, so a correct exactly-once pipeline
delivers each key's values as 1, 2, 3, ... with no gap and no repeat.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cairn.api.functions import KeyedProcessFunction
from cairn.api.state import ValueStateDescriptor


class SequenceGenerator:
    """Picklable generator for ``DataGeneratorSource``: ``(key, seq)`` per index."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, index: int) -> tuple[str, int]:
        return (f"k{index % self.keys:05d}", index // self.keys + 1)

    def generate_batch(self, indices: range) -> list[tuple[str, int]]:
        k = self.keys
        return [(f"k{i % k:05d}", i // k + 1) for i in indices]


class SequenceCheck(KeyedProcessFunction[str, tuple[str, int], str]):
    """Emits ``"key,seq,sum"``; a value out of sequence is emitted as ``"!key,seq,expected"``.

    The running sum of the sequence numbers is kept in keyed state, so after any recovery
    ``sum == seq * (seq + 1) / 2`` holds for every output line of a correct run.
    """

    def open(self, runtime_context: Any) -> None:
        self.last = runtime_context.get_state(ValueStateDescriptor("last", None))
        self.total = runtime_context.get_state(ValueStateDescriptor("sum", None))
        metrics = runtime_context.get_metrics_group()  # shown in the web UI and on REST
        self.checked = metrics.counter("checked")
        self.out_of_sequence = metrics.counter("outOfSequence")

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[str]:
        key, seq = value
        self.checked.inc()
        last = self.last.value() or 0
        if seq != last + 1:
            self.out_of_sequence.inc()
            yield f"!{key},{seq},{last + 1}"
        total = (self.total.value() or 0) + seq
        self.last.update(seq)
        self.total.update(total)
        yield f"{key},{seq},{total}"


class SlowSequenceCheck(SequenceCheck):
    """``SequenceCheck`` that spends ``cost_us`` microseconds of CPU per record (busy wait,
    like the seeds' slow map), to create real backpressure upstream."""

    def __init__(self, cost_us: int) -> None:
        self.cost_us = cost_us

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[str]:
        import time

        deadline = time.perf_counter() + self.cost_us / 1e6
        while time.perf_counter() < deadline:
            pass
        yield from super().process_element(value, ctx)


@dataclass
class SequenceReport:
    """What :func:`check_sequence_lines` found; ``duplicates`` maps each output line that
    occurs more than once to its number of extra copies (a record written twice)."""

    lines: int = 0
    violations: list[str] = field(default_factory=list)
    per_key: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    bad_sums: list[str] = field(default_factory=list)
    duplicates: dict[str, int] = field(default_factory=dict)

    def missing_or_duplicated(self, keys: int, records: int) -> list[str]:
        problems = []
        for k in range(keys):
            key = f"k{k:05d}"
            expected = len(range(k, records, keys))
            seqs = self.per_key.get(key, [])
            if sorted(seqs) != list(range(1, expected + 1)):
                dup = len(seqs) - len(set(seqs))
                problems.append(f"{key}: {len(seqs)} values, expected {expected}, dups {dup}")
        return problems

    @property
    def ok(self) -> bool:
        return not self.violations and not self.bad_sums and not self.duplicates


def check_sequence_lines(lines: Iterable[str]) -> SequenceReport:
    """Check output lines of ``SequenceCheck``: out-of-sequence values, wrong running sums,
    and records written more than once (counted per line: a repeated suffix of a key's
    sequence restarts no sequence, so only counting sees it).

    >>> report = check_sequence_lines(["k00000,1,1", "k00000,2,3", "k00000,2,3"])
    >>> report.ok, report.duplicates
    (False, {'k00000,2,3': 1})
    """
    report = SequenceReport()
    seen: Counter[str] = Counter()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        report.lines += 1
        seen[line] += 1
        if line.startswith("!"):
            report.violations.append(line)
            continue
        key, seq_s, total_s = line.split(",")
        seq, total = int(seq_s), int(total_s)
        report.per_key[key].append(seq)
        if total != seq * (seq + 1) // 2:
            report.bad_sums.append(line)
    report.duplicates = {line: n - 1 for line, n in seen.items() if n > 1}
    return report


def read_visible_lines(directory: str) -> list[str]:
    """Lines of every visible (committed) file under ``directory``, recursively."""
    lines: list[str] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in sorted(files):
            if name.startswith((".", "_")):
                continue
            with open(os.path.join(root, name), encoding="utf-8") as f:
                lines.extend(f.read().splitlines())
    return lines
