"""One run of a user's job script for ``cairn chaos``: the script executed in this process
with its sinks redirected to the run's own places, its checkpoints in the run's directory,
under a plan of faults, in segments (a stop with savepoint between two, each restored from
the last: ``--rescale``, ``--upgrade``), and what its sinks committed read back.

Invariant: a run starts fresh (``cairn.recovery.on-rerun: FRESH``) in a directory of its own
(``work/label``) and never reads another run's checkpoints or output; the job objects of the
user's script are never changed (the submission hook deploys rewritten copies); the result
holds what the sinks committed whether the run ended, failed or timed out.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cairn.cli.chaos_driver_segments import savepoint_name
from cairn.cli.chaos_outputs import (
    SinkOutput,
    appended_records,
    read_outputs,
    redirect_sinks,
    snapshot,
)
from cairn.cli.chaos_verdict import Cause, Difference, Record, classify, compare_outputs
from cairn.cli.options import parse_conf_items
from cairn.testing.fault_plan import (
    PlannedFault,
    Vertex,
    faults_text,
)

INTERVAL_MS = 300  # both runs' default checkpoint interval: many checkpoints to aim at
_SAVEPOINT_TIMEOUT_S = 120.0

__all__ = [
    "INTERVAL_MS",
    "RunResult",
    "control_run_differs",
    "differs",
    "judge",
    "restore_step",
    "run_conf",
    "run_job",
    "say",
    "segments_of",
    "texts",
    "watched_name",
]


@dataclass
class RunResult:
    """What one run of the job committed, output by output, and the shape of its job."""

    label: str
    outputs: dict[str, list[Record]] = field(default_factory=dict)
    sinks: list[SinkOutput] = field(default_factory=list)
    parallelism: int = 1
    vertices: tuple[Vertex, ...] = ()
    segments_run: list[int | None] = field(default_factory=list)
    restores: list[tuple[float, str]] = field(default_factory=list)  # (when, what)
    checkpoints: int = 0  # completed, at least (the watcher polls)
    error: str | None = None
    refused: str | None = None  # why the next segment's script cannot restore (--upgrade)
    note: str | None = None
    seconds: float = 0.0


def say(message: str) -> None:
    print(f"cairn chaos: {message}", file=sys.stderr, flush=True)


def segments_of(parallelism: int, rescale: bool) -> list[int | None]:
    """The parallelism of each segment of a run: the job's own, or with ``--rescale`` p,
    p+1, p (a stop with savepoint between two segments, each restored from the last).

    >>> segments_of(2, False), segments_of(2, True)
    ([None], [2, 3, 2])
    """
    return [parallelism, parallelism + 1, parallelism] if rescale else [None]


class _Watcher(threading.Thread):
    """Watches the segment's job: ``completed``, the checkpoints it completed; with
    ``stop_after`` (a count) it stops the job with a savepoint into ``directory`` once it
    completed that many (mid-run), unless the job ends first; ``path``: the savepoint."""

    def __init__(self, stop_after: int | None = None, directory: str = "") -> None:
        super().__init__(name="cairn-chaos-watcher", daemon=True)
        self.stop_after, self.directory = stop_after, directory
        self.completed = 0
        self.path: str | None = None
        self.done = threading.Event()

    def run(self) -> None:
        from cairn.launch import running_jobs

        while not self.done.wait(0.02):
            jobs = running_jobs()
            stats = jobs[0].get_checkpoint_statistics() if jobs else None
            if stats is None:
                continue
            self.completed = max(self.completed, stats.counts.completed)
            if self.stop_after is None or self.completed < self.stop_after:
                continue
            try:
                stop = jobs[0].stop_with_savepoint(False, self.directory)
                self.path = stop.result(timeout=_SAVEPOINT_TIMEOUT_S)
            except Exception as error:  # the job ended or failed over first: no rescale
                say(f"no stop with savepoint ({_one_line(error)})")
            return


def run_job(
    args: argparse.Namespace,
    label: str,
    work: str,
    *,
    plan: tuple[PlannedFault, ...] = (),
    markers: str = "",
    segments: Sequence[int | None] = (None,),
    stop_after: int = 1,
    scripts: Sequence[str] = (),
    before_restore: Callable[[int, str], str | None] | None = None,
    first: int = 0,
    restore: str | None = None,
) -> RunResult:
    """Run the script once (``label``: its directory under ``work``) with ``plan``'s
    faults, in ``segments`` (one per parallelism; each but the last stopped with a
    savepoint once it completed ``stop_after`` checkpoints, the next restored from it).
    ``scripts``: each segment's script (default: the job's); ``before_restore``: given the
    segment that stopped and its savepoint, why the next one must not restore from it
    (None: it may). ``first``: the segment to begin with (a driver life taking a run up,
    ``chaos_driver_segments``), restoring ``restore`` (None: as the run's on-rerun policy
    decides); its ``before_restore`` check comes first."""
    from cairn.common.exceptions import JobExecutionException
    from cairn.datastream.job_builder import PreparedJob
    from cairn.datastream.stream_execution_environment import (
        reset_context_defaults,
        set_context_defaults,
        set_submission_hook,
    )
    from cairn.graph.job_graph import build_job_graph
    from cairn.launch import running_jobs

    run_dir = os.path.join(work, label)
    os.makedirs(run_dir, exist_ok=True)  # a driver life after a kill: the same run
    result = RunResult(label)
    prefix = f"{os.path.basename(work).replace('-', '_')}_{label}"
    known: dict[int, dict[str, SinkOutput]] = {}
    watched = {path: snapshot(path) for path in args.compare}
    saved_argv, saved_path = sys.argv, list(sys.path)
    deadline = time.monotonic() + args.minutes * 60
    started = time.monotonic()
    try:
        if first > 0 and restore is not None and before_restore is not None:
            result.refused = before_restore(first - 1, restore)
        for segment, parallelism in enumerate(segments):
            if result.refused is not None:
                break
            if segment < first:
                continue
            script = os.path.abspath(scripts[segment] if scripts else args.script)
            jobs = 0

            def hook(prepared: PreparedJob) -> PreparedJob:
                nonlocal jobs
                jobs += 1
                earlier = known.setdefault(jobs, {})
                prepared = args.inputs.replay(prepared, jobs)  # Kafka: the captured input
                moved, sinks = redirect_sinks(
                    prepared, prefix, os.path.join(run_dir, f"job-{jobs}"), jobs, earlier
                )
                for sink in sinks:
                    if sink.name not in earlier:
                        earlier[sink.name] = sink
                        result.sinks.append(sink)
                if jobs == 1 and not result.vertices:
                    s = prepared.settings
                    graph = build_job_graph(
                        s.job_name,
                        prepared.sinks,
                        s.parallelism,
                        s.max_parallelism,
                        s.operator_chaining,
                    )
                    result.parallelism = s.parallelism
                    result.vertices = tuple(
                        Vertex(v.name, v.parallelism, v.is_source) for v in graph.vertices
                    )
                return moved

            conf = run_conf(args, run_dir, faults_text(plan, markers, segment) if plan else "")
            conf["restart-strategy.fixed-delay.attempts"] = str(len(plan) + 3 if plan else 0)
            sys.argv = [script, *args.script_args]
            sys.path.insert(0, os.path.dirname(script))
            set_context_defaults(
                parallelism=parallelism if parallelism is not None else args.parallelism,
                restore_path=restore,
                configuration=conf,
            )
            set_submission_hook(hook)
            if segment < len(segments) - 1:
                savepoint = os.path.join(run_dir, savepoint_name(segment, os.listdir(run_dir)))
                stopper = _Watcher(stop_after, "file://" + savepoint)
            else:
                stopper = _Watcher()
            stopper.start()

            def cancel_all() -> None:
                for client in running_jobs():
                    client.cancel()

            timer = threading.Timer(max(0.0, deadline - time.monotonic()), cancel_all)
            timer.daemon = True
            timer.start()
            try:
                result.segments_run.append(parallelism)
                runpy.run_path(script, run_name="__main__")
            except JobExecutionException as error:
                result.error = _one_line(error)
            except SystemExit as error:
                if error.code not in (None, 0):
                    result.error = f"the script exited with {error.code}"
            finally:
                timer.cancel()
                stopper.done.set()
                stopper.join()
                result.checkpoints += stopper.completed
                set_submission_hook(None)
                reset_context_defaults()
                sys.argv, sys.path[:] = saved_argv, list(saved_path)
            if time.monotonic() >= deadline:
                result.error = f"did not finish within --minutes {args.minutes:g}"
            if result.error is not None:
                break
            if stopper.stop_after is not None:
                if stopper.path is None:
                    result.note = (
                        f"the job ended before the stop with savepoint {segment + 1} (after "
                        f"{stop_after} checkpoints of segment {segment + 1}): give it more input"
                    )
                    break
                restore = stopper.path
                if before_restore is not None:
                    result.refused = before_restore(segment, restore)
                    if result.refused is not None:
                        break
                result.restores.append((time.time(), restore_step(segments, scripts, segment)))
    finally:
        result.seconds = time.monotonic() - started
        result.outputs.update(read_outputs(result.sinks))
    for path in args.compare:
        result.outputs[watched_name(path)] = appended_records(path, watched[path])
    return result


def restore_step(segments: Sequence[int | None], scripts: Sequence[str], segment: int) -> str:
    """What the restore after segment ``segment``'s stop with savepoint was, for the report.

    >>> restore_step([2, 3, 2], [], 0), restore_step([None, None], ["v1.py", "a/v2.py"], 0)
    ('restored at p=3 from savepoint 1', 'restored with v2.py from savepoint 1')
    """
    if scripts and scripts[segment + 1] != scripts[segment]:
        new = os.path.basename(scripts[segment + 1])
        return f"restored with {new} from savepoint {segment + 1}"
    return f"restored at p={segments[segment + 1]} from savepoint {segment + 1}"


def run_conf(args: argparse.Namespace, run_dir: str, faults: str) -> dict[str, str]:
    conf = {
        "cairn.progress": "false",
        "cairn.recovery.on-rerun": "FRESH",
        "execution.checkpointing.dir": "file://" + os.path.join(run_dir, "checkpoints"),
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.delay": "100 ms",
        "cairn.testing.faults": faults,
    }
    if args.checkpoint_interval:
        conf["execution.checkpointing.interval"] = f"{args.checkpoint_interval} ms"
    if args.executor:
        conf["cairn.executor"] = args.executor
    if args.allow_non_restored_state:
        conf["execution.state-recovery.ignore-unclaimed-state"] = "true"
    conf.update(parse_conf_items(args.conf))
    return conf


def watched_name(path: str) -> str:
    return f"--compare {path}"


def _one_line(error: BaseException) -> str:
    cause: BaseException | None = error
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    text = str(cause or error).strip().splitlines()
    return f"{type(cause or error).__name__}: {text[0] if text else ''}"


def texts(run: RunResult) -> dict[str, list[str]]:
    return {name: [r.text for r in records] for name, records in run.outputs.items()}


def control_run_differs(
    args: argparse.Namespace, work: str, reference: RunResult, scripts: Sequence[str] = ()
) -> bool:
    """Run the job once more without faults (label ``control``; ``scripts`` as for
    ``run_job``) and tell whether what it committed differs from ``reference``'s; a run that
    failed does not count as differing."""
    return differs(reference, run_job(args, "control", work, scripts=scripts))


def differs(reference: RunResult, other: RunResult) -> bool:
    """Whether ``other`` ended and committed other records than ``reference``."""
    return other.error is None and bool(compare_outputs(texts(reference), other.outputs))


def judge(
    args: argparse.Namespace,
    work: str,
    reference: RunResult,
    chaos: RunResult,
    *,
    scripts: Sequence[str] = (),
    again: Callable[[], RunResult] | None = None,
    upgrade: bool = False,
    where: str = "",
) -> tuple[list[Difference], Cause | None]:
    """What the faulted run committed against the reference: the differences, and if there
    are any, their likely cause. A control run without faults tells a job that differs by
    itself; if it agrees, ``again`` (the rescale or, ``upgrade``, the upgrade, without faults)
    tells a state that does not survive it. ``where`` names where those runs run."""
    diffs = compare_outputs(texts(reference), chaos.outputs)
    control_differs = again_differs = None
    if diffs:
        say(f"outputs differ; a second run without faults (the control{where})")
        control_differs = control_run_differs(args, work, reference, scripts=scripts)
        if again is not None and not control_differs:
            say(f"and a run {'upgraded' if upgrade else 'rescaled'} without faults{where}")
            again_differs = differs(reference, again())
    cause = classify(
        diffs,
        outside_sinks=frozenset(watched_name(p) for p in args.compare),
        control_differs=control_differs,
        rescale_differs=None if upgrade else again_differs,
        rescaled=len(chaos.segments_run) > 1 and not upgrade,
        upgrade_differs=again_differs if upgrade else None,
    )
    return diffs, cause
