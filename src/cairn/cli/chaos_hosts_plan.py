"""What ``cairn chaos --profile hosts`` decides and says, without I/O: the host faults a seed
draws (``plan_host_faults``), the driver kills (``plan_host_driver_kills``: the driver host
lost) and whether each landed (``driver_host_outcome``), whether a job can run on the
simulated hosts at all (``refusal``, ``unreachable_sinks``), what the driver's log showed
during a fault (``job_events``), the report's host lines and the replay command.

Invariant: pure functions of their arguments (the seed, the options, the sinks, a log's
text, how a driver ended); the same seed draws the same host faults and driver kills.

    >>> plan_host_faults(7, 3) == plan_host_faults(7, 3)
    True
    >>> split_faults(5)
    (2, 3)
"""

from __future__ import annotations

import argparse
import datetime
import random
import re
import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass

from cairn.cli.chaos_driver import DriverKill, KillOutcome, plan_driver_kills, why_not_landed
from cairn.cli.chaos_verdict import Difference
from cairn.testing.fault_plan import Vertex

__all__ = [
    "HOST_KINDS",
    "HostDriverKill",
    "HostFault",
    "HostOutcome",
    "driver_host_outcome",
    "host_fault_before",
    "host_lines",
    "job_events",
    "parse_progress",
    "plan_host_driver_kills",
    "plan_host_faults",
    "refusal",
    "replay_with_profile",
    "split_faults",
    "unavailable_text",
    "unreachable_sinks",
]


# The host faults of bench's campaign (bench/chaos_plan.py) that make sense for a user's
# job, with their weights and what a person reads.
HOST_KINDS: dict[str, tuple[int, str]] = {
    "kill-host": (2, "worker host lost"),
    "pause-worker": (2, "a worker of the job paused (SIGSTOP, then SIGCONT)"),
    "isolate-host": (1, "a worker host cut off from every other host"),
    "partition-driver": (1, "partition between a worker host and the driver host"),
    "partition-storage": (1, "partition between a worker host and the storage host"),
    "partition-peer": (1, "partition between the two worker hosts"),
    "disk-full": (2, "disk full on a worker host"),
    "storage-down": (2, "storage outage (the S3 server down)"),
}
_DURATION_S = (2.0, 5.0)
# Sinks whose place is a local directory, which the simulated hosts see; a JDBC or Kafka
# server of this machine is out of their reach (they route only to each other).
_REACHABLE = frozenset({"FileSink"})


@dataclass(frozen=True)
class HostFault:
    """Host fault ``#h<index>`` of ``kind`` aimed at worker host ``target``, lasting
    ``duration_s``, made ``gap_s`` after the job checkpointed since the last one healed."""

    index: int
    kind: str
    target: int
    duration_s: float
    gap_s: float = 0.0

    def describe(self, target: int | None = None) -> str:
        """``#h0 worker host lost: worker-1 for 3.2 s`` (``target``: where it was aimed in
        the end).

        >>> HostFault(0, "storage-down", 1, 3.2).describe()
        '#h0 storage outage (the S3 server down) for 3.2 s'
        >>> HostFault(1, "partition-driver", 1, 2.0).describe(0)
        '#h1 partition between a worker host and the driver host: worker-0 for 2.0 s'
        """
        where = (
            ""
            if self.kind == "storage-down"
            else f": worker-{self.target if target is None else target}"
        )
        return f"#h{self.index} {HOST_KINDS[self.kind][1]}{where} for {self.duration_s:.1f} s"


@dataclass(frozen=True)
class HostOutcome:
    """What became of a host fault: made at ``made_at`` (wall time) on worker host
    ``target`` and healed at ``healed_at``, or ``missed`` (why it was not made)."""

    fault: HostFault
    target: int
    made_at: float | None = None
    healed_at: float | None = None
    missed: str | None = None
    meanwhile: str = ""  # what the driver's log shows while it lasted (``job_events``)

    @property
    def landed(self) -> bool:
        return self.missed is None and self.made_at is not None


def split_faults(count: int) -> tuple[int, int]:
    """``--faults N`` under ``--profile hosts``: (worker kills, host faults), the host
    faults the larger half.

    >>> split_faults(0), split_faults(1), split_faults(4)
    ((0, 0), (0, 1), (2, 2))
    """
    hosts = (count + 1) // 2
    return count - hosts, hosts


