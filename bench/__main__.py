"""The benchmark runner: every (system x workload) ``--repeat`` times → RESULTS.md + chart.

Invariant: each measurement runs in a fresh process (``python -m bench.workloads`` for Cairn,
``bench/peers/run_peer.py`` for the peers) and is judged only by the JSON object on its last
stdout line; raw results are saved after every run, so an interrupted run loses nothing.

    python -m bench                         # everything, 3 repetitions (an hour or more)
    python -m bench --quick                 # small inputs, 1 repetition (a few minutes)
    python -m bench --systems cairn --workloads keyed-sum,latency
    python -m bench --from-json bench/out/<stamp>/results.json   # re-render only
    python -m bench --systems cairn --workloads keyed-sum --no-results  # keep RESULTS.md

A run rewrites the generated block of RESULTS.md with what it ran only: a partial run that
should not replace the full table uses ``--no-results`` (its raw results stay in
``bench/out/<stamp>/results.json``, to merge later with ``--from-json a.json,b.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench import WORKLOADS, empty_result, skew, windows
from bench.peers.run_peer import last_json_line
from bench.report import render_results, update_results_file, write_chart
from bench.saved_runs import group_results, merge_saved

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
PEER_RUNNER = os.path.join(BENCH, "peers", "run_peer.py")
STATE_MIN_PAUSE_MS = 2000
SYSTEMS = ("cairn", "pyflink", "spark", "spark-tws", "bytewax", "bytewax-2p")
WINDOW_ONLY = ("spark-tws",)  # keyed-sum's Spark peer is transformWithState already


@dataclass(frozen=True)
class Sizes:
    keyed_records: int
    keyed_keys: int
    overhead_records: int  # per run of the overhead workload (4 runs: with, without x 2)
    latency_seconds: float  # input duration at the fixed rate
    latency_warmup_s: float  # records created this long after the first are not timed
    recovery_seconds: float
    state_keys: tuple[int, ...]
    state_min_records: int
    repeat: int


FULL = Sizes(
    2_000_000, 10_000, 10_000_000, 10.0, 2.0, 15.0, (100_000, 1_000_000, 5_000_000), 4_000_000, 3
)
QUICK = Sizes(200_000, 1_000, 200_000, 4.0, 1.0, 6.0, (10_000, 100_000), 400_000, 1)


def plan_cases(workloads: Sequence[str], sizes: Sizes, rate: float | None) -> list[dict[str, Any]]:
    """The cases to run, in order; latency and recovery get ``rate`` (filled in later if
    ``None``: half of Cairn's measured keyed-sum rate)."""
    cases: list[dict[str, Any]] = []
    if "keyed-sum" in workloads:
        for case, interval in (("checkpoints-1s", 1000), ("no-checkpoints", 0)):
            cases.append(
                dict(
                    case=f"keyed-sum/{case}",
                    workload="keyed-sum",
                    records=sizes.keyed_records,
                    keys=sizes.keyed_keys,
                    interval_ms=interval,
                    rate=None,
                )
            )
    if "overhead" in workloads:
        # Cairn's own target: 2M records are under 3 s of steady state (2-3 checkpoints) at
        # Cairn's rate, too short to tell a few per cent from the machine's noise.
        cases.append(
            dict(
                case="overhead",
                workload="overhead",
                records=sizes.overhead_records,
                keys=sizes.keyed_keys,
                interval_ms=1000,
                rate=None,
            )
        )
    for workload, seconds in (
        ("latency", sizes.latency_seconds),
        ("recovery", sizes.recovery_seconds),
    ):
        if workload in workloads:
            cases.append(
                dict(
                    case=workload,
                    workload=workload,
                    records=None,
                    keys=sizes.keyed_keys,
                    interval_ms=1000,
                    rate=rate,
                    seconds=seconds,
                    warmup_s=sizes.latency_warmup_s,
                )
            )
    if "state-size" in workloads:
        for keys in sizes.state_keys:
            # Cairn: a 2 s min pause between checkpoints, so that large-state checkpoints
            # (longer than the interval) leave quiet windows to measure the dip against.
            cases.append(
                dict(
                    case=f"state-size/keys-{keys}",
                    workload="state-size",
                    records=max(2 * keys, sizes.state_min_records),
                    keys=keys,
                    interval_ms=1000,
                    rate=None,
                    min_pause_ms=STATE_MIN_PAUSE_MS,
                )
            )
    if "skew" in workloads:
        cases += skew.plan_cases(quick=sizes == QUICK)
    if "window" in workloads:
        cases += windows.plan_cases(quick=sizes == QUICK)
    return cases


def command(system: str, case: dict[str, Any], executor: str, timeout_s: float) -> list[str]:
    if case["workload"] == "skew":
        return skew.command(system, case, executor, timeout_s)
    if case["workload"] == "window":
        return windows.command(system, case, executor, timeout_s)
    args = [
        "--workload",
        case["workload"],
        "--records",
        str(case["records"]),
        "--keys",
        str(case["keys"]),
        "--checkpoint-interval-ms",
        str(case["interval_ms"]),
        "--rate",
        str(int(case["rate"] or 0)),
        "--parallelism",
        "2",
    ]
    if case["workload"] == "latency":
        args += ["--latency-warmup-s", str(case["warmup_s"])]
    if system == "cairn":
        if case.get("min_pause_ms"):
            args += ["--min-pause-ms", str(case["min_pause_ms"])]
        return [sys.executable, "-m", "bench.workloads", *args, "--executor", executor]
    # The peer runner cleans up its own process group a little before ours kills it.
    return [
        sys.executable,
        PEER_RUNNER,
        "--system",
        system,
        *args,
        "--timeout",
        str(max(60, int(timeout_s) - 30)),
    ]


def run_one(
    system: str, case: dict[str, Any], timeout_s: float, log_path: str, executor: str = "spark"
) -> dict[str, Any]:
    """One measurement in a fresh process group; a failure becomes a result with a note."""
    if system != "cairn" and not os.path.exists(PEER_RUNNER):
        result = empty_result(system, case["workload"], case["records"])
        result["unsupported"] = "bench/peers/run_peer.py is missing"
        return result
    cmd = command(system, case, executor, timeout_s)
    load_1m = round(os.getloadavg()[0], 2)  # the machine is shared: beside every figure
    started = time.monotonic()
    timed_out = False
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
        )
        try:
            stdout, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)  # the JVMs and workers it started, too
            stdout, _ = proc.communicate()
        log.write("\n--- stdout ---\n" + stdout)
    result = empty_result(system, case["workload"], case["records"])
    parsed = None if timed_out else last_json_line(stdout)
    if parsed is not None:
        result.update(parsed)
        if parsed.get("error") and not parsed.get("note"):  # the peer runner's own failure
            result["note"] = f"failed: {parsed['error']}"
    elif timed_out:
        result["note"] = f"timed out after {timeout_s:.0f} s"
    else:
        result["note"] = f"failed (exit {proc.returncode}); see {os.path.relpath(log_path, ROOT)}"
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["load_1m"] = load_1m
    if case.get("expected"):
        windows.verify(result, case["expected"])
    return result


