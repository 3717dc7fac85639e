"""Latency against throughput: the keyed sum's end-to-end latency at fractions of its maximum
rate, for one checkout or two (A/B), in one run.

Invariant: the maximum is measured first in the same run (the unthrottled keyed sum, ABBA
over the sides, its median on side A), every side gets the same offered rates, and the
sides alternate (A, B at one fraction, B, A at the next) so that a drift in the shared
machine's load falls on both; only figures of one run are compared.

    python -m bench.latency_curve --a ../cairn-before --b . --fractions 0.25,0.5,0.8,0.9

Each run is a ``bench.workloads`` process (``--workload latency``, 1 s exactly-once
checkpoints, 10,000 keys, p = 2); ``--conf key=value`` goes to every latency run (e.g.
``metrics.latency.interval=20`` with ``metrics.latency.history-size=100000``: the latency
markers' figures at the sink beside the records'). ``--peers bytewax,pyflink`` runs each peer
(``bench/peers/run_peer.py``, installed by ``bench/peers/install.sh``) at every offered rate
right after Cairn's runs of that rate, with at most ``--peer-max-records`` records; a peer that
fell more than 10 % short of the offered rate is marked saturated (its latency then grows with
the run's length, not with the rate). Prints a line per run, a table at the end and, with
``--json``, writes every result.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.ab import alternating_order, check_imports_its_own_cairn, run_once

__all__ = ["main", "offered_rates"]

FIGURES = (
    "latency_p50_ms",
    "latency_p99_ms",
    "latency_p999_ms",
    "latency_max_ms",
    "marker_p50_ms",
    "marker_p99_ms",
)


def offered_rates(maximum: float, fractions: list[float]) -> list[tuple[float, int]]:
    """Each fraction with its rate (records/s, rounded to 1,000).

    >>> offered_rates(2_000_000, [0.25, 0.8])
    [(0.25, 500000), (0.8, 1600000)]
    """
    return [(f, round(maximum * f / 1000) * 1000) for f in fractions]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_curve")
    parser.add_argument("--a", required=True, type=Path, help="checkout A")
    parser.add_argument("--b", type=Path, default=None, help="checkout B (optional)")
    parser.add_argument("--fractions", default="0.25,0.5,0.8,0.9")
    parser.add_argument("--seconds", type=float, default=10.0, help="input per latency run")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--max-records", type=int, default=2_000_000)
    parser.add_argument("--max-repeat", type=int, default=1, help="max-rate runs per side")
    parser.add_argument("--max-rate", type=float, default=None, help="skip measuring it")
    parser.add_argument("--repeat", type=int, default=1, help="latency runs per side and rate")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", type=Path, default=None, help="write every result here")
    parser.add_argument("--peers", default="", help="e.g. bytewax,pyflink (same offered rates)")
    parser.add_argument("--peer-max-records", type=int, default=2_000_000)
    parser.add_argument("--peer-timeout", type=float, default=600.0)
    ns = parser.parse_args(argv)
    peers = [p.strip() for p in ns.peers.split(",") if p.strip()]
    sides = {"a": ns.a.resolve()}
    if ns.b is not None:
        sides["b"] = ns.b.resolve()
    for checkout in sides.values():
        check_imports_its_own_cairn(checkout)
    common = ["--keys", str(ns.keys), "--checkpoint-interval-ms", "1000"]
    results: list[dict[str, Any]] = []
    maximum = ns.max_rate
    if maximum is None:
        rates: dict[str, list[float]] = {s: [] for s in sides}
        for side in _order(ns.max_repeat, len(sides)):
            args = ["--workload", "keyed-sum", "--records", str(ns.max_records), *common]
            r = run_once(sides[side], args, ns.timeout)
            rates[side].append(float(r["steady_records_per_s"] or 0.0))
            results.append({"side": side, "fraction": 1.0, **r})
            print(f"max {side.upper()}: {rates[side][-1]:,.0f} records/s", flush=True)
        maximum = statistics.median(rates["a"])
        if "b" in rates:
            ratio = statistics.median(rates["b"]) / maximum
            print(f"max: A {maximum:,.0f}  B/A {ratio:.3f}", flush=True)
    conf = [a for c in ns.conf for a in ("--conf", c)]
    for i, (fraction, rate) in enumerate(offered_rates(maximum, _fractions(ns.fractions))):
        order = _order(ns.repeat, len(sides))
        if i % 2 == 1:
            order = ["b" if s == "a" else "a" for s in order] if len(sides) > 1 else order
        for side in order:
            records = int(rate * ns.seconds)
            args = ["--workload", "latency", "--records", str(records), "--rate", str(rate)]
            r = run_once(sides[side], [*args, *common, *conf], ns.timeout)
            results.append({"side": side, "fraction": fraction, **r})
            shown = "  ".join(f"{k[:-3]} {r.get(k)}" for k in FIGURES if r.get(k) is not None)
            print(f"{fraction:.0%} ({rate:,} rec/s) {side.upper()}: {shown}", flush=True)
        for peer in peers:
            records = min(int(rate * ns.seconds), ns.peer_max_records)
            r = run_peer(peer, records, rate, ns.keys, ns.peer_timeout)
            results.append({"side": peer, "fraction": fraction, **r})
            shown = "  ".join(f"{k[:-3]} {r.get(k)}" for k in FIGURES if r.get(k) is not None)
            flag = " (saturated)" if r.get("saturated") else ""
            print(f"{fraction:.0%} ({rate:,} rec/s) {peer}{flag}: {shown}", flush=True)
    _table(results, {**sides, **{p: Path(p) for p in peers}})
    if ns.json is not None:
        ns.json.write_text(json.dumps(results, indent=1))
    return 0


def run_peer(system: str, records: int, rate: float, keys: int, timeout: float) -> dict[str, Any]:
    """One latency run of a peer at ``rate`` (its JSON result, ``saturated`` added)."""
    script = Path(__file__).resolve().parent / "peers" / "run_peer.py"
    args = [
        "--system", system, "--workload", "latency", "--records", str(records),
        "--rate", str(rate), "--keys", str(keys), "--checkpoint-interval-ms", "1000",
        "--parallelism", "2", "--timeout", str(timeout),
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=timeout + 60
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": done.stderr[-500:]}
    achieved = result.get("steady_records_per_s")
    result["saturated"] = bool(achieved) and float(achieved) < 0.9 * rate
    return result


def _order(repeat: int, sides: int) -> list[str]:
    return alternating_order(repeat) if sides > 1 else ["a"] * repeat


def _fractions(text: str) -> list[float]:
    return [float(f) for f in text.split(",") if f.strip()]


def _table(results: list[dict[str, Any]], sides: Mapping[str, Path]) -> None:
    """Medians per fraction and side (ms)."""
    print("\n| of max | side | " + " | ".join(k[:-3] for k in FIGURES) + " |")
    print("|---" * (len(FIGURES) + 2) + "|")
    fractions = sorted({r["fraction"] for r in results if r["fraction"] < 1.0})
    for fraction in fractions:
        for side in sides:
            runs = [r for r in results if r["fraction"] == fraction and r["side"] == side]
            cells = []
            for k in FIGURES:
                values = [r[k] for r in runs if r.get(k) is not None]
                cells.append(f"{statistics.median(values):.2f}" if values else "-")
            print(f"| {fraction:.0%} | {side.upper()} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