def plan_host_faults(seed: int, count: int, workers: int = 2) -> tuple[HostFault, ...]:
    """``count`` host faults drawn by weight from ``seed`` (a stream apart from the worker
    kills'), each at a worker host below ``workers``.

    >>> [f.kind for f in plan_host_faults(1, 200)].count("kill-host") > 0
    True
    >>> {f.target for f in plan_host_faults(1, 50)} == {0, 1}
    True
    """
    rng = random.Random(seed * 7919 + 17)
    kinds = list(HOST_KINDS)
    weights = [HOST_KINDS[k][0] for k in kinds]
    return tuple(
        HostFault(
            index,
            rng.choices(kinds, weights)[0],
            rng.randrange(workers),
            round(rng.uniform(*_DURATION_S), 1),
            round(rng.uniform(0.0, 1.0), 1),
        )
        for index in range(count)
    )


def unavailable_text(reason: str) -> str:
    """The one line ``--profile hosts`` prints when simulated hosts cannot be made here:
    the cause and the remedy.

    >>> print(unavailable_text("simulated hosts need root"))
    --profile hosts: simulated hosts need root; run it as root on Linux with iproute2, or use
    --profile local
    """
    return (
        f"--profile hosts: {reason}; run it as root on Linux with iproute2, or use --profile local"
    )


def refusal(args: argparse.Namespace) -> str | None:
    """Why ``args`` cannot run under ``--profile hosts`` (None: they can).

    >>> refusal(argparse.Namespace(upgrade="v2.py", executor=None))
    '--profile hosts does not combine with --upgrade yet; use --profile local for it'
    >>> refusal(argparse.Namespace(rescale=True, upgrade=None, executor=None)) is None
    True
    """
    for option, given in (
        # a new driver life would run every segment again, from the first
        (
            "--driver-kills and --rescale together",
            getattr(args, "driver_kills", 0) and getattr(args, "rescale", False),
        ),
        ("--upgrade", getattr(args, "upgrade", None)),
        ("--executor inprocess", getattr(args, "executor", None) == "inprocess"),
    ):
        if given:
            return f"--profile hosts does not combine with {option} yet; use --profile local for it"
    return None


def unreachable_sinks(sinks: Sequence[tuple[str, str, bool]]) -> str | None:
    """Why the job's sinks (name, kind, redirected) cannot be compared on the simulated
    hosts: a redirected sink that commits to a server of this machine (None: all can).

    >>> unreachable_sinks([("Sink 'out'", "FileSink", True), ("print", "x", False)]) is None
    True
    >>> print(unreachable_sinks([("Sink 'rows'", "JdbcSink", True)]))
    --profile hosts compares FileSink outputs only: Sink 'rows' is a JdbcSink, whose server
    the simulated hosts cannot reach; use --profile local
    """
    for name, kind, redirected in sinks:
        if redirected and kind not in _REACHABLE:
            return (
                f"--profile hosts compares FileSink outputs only: {name} is a {kind}, whose "
                "server the simulated hosts cannot reach; use --profile local"
            )
    return None


def host_fault_before(diff: Difference, outcomes: Sequence[HostOutcome]) -> HostOutcome | None:
    """The last host fault that landed before ``diff``'s record was committed (a missing
    record: the last one that landed).

    >>> from cairn.cli.chaos_verdict import Record
    >>> o = [HostOutcome(HostFault(i, "disk-full", 0, 2.0), 0, float(i), i + 1.0) for i in range(3)]
    >>> host_fault_before(Difference("o", "extra", None, Record("a", 1.5, "p:1")), o).fault.index
    1
    """
    landed = [o for o in outcomes if o.landed]
    if diff.actual is None:
        return landed[-1] if landed else None
    before = [o for o in landed if o.made_at is not None and o.made_at <= diff.actual.committed_at]
    return before[-1] if before else None


