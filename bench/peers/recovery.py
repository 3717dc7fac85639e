"""Kill-and-restart harness of the peers' recovery workload.

Invariant: the first run is SIGKILLed (its whole process group) once its sinks counted
``KILL_AT`` of the input and ``MIN_CHECKPOINT_PERIODS`` checkpoint intervals passed since its
first record — the point where Cairn's harness kills a worker — or ``--kill-after-s`` after
its first record if given; then the same job is restarted once from its own latest checkpoint
in the same work folder; replayed records = records processed by both runs - records of the
input.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import common

KILL_AT = 0.4  # of the input processed, as in Cairn's recovery workload
MIN_CHECKPOINT_PERIODS = 2.5  # checkpoint intervals after the first record (>= 2 completed)
FIRST_RECORD_TIMEOUT_S = 300.0


def _job_cmd(args: argparse.Namespace, script: str, run_tag: str, restore: bool) -> list[str]:
    cmd = [
        sys.executable,
        script,
        "--role",
        "job",
        "--workload",
        "recovery",
        "--run-tag",
        run_tag,
        "--records",
        str(args.records),
        "--keys",
        str(args.keys),
        "--checkpoint-interval-ms",
        str(args.checkpoint_interval_ms),
        "--parallelism",
        str(args.parallelism),
        "--rate",
        str(args.rate),
        "--work-dir",
        args.work_dir,
    ]
    return [*cmd, "--restore"] if restore else cmd


def _spawn(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PEER_LAUNCH_TIME": repr(time.time())}
    with open(log, "wb") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _last_json(log: Path) -> dict[str, Any]:
    for line in reversed(log.read_text(errors="replace").splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            return dict(json.loads(line))
    raise RuntimeError(f"the restarted job printed no result; see {log}")


def run_recovery(
    args: argparse.Namespace, system: str, script: str, timeout_s: float = 900.0
) -> dict[str, Any]:
    """Run, kill, restart; returns the recovery result (``recovery_s``, ``replayed_records``)."""
    # run_peer.py ends a run with SIGTERM: unwind, so the ``finally`` blocks kill the children
    # (they live in process groups of their own).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(args.work_dir)
    probes = str(work / "probes")
    first = _spawn(_job_cmd(args, script, "run1", restore=False), work / "run1.log")
    try:
        deadline = time.time() + FIRST_RECORD_TIMEOUT_S
        while common.read_progress(probes, "run1")[0] == 0:
            if first.poll() is not None or time.time() > deadline:
                raise RuntimeError(
                    f"first run produced no record within "
                    f"{FIRST_RECORD_TIMEOUT_S:.0f} s; see {work / 'run1.log'}"
                )
            time.sleep(0.05)
        first_record = time.time()
        if args.kill_after_s:
            time.sleep(args.kill_after_s)
        else:
            earliest = first_record + MIN_CHECKPOINT_PERIODS * args.checkpoint_interval_ms / 1000
            while (
                common.read_progress(probes, "run1")[0] < KILL_AT * args.records
                or time.time() < earliest
            ):
                if first.poll() is not None:
                    break
                time.sleep(0.02)
        if first.poll() is not None:
            raise RuntimeError("the first run finished before the kill: raise --records")
    finally:
        _kill_group(first)
    killed_at = time.time()
    kill_after = killed_at - first_record
    processed_before, _ = common.read_progress(probes, "run1")

    second = _spawn(_job_cmd(args, script, "run2", restore=True), work / "run2.log")
    try:
        second.wait(timeout=max(1.0, timeout_s - (time.time() - common.SCRIPT_START)))
    except subprocess.TimeoutExpired:
        _kill_group(second)
        raise
    finally:
        _kill_group(second)
    rerun = _last_json(work / "run2.log")
    result = common.result_template(args, system)
    result["versions"] = rerun.get("versions", result["versions"])
    after = common.collect_probes(probes, "run2")
    if after["first"] is not None:
        result["recovery_s"] = round(after["first"] - killed_at, 3)
    result["replayed_records"] = processed_before + after["count"] - args.records
    result["restarts"] = 1
    result["processed_before_kill"] = processed_before
    result["processed_after_restart"] = after["count"]
    result["kill_after_s"] = round(kill_after, 3)
    result["elapsed_s"] = round(time.time() - common.SCRIPT_START, 3)
    result["steady_records_per_s"] = rerun.get("steady_records_per_s")
    result["startup_s"] = rerun.get("startup_s")
    for field in ("checkpoint_p50_ms", "checkpoint_p99_ms", "checkpoints_completed"):
        result[field] = rerun.get(field)
    # Exactly-once check: the restored sums plus the rest of the input add up to the input.
    total = after["final_sum_total"]
    result["state_total_after_restart"] = total
    result["exactly_once_ok"] = None if total is None else total == args.records
    return result
