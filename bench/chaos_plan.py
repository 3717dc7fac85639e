"""The fault campaign's seeded schedule and its report: which fault comes next, where it
aims, and the table of what happened.

Invariant: everything here is a pure function of the seed and of the observations handed in,
so a failing seed replays the same schedule (``python -m bench.chaos --seed N``); nothing
here touches a process, a host or a file.

    >>> faults = plan_external(seed=7, count=5)
    >>> [f.kind for f in faults] == [f.kind for f in plan_external(seed=7, count=5)]
    True
    >>> "processing" in internal_faults(seed=7, marker="/tmp/m", unaligned=False)
    True
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

# External faults, made by the controller on the simulated hosts, with their weights.
EXTERNAL_KINDS = {
    "kill-worker": 6,  # SIGKILL one Cairn worker process (a Python process on a worker host)
    "kill-executor": 3,  # SIGKILL the executor JVM of a worker host
    "kill-host": 2,  # SIGKILL every process of a worker host; its Spark worker comes back
    "pause-worker": 3,  # SIGSTOP a worker process for a while (GC pause, frozen VM), SIGCONT
    "partition-driver": 2,  # a worker host and the driver host cannot reach each other
    "partition-storage": 2,  # a worker host and the storage host cannot reach each other
    "partition-peer": 2,  # the two worker hosts cannot reach each other
    "isolate-host": 2,  # a worker host's link down: cut off from everyone
    "disk-full": 2,  # a worker host's disk (tmpfs work dir) filled to the last byte
    "storage-down": 2,  # the S3 and PostgreSQL servers SIGKILLed, restarted on their data
    "kill-during-restore": 3,  # SIGKILL a worker process as soon as a new attempt starts
    "kill-during-savepoint": 2,  # trigger a savepoint, SIGKILL a worker while it runs
    "kill-driver": 1,  # SIGKILL the driver host's processes; the same command runs again
}
# The checkpoint store's own faults, in a run with its checkpoints on HDFS (``--storage hdfs``;
# ``storage-down`` above then kills HDFS too): added to the kinds above.
# A run on HDFS is about the store: its faults weigh more than the others'.
HDFS_KINDS = {
    "storage-down": 4,  # as above, HDFS included
    "slow-store": 4,  # the HDFS JVM SIGSTOPped past the checkpoint timeout, then SIGCONT
    "datanode-lost": 4,  # one of the two DataNodes stopped (blocks replicated twice), restarted
    "store-disk-full": 4,  # the DataNodes' disk (a tmpfs) filled to the last byte, then freed
}
# Landed only if a checkpoint failed meanwhile (the job's driver logged an abort).
STORE_FAULTS = frozenset(HDFS_KINDS) - {"storage-down"}
# A slow store lasts past the campaign job's checkpoint timeout (20 s): checkpoints expire.
SLOW_STORE_S = (21.0, 26.0)
# Where each external fault lands (internal ones are named by their fault point).
EXTERNAL_PHASE = {
    "kill-during-restore": "restore",
    "kill-during-savepoint": "savepoint",
    "kill-driver": "driver loss",
}
DURATIONAL = frozenset(
    {
        "pause-worker",
        "partition-driver",
        "partition-storage",
        "partition-peer",
        "isolate-host",
        "disk-full",
        "storage-down",
        "kill-host",
        *STORE_FAULTS,
    }
)
# Internal faults (runtime/faults.py points) and the phase each one is in.
INTERNAL_PHASE = {
    "processing": "processing",
    "alignment": "alignment (barriers from some inputs)",
    "after-barrier": "sync snapshot / sink pre-commit",
    "during-upload": "async upload",
    "before-commit": "sink commit (before)",
    "after-commit": "sink commit (after)",
    "replay": "restore (in-flight replay)",
    "driver-metadata": "metadata write",
}


@dataclass(frozen=True)
class ExternalFault:
    index: int
    kind: str
    target: int  # which worker host (0 or 1)
    duration_s: float  # how long a durational fault lasts before it is healed
    gap_s: float  # how long to let the job run (and recover) before this fault

    @property
    def phase(self) -> str:
        return EXTERNAL_PHASE.get(self.kind, "running")


def plan_external(
    seed: int, count: int, *, workers: int = 2, storage: str = "s3"
) -> list[ExternalFault]:
    """``count`` external faults drawn by weight from ``seed``; with ``storage="hdfs"`` the
    HDFS store's own faults too (a DataNode fault's ``target`` is the DataNode).

    >>> kinds = {f.kind for f in plan_external(seed=3, count=200, storage="hdfs")}
    >>> sorted(kinds & STORE_FAULTS)
    ['datanode-lost', 'slow-store', 'store-disk-full']
    >>> any(f.kind in STORE_FAULTS for f in plan_external(seed=3, count=200))
    False
    """
    rng = random.Random(seed)
    table = EXTERNAL_KINDS | (HDFS_KINDS if storage == "hdfs" else {})
    kinds, weights = zip(*table.items(), strict=True)
    plan = []
    for index in range(count):
        kind = rng.choices(kinds, weights)[0]
        low, high = SLOW_STORE_S if kind == "slow-store" else (2.0, 6.0)
        plan.append(
            ExternalFault(
                index=index,
                kind=kind,
                target=rng.randrange(workers),
                duration_s=round(rng.uniform(low, high), 1) if kind in DURATIONAL else 0.0,
                # Back to back once the job checkpointed again: the recovery is the wait.
                gap_s=round(rng.uniform(0.0, 1.0), 1),
            )
        )
    return plan


def internal_faults(
    seed: int, marker: str, *, unaligned: bool, attempts: int = 400, driver_metadata: bool = False
) -> str:
    """``cairn.testing.faults`` for one run of the job: a seeded fault point in every other
    attempt (1, 3, 5...), so an attempt without one follows each attempt with one and the
    job keeps making progress; each appends where it fired to ``marker``. ``replay`` fires
    only in an attempt that restored in-flight data (unaligned), at its first replayed
    records: a restore brings back tens of records at this job's pace, not hundreds."""
    rng = random.Random(seed * 7919 + 1)
    points = [
        "processing",
        "alignment",
        "after-barrier",
        "during-upload",
        "before-commit",
        "after-commit",
    ]
    if unaligned:
        points += ["replay", "replay"]
    specs = []
    for attempt in range(1, attempts, 2):
        point = rng.choice(points)
        fields = [f"point={point}", f"attempt={attempt}", f"marker={marker}"]
        if point == "processing":
            fields.append(f"records={rng.randrange(20, 600)}")
        elif point == "replay":
            fields.append("records=1")
        fields.append(f"subtask={rng.randrange(2)}")
        specs.append(",".join(fields))
    if driver_metadata:
        specs.append(f"point=driver-metadata,marker={marker}")
    return ";".join(specs)


