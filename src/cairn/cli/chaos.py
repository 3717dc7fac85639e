"""``cairn chaos job.py``: run a user's job once without faults (the reference) and once under
a seeded schedule of worker kills, and compare what their sinks committed.

Invariant: both runs are the same script with the same arguments in this process, each with
checkpoints and file sinks in a directory of its own and a fresh start (never a resume of
the other); the kills are ``cairn.testing.faults`` points (``testing/fault_plan.py``), so
``--seed S`` replays them. The verdict is ``chaos_verdict``'s pure functions; when the
outputs differ, a second fault-free run (the control) tells a job that differs with no
fault at all (non-deterministic) from one that differs only after a restore. With
``--upgrade new_job.py`` the reference is the new script and the faulted run switches from
the job's script to it at a stop with savepoint (``chaos_upgrade`` checks the savepoint
first). Exit status:
0 equal, 1 different (or the job failed under faults), 2 the job cannot run without faults.
"""

from __future__ import annotations

import argparse
import os
import random
import runpy
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cairn.cli.chaos_outputs import (
    SinkOutput,
    appended_records,
    read_outputs,
    redirect_sinks,
    snapshot,
)
from cairn.cli.chaos_upgrade import NOT_CARRIED, add_upgrade_arguments, prepare_upgrade
from cairn.cli.chaos_verdict import Cause, Difference, Record, classify, compare_outputs
from cairn.cli.options import parse_conf_items
from cairn.testing.fault_plan import (
    FiredFault,
    PlannedFault,
    Vertex,
    faults_text,
    fired_faults,
    plan_faults,
)

_INTERVAL_MS = 300  # both runs' default checkpoint interval: many checkpoints to aim at
_SAVEPOINT_TIMEOUT_S = 120.0

__all__ = ["HELP", "add_chaos_arguments", "cmd_chaos", "report", "segments_of"]


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


def _say(message: str) -> None:
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
                _say(f"no stop with savepoint ({_one_line(error)})")
            return


def _run(
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
) -> RunResult:
    """Run the script once (``label``: its directory under ``work``) with ``plan``'s
    faults, in ``segments`` (one per parallelism; each but the last stopped with a
    savepoint once it completed ``stop_after`` checkpoints, the next restored from it).
    ``scripts``: each segment's script (default: the job's); ``before_restore``: given the
    segment that stopped and its savepoint, why the next one must not restore from it
    (None: it may)."""
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
    os.makedirs(run_dir)
    result = RunResult(label)
    prefix = f"{os.path.basename(work).replace('-', '_')}_{label}"
    known: dict[int, dict[str, SinkOutput]] = {}
    watched = {path: snapshot(path) for path in args.compare}
    saved_argv, saved_path = sys.argv, list(sys.path)
    deadline = time.monotonic() + args.minutes * 60
    started = time.monotonic()
    restore: str | None = None
    try:
        for segment, parallelism in enumerate(segments):
            script = os.path.abspath(scripts[segment] if scripts else args.script)
            jobs = 0

            def hook(prepared: PreparedJob) -> PreparedJob:
                nonlocal jobs
                jobs += 1
                earlier = known.setdefault(jobs, {})
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

            conf = _conf(args, run_dir, faults_text(plan, markers, segment) if plan else "")
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
                savepoint = os.path.join(run_dir, f"savepoint-{segment}")
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
                step = f"restored at p={segments[segment + 1]} from savepoint {segment + 1}"
                if scripts and scripts[segment + 1] != scripts[segment]:
                    new = os.path.basename(scripts[segment + 1])
                    step = f"restored with {new} from savepoint {segment + 1}"
                result.restores.append((time.time(), step))
    finally:
        result.seconds = time.monotonic() - started
        result.outputs.update(read_outputs(result.sinks))
    for path in args.compare:
        result.outputs[_watched_name(path)] = appended_records(path, watched[path])
    return result


def _conf(args: argparse.Namespace, run_dir: str, faults: str) -> dict[str, str]:
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


def _watched_name(path: str) -> str:
    return f"--compare {path}"


