"""What each checkpoint store costs: the same RocksDB incremental-checkpoint job on local files,
S3 (SeaweedFS), HDFS (MiniDFSCluster), GCS (fake-gcs-server) and Azure Blob (Azurite).

Invariant: every store runs the same two measurements of :mod:`bench.workloads`, each in a
fresh process (its store started for the run by :mod:`bench.storage` and stopped with it),
with the same sizes, rate and settings; only ``--storage`` differs. The figures are Cairn's
own: per checkpoint the job master's statistics (end-to-end duration, full state size and the
bytes that checkpoint added), and for recovery the sinks' first output after the kill beside
the job master's restore summary (``JobInitialization``). Stores alternate, so the drift of a
shared machine falls on all of them; the machine's cores and load averages go with the result.

1. **Checkpoints** (``state-size`` workload): RocksDB, incremental, ``--keys`` keys (1M) each
   written once, then only ``--hot-fraction`` (1 %) of them updated, at ``--rate`` records/s
   with a checkpoint every ``--interval-ms``: each interval touches the same 10,000 distinct
   keys. The first ``--warmup`` checkpoints after the fill are left out (they upload the fill);
   over the next ``--checkpoints``: end-to-end p50/p95, the full state size, and the bytes each
   added (``checkpointed_size``: what was uploaded).
2. **Recovery** (``recovery`` workload): the same job at ``--recovery-keys`` keys (10M), a
   worker SIGKILLed once every key is in two completed checkpoints; seconds from the kill to
   the restored job's first output, and the job master's restore time (choosing the checkpoint
   -> every worker running) and the slowest worker's reads from the store.

Run it::

    python -m bench.store_costs                           # 1M / 10M keys, all five stores
    python -m bench.store_costs --stores file,s3 --keys 20000 --recovery-keys 20000 \\
        --checkpoints 5 --rate 20000                      # a small check
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import redirect_stdout
from dataclasses import asdict, dataclass
from typing import Any

from bench.peers.run_peer import last_json_line
from bench.storage import STORAGES

__all__ = [
    "CostPlan",
    "checkpoint_argv",
    "checkpoint_costs",
    "machine",
    "main",
    "markdown_table",
    "measure",
    "percentile",
    "recovery_argv",
    "recovery_costs",
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
Runner = Callable[[list[str], str], dict[str, Any]]


@dataclass(frozen=True)
class CostPlan:
    """The sizes and settings every store gets."""

    keys: int = 1_000_000
    recovery_keys: int = 10_000_000  # 0: no recovery run
    checkpoints: int = 20  # measured after the warm-up; 0: no checkpoint run
    warmup: int = 2
    interval_ms: int = 1000
    rate: float = 100_000.0
    recovery_rate: float = 100_000.0
    recovery_tail_s: float = 20.0  # input after the fill: the kill and the run-out
    hot_fraction: float = 0.01
    timeout_s: float = 1800.0

    def checkpoint_records(self) -> int:
        """Every key once, then input for 1.5 intervals per checkpoint wanted (warm-up and
        measured) and two more: a checkpoint that outlasts its interval delays the next.

        >>> CostPlan(keys=1_000_000, checkpoints=20, warmup=2).checkpoint_records()
        4500000
        """
        intervals = math.ceil(1.5 * (self.warmup + self.checkpoints)) + 2
        return self.keys + int(self.rate * self.interval_ms / 1000 * intervals)

    def recovery_records(self) -> int:
        """
        >>> CostPlan().recovery_records()
        12000000
        """
        return self.recovery_keys + int(self.recovery_rate * self.recovery_tail_s)


_COMMON = ["--state-backend", "rocksdb", "--incremental", "--parallelism", "2"]


def checkpoint_argv(plan: CostPlan, store: str) -> list[str]:
    """``bench.workloads`` arguments of the checkpoint measurement on ``store``.

    >>> " ".join(checkpoint_argv(CostPlan(keys=100, checkpoints=1, rate=1000), "hdfs"))
    ... # doctest: +NORMALIZE_WHITESPACE
    '--workload state-size --records 7100 --keys 100 --checkpoint-interval-ms 1000
     --rate 1000 --hot-fraction 0.01 --storage hdfs --state-backend rocksdb --incremental
     --parallelism 2'
    """
    return [
        *("--workload", "state-size", "--records", str(plan.checkpoint_records())),
        *("--keys", str(plan.keys), "--checkpoint-interval-ms", str(plan.interval_ms)),
        *("--rate", f"{plan.rate:g}", "--hot-fraction", f"{plan.hot_fraction:g}"),
        *("--storage", store, *_COMMON),
    ]


def recovery_argv(plan: CostPlan, store: str) -> list[str]:
    """``bench.workloads`` arguments of the recovery measurement on ``store``.

    >>> recovery_argv(CostPlan(recovery_keys=100, recovery_rate=50), "gcs")[:6]
    ['--workload', 'recovery', '--records', '1100', '--keys', '100']
    """
    return [
        *("--workload", "recovery", "--records", str(plan.recovery_records())),
        *("--keys", str(plan.recovery_keys), "--checkpoint-interval-ms", str(plan.interval_ms)),
        *("--rate", f"{plan.recovery_rate:g}", "--hot-fraction", f"{plan.hot_fraction:g}"),
        *("--storage", store, *_COMMON),
    ]


# ---- figures (pure) -----------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in (0, 100]).

    >>> percentile([5, 1, 4, 2, 3], 50), percentile(range(1, 21), 95), percentile([7], 95)
    (3, 19, 7)
    """
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def checkpoint_costs(result: dict[str, Any], warmup: int, count: int) -> dict[str, Any]:
    """The checkpoint figures of one ``state-size`` result: its ``hot_series`` (per
    checkpoint after the fill: end-to-end ms, full bytes, added bytes) without the first
    ``warmup``, at most ``count`` of them (the same number for every store).

    >>> series = [[900, 10_000, 9_000], [120, 10_100, 300], [100, 10_200, 200],
    ...           [140, 10_200, 400]]
    >>> c = checkpoint_costs({"hot_series": series}, warmup=1, count=3)
    >>> c["checkpoints"], c["e2e_p50_ms"], c["e2e_p95_ms"], c["full_bytes"]
    (3, 120, 140, 10200)
    >>> c["added_bytes_p50"], c["added_bytes_mean"], c["added_pct_mean"]
    (300, 300, 2.95)
    >>> checkpoint_costs({"hot_series": series[:1], "note": "x"}, 1, 5)["note"]
    'x; 1 checkpoints after the fill, 0 of 5 after the 1 of warm-up'
    """
    series = result.get("hot_series") or []
    used = series[warmup : warmup + count]
    out: dict[str, Any] = {"checkpoints": len(used), "note": result.get("note")}
    if len(used) < count:
        why = (
            f"{len(series)} checkpoints after the fill, {len(used)} of {count} after the"
            f" {warmup} of warm-up"
        )
        out["note"] = "; ".join(p for p in (result.get("note"), why) if p)
    if not used:
        return out
    e2e = [s[0] for s in used]
    full = [s[1] for s in used]
    added = [s[2] for s in used]
    out.update(
        e2e_p50_ms=percentile(e2e, 50),
        e2e_p95_ms=percentile(e2e, 95),
        e2e_max_ms=max(e2e),
        full_bytes=percentile(full, 50),
        added_bytes_p50=percentile(added, 50),
        added_bytes_mean=round(statistics.mean(added)),
        added_bytes_max=max(added),
        added_pct_mean=round(
            100 * statistics.mean(a / f for a, f in zip(added, full, strict=True) if f), 2
        ),
        records_per_s=result.get("steady_records_per_s"),
        restarts=result.get("restarts"),
    )
    return out


