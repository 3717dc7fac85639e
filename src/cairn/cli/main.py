"""The ``cairn`` command line: run a job script, list checkpoints, run the demo; list, savepoint,
stop and cancel running jobs (``cli/jobs.py``).

Invariant: the CLI only sets process-wide defaults and calls the public API; a job run with
``cairn run job.py`` behaves exactly like ``python job.py`` with those defaults applied.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import shlex
import sys
import traceback
from collections.abc import Sequence

from cairn.cli.options import add_job_options, parse_conf_items, signing_key_from_file


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


# Options of ``cairn run`` and whether they take a value. After the script they would belong
# to the script (as with ``flink run``); cairn refuses them there instead of dropping them.
_RUN_OPTIONS: dict[str, bool] = {
    "-p": True,
    "--parallelism": True,
    "-s": True,
    "--from-savepoint": True,
    "--from-checkpoint": True,
    "-n": False,
    "--allow-non-restored-state": False,
    "--fresh": False,
    "--resume": False,
    "--refuse-resume": False,
    "--master": True,
    "--executor": True,
    "-D": True,
    "--conf": True,
}


def _misplaced_run_options(script_args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split what follows the script into (cairn's options with their values, the rest).

    >>> _misplaced_run_options(["-p", "2", "--out", "x", "-Dk=v", "--parallelism=3"])
    (['-p', '2', '-Dk=v', '--parallelism=3'], ['--out', 'x'])
    """
    ours: list[str] = []
    rest: list[str] = []
    args = list(script_args)
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
        short = arg[:2] if len(arg) > 2 and arg[:2] in _RUN_OPTIONS else None
        if _RUN_OPTIONS.get(name) and "=" not in arg and i + 1 < len(args):
            ours.extend(args[i : i + 2])  # "-p 2"
            i += 2
            continue
        if name in _RUN_OPTIONS or short:  # "--parallelism=2", "-p2", "-Dkey=value"
            ours.append(arg)
        else:
            rest.append(arg)
        i += 1
    return ours, rest


def _refuse_misplaced(
    argv: Sequence[str], args: argparse.Namespace, ours: list[str], rest: list[str]
) -> int:
    before = list(argv[: len(argv) - len(args.script_args) - 1])  # "run" + options
    corrected = ["cairn", *before, *ours, args.script, *rest]
    if args.passthrough:
        corrected += ["--", *args.passthrough]
    print(
        f"cairn run: {' '.join(ours)} after the script would go to the script, not to cairn; "
        "put cairn's options before the script:\n  "
        + shlex.join(corrected)
        + "\n(to give them to the script itself, put them after '--': "
        + shlex.join(["cairn", *before, args.script, "--", *ours, *rest, *args.passthrough])
        + ")",
        file=sys.stderr,
    )
    return 2