def internal_point(marker_line: str) -> str:
    """The fault point a marker line names: ``"during-upload of Sink#0 (checkpoint 4)"``.

    >>> internal_point("during-upload of sequence-check#1 (checkpoint 12)")
    'during-upload'
    """
    return marker_line.split(" ", 1)[0]


def prefix_problems(lines: list[str], keys: int, splits: int = 2) -> dict[str, int]:
    """How ``lines`` (``key,seq,sum`` of ``SequenceCheck``) differ from what the generator's
    ``splits`` splits emitted: split j emits indices j, j + splits, j + 2 * splits... so each
    split's records must be a prefix of its indices. Lost: missing indices below a split's
    highest; duplicated; unexpected (``!`` lines, bad keys); bad sums (per-key order).

    >>> prefix_problems(["k00000,1,1", "k00001,1,1", "k00000,2,3"], keys=2, splits=1)["lost"]
    0
    >>> p = prefix_problems(["k00000,1,1", "k00000,2,3", "k00000,2,3", "k00000,3,7"], 2, 1)
    >>> p["lost"], p["duplicated"], p["bad_sums"]
    (2, 1, 1)
    >>> prefix_problems(["k00000,1,1", "k00000,2,3"], keys=2, splits=2)["lost"]
    0
    """
    seen: Counter[int] = Counter()
    unexpected = bad_sums = 0
    for line in lines:
        if not line or line.startswith("!"):
            unexpected += bool(line)
            continue
        key, seq_s, total_s = line.split(",")
        seq, total = int(seq_s), int(total_s)
        index = (seq - 1) * keys + int(key[1:])
        if int(key[1:]) >= keys or seq < 1:
            unexpected += 1
            continue
        seen[index] += 1
        if total != seq * (seq + 1) // 2:
            bad_sums += 1
    lost = 0
    for split in range(splits):
        mine = [i for i in seen if i % splits == split]
        if mine:
            lost += max(mine) // splits + 1 - len(mine)
    return {
        "records": len(seen),
        "lost": lost,
        "duplicated": sum(n - 1 for n in seen.values()),
        "unexpected": unexpected,
        "bad_sums": bad_sums,
    }


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank; NaN for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([5.0], 0.99)
    (2.0, 5.0)
    """
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q * len(ordered) + 0.5)))
    return ordered[rank - 1]


@dataclass
class RunVerdict:
    """One job run of the campaign: its configuration, faults and what its output shows."""

    name: str
    seed: int
    records: int
    external: Counter[tuple[str, str]] = field(default_factory=Counter)
    internal: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Faults made that did not land where they aimed (why: in ``notes``); not counted.
    missed: Counter[tuple[str, str]] = field(default_factory=Counter)
    recovery_s: list[float] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    order_violations: int = 0
    finished: bool = False
    checkpoints: int = 0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    # The load (``bench/chaos_load.py``), records/s: the maximum measured for the run's job
    # kind (None: a fixed ``--rate``), the rate it was paced at, and what its sinks committed
    # over the fault phase and in its steady windows (``steady_s`` seconds of them).
    # False if the sinks' output could not be read (the run's verdict is unknown).
    verified: bool = True
    max_rate: float | None = None
    target_rate: float = 0.0
    held_rate: float | None = None
    steady_rate: float | None = None
    steady_s: float = 0.0

    @property
    def faults(self) -> int:
        return sum(self.external.values()) + sum(self.internal.values())

    @property
    def ok(self) -> bool:
        return (
            self.finished
            and self.verified
            and self.lost == 0
            and self.duplicated == 0
            and self.unexpected == 0
            and self.order_violations == 0
        )


def report(verdicts: list[RunVerdict], command: str) -> str:
    """A Markdown report: verdict per run, faults by kind and phase, recovery percentiles."""
    lines = [f"Command: `{command}`", ""]
    lines.append(
        "| run | faults | records | lost | duplicated | order violations | finished | "
        "checkpoints | wall (s) | verdict |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---|---:|---:|---|")
    for v in verdicts:
        replay = f"FAILED (--seed {v.seed // 1000} --runs {v.name})"
        lines.append(
            f"| {v.name} | {v.faults} | {v.records} | {v.lost} | {v.duplicated} | "
            f"{v.order_violations} | {'yes' if v.finished else 'NO'} | {v.checkpoints} | "
            f"{v.wall_s:.0f} | {'ok' if v.ok else replay} |"
        )
    lines += ["", *load_table(verdicts)]
    total: Counter[tuple[str, str]] = Counter()
    for v in verdicts:
        total.update(v.external)
        total.update(v.internal)
    lines += ["", "| fault | phase | count |", "|---|---|---:|"]
    for (kind, phase), n in sorted(total.items()):
        lines.append(f"| {kind} | {phase} | {n} |")
    lines.append(f"| **all** | | **{sum(total.values())}** |")
    missed: Counter[tuple[str, str]] = Counter()
    for v in verdicts:
        missed.update(v.missed)
    if missed:
        lines += ["", "Missed (made, but not where they aimed; not counted above):", ""]
        lines += [f"- {kind} ({phase}): {n}" for (kind, phase), n in sorted(missed.items())]
    recovery = [r for v in verdicts for r in v.recovery_s]
    if recovery:
        lines += [
            "",
            f"Recovery (the fault, or its heal, → the next checkpoint completed), "
            f"{len(recovery)} faults: p50 {percentile(recovery, 0.5):.1f} s, "
            f"p90 {percentile(recovery, 0.9):.1f} s, p99 {percentile(recovery, 0.99):.1f} s, "
            f"max {max(recovery):.1f} s.",
        ]
    notes = [f"- {v.name}: {note}" for v in verdicts for note in v.notes]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)


def load_table(verdicts: list[RunVerdict]) -> list[str]:
    """The load row of each run: its measured maximum, the rate it was paced at, and the
    records/s its sinks committed in steady windows and over the whole fault phase (faults
    and recoveries included), each also as a fraction of the maximum.

    >>> v = RunVerdict("aligned-hashmap", 1000, 9, max_rate=4000.0, target_rate=2000.0,
    ...                held_rate=1500.0, steady_rate=1990.0, steady_s=42.0)
    >>> load_table([v])[-1]
    '| aligned-hashmap | 4,000 | 2,000 | 1,990 (42 s) | 1,500 | 0.50 | 0.38 |'
    """

    def rate(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    def share(value: float | None, of: float | None) -> str:
        return "-" if value is None or not of else f"{value / of:.2f}"

    lines = [
        "| run | max (records/s) | target | held, steady | held over the faults | "
        "steady/max | faults/max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for v in verdicts:
        steady = rate(v.steady_rate) + (f" ({v.steady_s:.0f} s)" if v.steady_rate else "")
        lines.append(
            f"| {v.name} | {rate(v.max_rate)} | {rate(v.target_rate)} | {steady} | "
            f"{rate(v.held_rate)} | {share(v.steady_rate, v.max_rate)} | "
            f"{share(v.held_rate, v.max_rate)} |"
        )
    return lines