def _one_line(error: BaseException) -> str:
    cause: BaseException | None = error
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    text = str(cause or error).strip().splitlines()
    return f"{type(cause or error).__name__}: {text[0] if text else ''}"


def _texts(run: RunResult) -> dict[str, list[str]]:
    return {name: [r.text for r in records] for name, records in run.outputs.items()}


def fault_before(diff: Difference, fired: Sequence[FiredFault]) -> FiredFault | None:
    """The last fault that fired before ``diff``'s record was committed (a missing record
    has no commit time: the last fault of the run).

    >>> from cairn.testing.fault_plan import PlannedFault
    >>> f = [FiredFault(PlannedFault(i, "upload", i, 0), "x", float(i)) for i in range(3)]
    >>> d = Difference("o", "extra", None, Record("a", 1.5, "p:1"))
    >>> fault_before(d, f).fault.index
    1
    """
    if not fired:
        return None
    if diff.actual is None:
        return fired[-1]
    before = [f for f in fired if f.at <= diff.actual.committed_at]
    return before[-1] if before else None


def _restore_before(
    diff: Difference, restores: Sequence[tuple[float, str]]
) -> tuple[float, str] | None:
    if diff.actual is None:
        return restores[-1] if restores else None
    before = [r for r in restores if r[0] <= diff.actual.committed_at]
    return before[-1] if before else None


def report(
    *,
    command: str,
    seed: int,
    plan: Sequence[PlannedFault],
    fired: Sequence[FiredFault],
    diffs: Sequence[Difference],
    cause: Cause | None,
    sinks: Sequence[SinkOutput],
    compared: int,
    records: int,
    rescale: str | None = None,
    restores: Sequence[tuple[float, str]] = (),
    upgrade: str | None = None,
    held: Sequence[str] = (),
) -> str:
    """What ``cairn chaos`` prints: the verdict, the first difference with the fault just
    before it, the likely cause, the command that replays it; ``rescale``: how the faulted
    run was rescaled (None: it was not), ``restores``: when it was restored at another
    parallelism; ``upgrade``: how the faulted run was upgraded (None: it was not),
    ``held``: what became of the savepoint's states, when the upgrade did not carry them."""
    lines = []
    skipped = [s for s in sinks if s.reason]
    if diffs:
        outputs = sorted({d.output for d in diffs})
        lines.append(
            f"DIFFERENT: {len(outputs)} of {compared} outputs differ from the fault-free run "
            f"({len(diffs)} differences), {len(fired)} of {len(plan)} faults fired"
        )
        first = diffs[0]
        lines.append(f"  first difference, in {first.output}: {first.describe()}")
        before = fault_before(first, fired)
        if before is not None:
            lines.append(f"  fault just before: {before.fault.describe()}: {before.where}")
        step = _restore_before(first, restores)
        if step is not None and (before is None or step[0] > before.at):
            lines.append(f"  {'upgrade' if upgrade else 'rescale'} just before: {step[1]}")
        for other in outputs:
            if other != first.output:
                d = next(d for d in diffs if d.output == other)
                lines.append(f"  also in {other}: {d.describe()}")
        if cause is not None:
            lines.append(f"  likely cause: {cause.name}: {cause.why}")
        lines += [f"  state across the upgrade: {h}" for h in held]
        lines.append(f"  replay: {command}")
    else:
        lines.append(
            f"EQUAL: {compared} outputs ({records} records) committed the same with "
            f"{len(fired)} of {len(plan)} faults as without"
        )
        lines.append(f"  replay: {command}")
        if compared == 0:
            lines.append("  nothing was compared: the job has no sink it reads and no --compare")
    if rescale is not None:
        lines.append(f"  rescaled: {rescale}")
    if upgrade is not None:
        lines.append(f"  upgraded: {upgrade}")
    for f in fired:
        lines.append(f"  fired {f.fault.describe()}: {f.where}")
    for s in skipped:
        lines.append(f"  not compared: {s.name} ({s.kind}): {s.reason}")
    return "\n".join(lines)


