"""A seeded schedule of worker kills for one run of a user's job (``cairn chaos``), as
``cairn.testing.faults`` text, and what the kills left behind (where each one fired).

Invariant: the schedule is a pure function of the seed and of the job's shape (parallelism,
records per subtask), so ``--seed S`` replays the same kills at the same points; fault ``i``
aims at attempt ``i`` (each restart meets the next fault), and writes where it fired to a
marker file of its own, ``fault-<i>``, whose modification time is when it fired.

    >>> plan = plan_faults(seed=7, count=4, parallelism=2, records_per_subtask=500)
    >>> plan == plan_faults(seed=7, count=4, parallelism=2, records_per_subtask=500)
    True
    >>> [f.attempt for f in plan]
    [0, 1, 2, 3]
    >>> faults_text(plan[:1], "/tmp/m").startswith("point=")
    True
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

__all__ = [
    "KINDS",
    "FiredFault",
    "PlannedFault",
    "faults_text",
    "fired_faults",
    "plan_faults",
]

# What a planned fault kills, and the fault point (runtime/faults.py) it uses; "restore" is a
# kill among the first records after a restore (a new attempt's processing, records 1..3).
KINDS = {
    "processing": "processing",
    "alignment": "alignment",
    "sync-snapshot": "after-barrier",
    "upload": "during-upload",
    "before-commit": "before-commit",
    "after-commit": "after-commit",
    "restore": "processing",
}
# The phase a person reads in the report.
PHASES = {
    "processing": "while processing records",
    "alignment": "during barrier alignment",
    "sync-snapshot": "after the synchronous snapshot (the sink's pre-commit)",
    "upload": "while uploading the checkpoint's state",
    "before-commit": "after the checkpoint completed, before the sinks' commit",
    "after-commit": "right after the sinks' commit",
    "restore": "right after a restore",
}


@dataclass(frozen=True)
class PlannedFault:
    """SIGKILL of the worker running ``subtask`` (of any operator) at ``kind``'s point, in
    ``attempt``; ``records``: for processing points, after this many input records."""

    index: int
    kind: str
    attempt: int
    subtask: int
    records: int = 0

    @property
    def point(self) -> str:
        return KINDS[self.kind]

    @property
    def phase(self) -> str:
        return PHASES[self.kind]

    def spec(self, marker_dir: str) -> str:
        """This fault as one ``cairn.testing.faults`` entry.

        >>> PlannedFault(0, "restore", 1, 0, 2).spec("/m")
        'point=processing,attempt=1,subtask=0,records=2,marker=/m/fault-0'
        """
        fields = [f"point={self.point}", f"attempt={self.attempt}", f"subtask={self.subtask}"]
        if self.records:
            fields.append(f"records={self.records}")
        fields.append(f"marker={os.path.join(marker_dir, f'fault-{self.index}')}")
        return ",".join(fields)

    def describe(self) -> str:
        """``#2 kill subtask 1 during barrier alignment (attempt 2)``."""
        after = f" after {self.records} records" if self.kind == "processing" else ""
        return (
            f"#{self.index} kill subtask {self.subtask} {self.phase}{after} "
            f"(attempt {self.attempt})"
        )


def plan_faults(
    seed: int, count: int, *, parallelism: int, records_per_subtask: int
) -> tuple[PlannedFault, ...]:
    """``count`` kills drawn from ``seed``: one per attempt, at a point of ``KINDS`` (no
    alignment at parallelism 1: one input channel never aligns), on a subtask below
    ``parallelism``; processing kills after 1..``records_per_subtask`` records.

    >>> [f.kind for f in plan_faults(3, 3, parallelism=1, records_per_subtask=10)]
    ['sync-snapshot', 'upload', 'restore']
    """
    if count < 0 or parallelism < 1:
        raise ValueError(f"need count >= 0 and parallelism >= 1, got {count}, {parallelism}")
    rng = random.Random(seed)
    kinds = [k for k in KINDS if parallelism > 1 or k != "alignment"]
    plan = []
    for index in range(count):
        kind = rng.choice(kinds if index else [k for k in kinds if k != "restore"])
        records = 0
        if kind == "processing":
            records = rng.randrange(1, max(2, records_per_subtask))
        elif kind == "restore":
            records = rng.randrange(1, 4)
        plan.append(PlannedFault(index, kind, index, rng.randrange(parallelism), records))
    return tuple(plan)


def faults_text(plan: tuple[PlannedFault, ...], marker_dir: str) -> str:
    """The ``cairn.testing.faults`` value of ``plan``, markers under ``marker_dir``."""
    if any(c in marker_dir for c in ",;="):
        raise ValueError(f"a marker directory must not contain ',', ';' or '=': {marker_dir}")
    return ";".join(f.spec(marker_dir) for f in plan)


@dataclass(frozen=True)
class FiredFault:
    """A planned fault that fired: where (its marker's text) and when (its mtime)."""

    fault: PlannedFault
    where: str
    at: float


def fired_faults(plan: tuple[PlannedFault, ...], marker_dir: str) -> tuple[FiredFault, ...]:
    """The faults of ``plan`` that fired (their marker exists), in the order they fired."""
    fired = []
    for fault in plan:
        path = os.path.join(marker_dir, f"fault-{fault.index}")
        try:
            with open(path, encoding="utf-8") as f:
                where = f.read().strip()
            fired.append(FiredFault(fault, where, os.path.getmtime(path)))
        except FileNotFoundError:
            continue
    return tuple(sorted(fired, key=lambda f: (f.at, f.fault.index)))
