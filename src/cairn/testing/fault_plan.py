"""A seeded schedule of worker kills and pauses for one run of a user's job (``cairn chaos``),
as ``cairn.testing.faults`` text, and what they left behind (where each one fired).

Invariant: the schedule is a pure function of the seed and of the job's shape (its vertices
with their parallelism, records per subtask, the run's segments), so ``--seed S`` replays
the same kills at the same points; each fault aims at one vertex (drawn among all of the
job's, so a chained source is no likelier than any other) and at one attempt of one segment
(a ``--rescale`` run is several jobs, each restored from the last one's savepoint, whose
attempts count from 0 again: fault ``i`` aims at segment ``i mod S``, at the attempt that
the segment's kills before it started), and writes where it fired to a marker file of its
own, ``fault-<i>``, whose modification time is when it fired. A pause (SIGSTOP for a few
seconds, then SIGCONT) ends no attempt: the fault after it in its segment aims at the same
attempt and waits for the pause's marker (``after``), so faults fire in the plan's order.

    >>> shape = (Vertex("orders", 2, True), Vertex("totals -> Sink", 2, False))
    >>> plan = plan_faults(seed=7, count=4, vertices=shape, records_per_subtask=500)
    >>> plan == plan_faults(seed=7, count=4, vertices=shape, records_per_subtask=500)
    True
    >>> [(f.action, f.attempt, f.after) for f in plan_faults(1, 4, vertices=shape,
    ...     records_per_subtask=500)]
    [('kill', 0, None), ('pause', 1, None), ('kill', 1, 1), ('kill', 2, None)]
    >>> [(f.segment, f.attempt) for f in plan_faults(7, 4, vertices=shape,
    ...     records_per_subtask=500, segments=3)]
    [(0, 0), (1, 0), (2, 0), (0, 1)]
    >>> faults_text(plan[:1], "/tmp/m").startswith("point=")
    True
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "KINDS",
    "FiredFault",
    "PlannedFault",
    "Vertex",
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
# The share of faults that pause a worker instead of killing it, and how long (seconds).
PAUSES = 0.2
PAUSE_S = (1.0, 3.0)
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
class Vertex:
    """A vertex of the job as the plan sees it: its name (its chained operators' names
    joined by `` -> ``), parallelism, and whether it is a source (which never aligns)."""

    name: str
    parallelism: int
    is_source: bool = False


@dataclass(frozen=True)
class PlannedFault:
    """SIGKILL (``action`` "kill") of the worker running ``subtask`` of ``vertex`` (None: of
    whichever vertex gets there first) at ``kind``'s point, in ``attempt`` of ``segment``, or
    a stop of its process for ``pause_s`` (``action`` "pause"); ``records``: for processing
    points, after this many input records; ``after``: only once fault ``after`` fired."""

    index: int
    kind: str
    attempt: int
    subtask: int
    records: int = 0
    vertex: str | None = None
    segment: int = 0
    action: str = "kill"
    pause_s: float = 0.0
    after: int | None = None

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
        >>> PlannedFault(3, "upload", 1, 0, action="pause", pause_s=2.5, after=2).spec("/m")
        'point=during-upload,attempt=1,subtask=0,kill=pause,for=2.5,after=/m/fault-2,marker=/m/fault-3'
        """
        fields = [f"point={self.point}", f"attempt={self.attempt}", f"subtask={self.subtask}"]
        if self.vertex is not None:
            fields.append(f"vertex={self.vertex}")
        if self.records:
            fields.append(f"records={self.records}")
        if self.action == "pause":
            fields += ["kill=pause", f"for={self.pause_s:g}"]
        if self.after is not None:
            fields.append(f"after={os.path.join(marker_dir, f'fault-{self.after}')}")
        fields.append(f"marker={os.path.join(marker_dir, f'fault-{self.index}')}")
        return ",".join(fields)

    def describe(self) -> str:
        """``#2 kill subtask 1 of 'totals' during barrier alignment (attempt 2)``.

        >>> PlannedFault(2, "alignment", 0, 1, vertex="totals", segment=1).describe()
        "#2 kill subtask 1 of 'totals' during barrier alignment (segment 1, attempt 0)"
        >>> print(PlannedFault(4, "upload", 1, 0, action="pause", pause_s=1.5).describe())
        #4 pause subtask 0 for 1.5 s while uploading the checkpoint's state (attempt 1)
        """
        after = f" after {self.records} records" if self.kind == "processing" else ""
        of = f" of {self.vertex!r}" if self.vertex is not None else ""
        pause = f" for {self.pause_s:g} s" if self.action == "pause" else ""
        segment = f"segment {self.segment}, " if self.segment else ""
        return (
            f"#{self.index} {self.action} subtask {self.subtask}{of}{pause} {self.phase}"
            f"{after} ({segment}attempt {self.attempt})"
        )


