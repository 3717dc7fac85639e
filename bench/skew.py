"""The ``skew`` workload: seed 000's checkpoint-alignment experiment on Cairn and PyFlink.

Both systems run the same job (an unbounded source emitting ``2`` once per 1,000 records and
``1`` otherwise, bounded only by backpressure -> ``key_by(lambda v: v % 2 == 0)`` -> a map
spinning 1 ms per record with a counter in state -> discard; parallelism 2; a checkpoint every
2 s) in four variants — ``aligned``, ``unaligned``, ``timeout`` (unaligned after a 1 s
aligned-checkpoint timeout) and ``debloat`` (unaligned + buffer debloating) — each for a fixed
time, then cancelled. Cairn runs ``cairn.experiments.skew.run_variant``; PyFlink runs
``bench/peers/pyflink_skew.py`` in its venv. Spark Structured Streaming and Bytewax have no
barrier alignment to compare and report ``unsupported``.

Invariant: every run prints one JSON object as its last stdout line (the shared result
fields plus the skew figures below and the raw per-checkpoint ``samples``); the figures of
both systems are computed from those samples by the same function,
``cairn.experiments.skew.summarize`` (percentiles nearest-rank over completed
checkpoints). The RESULTS.md section is rendered by ``bench.report`` with the other sections.

    python -m bench --systems cairn,pyflink --workloads skew --quick
    python -m bench.skew --system cairn --variant unaligned --seconds 20   # one run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import empty_result
from cairn.checkpoint.stats import Summary
from cairn.experiments.skew import (
    DEFAULT_ALIGNMENT_TIMEOUT_MS,
    DEFAULT_INTERVAL_MS,
    DEFAULT_RECORD_COST_MS,
    VARIANTS,
    CheckpointSample,
    summarize,
)

__all__ = ["SECONDS_FULL", "SECONDS_QUICK", "command", "plan_cases", "skew_fields"]

SECONDS_FULL = 40.0
SECONDS_QUICK = 20.0
SUPPORTED = ("cairn", "pyflink")
PEERS = Path(__file__).resolve().parent / "peers"


def plan_cases(quick: bool) -> list[dict[str, Any]]:
    """One case per variant (``skew/aligned``, ...), in the demo's order.

    >>> [c["case"] for c in plan_cases(quick=True)][:2], plan_cases(True)[0]["seconds"]
    (['skew/aligned', 'skew/unaligned'], 20.0)
    """
    seconds = SECONDS_QUICK if quick else SECONDS_FULL
    return [
        dict(
            case=f"skew/{variant}",
            workload="skew",
            variant=variant,
            seconds=seconds,
            records=0,
            keys=2,
            interval_ms=DEFAULT_INTERVAL_MS,
            rate=None,
            alignment_timeout_ms=DEFAULT_ALIGNMENT_TIMEOUT_MS,
            record_cost_ms=DEFAULT_RECORD_COST_MS,
        )
        for variant in VARIANTS
    ]


def command(system: str, case: Mapping[str, Any], executor: str, timeout_s: float) -> list[str]:
    """The runner's command for one (system, skew case); every system goes through this
    module (PyFlink in its venv, unsupported systems print why)."""
    return [
        sys.executable,
        "-m",
        "bench.skew",
        "--system",
        system,
        "--variant",
        str(case["variant"]),
        "--seconds",
        str(case["seconds"]),
        "--checkpoint-interval-ms",
        str(case["interval_ms"]),
        "--alignment-timeout-ms",
        str(case["alignment_timeout_ms"]),
        "--record-cost-ms",
        str(case["record_cost_ms"]),
        "--executor",
        executor,
        "--timeout",
        str(max(60, int(timeout_s) - 30)),
    ]


def skew_fields(
    samples: Sequence[CheckpointSample], seconds: float, records_in: int
) -> dict[str, Any]:
    """The reported figures of one run, from its checkpoints and the records into the map.

    >>> f = skew_fields([CheckpointSample(1, "COMPLETED", 80, persisted_bytes=10, unaligned=True),
    ...                  CheckpointSample(2, "IN_PROGRESS", 5)], 10.0, 8000)
    >>> f["checkpoints_completed"], f["checkpoint_p50_ms"], f["unaligned_checkpoints"], \