def calibrated_rate(results: Sequence[dict[str, Any]]) -> float | None:
    """Half of Cairn's median steady keyed-sum rate with checkpoints, rounded to 1,000."""
    rates = [
        r["steady_records_per_s"]
        for r in results
        if r.get("system") == "cairn"
        and r.get("case") == "keyed-sum/checkpoints-1s"
        and isinstance(r.get("steady_records_per_s"), int | float)
    ]
    if not rates:
        return None
    return float(max(1000, round(statistics.median(rates) / 2, -3)))


def own_rate(results: Sequence[dict[str, Any]], system: str) -> float | None:
    """A system's median steady keyed-sum rate with checkpoints in this run, if measured."""
    rates = [
        r["steady_records_per_s"]
        for r in results
        if r.get("system") == system
        and r.get("case") == "keyed-sum/checkpoints-1s"
        and isinstance(r.get("steady_records_per_s"), int | float)
    ]
    return float(statistics.median(rates)) if rates else None


def peer_case(
    system: str, case: dict[str, Any], results: Sequence[dict[str, Any]], budget_s: float
) -> tuple[dict[str, Any], str | None, str | None]:
    """How ``system`` runs ``case``: (the case, a note for its row, why it is not run).

    A peer slower than the common latency/recovery rate would only queue up (its latency
    grows with the run's length), so it is fed at half of its own keyed-sum rate instead and
    the row says so; a state-size run that would take longer than ``budget_s`` at its
    measured rate is not run, and the row says why.
    """
    if case["workload"] == "overhead" and system != "cairn":
        return case, None, "Cairn's own target (its checkpoints against none, long runs)"
    own = None if system == "cairn" else own_rate(results, system)
    if own is None:
        return case, None, None
    if case["workload"] in ("latency", "recovery") and own < case["rate"]:
        rate = float(max(100, round(own / 2, -2)))
        note = (
            f"fed at {rate:,.0f} records/s, half of its own keyed-sum rate ({own:,.0f}): "
            f"it cannot sustain the common {case['rate']:,.0f} records/s"
        )
        return {**case, "rate": rate, "records": int(rate * case["seconds"])}, note, None
    if case["workload"] == "state-size" and case["records"] / own > budget_s:
        why = (
            f"{case['records']:,} records would take over {case['records'] / own:,.0f} s "
            f"at its keyed-sum rate of {own:,.0f} records/s (budget: --peer-budget-s "
            f"{budget_s:.0f} per run)"
        )
        return case, None, why
    return case, None, None