def cmd_run(args: argparse.Namespace) -> int:
    from cairn.common.exceptions import JobExecutionException
    from cairn.datastream.stream_execution_environment import set_context_defaults
    from cairn.deploy.job_master_client import JobExecutionError

    ours, rest = _misplaced_run_options(args.script_args)
    if ours:
        return _refuse_misplaced(args.argv, args, ours, rest)
    script_args = [*args.script_args, *args.passthrough]
    conf: dict[str, str] = {"cairn.progress": "true"}
    if args.master:
        conf["cairn.spark.master"] = args.master
    if args.executor:
        conf["cairn.executor"] = args.executor
    if args.allow_non_restored_state:
        conf["execution.state-recovery.ignore-unclaimed-state"] = "true"
    conf.update(parse_conf_items(args.conf))
    if args.on_rerun:  # the flag wins over -D, which a shared script or alias may carry
        conf["cairn.recovery.on-rerun"] = args.on_rerun
    set_context_defaults(
        parallelism=args.parallelism,
        restore_path=args.from_checkpoint,
        configuration=conf,
    )
    script = os.path.abspath(args.script)
    if not os.path.isfile(script):
        from cairn.common.exceptions import ConfigurationError

        what = "is a directory" if os.path.isdir(script) else "does not exist"
        raise ConfigurationError(
            f"the script {args.script} {what}\n"
            "  give the path of a Python job script: cairn run [options] job.py [args]"
        )
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except JobExecutionException as error:
        # A bad restore path or configuration found in the attempt: main()'s one line.
        if args.verbose or not isinstance(error, JobExecutionError) or _expected_error(error):
            raise
        from cairn.cli.failure_report import report_job_failure
        from cairn.observability.progress import silence_progress

        silence_progress()
        print(report_job_failure(error), file=sys.stderr)
        return 1
    except Exception as error:
        # The script itself raised (a syntax error, a bad call into the API, its own
        # exception): the user's frames, not runpy's and Cairn's; -v keeps the traceback.
        if args.verbose or _expected_error(error):
            raise
        from cairn.cli.failure_report import report_script_error
        from cairn.observability.progress import silence_progress

        silence_progress()
        print(report_script_error(args.script, error), file=sys.stderr)
        return 1
    return 0


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from cairn.checkpoint.errors import CheckpointError, CheckpointStorageUnusableError
    from cairn.checkpoint.storage_access import describe_storage_error, is_storage_error
    from cairn.common.config_options import validate_configuration
    from cairn.common.exceptions import ConfigurationError
    from cairn.common.filesystems import filesystem_url_problem
    from cairn.common.storage_options import storage_options_for
    from cairn.observability.tables import checkpoints_report

    problem = filesystem_url_problem(args.path)
    if problem is not None:
        raise ConfigurationError(problem)
    resolved = validate_configuration(parse_conf_items(args.conf))
    key = signing_key_from_file(args.signing_key_file)
    try:
        print(
            checkpoints_report(
                args.path,
                checkpoint_id=args.checkpoint_id,
                details=args.details,
                as_json=args.json,
                storage_options=storage_options_for(args.path, resolved),
                key=key,
            )
        )
    except LookupError as e:  # no such checkpoint id: as expected as a missing directory
        raise CheckpointError(str(e)) from e
    except CheckpointError:
        raise
    except Exception as e:  # missing credentials, unreachable endpoint, no permission, ...
        if not is_storage_error(e):
            raise
        raise CheckpointStorageUnusableError(args.path, describe_storage_error(args.path, e)) from e
    return 0


# ``cairn demo`` options that must be positive (or >= 0), checked before Spark starts.
_DEMO_MINIMUMS = {
    "records": 0,
    "keys": 1,
    "parallelism": 1,
    "rate": 1,
    "seconds": 1,
    "alignment_timeout_ms": 0,
    "record_cost_ms": 0,
}


def _check_demo_args(args: argparse.Namespace) -> None:
    """Raise ``ConfigurationError`` naming the first option below its minimum.

    >>> _check_demo_args(argparse.Namespace(parallelism=0, rate=1))
    Traceback (most recent call last):
    ...
    cairn.common.exceptions.ConfigurationError: --parallelism must be at least 1, got 0
    """
    from cairn.common.exceptions import ConfigurationError

    for name, minimum in _DEMO_MINIMUMS.items():
        value = getattr(args, name, None)
        if value is not None and value < minimum:
            option = "--" + name.replace("_", "-")
            raise ConfigurationError(f"{option} must be at least {minimum}, got {value}")


