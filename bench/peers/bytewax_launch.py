"""How the Bytewax peers run their dataflow: in this process (all workers as threads, or one
member of a cluster) or as a cluster of processes on loopback (Bytewax's ``-p``/``-i``/``-a``
mode: unlike worker threads, they do not share one GIL).

Invariant: the recovery partitions (``<work-dir>/recovery``) are created once, by the
launching process or by process 0, before any worker opens them; every member of a cluster
gets the same ``--work-dir``, addresses and argument list but its own ``--process-id``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import common


def _recovery_db(args: argparse.Namespace, create: bool) -> Path | None:
    """``<work-dir>/recovery`` when checkpoints are on, initialized if ``create``."""
    from bytewax.recovery import init_db_dir

    if args.checkpoint_interval_ms <= 0:
        return None
    db = Path(args.work_dir) / "recovery"
    if create and not db.exists():
        db.mkdir(parents=True)
        init_db_dir(db, args.parallelism)
    return db


def run_dataflow(
    args: argparse.Namespace,
    flow: Any,
    process_id: int | None = None,
    addresses: list[str] | None = None,
) -> None:
    """This process's part of ``flow``: all workers as threads, or one of a cluster."""
    from bytewax._bytewax import cli_main
    from bytewax.recovery import RecoveryConfig

    db = _recovery_db(args, create=process_id in (None, 0))
    cli_main(
        flow,
        workers_per_process=args.parallelism // max(1, args.processes),
        process_id=process_id,
        addresses=addresses,
        epoch_interval=timedelta(milliseconds=args.checkpoint_interval_ms or 1000),
        recovery_config=RecoveryConfig(str(db)) if db is not None else None,
    )


def run_cluster(args: argparse.Namespace, script: str) -> None:
    """``--processes N``: N processes of ``script`` on loopback sharing the workers."""
    _recovery_db(args, create=True)
    addresses = ",".join(f"127.0.0.1:{common.free_port()}" for _ in range(args.processes))
    base = [a for a in sys.argv[1:] if not a.startswith("--role")]
    children = [
        subprocess.Popen(
            [sys.executable, script, *base, "--role", "process", "--process-id", str(i),
             "--addresses", addresses, "--work-dir", args.work_dir]
        )
        for i in range(args.processes)
    ]  # fmt: skip
    codes = [child.wait() for child in children]
    if any(codes):
        raise SystemExit(f"a Bytewax process failed: exit codes {codes}")
