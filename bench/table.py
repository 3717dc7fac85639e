"""The Table API benchmark: a streaming word count and a 1 s tumbling-window aggregation, with
and without a Python scalar UDF, Cairn vs PyFlink's Table API (Flink's JVM planner) vs Spark
Structured Streaming SQL, side by side in one run.

Invariant: every system reads the same events (``bench/peers/table_common.py``) and runs the
same query — Cairn with the Table API expression DSL (the logical plan its SQL front end will
build), the peers in SQL — at parallelism 2 with 1 s exactly-once checkpoints (Spark: a
micro-batch commit per 1 s trigger); a system's events/s count only when its results equal
:func:`table_common.expected` (``verified``). The systems alternate within each repetition
(the order reversed every other one), so the noise of a shared machine falls on all alike:
compare them as ratios within one run.

    python -m bench.table --events 2000000 --keys 10000 --systems cairn,pyflink,spark --repeat 2
    python -m bench.table --report bench/out/table-<stamp>/results.json   # RESULTS.md section

``--latency-rate R`` adds a latency run per system and case after the throughput runs: the
source paced at ``R`` events/s (a second's worth released at once, as Flink's ``datagen`` and
Spark's ``rate`` source do) for ``--latency-seconds``, event time as fast as wall time; its
p50/p99/max latency (``bench/peers/table_latency.py`` defines it: word count, from an event's
offer by the source to the first update including it at the sink; window, from the offer of
the event that closed the window to the result at the sink). Pick ``R`` well below every
system's events/s: at saturation a latency means nothing.

    python -m bench.table --events 2000000 --keys 10000 --latency-rate 20000 --repeat 2

Each run is a fresh process: ``python -m bench.table_jobs`` for Cairn, ``bench/peers/
run_peer.py --workload table-...`` for the peers (their venvs from ``bench/peers/install.sh``).
Prints a table (system, workload, udf, events/s, p99 ms, Cairn / this) and writes every
result and the run's parameters to ``<out>/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))

import table_common as tc  # noqa: E402

from bench.peers.run_peer import last_json_line  # noqa: E402
from bench.report_tables import md_table  # noqa: E402

__all__ = [
    "SYSTEMS",
    "TARGETS",
    "command",
    "main",
    "plan_runs",
    "summarize",
    "table_section",
]

SYSTEMS = ("cairn", "pyflink", "spark")
UDF_CHOICES = ("off", "on")
# The issue's targets: Cairn / PyFlink with a Python UDF, Cairn / Spark SS SQL without one.
TARGETS = {("pyflink", True): 10.0, ("spark", False): 1.0}
ROOT = Path(__file__).resolve().parent.parent


def command(
    system: str,
    workload: str,
    udf: bool,
    events: int,
    keys: int,
    events_per_second: int,
    verify: bool,
    executor: str = "spark",
    timeout_s: float = 900.0,
    spark_batch_rows: int = 0,
    rate: int = 0,
    warmup_s: float = 10.0,
) -> list[str]:
    """The command of one run; ``rate``: the latency run's (``events_per_second`` = ``rate``).

    >>> command("cairn", "table-window", True, 10, 3, 1000, False)[2:5]
    ['bench.table_jobs', '--workload', 'table-window']
    """
    args = [
        "--workload", workload,
        "--records", str(events),
        "--keys", str(keys),
        "--events-per-second", str(events_per_second),
        "--udf", "on" if udf else "off",
        "--checkpoint-interval-ms", "1000",
        "--parallelism", "2",
        *(["--verify"] if verify else []),
        *(["--rate", str(rate), "--latency-warmup-s", str(warmup_s)] if rate else []),
    ]  # fmt: skip
    if system == "cairn":
        return [sys.executable, "-m", "bench.table_jobs", *args, "--executor", executor]
    if system == "spark" and spark_batch_rows and not rate:
        args += ["--batch-rows", str(spark_batch_rows)]
    return [
        sys.executable, str(PEERS / "run_peer.py"), "--system", system, *args,
        "--timeout", str(int(timeout_s)),
    ]  # fmt: skip


def plan_runs(
    systems: Sequence[str], workloads: Sequence[str], udfs: Sequence[bool], repeat: int
) -> list[tuple[int, str, bool, str]]:
    """``(repetition, workload, udf, system)`` in run order: every case's systems back to
    back, their order reversed in odd repetitions.

    >>> plan_runs(["a", "b"], ["w"], [False], 2)
    [(0, 'w', False, 'a'), (0, 'w', False, 'b'), (1, 'w', False, 'b'), (1, 'w', False, 'a')]
    """
    out = []
    for rep in range(repeat):
        order = list(systems) if rep % 2 == 0 else list(reversed(systems))
        for workload in workloads:
            for udf in udfs:
                out += [(rep, workload, udf, s) for s in order]
    return out


def run_one(cmd: list[str], timeout_s: float, log: Path) -> dict[str, Any]:
    env = dict(os.environ)
    paths = [str(ROOT / "src"), str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    started = time.time()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=str(ROOT)
        )
        out, err = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        err = f"timed out after {timeout_s:.0f} s"
    log.write_text(f"$ {' '.join(cmd)}\n--- stdout ---\n{out}\n--- stderr ---\n{err}\n")
    result = last_json_line(out) or {"error": "no JSON result", "log": str(log)}
    result.setdefault("wall_s", round(time.time() - started, 3))
    return result


def summarize(results: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (workload, udf, system): medians over the runs, verification, ratio.

    >>> rows = summarize([
    ...     {"system": "cairn", "workload": "w", "udf": True, "steady_records_per_s": 300},
    ...     {"system": "pyflink", "workload": "w", "udf": True, "steady_records_per_s": 20,
    ...      "verified": True},
    ... ])
    >>> [(r["system"], r["events_per_s"], r["cairn_ratio"]) for r in rows]
    [('cairn', 300, 1.0), ('pyflink', 20, 15.0)]
    """
    groups: dict[tuple[str, bool, str], list[Mapping[str, Any]]] = {}
    for r in results:
        groups.setdefault((str(r["workload"]), bool(r.get("udf")), str(r["system"])), []).append(r)
    rows = []
    for (workload, udf, system), runs in groups.items():
        timed = [r for r in runs if r.get("mode") != "latency"]
        rates = [r["steady_records_per_s"] for r in timed if r.get("steady_records_per_s")]
        p50 = [r["latency_p50_ms"] for r in runs if r.get("latency_p50_ms") is not None]
        p99 = [r["latency_p99_ms"] for r in runs if r.get("latency_p99_ms") is not None]
        worst = [r["latency_max_ms"] for r in runs if r.get("latency_max_ms") is not None]
        paced = [r for r in runs if r.get("mode") == "latency"]
        flags = [r["verified"] for r in runs if r.get("verified") is not None]
        errors = [
            str(r.get("error") or r.get("unsupported")) for r in timed if not r.get("elapsed_s")
        ]
        rows.append(
            {
                "workload": workload,
                "udf": udf,
                "system": system,
                "runs": len(timed),
                "latency_runs": len(paced),
                "events_per_s": round(statistics.median(rates)) if rates else None,
                "events_per_s_min": min(rates, default=None),
                "events_per_s_max": max(rates, default=None),
                "latency_p50_ms": statistics.median(p50) if p50 else None,
                "latency_p99_ms": statistics.median(p99) if p99 else None,
                "latency_max_ms": max(worst, default=None),
                "latency_failed": bool(paced) and not p99,
                "verified": (all(flags) if flags else None),
                "capped": any(r.get("capped_by_source") for r in runs),
                "errors": errors,
            }
        )
    for row in rows:
        cairn = next(
            (
                r
                for r in rows
                if r["system"] == "cairn"
                and r["workload"] == row["workload"]
                and r["udf"] == row["udf"]
            ),
            None,
        )
        ref = cairn["events_per_s"] if cairn else None
        mine = row["events_per_s"]
        row["cairn_ratio"] = round(ref / mine, 2) if ref and mine else None
    order = {s: i for i, s in enumerate(SYSTEMS)}
    rows.sort(key=lambda r: (r["workload"], r["udf"], order.get(r["system"], 99), r["system"]))
    return rows