def cmd_demo(args: argparse.Namespace) -> int:
    _check_demo_args(args)
    if args.scenario == "skew":
        from cairn.cli.demo_skew import parse_variants, run_skew_demo

        try:
            variants = parse_variants(args.variants)
        except ValueError as e:
            print(f"cairn demo skew: {e}", file=sys.stderr)
            return 2
        return run_skew_demo(
            seconds=args.seconds,
            variants=variants,
            master=args.master,
            parallelism=args.parallelism,
            alignment_timeout_ms=args.alignment_timeout_ms,
            record_cost_ms=args.record_cost_ms,
        )
    from cairn.cli.demo import run_demo

    return run_demo(
        records=args.records,
        keys=args.keys,
        parallelism=args.parallelism,
        rate=args.rate,
        output=args.output,
        kill=not args.no_kill,
        master=args.master,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cairn",
        description="Stateful stream processing with Flink's checkpointing model, on Spark.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a job script (a Python file using cairn.datastream)")
    run.add_argument("script")
    run.add_argument("script_args", nargs=argparse.REMAINDER)
    run.add_argument(
        "-s",
        "--from-savepoint",
        "--from-checkpoint",
        dest="from_checkpoint",
        default=None,
        metavar="PATH",
        help="restore from a savepoint or retained checkpoint directory",
    )
    run.add_argument(
        "-n",
        "--allow-non-restored-state",
        action="store_true",
        help="restore even if state of an operator (uid) the job no longer has would be dropped",
    )
    rerun = run.add_mutually_exclusive_group()
    rerun.add_argument(
        "--fresh",
        dest="on_rerun",
        action="store_const",
        const="FRESH",
        help="start from scratch even if an earlier run of this job was lost with completed "
        "checkpoints (cairn.recovery.on-rerun: FRESH; its checkpoints are kept)",
    )
    rerun.add_argument(
        "--resume",
        dest="on_rerun",
        action="store_const",
        const="FORCE_RESUME",
        help="resume from the earlier run's latest completed checkpoint, even if that run "
        "ended FINISHED or CANCELED (cairn.recovery.on-rerun: FORCE_RESUME)",
    )
    rerun.add_argument(
        "--refuse-resume",
        dest="on_rerun",
        action="store_const",
        const="REFUSE",
        help="fail instead of resuming an earlier run, naming its checkpoint "
        "(cairn.recovery.on-rerun: REFUSE); without -s, --fresh or --resume, a rerun "
        "resumes a lost or failed run by itself",
    )
    add_job_options(run)
    run.set_defaults(func=cmd_run)

    cps = sub.add_parser(
        "checkpoints", help="list retained checkpoints under a path with their statistics"
    )
    cps.add_argument("path", help="storage root, job directory, chk-<n> or savepoint directory")
    cps.add_argument(
        "--id",
        type=int,
        default=None,
        dest="checkpoint_id",
        metavar="N",
        help="print the per-subtask statistics of checkpoint N",
    )
    cps.add_argument(
        "--details",
        action="store_true",
        help="per-subtask statistics (of --id N, else of the newest checkpoint)",
    )
    cps.add_argument("--json", action="store_true", help="print JSON instead of tables")
    cps.add_argument(
        "-D",
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="storage configuration, e.g. -D s3.endpoint=http://127.0.0.1:8333 "
        "(s3.access-key, s3.secret-key, s3.path.style.access; or AWS_* "
        "environment variables)",
    )
    cps.add_argument(
        "--signing-key-file",
        default=None,
        metavar="FILE",
        help="check signatures with the key in FILE (default: the key in "
        "$CAIRN_CHECKPOINT_SIGNING_KEY, if set); without a key, signatures are "
        "not checked",
    )
    cps.set_defaults(func=cmd_checkpoints)

    demo = sub.add_parser(
        "demo",
        help="demos on local Spark: exactly-once with a killed "
        "worker (default), or 'skew': aligned vs. unaligned checkpoints",
    )
    demo.add_argument(
        "scenario", nargs="?", choices=["exactly-once", "skew"], default="exactly-once"
    )
    demo.add_argument("--records", type=int, default=600_000)
    demo.add_argument("--keys", type=int, default=100)
    demo.add_argument("-p", "--parallelism", type=int, default=2)
    demo.add_argument("--rate", type=int, default=60_000, help="records per second")
    demo.add_argument("--output", default=None, help="output directory (default: a temp dir)")
    demo.add_argument("--no-kill", action="store_true", help="do not kill a worker")
    demo.add_argument("--master", default=None, help="Spark master URL (default: local)")
    demo.add_argument("--seconds", type=int, default=30, help="skew: seconds per variant")
    demo.add_argument(
        "--variants",
        default="aligned,unaligned,timeout,debloat",
        help="skew: comma-separated, from aligned,unaligned,timeout,debloat",
    )
    demo.add_argument(
        "--alignment-timeout-ms",
        type=int,
        default=1000,
        help="skew: aligned checkpoint timeout of the 'timeout' variant",
    )
    demo.add_argument(
        "--record-cost-ms",
        type=float,
        default=1.0,
        help="skew: busy-loop time per record in the skewed map",
    )
    demo.set_defaults(func=cmd_demo)

    from cairn.cli.chaos import HELP, add_chaos_arguments
    from cairn.cli.jobs import add_job_commands
    from cairn.cli.sql import add_sql_command
    from cairn.cli.state import add_state_command
    from cairn.cli.table import add_table_command
    from cairn.cli.tls import add_tls_command

    add_job_commands(sub)
    add_chaos_arguments(sub.add_parser("chaos", help=HELP))
    add_tls_command(sub)
    add_sql_command(sub)
    add_state_command(sub)
    add_table_command(sub)
    return parser


