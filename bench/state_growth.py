"""A regular SQL join's state, without and with ``table.exec.state.ttl``, checkpoint by
checkpoint; what ``cairn doctor`` says of each run.

Invariant: both runs join the same two paced ``datagen`` streams on a key each side sees
once (``id`` 1..N at ``--rate`` rows/s), with 1 s exactly-once checkpoints; only the TTL
differs. Without one the join keeps every row it ever saw (Flink's, and Cairn's, regular join
semantics), so its checkpointed state grows with the input; with a TTL the rows not written for
that long are left out of each snapshot, so the state levels off at about ``rate x TTL`` rows.
Prints each completed checkpoint's join state and the doctor's findings, writes
``results.json`` and, with matplotlib, a chart (``--chart``).

    python -m bench.state_growth --rate 4000 --seconds 20 --ttl 3s --chart bench/state_growth.png
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.observability.doctor.fact_sources import facts_of_master
from cairn.observability.doctor.rules import diagnose
from cairn.table import EnvironmentSettings, TableEnvironment

MIB = 1 << 20


def run(rate: int, seconds: int, ttl: str | None, checkpoints: str) -> dict[str, Any]:
    """One run: each completed checkpoint's (seconds since the first, join state bytes), and
    the doctor's findings."""
    rows = rate * seconds
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    config.set("cairn.executor", "inprocess")
    config.set("parallelism.default", "2")
    config.set("execution.checkpointing.interval", "1 s")
    config.set("state.checkpoints.dir", Path(checkpoints).resolve().as_uri())
    if ttl is not None:
        config.set("table.exec.state.ttl", ttl)
    for side in ("l", "r"):
        t_env.execute_sql(
            f"CREATE TABLE {side} (id BIGINT, payload STRING) WITH ('connector' = 'datagen',"
            f" 'rows-per-second' = '{rate // 2}', 'fields.id.kind' = 'sequence',"
            f" 'fields.id.start' = '1', 'fields.id.end' = '{rows // 2}',"
            " 'fields.payload.length' = '40')"
        )
    t_env.execute_sql(
        "CREATE TABLE out_t (id BIGINT, a STRING, b STRING) WITH ('connector' = 'blackhole')"
    )
    started = time.monotonic()
    result = t_env.execute_sql(
        "INSERT INTO out_t SELECT l.id, l.payload, r.payload FROM l JOIN r ON l.id = r.id"
    )
    result.wait()
    elapsed = time.monotonic() - started
    master = result.get_job_client().job_master
    facts = facts_of_master(master)
    join = next(int(v) for v, name in facts.vertex_names.items() if name.startswith("Join("))
    completed = sorted(
        (c for c in facts.checkpoints if c.status.value == "COMPLETED" and not c.is_savepoint),
        key=lambda c: c.trigger_ms,
    )
    first = completed[0].trigger_ms if completed else 0
    sizes = [
        (
            (c.trigger_ms - first) / 1000,
            sum(s.metrics.state_size for s in c.subtasks.values() if int(s.task.vertex_id) == join),
        )
        for c in completed
    ]
    findings = [f.to_dict() for f in diagnose(facts)]
    return {"ttl": ttl, "rows": rows, "seconds": elapsed, "sizes": sizes, "findings": findings}


def _chart(runs: list[dict[str, Any]], path: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for r in runs:
        label = "no TTL" if r["ttl"] is None else f"table.exec.state.ttl = {r['ttl']}"
        ax.plot(
            [t for t, _ in r["sizes"]], [b / MIB for _, b in r["sizes"]], marker="o", label=label
        )
    ax.set_xlabel("seconds (the last 10 checkpoints the job keeps statistics of)")
    ax.set_ylabel("join state (MiB, all subtasks)")
    ax.set_title("A regular SQL join's checkpointed state")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=4000, help="rows/s of both sides together")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--ttl", default="3 s")
    parser.add_argument("--out", default="bench/out/state-growth")
    parser.add_argument("--chart", default=None, help="a PNG path (needs matplotlib)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    runs = []
    for ttl in (None, args.ttl):
        try:
            runs.append(run(args.rate, args.seconds, ttl, os.path.join(args.out, f"chk-{ttl}")))
        finally:
            reset_context_defaults()
    for r in runs:
        name = "no TTL" if r["ttl"] is None else f"TTL {r['ttl']}"
        sizes = " ".join(f"{b / MIB:.1f}" for _, b in r["sizes"])
        rules = ", ".join(f["rule"] for f in r["findings"]) or "none"
        print(f"{name:>10}: join state MiB per checkpoint: {sizes}")
        print(f"{'':>10}  doctor: {rules}")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(runs, f, indent=1)
    if args.chart and _chart(runs, args.chart):
        print(f"chart: {args.chart}")


if __name__ == "__main__":
    main()