def recovery_costs(result: dict[str, Any]) -> dict[str, Any]:
    """The recovery figures of one ``recovery`` result: from the kill (the bench's clocks)
    and the job master's restore summary.

    >>> r = recovery_costs({"recovery_s": 1.5, "recovery_detected_s": 0.1,
    ...     "recovery_running_s": 1.6, "state_size_at_kill_bytes": 9, "note": None,
    ...     "restore_initialization": {"total_ms": 1400, "state_read_ms": 600,
    ...     "initialize_state_ms": 700, "state_bytes": 8, "checkpoint_id": 4}})
    >>> r["recovery_s"], r["restore_total_ms"], r["restore_read_ms"], r["restored_bytes"]
    (1.5, 1400, 600, 8)
    """
    init = result.get("restore_initialization") or {}
    return {
        "recovery_s": result.get("recovery_s"),  # kill -> the restored job's first output
        "detected_s": result.get("recovery_detected_s"),
        "all_running_s": result.get("recovery_running_s"),
        "state_at_kill_bytes": result.get("state_size_at_kill_bytes"),
        "restore_total_ms": init.get("total_ms"),  # choosing the checkpoint -> all running
        "restore_state_ms": init.get("initialize_state_ms"),  # the slowest worker's state
        "restore_read_ms": init.get("state_read_ms"),  # ... of which reading the store
        "restored_bytes": init.get("state_bytes"),
        "restored_checkpoint": init.get("checkpoint_id"),
        "note": result.get("note"),
    }


