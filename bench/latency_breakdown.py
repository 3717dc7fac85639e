"""What the latency tail of a ``latency`` run coincided with: the worker processes' GC pauses
and the checkpoints, from the files a run keeps (``bench.workloads --workload latency
--keep-dir DIR``).

Invariant: reads only what the run wrote (the sinks' ``latency-*.json``: their 50 ms timeline
of the worst latency and, since this module, the GC pauses of each worker process;
``checkpoints.json``); a tail window is one whose worst latency is at or above the run's p99,
and a cause is counted for it when it overlapped the worst record's lifetime in that window
(the window's end minus that latency, to the window's end).

    python -m bench.latency_breakdown DIR/sink
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
from typing import Any

from bench.measure import merge_latency

__all__ = ["breakdown", "main"]

GC_MIN_NS = 1_000_000  # pauses shorter than 1 ms are counted, not blamed


def breakdown(sink_dir: str) -> dict[str, Any]:
    """GC statistics per generation and the share of tail windows each cause overlapped."""
    summary = merge_latency(sink_dir)
    windows: list[tuple[int, int]] = []  # (window end ns, worst latency ns)
    pauses: list[tuple[int, int, int, int]] = []
    for path in glob.glob(os.path.join(sink_dir, "latency-*.json")):
        with open(path, encoding="ascii") as f:
            data = json.load(f)
        width = int(data["timeline_window_ns"])
        windows += [((int(w) + 1) * width, int(v)) for w, v in data["timeline"]]
        pauses += [tuple(e) for e in data.get("gc", [])]  # type: ignore[misc]
    result: dict[str, Any] = {}
    for gen in (0, 1, 2):
        ev = [e for e in pauses if e[1] == gen]
        if ev:
            wall = sorted(e[2] / 1e6 for e in ev)
            cpu = sorted(e[3] / 1e6 for e in ev)
            result[f"gc{gen}"] = {
                "count": len(ev),
                "wall_p50_ms": round(statistics.median(wall), 3),
                "wall_max_ms": round(wall[-1], 2),
                "cpu_p50_ms": round(statistics.median(cpu), 3),
                "cpu_max_ms": round(cpu[-1], 2),
                "wall_total_ms": round(sum(wall), 1),
            }
    if summary is None or not windows:
        return result
    p99_ns = summary.p99_ms * 1e6
    tail = [(end, worst) for end, worst in windows if worst >= p99_ns]
    long_pauses = [(t, t + wall) for t, _g, wall, _c in pauses if wall >= GC_MIN_NS]
    checkpoints = _checkpoint_triggers(os.path.join(sink_dir, "checkpoints.json"))
    with_gc = with_cp = 0
    for end, worst in tail:
        born = end - worst
        if any(s < end and e > born for s, e in long_pauses):
            with_gc += 1
        if any(born <= t < end for t in checkpoints):
            with_cp += 1
    result.update(
        p99_ms=summary.p99_ms,
        windows=len(windows),
        tail_windows=len(tail),
        tail_with_gc_pause_ge_1ms=with_gc,
        tail_with_checkpoint_trigger=with_cp,
        gc_pauses_ge_1ms=len(long_pauses),
    )
    return result


def _checkpoint_triggers(path: str) -> list[int]:
    try:
        with open(path, encoding="ascii") as f:
            rows = json.load(f)
    except OSError:
        return []
    return [int(r["trigger_ms"]) * 1_000_000 for r in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_breakdown")
    parser.add_argument("sink_dir", help="the sink folder of a kept latency run")
    ns = parser.parse_args(argv)
    print(json.dumps(breakdown(ns.sink_dir), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
