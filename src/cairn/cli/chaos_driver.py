"""``cairn chaos --driver-kills K``: the faulted run as a driver of its own that is SIGKILLed
K times at seeded moments and started again, each new driver resuming the job from its
latest completed checkpoint by itself, as a supervised ``cairn run`` does (driver-loss.md).

Invariant: every life of the faulted run is the same script, arguments, checkpoint
directory and sink places (``<work>/faults``), run by ``cli/chaos_driver_life.py`` in a
child process that leads its own process group (the driver, its Spark JVM and Python
workers), with ``cairn.recovery.on-rerun: RESUME``; life ``i < K`` carries driver kill
``i`` only (a ``kill=driver`` fault of ``runtime/faults.py`` aimed at the ``n``-th
checkpoint of that life), the last life the seeded worker kills (of the segments it runs:
with ``--rescale`` or ``--upgrade`` each life begins where the run directory says the one
before left the run, ``cli/chaos_driver_segments.py``). A kill counts as landed
only when its marker file exists *and* the driver died of SIGKILL; a driver that ended
otherwise, or one killed with no marker, is reported as such, never counted. Only the life
that ends reads what the sinks committed, once, after all of them.

    >>> kills = plan_driver_kills(7, 2, checkpoints=9, vertices=(Vertex("src -> Sink", 2),))
    >>> kills == plan_driver_kills(7, 2, checkpoints=9, vertices=(Vertex("src -> Sink", 2),))
    True
    >>> [k.index for k in kills], all(1 <= k.checkpoint <= 3 for k in kills)
    ([0, 1], True)
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pickle
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cairn.cli.chaos_driver_segments import (
    SegmentFacts,
    SegmentStart,
    kill_landing,
    landing_text,
    next_driver_text,
    resumed_at,
    segment_facts,
    segment_name,
    segment_start,
)
from cairn.cli.chaos_outputs import appended_records, snapshot
from cairn.cli.chaos_run import restore_step
from cairn.cli.chaos_verdict import Difference, Record
from cairn.testing.fault_plan import PlannedFault, Vertex

__all__ = [
    "DRIVER_KINDS",
    "DriverKill",
    "DriverKillRun",
    "KillOutcome",
    "Segments",
    "checkpoints_numbered",
    "driver_kill_lines",
    "kill_before",
    "plan_driver_kills",
    "resumed_checkpoint",
    "run_with_driver_kills",
    "why_not_landed",
]

# A driver kill's moment: (the fault point of runtime/faults.py, whether it aims at the
# sinks' vertex, what a person reads; {n} is the checkpoint).
DRIVER_KINDS: dict[str, tuple[str, bool, str]] = {
    "sink-pre-commit": (
        "after-barrier",
        True,
        "between the sink's pre-commit of checkpoint {n} and the checkpoint's completion",
    ),
    "metadata": (
        "driver-metadata",
        False,
        "during checkpoint {n}: every subtask acknowledged, its _metadata not yet published",
    ),
    "before-commit": (
        "before-commit",
        True,
        "after checkpoint {n} completed, before the sink committed it",
    ),
    "completed": (
        "after-commit",
        False,
        "after checkpoint {n} completed and a subtask committed it",
    ),
}
_RESUMED = re.compile(r"resumes from checkpoint (\d+) at ")
_LOG_TAIL = 2000


@dataclass(frozen=True)
class DriverKill:
    """SIGKILL of the driver's process group in driver life ``index`` (its first attempt)
    at ``kind``'s moment of that life's ``checkpoint``-th checkpoint; ``vertex``: the
    vertex whose subtask fires it (None: whichever gets there first)."""

    index: int
    kind: str
    checkpoint: int
    vertex: str | None = None

    @property
    def point(self) -> str:
        return DRIVER_KINDS[self.kind][0]

    def describe(self, base: int = 0) -> str:
        """``driver kill #0 during checkpoint 3: ...``; ``base``: the checkpoints numbered
        before this life (its aim is ``base + checkpoint``).

        >>> DriverKill(1, "before-commit", 2, "p -> Sink").describe(base=5)
        "driver kill #1 after checkpoint 7 completed, before the sink committed it ('p -> Sink')"
        """
        phase = DRIVER_KINDS[self.kind][2].format(n=base + self.checkpoint)
        of = f" ({self.vertex!r})" if self.vertex is not None else ""
        return f"driver kill #{self.index} {phase}{of}"

    def spec(self, base: int, marker_dir: str) -> str:
        """This kill as a ``cairn.testing.faults`` entry of its driver life.

        >>> DriverKill(0, "metadata", 2).spec(4, "/m")
        'point=driver-metadata,attempt=0,checkpoint=6,kill=driver,marker=/m/driver-0'
        """
        fields = [f"point={self.point}", "attempt=0", f"checkpoint={base + self.checkpoint}"]
        if self.vertex is not None:
            fields.append(f"vertex={self.vertex}")
        fields += ["kill=driver", f"marker={os.path.join(marker_dir, f'driver-{self.index}')}"]
        return ",".join(fields)


def plan_driver_kills(
    seed: int, count: int, *, checkpoints: int, vertices: Sequence[Vertex]
) -> tuple[DriverKill, ...]:
    """``count`` driver kills drawn from ``seed`` (independently of the worker kills the
    same seed draws): kill ``i`` ends driver life ``i`` at a moment of ``DRIVER_KINDS``,
    at its ``n``-th checkpoint, ``n`` in 1..``checkpoints // (count + 1)`` (the reference
    completed ``checkpoints``: every life gets its share of the job). The sinks' moments
    aim at the last vertex (the graph is sorted sources first, so it ends in a sink).

    >>> one = (Vertex("orders", 1, True), Vertex("total -> Sink", 1))
    >>> for k in plan_driver_kills(3, 3, checkpoints=8, vertices=one):
    ...     print(k.kind, k.checkpoint, k.vertex)
    metadata 1 None
    before-commit 2 total -> Sink
    sink-pre-commit 2 total -> Sink
    """
    if count < 0 or not vertices:
        raise ValueError(f"need count >= 0 and vertices, got {count}, {list(vertices)}")
    rng = random.Random(f"driver-kills-{seed}")
    last = vertices[-1].name
    names = [v.name for v in vertices]
    safe = not any(c in last for c in ",;=") and not any(
        last in other for other in names if other != last
    )
    most = max(1, checkpoints // (count + 1))
    kills = []
    for index in range(count):
        kind = rng.choice(sorted(DRIVER_KINDS))
        n = 1 + int(rng.random() * most)  # one draw whatever `most`: the kinds replay
        aims_sink = DRIVER_KINDS[kind][1] and safe
        kills.append(DriverKill(index, kind, n, last if aims_sink else None))
    return tuple(kills)


@dataclass(frozen=True)
class KillOutcome:
    """What became of a planned driver kill: ``where`` it fired (its marker's text) and
    ``at`` (the marker's mtime) if it landed, else ``why`` it did not; ``base``: the
    checkpoints numbered before its life; ``resumed_from``: the checkpoint the next driver
    said it resumed from (None: it started fresh, or there was no next driver); in a run in
    segments, ``segment``: where it landed among them, ``next_step``: what the next driver
    did (``chaos_driver_segments``)."""

    kill: DriverKill
    base: int = 0
    where: str | None = None
    at: float = 0.0
    why: str | None = None
    resumed_from: int | None = None
    segment: str | None = None
    next_step: str | None = None

    @property
    def landed(self) -> bool:
        return self.where is not None


def resumed_checkpoint(log: str) -> int | None:
    """The checkpoint a driver's log says the job resumed from (``restore_choice``).

    >>> resumed_checkpoint("WARNING ...: Job 1f resumes from checkpoint 26 at file:///c.")
    26
    >>> resumed_checkpoint("starts fresh") is None
    True
    """
    found = _RESUMED.findall(log)
    return int(found[-1]) if found else None


def kill_before(diff: Difference, outcomes: Sequence[KillOutcome]) -> KillOutcome | None:
    """The last driver kill that landed before ``diff``'s record was committed (a missing
    record: the last kill that landed).

    >>> k = [KillOutcome(DriverKill(i, "metadata", 1), where="x", at=float(i)) for i in (0, 1)]
    >>> kill_before(Difference("o", "extra", None, Record("a", 0.5, "p:1")), k).kill.index
    0
    >>> kill_before(Difference("o", "missing", "a", None), k).kill.index
    1
    """
    landed = [o for o in outcomes if o.landed]
    if diff.actual is None:
        return landed[-1] if landed else None
    before = [o for o in landed if o.at <= diff.actual.committed_at]
    return before[-1] if before else None


def driver_kill_lines(
    outcomes: Sequence[KillOutcome], planned: int, diffs: Sequence[Difference] = ()
) -> list[str]:
    """The report's lines on driver kills: how many landed, the one just before the first
    difference, and each one, landed (where, what the next driver resumed from) or not
    (why).

    >>> k = DriverKill(0, "metadata", 2)
    >>> print("\\n".join(driver_kill_lines([KillOutcome(k, 3, "driver-metadata (checkpoint 5)",
    ...     1.0, resumed_from=4), KillOutcome(DriverKill(1, "completed", 1), 5,
    ...     why="the job finished first")], 2)))
      driver kills: 1 of 2 landed, each followed by a new driver of the same run
      landed driver kill #0 during checkpoint 5: every subtask acknowledged, its _metadata not yet published: driver-metadata (checkpoint 5); the next driver resumed from checkpoint 4
      did not land: driver kill #1 after checkpoint 6 completed and a subtask committed it: the job finished first
    """  # noqa: E501
    landed = [o for o in outcomes if o.landed]
    lines = [
        f"  driver kills: {len(landed)} of {planned} landed, each followed by a new driver "
        "of the same run"
    ]
    if diffs:
        before = kill_before(diffs[0], outcomes)
        if before is not None:
            lines.append(f"  driver kill just before: {before.kill.describe(before.base)}")
    for o in outcomes:
        if o.landed:
            if o.next_step is not None:  # in a run in segments: which, from where
                resumed = o.next_step
            elif o.resumed_from is not None:
                resumed = f"the next driver resumed from checkpoint {o.resumed_from}"
            else:
                resumed = "the next driver started fresh (no completed checkpoint)"
            where = f"{o.where}, {o.segment}" if o.segment else o.where
            lines.append(f"  landed {o.kill.describe(o.base)}: {where}; {resumed}")
        else:
            lines.append(f"  did not land: {o.kill.describe(o.base)}: {o.why}")
    return lines


@dataclass
class DriverKillRun:
    """The faulted run's lives together: what its sinks committed (read by the last
    life), its error (None: it finished), each kill's outcome, its lives' logs; in
    segments, as ``chaos_run.RunResult`` says them over all lives: the parallelism of each
    segment run, the restores between them, why it stopped short (``note``, ``refused``),
    and the savepoints their stops completed."""

    outputs: dict[str, list[Record]] = field(default_factory=dict)
    error: str | None = None
    outcomes: list[KillOutcome] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    planned: int = 0
    segments_run: list[int | None] = field(default_factory=list)
    restores: list[tuple[float, str]] = field(default_factory=list)
    note: str | None = None
    refused: str | None = None
    savepoints: list[str] = field(default_factory=list)

    def lines(self, diffs: Sequence[Difference] = ()) -> list[str]:
        return driver_kill_lines(self.outcomes, self.planned, diffs)


def checkpoints_numbered(checkpoint_dir: str) -> int:
    """The highest checkpoint id a new driver of the run numbers above (rerun.py's
    ``first_new_id`` - 1), over the job directories under ``checkpoint_dir``."""
    from cairn.checkpoint.rerun import first_new_id
    from cairn.checkpoint.run_status import read_job_dir

    highest = 0
    for job_dir in glob.glob(os.path.join(checkpoint_dir, "*")):
        if os.path.isdir(job_dir):
            highest = max(highest, first_new_id(read_job_dir(job_dir)) - 1)
    return highest


def _life_spec(
    args: argparse.Namespace,
    work: str,
    minutes: float,
    faults: str,
    plan: Sequence[PlannedFault],
    markers: str,
) -> dict[str, object]:
    return {
        "args": {
            "script": args.script,
            "script_args": list(args.script_args),
            "compare": [],  # read by the parent over all lives
            "minutes": minutes,
            "checkpoint_interval": args.checkpoint_interval,
            "parallelism": args.parallelism,
            "executor": args.executor,
            "upgrade": None,  # the segments' scripts: _segments_spec
            "allow_non_restored_state": getattr(args, "allow_non_restored_state", False),
            "conf": [
                *(args.conf or []),
                "cairn.recovery.on-rerun=RESUME",
                *([f"cairn.testing.faults={faults}"] if faults else []),
            ],
        },
        "work": work,
        "plan": [vars(f) for f in plan],
        "markers": markers,
        "inputs": _saved_inputs(args, work),
    }


@dataclass(frozen=True)
class Segments:
    """The faulted run's segments, as ``chaos_run.run_job`` takes them (``--rescale``,
    ``--upgrade``): each one's parallelism, ``stop_after``, each one's script (empty: the
    job's) and ``check``, the upgrade's check before a restore (an ``UpgradeCheck`` of
    ``chaos_upgrade``, pickled for the lives; None: no check)."""

    parallelism: tuple[int | None, ...] = (None,)
    stop_after: int = 1
    scripts: tuple[str, ...] = ()
    check: Any = None


def _segments_spec(segments: Segments, start: SegmentStart, work: str) -> dict[str, object]:
    """The spec's part on segments: all of them, and where this life takes the run up."""
    check = ""
    if segments.check is not None:
        check = os.path.join(work, "upgrade-check.pickle")
        with open(check, "wb") as f:
            pickle.dump(segments.check, f)
    return {
        "segments": list(segments.parallelism),
        "stop_after": segments.stop_after,
        "scripts": list(segments.scripts),
        "check": check,
        "first": start.segment,
        "restore": start.restore,
    }


def _saved_inputs(args: argparse.Namespace, work: str) -> str:
    """Where the driver lives find the command's captured inputs (``chaos_inputs``): every
    life replays the records the reference read, never a fresh capture."""
    inputs = getattr(args, "inputs", None)
    if inputs is None:
        return ""
    path = os.path.join(work, "inputs.pickle")
    with open(path, "wb") as f:
        pickle.dump(inputs, f)
    return path


def _env() -> dict[str, str]:
    """This environment, with this process's ``cairn`` first on the child's path (a
    checkout's, not another installed one); the child's working directory is ours."""
    import cairn

    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(cairn.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def _say(message: str) -> None:
    print(f"cairn chaos: {message}", file=sys.stderr, flush=True)


def _tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()[-_LOG_TAIL:]
    except FileNotFoundError:
        return ""


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def run_with_driver_kills(
    args: argparse.Namespace,
    work: str,
    kills: Sequence[DriverKill],
    plan: Sequence[PlannedFault],
    markers: str,
    segments: Segments = Segments(),
) -> DriverKillRun:
    """Run the faulted run as ``len(kills) + 1`` driver lives (the last one with ``plan``'s
    worker kills), each a child process of its own started once the one before died, where
    the run directory says the one before left the run (``chaos_driver_segments``); see the
    module's invariant."""
    run = DriverKillRun(planned=len(kills))
    watched = {path: snapshot(path) for path in args.compare}
    deadline = time.monotonic() + args.minutes * 60
    run_dir = os.path.join(work, "faults")
    checkpoint_dir = os.path.join(run_dir, "checkpoints")
    result_path = os.path.join(work, "faults-result.json")
    count = len(segments.parallelism)
    facts = segment_facts(run_dir, count)
    for life in range(len(kills) + 1):
        kill = kills[life] if life < len(kills) else None
        base = checkpoints_numbered(checkpoint_dir)
        faults = kill.spec(base, markers) if kill is not None else ""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            run.error = f"did not finish within --minutes {args.minutes:g}"
            for late in kills[life:]:
                run.outcomes.append(KillOutcome(late, why="--minutes ran out before its driver"))
            break
        start = segment_start(facts)
        spec = _life_spec(args, work, remaining / 60, faults, () if kill else plan, markers)
        spec.update(_segments_spec(segments, start, work))
        spec_path = os.path.join(work, f"faults-life-{life}.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        log_path = os.path.join(work, f"faults-driver-{life}.log")
        run.logs.append(log_path)
        what = kill.describe(base) if kill is not None else f"{len(plan)} worker kills"
        if count > 1:
            what += f"; from {segment_name(start.segment, segments.parallelism, segments.scripts)}"
        _say(f"driver {life + 1} of the faulted run ({what}); its log: {log_path}")
        code = _run_life(spec_path, result_path, log_path, remaining)
        before, facts = facts, segment_facts(run_dir, count)
        if run.outcomes and run.outcomes[-1].landed:  # what this driver resumed from
            log = _read(log_path)
            step = None
            if count > 1:
                step = next_driver_text(
                    start, resumed_at(log), segments.parallelism, segments.scripts
                )
            run.outcomes[-1] = replace(
                run.outcomes[-1], resumed_from=resumed_checkpoint(log), next_step=step
            )
        if kill is not None:
            marker = os.path.join(markers, f"driver-{kill.index}")
            # Each subtask the kill aims at may fire before the group dies: all of them.
            where = " and ".join(x for x in _read(marker).splitlines() if x.strip()) or None
            if code == -signal.SIGKILL and where is not None:
                at = os.path.getmtime(marker)
                landed = None
                if count > 1:
                    landing = kill_landing(before, facts)
                    landed = landing_text(landing, segments.parallelism, segments.scripts)
                run.outcomes.append(KillOutcome(kill, base, where, at, segment=landed))
                continue
        if code is None:
            run.error = f"did not finish within --minutes {args.minutes:g}"
        elif code != 0 or not os.path.exists(result_path):
            run.error = (
                f"driver {life + 1} exited with {code} without a planned kill; the end of "
                f"its log {log_path}:\n{_tail(log_path)}"
            )
        else:
            _load_result(result_path, run)
            run.segments_run[:0] = segments.parallelism[: start.segment]
        if kill is not None:
            why = why_not_landed(code, where, run.error if code == 0 else None)
            run.outcomes.append(KillOutcome(kill, base, why=why))
            for later in kills[life + 1 :]:
                run.outcomes.append(KillOutcome(later, why="no driver left to kill: " + why))
        break
    for path in args.compare:
        run.outputs[f"--compare {path}"] = appended_records(path, watched[path])
    _savepoints(facts, segments, run)
    return run


def _savepoints(facts: SegmentFacts, segments: Segments, run: DriverKillRun) -> None:
    """The savepoints the run's stops completed, and the restore after each (when its
    ``_metadata`` was written)."""
    for k, path in enumerate(facts.savepoints):
        if path is None:
            break
        run.savepoints.append(path)
        metadata = os.path.join(path.removeprefix("file://"), "_metadata")
        step = restore_step(segments.parallelism, segments.scripts, k)
        run.restores.append((os.path.getmtime(metadata), step))


def why_not_landed(code: int | None, where: str | None, failed: str | None = None) -> str:
    """Why a driver kill did not land, from how its driver ended (``code``: its exit
    status, negative for a signal, None: it ran out of time), its marker's text and, for a
    driver that ended (0), the job's error if it failed.

    >>> why_not_landed(0, None)
    'the job ended before it (give it more input or a shorter --checkpoint-interval)'
    >>> why_not_landed(0, None, "JobExecutionException: boom")
    'the job failed before it: JobExecutionException: boom'
    >>> why_not_landed(-9, None)
    'the driver was SIGKILLed by something else (no marker)'
    """
    if code == 0 and failed is not None:
        return f"the job failed before it: {failed}"
    if code == 0:
        return "the job ended before it (give it more input or a shorter --checkpoint-interval)"
    if code is None:
        return "the driver ran out of --minutes first"
    if code == -signal.SIGKILL:
        return "the driver was SIGKILLed by something else (no marker)"
    landed = f" (its marker says {where!r})" if where else ""
    return f"the driver exited with {code}{landed}"


def _run_life(spec_path: str, result_path: str, log_path: str, timeout: float) -> int | None:
    """One driver life in a process group of its own: its exit code (negative: the
    signal), None if it outlived ``timeout`` (then its group is killed)."""
    with open(log_path, "w", encoding="utf-8") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "cairn.cli.chaos_driver_life", spec_path, result_path],
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the driver leads its group: kill=driver needs it
        )
        try:
            return child.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return None
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


def _load_result(path: str, run: DriverKillRun) -> None:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    run.error = data["error"]
    run.segments_run = list(data.get("segments_run", []))
    run.note, run.refused = data.get("note"), data.get("refused")
    for name, records in data["outputs"].items():
        run.outputs[name] = [Record(text, at, where) for text, at, where in records]