def _replay_command(args: argparse.Namespace, seed: int) -> str:
    parts = ["cairn", "chaos", args.script, f"--faults={args.faults}", f"--seed={seed}"]
    for path in args.compare:
        parts += ["--compare", path]
    if args.rescale:
        parts.append("--rescale")
    if args.upgrade:
        parts += ["--upgrade", args.upgrade]
    if args.allow_non_restored_state:
        parts.append("--allow-non-restored-state")
    if args.parallelism is not None:
        parts += ["-p", str(args.parallelism)]
    if args.checkpoint_interval != _INTERVAL_MS:
        parts += ["--checkpoint-interval", str(args.checkpoint_interval)]
    if args.executor:
        parts += ["--executor", args.executor]
    for item in args.conf or []:
        parts += ["-D", item]
    if args.script_args:
        parts += ["--", *args.script_args]
    return shlex.join(parts)


def cmd_chaos(args: argparse.Namespace) -> int:
    from cairn.common.exceptions import ConfigurationError

    if not os.path.isfile(args.script):
        raise ConfigurationError(f"no such job script: {args.script}")
    if args.faults < 0 or args.minutes <= 0:
        raise ConfigurationError("--faults must be >= 0 and --minutes > 0")
    if args.upgrade is not None and (args.rescale or not os.path.isfile(args.upgrade)):
        raise ConfigurationError(f"--upgrade: no such job script {args.upgrade} (or --rescale)")
    args.script_args = list(getattr(args, "passthrough", []))
    if args.profile == "hosts":  # the faulted run on simulated hosts: chaos_hosts.py
        from cairn.cli.chaos_hosts import cmd_chaos_hosts

        return cmd_chaos_hosts(args)
    seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
    if args.work_dir:
        os.makedirs(args.work_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="cairn-chaos-", dir=args.work_dir)
    scripts = [args.script, args.upgrade] if args.upgrade else []
    upgrade = prepare_upgrade(args, _conf(args, work, "")) if args.upgrade else None
    _say(f"--seed={seed}, work directory {work}; the reference run (no faults)")
    reference = _run(args, "reference", work, scripts=scripts[1:])
    if reference.error is not None:
        _say(f"the job fails without faults ({reference.error}); nothing to compare")
        return 2
    records = sum(len(r) for r in reference.outputs.values())
    segments = [None, None] if upgrade else segments_of(reference.parallelism, args.rescale)
    # Mid-run: segment k stops after its share of the checkpoints the reference completed
    # (a quarter each: the restores and the stops take their time too).
    stop_after = max(1, reference.checkpoints // (4 if upgrade else len(segments) + 1))
    plan = plan_faults(
        seed,
        args.faults,
        vertices=reference.vertices or (Vertex("", reference.parallelism),),
        records_per_subtask=max(10, records // reference.parallelism),
        segments=len(segments),
    )
    markers = os.path.join(work, "fault-markers")
    os.makedirs(markers)
    what = " and a rescale" if args.rescale else " and an upgrade" if upgrade else ""
    _say(f"the run under {len(plan)} faults{what} ({reference.seconds:.1f} s without)")
    check = upgrade.before_restore if upgrade else None
    chaos = _run(
        args,
        "faults",
        work,
        plan=plan,
        markers=markers,
        segments=segments,
        stop_after=stop_after,
        scripts=scripts,
        before_restore=check,
    )
    fired = fired_faults(plan, markers)
    command = _replay_command(args, seed)
    refused = chaos.refused
    if refused is None and upgrade is not None and chaos.error is not None:
        refused = upgrade.after_failure(chaos.error)  # a state that no longer reads
    if refused is None and upgrade is not None and chaos.note is not None:
        refused = f"NOT UPGRADED: {chaos.note}; nothing compared"
    if refused is not None:
        print(f"{refused}\n  replay: {command}")
        return 1
    if chaos.error is not None:
        print(f"FAILED under faults: {chaos.error}")
        for f in fired:
            print(f"  fired {f.fault.describe()}: {f.where}")
        print(f"  replay: {command}")
        return 1
    diffs = compare_outputs(_texts(reference), chaos.outputs)
    control_differs = rescale_differs = None
    if diffs:
        _say("outputs differ; a second run without faults (the control)")
        control = _run(args, "control", work, scripts=scripts[1:])
        control_differs = control.error is None and bool(
            compare_outputs(_texts(reference), control.outputs)
        )
        if (args.rescale or upgrade) and not control_differs:
            _say(f"and a run {'upgraded' if upgrade else 'rescaled'} without faults")
            # With --upgrade once more after it: which states the new version has.
            steps = [*segments, None] if upgrade else segments
            rescaled = _run(
                args,
                "upgrade" if upgrade else "rescale",
                work,
                segments=steps,
                stop_after=stop_after,
                scripts=[*scripts, args.upgrade] if upgrade else [],
                before_restore=check,
            )
            rescale_differs = rescaled.error is None and bool(
                compare_outputs(_texts(reference), rescaled.outputs)
            )
    outside = frozenset(_watched_name(p) for p in args.compare)
    cause = classify(
        diffs,
        outside_sinks=outside,
        control_differs=control_differs,
        rescale_differs=None if upgrade else rescale_differs,
        rescaled=len(chaos.segments_run) > 1 and not upgrade,
        upgrade_differs=rescale_differs if upgrade else None,
    )
    print(
        report(
            command=command,
            seed=seed,
            plan=plan,
            fired=fired,
            diffs=diffs,
            cause=cause,
            sinks=reference.sinks,
            compared=len(reference.outputs),
            records=records,
            rescale=_rescale_text(chaos) if args.rescale else None,
            restores=chaos.restores,
            upgrade=upgrade.text() if upgrade else None,
            held=upgrade.carried_text() if upgrade and cause and cause.name == NOT_CARRIED else (),
        )
    )
    return 1 if diffs else 0


def _rescale_text(run: RunResult) -> str:
    """``p=2 -> 3 -> 2, stopped with a savepoint ...`` or why the run was not rescaled."""
    shown = " -> ".join(str(p) for p in run.segments_run)
    if run.note is not None:
        return f"only p={shown}: {run.note}"
    return f"p={shown}, each step a stop with savepoint mid-run and a restore from it"


HELP = (
    "run a job without and with seeded faults (worker kills) and compare what its sinks "
    "committed; exit 1 on any difference (--upgrade NEW_JOB.py: also switch to a new "
    "version of the job through a savepoint)"
)


def add_chaos_arguments(chaos: argparse.ArgumentParser) -> None:
    """The options of ``cairn chaos`` on its subparser."""
    chaos.add_argument("script", help="the job; its own arguments go after '--'")
    chaos.add_argument("--faults", type=int, default=3, help="kills (default: %(default)s)")
    chaos.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    chaos.add_argument(
        "--profile",
        choices=["local", "hosts"],
        default="local",
        help="local: kills of this machine's Spark workers at Cairn's fault points; hosts: "
        "the faulted run on simulated hosts, also host loss, partitions, disk full and "
        "storage outages (root, Linux)",
    )
    chaos.add_argument(
        "--rescale",
        action="store_true",
        help="also rescale the faulted run mid-run: stop with a savepoint, restore at p+1, "
        "again at p",
    )
    add_upgrade_arguments(chaos)
    chaos.add_argument(
        "--minutes", type=float, default=10.0, help="limit per run (default: %(default)s)"
    )
    chaos.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="PATH",
        help="also compare what the job writes itself at PATH (a file or directory), "
        "outside its sinks",
    )
    chaos.add_argument(
        "--checkpoint-interval",
        type=int,
        default=_INTERVAL_MS,
        metavar="MS",
        help="checkpoint interval of both runs (default: %(default)s; 0: the job's own)",
    )
    chaos.add_argument("-p", "--parallelism", type=int, default=None)
    chaos.add_argument("--executor", choices=["spark", "inprocess"], default=None)
    chaos.add_argument("-D", "--conf", action="append", metavar="KEY=VALUE")
    chaos.add_argument("--work-dir", default=None, help="where the runs' directories go")
    chaos.set_defaults(func=cmd_chaos)