def host_lines(
    outcomes: Sequence[HostOutcome], started: float, diff: Difference | None = None
) -> list[str]:
    """The report's lines on the host faults: how many landed, each one's outcome (when,
    seconds into the faulted run, or why missed), and the one just before ``diff``.

    >>> f = HostFault(0, "kill-host", 1, 3.0)
    >>> o = [HostOutcome(f, 1, 112.25, 115.5), HostOutcome(f, 0, missed="the job had ended")]
    >>> for line in host_lines(o, 100.0):
    ...     print(line)
      host faults: 1 of 2 landed
      host fault #h0 worker host lost: worker-1 for 3.0 s: landed at +12.2 s, healed at +15.5 s
      host fault #h0 worker host lost: worker-0 for 3.0 s: missed (the job had ended)
    """
    lines = [f"  host faults: {sum(o.landed for o in outcomes)} of {len(outcomes)} landed"]
    if diff is not None:
        before = host_fault_before(diff, outcomes)
        if before is not None:
            lines.append(f"  host fault just before: {before.fault.describe(before.target)}")
    for o in outcomes:
        what = o.fault.describe(o.target)
        if o.landed and o.made_at is not None and o.healed_at is not None:
            lines.append(
                f"  host fault {what}: landed at +{o.made_at - started:.1f} s, "
                f"healed at +{o.healed_at - started:.1f} s"
                + (f"; meanwhile {o.meanwhile}" if o.meanwhile else "")
            )
        else:
            lines.append(f"  host fault {what}: missed ({o.missed})")
    return lines


_EVENTS = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?(?:(Completed checkpoint)|(Aborting checkpoint)"
    r"|attempt \d+ (failed) \(|restored checkpoint \d+ in (\d+) ms)",
    re.MULTILINE,
)


def job_events(log_text: str, start: float, end: float) -> str:
    """What the driver's log (Python logging's ``asctime`` lines, local time) shows
    between ``start`` and ``end`` (wall times): failed attempts, restores and how long
    they took, aborted and completed checkpoints (or that none completed).

    >>> import datetime
    >>> log = chr(10).join([
    ...     "2026-12-06 02:29:23,186 job_master job j: attempt 0 failed (lost ...)",
    ...     "2026-12-06 02:29:32,549 restore_choice job j, attempt 1: restored checkpoint 1 in"
    ...     " 9363 ms: ...",
    ...     "2026-12-06 02:29:32,667 coordinator Completed checkpoint 3 (1655 bytes, 69 ms)",
    ...     "2026-12-06 02:29:50,000 coordinator Completed checkpoint 9 (1655 bytes, 69 ms)",
    ... ])
    >>> t = datetime.datetime(2026, 12, 6, 2, 29, 23).timestamp()
    >>> job_events(log, t, t + 10)
    '1 attempt failed, a restore took 9.4 s, 1 checkpoint completed'
    >>> job_events(log, t + 30, t + 40)
    'no checkpoint completed'
    """
    failed = aborted = completed = 0
    restores: list[float] = []
    for m in _EVENTS.finditer(log_text):
        at = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if not start <= at <= end:
            continue
        completed += bool(m.group(2))
        aborted += bool(m.group(3))
        failed += bool(m.group(4))
        if m.group(5):
            restores.append(int(m.group(5)) / 1000)
    parts = []
    if failed:
        parts.append(f"{failed} attempt{'s' * (failed > 1)} failed")
    if restores:
        took = ", ".join(f"{r:.1f} s" for r in restores)
        parts.append(f"a restore took {took}" if len(restores) == 1 else f"restores took {took}")
    if aborted:
        parts.append(f"{aborted} checkpoint{'s' * (aborted > 1)} aborted")
    if completed:
        parts.append(f"{completed} checkpoint{'s' * (completed > 1)} completed")
    else:
        parts.append("no checkpoint completed")
    return ", ".join(parts)


def replay_with_profile(command: str) -> str:
    """The replay command with ``--profile=hosts`` after its seed.

    >>> replay_with_profile("cairn chaos job.py --faults=3 --seed=7 -- --out x")
    'cairn chaos job.py --faults=3 --seed=7 --profile=hosts -- --out x'
    """
    parts = shlex.split(command)
    return shlex.join([*parts[:5], "--profile=hosts", *parts[5:]])


# -- driver kills: the driver host lost ------------------------------------------------------