def _expected_error(error: BaseException) -> BaseException | None:
    """The error a user can act on without a traceback (bad configuration, a job that cannot
    be submitted, a checkpoint that cannot be restored), found along the cause chain."""
    from cairn.checkpoint.errors import CheckpointError
    from cairn.common.exceptions import (
        ConfigurationError,
        JobSubmissionError,
        MissingDependencyError,
    )
    from cairn.rest.client import JobControlError

    expected = (
        ConfigurationError,
        JobSubmissionError,
        CheckpointError,
        JobControlError,
        MissingDependencyError,
    )
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, expected):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None


def _interrupted_jobs() -> str:
    """Where the checkpoints of this process's running jobs are, for the line printed on
    Ctrl-C: ``"; job <id>: checkpoints under <dir>, latest completed chk-<n>"``.

    The jobs end with the process, as after a crash, so their checkpoints stay on storage
    whatever the retention setting, and the same command run again resumes from them.
    """
    from cairn.launch import running_jobs

    parts = []
    for client in running_jobs():
        master = client.job_master
        if not master.settings.checkpoint.enabled:
            parts.append(f"job {master.job_id}")
            continue
        latest = master.view.latest_checkpoint_id
        where = f"latest completed chk-{latest}" if latest is not None else "none completed"
        if latest is not None:  # the run record still says RUNNING: a rerun resumes
            where += " (the same command resumes from it; --fresh starts from scratch)"
        parts.append(f"job {master.job_id}: checkpoints under {master.storage.job_dir}, {where}")
    return "; " + "; ".join(parts) if parts else ""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``cairn`` command line; returns the exit status.

    Expected errors (invalid configuration, no usable checkpoint, a job that cannot be
    submitted) print one line, ``cairn <command>: <what is wrong>``, and return 1; ``-v``
    adds the traceback. A job of ``cairn run`` that fails in the user's code prints a short
    report (``cli/failure_report.py``) and returns 1 (``-v``: its whole traceback); so does a
    script that raises outside a job (a syntax error, its own exception): its own frames,
    the whole traceback in a log file. Anything else keeps its traceback.
    Ctrl-C prints ``cairn <command>: interrupted`` (for ``run``, with where the running jobs'
    checkpoints are) and returns 130.
    """
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # What follows "--" is the script's, as written (argparse would drop the "--").
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.argv = argv[:cut]
    args.passthrough = argv[cut + 1 :]
    _configure_logging(args.verbose)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # the reader went away (cairn list | head): nothing to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the flush at exit does not raise again
        return 141  # as a shell reports a command SIGPIPE ended
    except KeyboardInterrupt:
        from cairn.observability.progress import silence_progress

        silence_progress()  # no status line after the last one
        print(f"cairn {args.command}: interrupted{_interrupted_jobs()}", file=sys.stderr)
        return 130
    except Exception as error:
        expected = _expected_error(error)
        if expected is None:
            raise
        if args.verbose:
            traceback.print_exc()
        print(f"cairn {args.command}: {expected}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