f["steady_records_per_s"]
    (1, 80, 1, 800)
    """
    row = summarize("", samples)
    done = [s.end_to_end_ms for s in samples if s.status == "COMPLETED"]
    return {
        "checkpoints_completed": row.completed,
        "checkpoints_failed": row.failed,
        "checkpoints_open": row.in_progress,
        "checkpoint_p50_ms": row.e2e_p50_ms,
        "checkpoint_p99_ms": Summary.of(done).p99 if done else None,
        "checkpoint_max_ms": row.e2e_max_ms,
        "alignment_p50_ms": row.alignment_p50_ms,
        "alignment_max_ms": row.alignment_max_ms,
        "start_delay_max_ms": row.start_delay_max_ms,
        "persisted_max_bytes": row.persisted_max_bytes,
        "persisted_total_bytes": row.persisted_total_bytes,
        "unaligned_checkpoints": row.unaligned,
        "steady_records_per_s": round(records_in / seconds) if seconds > 0 else None,
        "failure_reasons": list(row.failure_reasons),
    }


# ---- one run ------------------------------------------------------------------------------


def _base(system: str, args: argparse.Namespace) -> dict[str, Any]:
    result = empty_result(system, "skew", 0)
    result.update(
        variant=args.variant,
        parallelism=2,
        keys=2,
        checkpoint_interval_ms=args.checkpoint_interval_ms,
        alignment_timeout_ms=args.alignment_timeout_ms,
        record_cost_ms=args.record_cost_ms,
    )
    return result


def run_cairn(args: argparse.Namespace) -> dict[str, Any]:
    from bench.workloads import cairn_versions
    from cairn.experiments.skew import run_variant

    started = time.time()
    result = _base("cairn", args)
    result["versions"] = cairn_versions()
    run = run_variant(
        args.variant,
        args.seconds,
        2,
        None,
        args.alignment_timeout_ms,
        args.checkpoint_interval_ms,
        args.record_cost_ms,
        executor=args.executor,
    )
    result.update(skew_fields(run.samples, run.seconds, run.records))
    result.update(
        seconds=round(run.seconds, 3),
        records_in=run.records,
        elapsed_s=round(time.time() - started, 3),
        samples=[s.to_dict() for s in run.samples],
        note=run.error,
    )
    return result


def run_pyflink(args: argparse.Namespace) -> dict[str, Any]:
    """``pyflink_skew.py`` in the PyFlink venv, in its own process group, bounded in time."""
    sys.path.insert(0, str(PEERS))
    import run_peer  # bench/peers/run_peer.py: the venv, its environment, the process group

    result = _base("pyflink", args)
    python = run_peer.venv_python("pyflink")
    if not python.exists():
        result["unsupported"] = "pyflink is not installed: run bash bench/peers/install.sh"
        return result
    work = Path(tempfile.mkdtemp(prefix="peer-pyflink-skew-"))
    cmd = [
        str(python),
        str(PEERS / "pyflink_skew.py"),
        "--variant",
        args.variant,
        "--seconds",
        str(args.seconds),
        "--checkpoint-interval-ms",
        str(args.checkpoint_interval_ms),
        "--alignment-timeout-ms",
        str(args.alignment_timeout_ms),
        "--record-cost-ms",
        str(args.record_cost_ms),
        "--work-dir",
        str(work),
    ]
    log_path = work / "peer.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=str(work),
            env=run_peer.peer_env("pyflink"),
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            out = b""
            result["note"] = f"timed out after {args.timeout:.0f} s; log: {log_path}"
        finally:
            run_peer.kill_group(proc)
    peer = run_peer.last_json_line(out.decode(errors="replace"))
    if peer is None:
        result["note"] = (
            result["note"] or f"no JSON result (exit {proc.returncode}); log: {log_path}"
        )
        return result
    samples = [CheckpointSample.from_dict(s) for s in peer.get("samples", [])]
    shutil.rmtree(work, ignore_errors=True)  # kept only when the run failed (for its log)
    result.update(peer)
    result.update(
        skew_fields(samples, float(peer.get("seconds") or 0), int(peer.get("records_in") or 0))
    )
    return result


# ---- entry point --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.skew",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--system", required=True)
    parser.add_argument("--variant", required=True, choices=VARIANTS)
    parser.add_argument("--seconds", type=float, default=SECONDS_QUICK)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=DEFAULT_INTERVAL_MS)
    parser.add_argument("--alignment-timeout-ms", type=int, default=DEFAULT_ALIGNMENT_TIMEOUT_MS)
    parser.add_argument("--record-cost-ms", type=float, default=DEFAULT_RECORD_COST_MS)
    parser.add_argument("--executor", choices=["spark", "inprocess"], default="spark")
    parser.add_argument("--timeout", type=float, default=600.0, help="PyFlink: hard limit, s")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        if args.system == "cairn":
            result = run_cairn(args)
        elif args.system == "pyflink":
            result = run_pyflink(args)
        else:
            result = _base(args.system, args)
            result["unsupported"] = (
                f"{args.system} has no aligned and unaligned checkpoint "
                f"modes to compare (supported: {', '.join(SUPPORTED)})"
            )
    except Exception as exc:  # report, don't crash: the runner records the reason
        result = _base(args.system, args)
        result["note"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        print(json.dumps(result, default=str), flush=True)
        return 1
    print(json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