@dataclass(frozen=True)
class HostDriverKill(DriverKill):
    """Driver kill ``index`` of ``--driver-kills`` under ``--profile hosts``: every process
    on the driver host SIGKILLed (the host lost) ``gap_s`` after the run's ``base +
    checkpoint``-th completed checkpoint, ``base`` the count before its driver life. Its
    ``kind`` and ``vertex`` are the local profile's draw (``plan_driver_kills``), unused:
    a host is lost at a moment of its own, not at a fault point."""

    gap_s: float = 0.0

    def describe(self, base: int = 0) -> str:
        """What a person reads, the aim counted over the whole run.

        >>> HostDriverKill(0, "metadata", 2, None, 0.25).describe(base=1)
        "driver kill #0: the driver host lost 0.25 s after the run's 3rd completed checkpoint"
        >>> HostDriverKill(1, "metadata", 11, None, 0.0).describe()
        "driver kill #1: the driver host lost 0.00 s after the run's 11th completed checkpoint"
        """
        n = base + self.checkpoint
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return (
            f"driver kill #{self.index}: the driver host lost {self.gap_s:.2f} s after the "
            f"run's {n}{suffix} completed checkpoint"
        )


def plan_host_driver_kills(
    seed: int, count: int, *, checkpoints: int, vertices: Sequence[Vertex], interval_s: float
) -> tuple[HostDriverKill, ...]:
    """``count`` driver kills of ``--profile hosts``: the local profile's (the same seed,
    the same ``checkpoint`` of each life, ``plan_driver_kills``), each made a gap after that
    checkpoint, drawn up to ``interval_s`` (the checkpoint interval: any phase of it).

    >>> one = (Vertex("orders", 1, True), Vertex("total -> Sink", 1))
    >>> kills = plan_host_driver_kills(3, 2, checkpoints=8, vertices=one, interval_s=0.3)
    >>> [k.checkpoint for k in kills] == [
    ...     k.checkpoint for k in plan_driver_kills(3, 2, checkpoints=8, vertices=one)]
    True
    >>> all(0.0 <= k.gap_s <= 0.3 for k in kills)
    True
    """
    rng = random.Random(f"host-driver-kills-{seed}")
    return tuple(
        HostDriverKill(k.index, k.kind, k.checkpoint, k.vertex, round(rng.random() * interval_s, 2))
        for k in plan_driver_kills(seed, count, checkpoints=checkpoints, vertices=vertices)
    )


def parse_progress(text: str) -> tuple[int, int | None]:
    """The hosts driver's ``progress`` file: (how many checkpoints the run completed, the
    latest one's id, None before the first); an unreadable file reads as none.

    >>> parse_progress("12 27"), parse_progress("3"), parse_progress(""), parse_progress("x")
    ((12, 27), (3, None), (0, None), (0, None))
    """
    parts = text.split()
    try:
        count = int(parts[0]) if parts else 0
        latest = int(parts[1]) if len(parts) > 1 else None
    except ValueError:
        return 0, None
    return count, latest


def driver_host_outcome(
    kill: HostDriverKill,
    base: int,
    *,
    code: int | None,
    driver_hit: bool,
    ended_first: bool,
    at: float,
    started: float,
    progress: tuple[int, int | None],
    failed: str | None = None,
) -> KillOutcome:
    """Whether driver kill ``kill`` landed, from the evidence: its driver exited of SIGKILL
    (``code``), its pid was among the processes the host kill hit (``driver_hit``), and it
    had not written its result first (``ended_first``: the job had ended, the kill came
    late). Landed: where (``at``, seconds after ``started``, and the run's ``progress`` at
    the kill); else why not (``why_not_landed``; ``failed``: the job's error).

    >>> k = HostDriverKill(0, "metadata", 2, None, 0.1)
    >>> o = driver_host_outcome(k, 0, code=-9, driver_hit=True, ended_first=False, at=112.5,
    ...     started=100.0, progress=(4, 5))
    >>> o.landed, o.where
    (True, 'at +12.5 s, once 4 checkpoints had completed (the latest: checkpoint 5)')
    >>> driver_host_outcome(k, 0, code=0, driver_hit=False, ended_first=True, at=112.5,
    ...     started=100.0, progress=(9, 12)).why
    'the job ended before it (give it more input or a shorter --checkpoint-interval)'
    """
    count, latest = progress
    if code == -signal.SIGKILL and driver_hit and not ended_first:
        newest = f" (the latest: checkpoint {latest})" if latest is not None else ""
        where = f"at +{at - started:.1f} s, once {count} checkpoints had completed{newest}"
        return KillOutcome(kill, base, where, at)
    if ended_first:
        return KillOutcome(kill, base, why=why_not_landed(0, None, failed))
    if code == -signal.SIGKILL:  # not by this kill: it hit no process of the driver
        return KillOutcome(kill, base, why=why_not_landed(code, None))
    return KillOutcome(kill, base, why=why_not_landed(code, None, failed))