# ---- machine ------------------------------------------------------------------------------


def machine_info() -> dict[str, str]:
    info = {"CPU": _cpu_model(), "cores": str(os.cpu_count())}
    try:
        import psutil

        info["memory"] = f"{psutil.virtual_memory().total / 2**30:.1f} GiB"
    except ImportError:
        pass
    info["OS"] = platform.platform()
    info["Python"] = platform.python_version()
    info["Java"] = _first_line(["java", "-version"])
    try:
        import pyspark

        info["PySpark (Cairn's)"] = pyspark.__version__
    except ImportError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        cairn = version("cairn")
    except PackageNotFoundError:
        cairn = "?"
    sha = _first_line(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    dirty = _first_line(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"])
    info["Cairn"] = f"{cairn} (git {sha}{' + uncommitted changes' if dirty else ''})"
    info["load average at start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else ""


# ---- main ---------------------------------------------------------------------------------


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _summary(r: dict[str, Any]) -> str:
    parts = []
    for name, fmt in (
        ("steady_records_per_s", "{:,.0f} rec/s"),
        ("latency_p99_ms", "p99 {} ms"),
        ("recovery_s", "recovered in {} s"),
        ("checkpoint_p50_ms", "cp p50 {} ms"),
        ("async_dip_pct", "dip {} %"),
    ):
        if isinstance(r.get(name), int | float):
            parts.append(fmt.format(r[name]))
    for name in ("unsupported", "note"):
        if r.get(name):
            parts.append(f"{name}: {r[name]}")
    return ", ".join(parts) or "no figures"


def run_all(args: argparse.Namespace, out_dir: str) -> tuple[list[dict[str, Any]], dict]:
    sizes = QUICK if args.quick else FULL
    repeat = args.repeat or sizes.repeat
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown:
        raise SystemExit(f"unknown workloads: {', '.join(sorted(unknown))}")
    cases = plan_cases(workloads, sizes, args.rate or None)
    meta: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": re.sub(r" --(results|chart) \S+", "", "python -m bench " + " ".join(args.argv)),
        "repeat": repeat,
        "machine": machine_info(),
        "cases": {},
    }
    results: list[dict[str, Any]] = []
    # Rates measured by an earlier run (--baseline): the common rate and each peer's own.
    known: list[dict[str, Any]] = []
    for path in filter(None, (args.baseline or "").split(",")):
        with open(path, encoding="utf-8") as f:
            known += json.load(f)["results"]
    total = repeat * sum(
        1 for c in cases for s in systems if s not in WINDOW_ONLY or c["workload"] == "window"
    )
    done = 0
    for case in cases:
        if case["rate"] is None and case["workload"] in ("latency", "recovery"):
            case["rate"] = (
                calibrated_rate(results)
                or calibrated_rate(known)
                or _calibrate(args, out_dir, sizes)
            )
        if case["records"] is None:
            case["records"] = int(case["rate"] * case["seconds"])
        if case["workload"] == "window" and "expected" not in case:
            case["expected"] = windows.expected_results(case)
            _say(f"window: expected {case['expected']}")
        meta["cases"][case["case"]] = case
        for rep in range(repeat):
            for system in systems:  # interleaved: noise spreads over all systems alike
                if system in WINDOW_ONLY and case["workload"] != "window":
                    continue
                done += 1
                log = os.path.join(
                    out_dir, f"{case['case'].replace('/', '_')}-{system}-{rep + 1}.log"
                )
                run_case, note, skip = peer_case(system, case, known + results, args.peer_budget_s)
                if skip is not None:
                    result = empty_result(system, case["workload"], case["records"])
                    result.update(unsupported=skip, wall_s=0.0)
                else:
                    result = run_one(system, run_case, args.timeout, log, args.executor)
                if note is not None:
                    result["note"] = note + (f"; {result['note']}" if result.get("note") else "")
                result.update(case=case["case"], repetition=rep + 1)
                results.append(result)
                _say(
                    f"[{done}/{total}] {system} {case['case']} #{rep + 1}: {_summary(result)}"
                    f" ({result['wall_s']} s)"
                )
                _save(out_dir, results, meta)
    meta["machine"]["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    _save(out_dir, results, meta)
    return results, meta


def _calibrate(args: argparse.Namespace, out_dir: str, sizes: Sizes) -> float:
    """No keyed-sum results and no --rate: measure Cairn's keyed-sum rate once."""
    case = plan_cases(["keyed-sum"], sizes, None)[0]
    result = run_one(
        "cairn", case, args.timeout, os.path.join(out_dir, "calibration.log"), args.executor
    )
    result["case"] = case["case"]
    rate = calibrated_rate([result])
    if rate is None:
        raise SystemExit("could not calibrate the rate; pass --rate")
    _say(f"calibrated rate: {rate:,.0f} records/s (half of Cairn's keyed-sum)")
    return rate


def _save(out_dir: str, results: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)


def write_outputs(
    results: list[dict[str, Any]], meta: dict[str, Any], results_md: str, chart: str
) -> None:
    groups = group_results(results)
    update_results_file(results_md, render_results(groups, meta, meta["cases"]))
    _say(f"wrote {os.path.relpath(results_md, ROOT)}")
    why = write_chart(groups, chart, _chart_title(meta))
    _say(f"wrote {os.path.relpath(chart, ROOT)}" if why is None else f"no chart: {why}")


def _chart_title(meta: dict[str, Any]) -> str:
    case = meta["cases"].get("keyed-sum/checkpoints-1s") or {}
    if not case:
        return "keyed-sum"
    return (
        f"keyed-sum: {case['records']:,} records, {case['keys']:,} keys, parallelism 2 "
        "(median, min-max)"
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small inputs, 1 repetition")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--repeat", type=int, default=0, help="default 3 (1 with --quick)")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="records/s for latency and recovery (default: half of Cairn's "
        "measured keyed-sum rate with checkpoints)",
    )
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per run")
    parser.add_argument(
        "--baseline",
        default=None,
        help="results.json of earlier runs (comma-separated) whose keyed-sum "
        "rates set the common rate and the peers' own rates",
    )
    parser.add_argument(
        "--peer-budget-s",
        type=float,
        default=600.0,
        help="skip a peer's state-size run expected to take longer (at its "
        "keyed-sum rate measured in the same run)",
    )
    parser.add_argument(
        "--executor",
        choices=["spark", "inprocess"],
        default="spark",
        help="Cairn's executor (inprocess: debugging only)",
    )
    parser.add_argument("--results", default=os.path.join(BENCH, "RESULTS.md"))
    parser.add_argument(
        "--no-results",
        action="store_true",
        help="leave RESULTS.md and the chart as they are (raw results: bench/out/<stamp>/)",
    )
    parser.add_argument("--chart", default=os.path.join(BENCH, "results.png"))
    parser.add_argument(
        "--from-json",
        default=None,
        help="re-render saved results.json files (comma-separated; a later "
        "file's runs of a case and system replace an earlier one's)",
    )
    args = parser.parse_args(argv)
    args.argv = argv
    if args.from_json:
        results, meta = merge_saved(args.from_json.split(","))
        write_outputs(results, meta, args.results, args.chart)
        return 0
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = os.path.join(BENCH, "out", stamp)
    os.makedirs(out_dir, exist_ok=True)
    _say(f"logs and raw results: {os.path.relpath(out_dir, ROOT)}")
    results, meta = run_all(args, out_dir)
    if args.no_results:
        saved = os.path.join(out_dir, "results.json")
        _say(f"RESULTS.md left as it is (--no-results); to merge later: --from-json {saved}")
        return 0
    write_outputs(results, meta, args.results, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
