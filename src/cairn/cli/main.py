"""The ``cairn`` command line: run a job script, list checkpoints, run the demo.

Invariant: the CLI only sets process-wide defaults and calls the public API; a job run with
``cairn run job.py`` behaves exactly like ``python job.py`` with those defaults applied.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import sys
from collections.abc import Sequence


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


# Options of ``cairn run``; after the script they belong to the script (as with ``flink run``).
_RUN_OPTIONS = frozenset(
    {"-p", "--parallelism", "-s", "--from-checkpoint", "--master", "--executor", "-D", "--conf"}
)


def cmd_run(args: argparse.Namespace) -> int:
    from cairn.datastream.stream_execution_environment import set_context_defaults

    misplaced = [a for a in args.script_args if a.split("=", 1)[0] in _RUN_OPTIONS]
    if misplaced:
        print(f"cairn run: {' '.join(misplaced)} after the script go to the script, not to "
              "cairn; put cairn's options before the script", file=sys.stderr)
    conf: dict[str, str] = {"cairn.progress": "true"}
    if args.master:
        conf["cairn.spark.master"] = args.master
    if args.executor:
        conf["cairn.executor"] = args.executor
    for item in args.conf or []:
        key, _, value = item.partition("=")
        conf[key.strip()] = value.strip()
    set_context_defaults(
        parallelism=args.parallelism,
        restore_path=args.from_checkpoint,
        configuration=conf,
    )
    script = os.path.abspath(args.script)
    sys.argv = [script, *args.script_args]
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")
    return 0


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from cairn.checkpoint.errors import CheckpointError
    from cairn.observability.tables import checkpoints_report

    try:
        print(checkpoints_report(args.path, checkpoint_id=args.checkpoint_id,
                                 details=args.details, as_json=args.json))
    except (CheckpointError, LookupError) as e:
        print(f"cairn checkpoints: {e}", file=sys.stderr)
        return 1
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    if args.scenario == "skew":
        from cairn.cli.demo_skew import parse_variants, run_skew_demo

        try:
            variants = parse_variants(args.variants)
        except ValueError as e:
            print(f"cairn demo skew: {e}", file=sys.stderr)
            return 2
        return run_skew_demo(seconds=args.seconds, variants=variants, master=args.master,
                             parallelism=args.parallelism,
                             alignment_timeout_ms=args.alignment_timeout_ms,
                             record_cost_ms=args.record_cost_ms)
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
    run.add_argument("-p", "--parallelism", type=int, default=None)
    run.add_argument("-s", "--from-checkpoint", default=None,
                     help="restore from a retained checkpoint or savepoint directory")
    run.add_argument("--master", default=None, help="Spark master URL (default: local)")
    run.add_argument("--executor", choices=["spark", "inprocess"], default=None)
    run.add_argument("-D", "--conf", action="append", metavar="KEY=VALUE",
                     help="configuration option, e.g. -D execution.checkpointing.interval=1s")
    run.set_defaults(func=cmd_run)

    cps = sub.add_parser("checkpoints", help="list retained checkpoints under a path with "
                         "their statistics")
    cps.add_argument("path", help="storage root, job directory, chk-<n> or savepoint directory")
    cps.add_argument("--id", type=int, default=None, dest="checkpoint_id", metavar="N",
                     help="print the per-subtask statistics of checkpoint N")
    cps.add_argument("--details", action="store_true",
                     help="per-subtask statistics (of --id N, else of the newest checkpoint)")
    cps.add_argument("--json", action="store_true", help="print JSON instead of tables")
    cps.set_defaults(func=cmd_checkpoints)

    demo = sub.add_parser("demo", help="demos on local Spark: exactly-once with a killed "
                          "worker (default), or 'skew': aligned vs. unaligned checkpoints")
    demo.add_argument("scenario", nargs="?", choices=["exactly-once", "skew"],
                      default="exactly-once")
    demo.add_argument("--records", type=int, default=600_000)
    demo.add_argument("--keys", type=int, default=100)
    demo.add_argument("-p", "--parallelism", type=int, default=2)
    demo.add_argument("--rate", type=int, default=60_000, help="records per second")
    demo.add_argument("--output", default=None, help="output directory (default: a temp dir)")
    demo.add_argument("--no-kill", action="store_true", help="do not kill a worker")
    demo.add_argument("--master", default=None, help="Spark master URL (default: local)")
    demo.add_argument("--seconds", type=int, default=30, help="skew: seconds per variant")
    demo.add_argument("--variants", default="aligned,unaligned,timeout,debloat",
                      help="skew: comma-separated, from aligned,unaligned,timeout,debloat")
    demo.add_argument("--alignment-timeout-ms", type=int, default=1000,
                      help="skew: aligned checkpoint timeout of the 'timeout' variant")
    demo.add_argument("--record-cost-ms", type=float, default=1.0,
                      help="skew: busy-loop time per record in the skewed map")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