def _fmt_rate(row: Mapping[str, Any]) -> str:
    if row["events_per_s"] is None:
        if row["errors"]:
            return "failed: " + row["errors"][0][:80]
        return "—" if row["verified"] is not False else "not verified"
    text = f"{row['events_per_s']:,}"
    if row["runs"] > 1 and row["events_per_s_min"] != row["events_per_s_max"]:
        text += f" ({row['events_per_s_min']:,}-{row['events_per_s_max']:,})"
    if row.get("capped"):
        text += " (capped by the source: batches shorter than the trigger)"
    return text


def _fmt_ms(row: Mapping[str, Any], name: str) -> str:
    if row.get(name) is None:
        return "failed" if row.get("latency_failed") else "—"
    return f"{row[name]:.1f}"


def text_table(rows: Sequence[Mapping[str, Any]]) -> str:
    header = (
        "system", "workload", "udf", "events/s", "p50 ms", "p99 ms", "Cairn / this", "verified",
    )  # fmt: skip
    body = [
        (
            r["system"],
            r["workload"],
            "on" if r["udf"] else "off",
            _fmt_rate(r),
            _fmt_ms(r, "latency_p50_ms"),
            _fmt_ms(r, "latency_p99_ms"),
            "—" if r["cairn_ratio"] is None else f"{r['cairn_ratio']:.2f}x",
            {True: "yes", False: "NO", None: "—"}[r["verified"]],
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body, strict=True)]
    lines = [
        "  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True))
        for line in (header, *body)
    ]
    return "\n".join(lines)


