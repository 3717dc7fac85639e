"""``cairn chaos job.py``: run a user's job once without faults (the reference) and once under
a seeded schedule of worker kills, and compare what their sinks committed.

Invariant: both runs are the same script with the same arguments in this process, each with
checkpoints and file sinks in a directory of its own and a fresh start (never a resume of
the other); with ``--driver-kills`` the faulted run is drivers of its own instead, each a
child process killed at a seeded moment and resumed by the next (``cli/chaos_driver.py``);
with ``--rescale`` or ``--upgrade`` a life killed in a segment is followed by one that takes
the run up where the run directory says it stands (``cli/chaos_driver_segments.py``);
the kills are ``cairn.testing.faults`` points (``testing/fault_plan.py``), so
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
import tempfile

from cairn.cli.chaos_driver import Segments, plan_driver_kills, run_with_driver_kills
from cairn.cli.chaos_inputs import InputCapture, add_capture_arguments
from cairn.cli.chaos_report import replay_command, report, rescale_text
from cairn.cli.chaos_run import (
    INTERVAL_MS,
    RunResult,
    judge,
    run_conf,
    run_job,
    say,
    segments_of,
)
from cairn.cli.chaos_upgrade import NOT_CARRIED, add_upgrade_arguments, prepare_upgrade
from cairn.testing.fault_plan import (
    Vertex,
    fired_faults,
    plan_faults,
)

__all__ = [
    "HELP",
    "add_chaos_arguments",
    "cmd_chaos",
]


def cmd_chaos(args: argparse.Namespace) -> int:
    from cairn.common.exceptions import ConfigurationError

    if not os.path.isfile(args.script):
        raise ConfigurationError(f"no such job script: {args.script}")
    if args.faults < 0 or args.minutes <= 0 or args.driver_kills < 0:
        raise ConfigurationError("--faults, --driver-kills must be >= 0 and --minutes > 0")
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
    upgrade = prepare_upgrade(args, run_conf(args, work, "")) if args.upgrade else None
    args.inputs = InputCapture.from_args(args, work)  # Kafka sources: captured, replayed
    say(f"--seed={seed}, work directory {work}; the reference run (no faults)")
    reference = run_job(args, "reference", work, scripts=scripts[1:])
    if reference.error is not None:
        say(f"the job fails without faults ({reference.error}); nothing to compare")
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
    what += f" and {args.driver_kills} driver kills" if args.driver_kills else ""
    say(f"the run under {len(plan)} faults{what} ({reference.seconds:.1f} s without)")
    check = upgrade.before_restore if upgrade else None
    driven = None
    if args.driver_kills:  # the faulted run in drivers of its own, killed and restarted
        kills = plan_driver_kills(
            seed,
            args.driver_kills,
            checkpoints=reference.checkpoints,
            vertices=reference.vertices or (Vertex("", reference.parallelism),),
        )
        staged = Segments(tuple(segments), stop_after, tuple(scripts), upgrade)
        driven = run_with_driver_kills(args, work, kills, plan, markers, staged)
        chaos = RunResult(
            "faults",
            outputs=driven.outputs,
            segments_run=driven.segments_run,
            restores=driven.restores,
            error=driven.error,
            refused=driven.refused,
            note=driven.note,
        )
        if upgrade is not None:  # what the savepoints held, for the report
            for k, path in enumerate(driven.savepoints):
                upgrade.before_restore(k, path)
    else:
        chaos = run_job(
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
    command = replay_command(args, seed)
    refused = chaos.refused
    if refused is None and upgrade is not None and chaos.error is not None:
        refused = upgrade.after_failure(chaos.error)  # a state that no longer reads
    if refused is None and upgrade is not None and chaos.note is not None:
        refused = f"NOT UPGRADED: {chaos.note}; nothing compared"
    if refused is not None:
        print(f"{refused}\n  replay: {command}")
        for line in driven.lines() if driven else []:
            print(line)
        return 1
    if chaos.error is not None:
        print(f"FAILED under faults: {chaos.error}")
        for f in fired:
            print(f"  fired {f.fault.describe()}: {f.where}")
        for line in driven.lines() if driven else []:
            print(line)
        print(f"  replay: {command}")
        for line in args.inputs.report_lines():
            print(line)
        return 1

    def again() -> RunResult:  # with --upgrade once more after it: the new version's states
        return run_job(
            args,
            "upgrade" if upgrade else "rescale",
            work,
            segments=[*segments, None] if upgrade else segments,
            stop_after=stop_after,
            scripts=[*scripts, args.upgrade] if upgrade else [],
            before_restore=check,
        )

    diffs, cause = judge(
        args,
        work,
        reference,
        chaos,
        scripts=scripts[1:],
        again=again if args.rescale or upgrade else None,
        upgrade=upgrade is not None,
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
            rescale=rescale_text(chaos) if args.rescale else None,
            restores=chaos.restores,
            upgrade=upgrade.text() if upgrade else None,
            held=upgrade.carried_text() if upgrade and cause and cause.name == NOT_CARRIED else (),
        )
    )
    for line in driven.lines(diffs) if driven else []:
        print(line)
    for line in args.inputs.report_lines():
        print(line)
    return 1 if diffs else 0


HELP = (
    "run a job without and with seeded faults (worker kills, --driver-kills) and compare "
    "what its sinks committed; exit 1 on any difference (--upgrade NEW_JOB.py: also switch "
    "to a new version of the job through a savepoint)"
)


def add_chaos_arguments(chaos: argparse.ArgumentParser) -> None:
    """The options of ``cairn chaos`` on its subparser."""
    chaos.add_argument("script", help="the job; its own arguments go after '--'")
    chaos.add_argument("--faults", type=int, default=3, help="kills (default: %(default)s)")
    chaos.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    chaos.add_argument(
        "--driver-kills",
        type=int,
        default=0,
        metavar="K",
        help="also SIGKILL the faulted run's driver K times at seeded moments; each new "
        "driver resumes from the latest completed checkpoint (default: %(default)s)",
    )
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
        default=INTERVAL_MS,
        metavar="MS",
        help="checkpoint interval of both runs (default: %(default)s; 0: the job's own)",
    )
    chaos.add_argument("-p", "--parallelism", type=int, default=None)
    chaos.add_argument("--executor", choices=["spark", "inprocess"], default=None)
    chaos.add_argument("-D", "--conf", action="append", metavar="KEY=VALUE")
    chaos.add_argument("--work-dir", default=None, help="where the runs' directories go")
    add_capture_arguments(chaos)
    chaos.set_defaults(func=cmd_chaos)
