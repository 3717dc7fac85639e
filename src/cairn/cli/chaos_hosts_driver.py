"""The driver of ``cairn chaos --profile hosts``'s faulted run, on the simulated cluster's
driver host: ``python -m cairn.cli.chaos_hosts_driver spec.json`` (``chaos_hosts`` writes the
spec and starts it).

Invariant: the job runs exactly as a local chaos run does (``chaos_run.run_job``: the same sink
redirection into the run's directory, the same worker kills of the spec's ``plan``, the
same ``segments``: with ``--rescale``, stops with a savepoint into the run's directory,
which every host sees), with the spec's arguments (the cluster's configuration among
their ``-D`` items); while it runs, the spec's
``progress`` file holds how many checkpoints completed, counted across attempts and from
the spec's ``progress_base`` on (the count of the driver lives before this one: only ever
growing), and the id of the latest one (``chaos_hosts_plan.parse_progress``); once it
ends, the spec's ``result`` file holds what it committed as JSON. Nothing here makes a
fault (a driver host lost under ``--driver-kills`` is ``chaos_hosts_lives``'s doing).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
from typing import Any

__all__ = ["driver_main"]


def driver_main(spec_path: str) -> int:
    """The faulted run's driver, on the driver host: ``chaos_run.run_job`` of the job with the
    cluster's configuration; the count of completed checkpoints written to the spec's
    ``progress`` file as they complete, what the run committed to its ``result``."""
    from cairn.cli.chaos_inputs import RATE, RECORDS, SECONDS, InputCapture
    from cairn.cli.chaos_run import run_job
    from cairn.testing.fault_plan import PlannedFault

    # The driver's log (restarts, failed checkpoints) is kept in the work directory.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    os.chdir(spec["cwd"])
    args = argparse.Namespace(**spec["args"])
    # No capture on the hosts (they reach no Kafka): a job with an unbounded Kafka source
    # fails there, as its sinks would.
    args.inputs = InputCapture(os.path.join(spec["work"], "input"), RECORDS, SECONDS, RATE)
    plan = tuple(PlannedFault(**fields) for fields in spec["plan"])
    done = threading.Event()

    base = int(spec.get("progress_base", 0))
    watcher = threading.Thread(target=_watch, args=(spec["progress"], base, done), daemon=True)
    watcher.start()
    try:
        run = run_job(
            args,
            "faults",
            spec["work"],
            plan=plan,
            markers=spec["markers"],
            segments=spec["segments"],
            stop_after=spec["stop_after"],
        )
    finally:
        done.set()
    data = {
        "outputs": {
            n: [[r.text, r.committed_at, r.where] for r in rs] for n, rs in run.outputs.items()
        },
        "sinks": [[s.name, s.kind, None, s.reason] for s in run.sinks],
        "parallelism": run.parallelism,
        "checkpoints": run.checkpoints,
        "error": run.error,
        "seconds": run.seconds,
        "segments_run": run.segments_run,
        "restores": run.restores,
        "note": run.note,
    }
    with open(spec["result"], "w", encoding="utf-8") as f:
        json.dump(data, f)
    return 0


def _watch(progress: str, base: int, done: threading.Event) -> None:
    """Write how many checkpoints the job completed (from ``base`` on) and the latest one's
    id to ``progress`` as they complete, across attempts (each attempt's count may start
    again), until ``done``."""
    from cairn.launch import running_jobs

    count, last = base, 0
    while not done.wait(0.1):
        jobs = running_jobs()
        stats: Any = jobs[0].get_checkpoint_statistics() if jobs else None
        if stats is None:
            continue
        now = stats.counts.completed
        if now > last:
            count += now - last
            latest = stats.latest_completed
            with open(progress + ".tmp", "w", encoding="ascii") as f:
                f.write(f"{count} {latest.checkpoint_id if latest is not None else ''}".strip())
            os.replace(progress + ".tmp", progress)
        last = now


if __name__ == "__main__":
    sys.exit(driver_main(sys.argv[1]))