def machine() -> dict[str, Any]:
    """Cores and load averages now (the machine may be shared)."""
    return {"cores": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()]}


def _mb(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value / 1e6:,.{digits}f}"


def _cell(value: Any, fmt: str = "{:,}") -> str:
    return "-" if value is None else fmt.format(value)


def markdown_table(stores: Sequence[dict[str, Any]]) -> str:
    """A row per store: checkpoints, then recovery.

    >>> row = {"store": "s3", "checkpoint": {"checkpoints": 20, "e2e_p50_ms": 120,
    ...     "e2e_p95_ms": 180, "full_bytes": 50_000_000, "added_bytes_p50": 400_000,
    ...     "added_bytes_mean": 500_000, "added_pct_mean": 1.0},
    ...     "recovery": {"recovery_s": 1.2, "restore_total_ms": 1100, "restore_read_ms": 300,
    ...     "restored_bytes": 480_000_000}}
    >>> print(markdown_table([row]).splitlines()[-1])
    | s3 | 20 | 120 | 180 | 50.0 | 0.40 | 0.50 | 1.00 | 1.20 | 1,100 | 300 | 480.0 |
    """
    lines = [
        "| store | checkpoints | e2e p50 ms | e2e p95 ms | full state MB | added MB p50 "
        "| added MB mean | added % of full | recovery s | restore ms | store reads ms "
        "| restored MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in stores:
        c, r = row.get("checkpoint") or {}, row.get("recovery") or {}
        cells = [
            row["store"],
            _cell(c.get("checkpoints")),
            _cell(c.get("e2e_p50_ms")),
            _cell(c.get("e2e_p95_ms")),
            _mb(c.get("full_bytes")),
            _mb(c.get("added_bytes_p50"), 2),
            _mb(c.get("added_bytes_mean"), 2),
            _cell(c.get("added_pct_mean"), "{:.2f}"),
            _cell(r.get("recovery_s"), "{:.2f}"),
            _cell(r.get("restore_total_ms")),
            _cell(r.get("restore_read_ms")),
            _mb(r.get("restored_bytes")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---- running ------------------------------------------------------------------------------


def subprocess_runner(timeout_s: float) -> Runner:
    """Each measurement in a fresh process group (its store's server included), its stderr
    in ``log_path``; killed as a group after ``timeout_s``."""

    def run(argv: list[str], log_path: str) -> dict[str, Any]:
        cmd = [sys.executable, "-m", "bench.workloads", *argv]
        with open(log_path, "w", encoding="utf-8") as log:
            log.write(" ".join(cmd) + "\n")
            log.flush()
            proc = subprocess.Popen(
                cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                start_new_session=True,
            )  # fmt: skip
            try:
                stdout, _ = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return {"note": f"timed out after {timeout_s:.0f} s"}
            log.write("\n--- stdout ---\n" + stdout)
        parsed = last_json_line(stdout)
        if parsed is None:
            return {"note": f"failed (exit {proc.returncode}); see {log_path}"}
        return parsed

    return run


def in_process_runner(argv: list[str], log_path: str) -> dict[str, Any]:
    """The measurement in this process (tests: the session's Spark is reused)."""
    from bench.workloads import main as workloads_main

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        workloads_main(argv)
    return last_json_line(buffer.getvalue()) or {"note": "no result printed"}


def measure(
    plan: CostPlan,
    stores: Sequence[str],
    out_dir: str,
    runner: Runner,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Both measurements on every store (checkpoints on each store, then recovery on each),
    with the machine's state before and after."""
    os.makedirs(out_dir, exist_ok=True)
    doc: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "plan": asdict(plan),
        "machine_start": machine(),
        "stores": [{"store": s} for s in stores],
    }
    phases: list[tuple[str, Callable[[CostPlan, str], list[str]]]] = []
    if plan.checkpoints > 0:
        phases.append(("checkpoint", checkpoint_argv))
    if plan.recovery_keys > 0:
        phases.append(("recovery", recovery_argv))
    for phase, argv_of in phases:
        for row in doc["stores"]:
            store = row["store"]
            load = round(os.getloadavg()[0], 2)
            started = time.monotonic()
            raw = runner(argv_of(plan, store), os.path.join(out_dir, f"{phase}-{store}.log"))
            figures = (
                checkpoint_costs(raw, plan.warmup, plan.checkpoints)
                if phase == "checkpoint"
                else recovery_costs(raw)
            )
            figures.update(load_1m=load, wall_s=round(time.monotonic() - started, 1))
            row[phase] = figures
            row[f"{phase}_raw"] = raw
            say(f"{phase:10} {store:6} {_summary(phase, figures)}")
    doc["machine_end"] = machine()
    with open(os.path.join(out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return doc


def _summary(phase: str, f: dict[str, Any]) -> str:
    if phase == "checkpoint" and f.get("checkpoints"):
        return (
            f"{f['checkpoints']} checkpoints: p50 {f['e2e_p50_ms']} ms, p95 {f['e2e_p95_ms']} ms,"
            f" full {_mb(f['full_bytes'])} MB, added {_mb(f['added_bytes_mean'], 2)} MB mean"
            f" ({f['wall_s']} s, load {f['load_1m']})"
        )
    if phase == "recovery" and f.get("recovery_s") is not None:
        return (
            f"recovery {f['recovery_s']:.2f} s, restore {f['restore_total_ms']} ms,"
            f" {_mb(f['restored_bytes'])} MB read ({f['wall_s']} s, load {f['load_1m']})"
        )
    return f"no figures: {f.get('note')}"


def report(doc: dict[str, Any]) -> str:
    """The table and the machine's state, as printed at the end of a run."""
    start, end = doc["machine_start"], doc["machine_end"]
    return (
        markdown_table(doc["stores"])
        + f"\n\n{doc['started']}; {start['cores']} cores; load average (1/5/15 min)"
        f" {'/'.join(map(str, start['load']))} at the start, {'/'.join(map(str, end['load']))}"
        " at the end"
    )


def main(argv: list[str] | None = None) -> int:
    d = CostPlan()
    parser = argparse.ArgumentParser(
        prog="python -m bench.store_costs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--stores", default=",".join(STORAGES), help="comma-separated")
    parser.add_argument("--keys", type=int, default=d.keys, help="checkpoint run's keys")
    parser.add_argument(
        "--recovery-keys", type=int, default=d.recovery_keys, help="0: no recovery run"
    )
    parser.add_argument(
        "--checkpoints", type=int, default=d.checkpoints, help="measured; 0: no checkpoint run"
    )
    parser.add_argument("--warmup", type=int, default=d.warmup, help="checkpoints left out")
    parser.add_argument("--interval-ms", type=int, default=d.interval_ms)
    parser.add_argument("--rate", type=float, default=d.rate, help="checkpoint run, records/s")
    parser.add_argument("--recovery-rate", type=float, default=d.recovery_rate)
    parser.add_argument("--recovery-tail-s", type=float, default=d.recovery_tail_s)
    parser.add_argument("--hot-fraction", type=float, default=d.hot_fraction)
    parser.add_argument("--timeout-s", type=float, default=d.timeout_s, help="per measurement")
    parser.add_argument("--out", default=None, help="default bench/out/store-costs-<stamp>")
    parser.add_argument("--json", default=None, help="also write the result here")
    parser.add_argument("--report", default=None, help="print the table of a results.json")
    args = parser.parse_args(argv)
    if args.report:
        with open(args.report, encoding="utf-8") as f:
            print(report(json.load(f)))
        return 0
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = [s for s in stores if s not in STORAGES]
    if unknown or not stores:
        parser.error(f"--stores: unknown {unknown}; expected some of {', '.join(STORAGES)}")
    plan = CostPlan(
        keys=args.keys,
        recovery_keys=args.recovery_keys,
        checkpoints=args.checkpoints,
        warmup=args.warmup,
        interval_ms=args.interval_ms,
        rate=args.rate,
        recovery_rate=args.recovery_rate,
        recovery_tail_s=args.recovery_tail_s,
        hot_fraction=args.hot_fraction,
        timeout_s=args.timeout_s,
    )
    out_dir = args.out or os.path.join(OUT, "store-costs-" + time.strftime("%Y%m%d-%H%M%S"))
    doc = measure(plan, stores, out_dir, subprocess_runner(plan.timeout_s))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
    print(report(doc))
    print(f"results: {os.path.join(out_dir, 'results.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