def plan_faults(
    seed: int,
    count: int,
    *,
    vertices: Sequence[Vertex],
    records_per_subtask: int,
    segments: int = 1,
    pauses: float = PAUSES,
    pause_s: tuple[float, float] = PAUSE_S,
) -> tuple[PlannedFault, ...]:
    """``count`` faults drawn from ``seed``: fault ``i`` in segment ``i mod segments``, on a
    vertex drawn from ``vertices`` and a subtask below its parallelism, at a point of
    ``KINDS`` (no alignment on a source nor in a job at parallelism 1: one input channel
    never aligns; no restore fault in the very first attempt nor after a pause); processing
    faults after 1..``records_per_subtask`` records. A share ``pauses`` of them (a stream of
    draws of its own, so the points stay those of the kills) pause the worker for a time
    drawn from ``pause_s`` instead of killing it. A vertex whose name is part of another's
    is aimed at by no name (the first vertex to get there).

    >>> one = (Vertex("orders -> Sink", 1, True),)
    >>> [f.kind for f in plan_faults(1, 3, vertices=one, records_per_subtask=10, pauses=0)]
    ['after-commit', 'processing', 'restore']
    """
    if count < 0 or segments < 1 or not vertices or min(v.parallelism for v in vertices) < 1:
        raise ValueError(
            f"need count >= 0, segments >= 1 and vertices of parallelism >= 1, got {count}, "
            f"{segments}, {list(vertices)}"
        )
    rng = random.Random(seed)
    paused = random.Random(f"pauses-{seed}")
    aligns = max(v.parallelism for v in vertices) > 1
    names = [v.name for v in vertices]
    plan: list[PlannedFault] = []
    kills = [0] * segments  # per segment: the kills planned so far, its attempt now
    last: list[PlannedFault | None] = [None] * segments
    for index in range(count):
        segment = index % segments
        attempt, before = kills[segment], last[segment]
        pause = paused.random() < pauses
        duration = round(paused.uniform(*pause_s), 1)
        vertex = vertices[rng.randrange(len(vertices))]
        kinds = [k for k in KINDS if k != "alignment" or (aligns and not vertex.is_source)]
        if index == 0:
            kinds.remove("restore")
        kind = rng.choice(kinds)
        records = 0
        if kind == "processing":
            records = rng.randrange(1, max(2, records_per_subtask))
        elif kind == "restore":
            records = rng.randrange(1, 4)
            after_pause = before is not None and before.action == "pause"
            if (attempt == 0 and segment == 0) or after_pause:
                kind = "processing"  # no restore just before: the same draws, early records
        ambiguous = any(vertex.name in other for other in names if other != vertex.name)
        fault = PlannedFault(
            index,
            kind,
            attempt,
            rng.randrange(vertex.parallelism),
            records,
            None if ambiguous or _unsafe(vertex.name) else vertex.name,
            segment,
            action="pause" if pause else "kill",
            pause_s=duration if pause else 0.0,
            after=before.index if before is not None and before.action == "pause" else None,
        )
        plan.append(fault)
        last[segment] = fault
        kills[segment] += fault.action == "kill"
    return tuple(plan)


def _unsafe(name: str) -> bool:
    return any(c in name for c in ",;=")


def faults_text(plan: tuple[PlannedFault, ...], marker_dir: str, segment: int = 0) -> str:
    """The ``cairn.testing.faults`` value of ``plan``'s faults in ``segment``, markers under
    ``marker_dir``."""
    if _unsafe(marker_dir):
        raise ValueError(f"a marker directory must not contain ',', ';' or '=': {marker_dir}")
    return ";".join(f.spec(marker_dir) for f in plan if f.segment == segment)


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