def table_section(meta: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> list[str]:
    """The RESULTS.md section of a run (``python -m bench.table --report results.json``)."""
    rows = summarize(results)
    out = [
        "### Table API: word count and tumbling window, with and without a Python UDF",
        "",
        f"`{meta['command']}` ({meta['date']}; medians of {meta['repeat']} run(s), (min-max) "
        f"where they differ). {meta['events']:,} events over {meta['keys']:,} words, "
        f"{meta['events_per_second']:,} events per second of event time (up to 200 ms out of "
        "order, 500 ms bounded-out-of-orderness watermark), parallelism 2, 1 s exactly-once "
        "checkpoints (Spark: a micro-batch commit per 1 s trigger). `table-wordcount`: "
        "`SELECT word, COUNT(*) FROM events GROUP BY word` (an updating result); `table-"
        "window`: 1 s `TUMBLE` on event time, `COUNT(*), SUM(v)` per word; `udf on`: the word"
        " goes through `normalize_word(word)`, a Python scalar function (`upper()`). Cairn: "
        "the Table API expression DSL (the logical plan its SQL will build), `blackhole` "
        "sink; PyFlink 2.3: Flink SQL on the JVM planner over a `datagen` sequence, "
        "`blackhole` sink; Spark 4.3 SS: `spark.sql` over `rate-micro-batch`, `foreachBatch` "
        "sink. Events/s: Cairn and PyFlink from their sources' progress between 10 % and 90 %"
        " of the input, Spark from its micro-batches after the first; counted only when the "
        "run's results equal the expected ones.",
        "",
    ]
    if meta.get("latency_rate"):
        out[-1:-1] = [
            "",
            "Latency (p50/p99 ms, medians over the runs): a separate run per case with the "
            f"source paced at {meta['latency_rate']:,} events/s for "
            f"{meta['latency_seconds']:g} s, a second's worth released at once (Flink's "
            "`datagen` and Spark's `rate` source do so; Cairn's limiter copies them), event "
            "time as fast as wall time, results sampled by word, events offered in the first "
            f"{meta['latency_warmup_s']:g} s after the first result left out. "
            "`table-wordcount`: per event, from its offer by the source (Cairn, PyFlink: the "
            "wall clock as the source emits it; Spark: the end of its second, when `rate` "
            "makes it readable) to the sink receiving the first update that includes it "
            "(Spark: the end of the micro-batch that read it); `table-window`: per result, "
            "from the offer of the event that closed the window (the later of the two "
            "splits' first events at or past the window's end + 500 ms) to the result at the "
            "sink. See bench/README.md for the definitions.",
        ]
    out += md_table(
        ("system", "workload", "udf", "events/s", "p50 ms", "p99 ms", "Cairn / this", "verified"),
        [
            (
                r["system"],
                r["workload"],
                "on" if r["udf"] else "off",
                _fmt_rate(r),
                _fmt_ms(r, "latency_p50_ms"),
                _fmt_ms(r, "latency_p99_ms"),
                "—" if r["cairn_ratio"] is None else f"{r['cairn_ratio']:.2f}x",
                {True: "yes", False: "**no**", None: "—"}[r["verified"]],
            )
            for r in rows
        ],
    )
    out += ["", "Targets of the Table API issue:", ""]
    target_rows = []
    for (peer, udf), target in TARGETS.items():
        for row in rows:
            if row["system"] == peer and row["udf"] == udf:
                ratio = row["cairn_ratio"]
                target_rows.append(
                    (
                        f"{row['workload']}, udf {'on' if udf else 'off'}: ≥ {target:g}x {peer}",
                        "—" if ratio is None else f"{ratio:.2f}x",
                        "—" if ratio is None else ("yes" if ratio >= target else "**no**"),
                    )
                )
    out += md_table(("target", "measured (median)", "met"), target_rows)
    out.append("")
    return out


def verify_all(results: list[dict[str, Any]], expected: Mapping[str, Mapping[str, int]]) -> None:
    """Check every run that reports figures; carry a system's verification of a case to
    its other runs of the case (only the first repetition runs the verifying query)."""
    verdict: dict[tuple[str, bool, str], bool] = {}
    results = [r for r in results if r.get("mode") != "latency"]  # sampled: nothing to check
    for r in results:
        tc.verify(r, dict(expected[r["workload"]]))
        if r.get("verified") is not None:
            key = (r["workload"], bool(r.get("udf")), r["system"])
            verdict[key] = verdict.get(key, True) and bool(r["verified"])
    for r in results:
        key = (r["workload"], bool(r.get("udf")), r["system"])
        if r.get("verified") is None and key in verdict:
            r["verified"] = verdict[key]
            r["verified_by"] = "the first repetition's verifying run"
            if not verdict[key]:
                r["unverified_events_per_s"] = r.get("steady_records_per_s")
                r["steady_records_per_s"] = None


def latency_runs(
    args: argparse.Namespace,
    systems: Sequence[str],
    workloads: Sequence[str],
    udfs: Sequence[bool],
    out: Path,
    done: int,
) -> list[dict[str, Any]]:
    """The paced runs (``--latency-rate``), in the throughput runs' order."""
    rate = args.latency_rate
    events = max(1, round(rate * args.latency_seconds))
    plan = plan_runs(systems, workloads, udfs, args.repeat)
    results = []
    for n, (rep, workload, udf, system) in enumerate(plan, done + 1):
        cmd = command(
            system, workload, udf, events, args.keys, rate, False, args.executor,
            args.timeout, 0, rate, args.latency_warmup_s,
        )  # fmt: skip
        load = round(os.getloadavg()[0], 2)
        log = out / f"{n:03d}-{system}-{workload}-udf-{'on' if udf else 'off'}-latency.log"
        result = run_one(cmd, args.timeout + 60, log)
        result.update(
            system=system, workload=workload, udf=udf, repetition=rep, load_1m=load,
            log=str(log), mode="latency",
        )  # fmt: skip
        results.append(result)
        print(
            f"[latency {n - done}/{len(plan)}] {system} {workload} udf "
            f"{'on' if udf else 'off'}: p50 {result.get('latency_p50_ms')} ms, p99 "
            f"{result.get('latency_p99_ms')} ms at {rate:,} events/s"
            + (f", error: {result['error']}" if result.get("error") else ""),
            flush=True,
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workloads", default=",".join(tc.WORKLOADS))
    parser.add_argument("--udf", default="off,on", help="off, on or off,on")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--events-per-second", type=int, default=0, help="default: events/10")
    parser.add_argument("--executor", choices=["spark", "inprocess"], default="spark")
    parser.add_argument(
        "--no-verify", action="store_true", help="skip the verifying runs (Spark verifies anyway)"
    )
    parser.add_argument(
        "--spark-batch-rows",
        type=int,
        default=0,
        help="Spark's rows per micro-batch (default: events / 5, at most 2,000,000); a batch "
        "shorter than the 1 s trigger caps Spark's rate (its rows say so)",
    )
    parser.add_argument(
        "--latency-rate",
        type=int,
        default=0,
        help="add a paced latency run per system and case at this many events/s (0: none); "
        "keep it well below every system's events/s",
    )
    parser.add_argument("--latency-seconds", type=float, default=60.0, help="its length")
    parser.add_argument(
        "--latency-warmup-s",
        type=float,
        default=10.0,
        help="leave out events offered before this long after the first result",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    parser.add_argument("--out", default="", help="default: bench/out/table-<stamp>/")
    parser.add_argument(
        "--report", metavar="RESULTS_JSON", help="print the RESULTS.md section of a saved run"
    )
    args = parser.parse_args(argv)
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        sys.stdout.write("\n".join(table_section(saved["meta"], saved["results"])) + "\n")
        return 0
    systems = [s for s in args.systems.split(",") if s]
    workloads = [w for w in args.workloads.split(",") if w]
    udfs = [u == "on" for u in args.udf.split(",") if u]
    for s in systems:
        if s not in SYSTEMS:
            parser.error(f"unknown system {s!r} (expected {', '.join(SYSTEMS)})")
    for w in workloads:
        if w not in tc.WORKLOADS:
            parser.error(f"unknown workload {w!r} (expected {', '.join(tc.WORKLOADS)})")
    eps = args.events_per_second or tc.default_events_per_second(args.events)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = Path(args.out or ROOT / "bench" / "out" / f"table-{stamp}")
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    expected = {w: tc.expected(w, args.events, args.keys, eps) for w in workloads}
    meta = {
        "command": "python -m bench.table " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "events": args.events,
        "keys": args.keys,
        "events_per_second": eps,
        "repeat": args.repeat,
        "systems": systems,
        "expected": expected,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "expected_s": round(time.time() - started, 1),
        "latency_rate": args.latency_rate,
        "latency_seconds": args.latency_seconds,
        "latency_warmup_s": args.latency_warmup_s,
    }
    results: list[dict[str, Any]] = []
    plan = plan_runs(systems, workloads, udfs, args.repeat)
    for n, (rep, workload, udf, system) in enumerate(plan, 1):
        verify = rep == 0 and not args.no_verify
        cmd = command(
            system,
            workload,
            udf,
            args.events,
            args.keys,
            eps,
            verify,
            args.executor,
            args.timeout,
            args.spark_batch_rows,
        )
        load = round(os.getloadavg()[0], 2)
        log = out / f"{n:03d}-{system}-{workload}-udf-{'on' if udf else 'off'}.log"
        result = run_one(cmd, args.timeout + 60, log)
        result.update(
            system=system, workload=workload, udf=udf, repetition=rep, load_1m=load, log=str(log)
        )
        results.append(result)
        print(
            f"[{n}/{len(plan)}] {system} {workload} udf {'on' if udf else 'off'}: "
            f"{result.get('steady_records_per_s')} events/s, "
            f"{result.get('wall_s')} s wall"
            + (f", error: {result['error']}" if result.get("error") else ""),
            flush=True,
        )
    if args.latency_rate > 0:
        results += latency_runs(args, systems, workloads, udfs, out, len(results))
    verify_all(results, expected)
    meta["elapsed_s"] = round(time.time() - started, 1)
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=1, default=str)
    )
    print()
    print(text_table(summarize(results)))
    print(
        "\nCairn runs the Table API expression DSL (the logical plan its SQL will build); "
        "PyFlink and Spark run SQL."
    )
    print(f"results: {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
