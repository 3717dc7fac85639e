"""The Nexmark benchmark: q0, q1, q2, q3, q4, q5, q7, q8 and q11 on Cairn, Flink SQL (PyFlink
2.3: the JVM planner and runtime) and Spark Structured Streaming SQL, over the same events.

Invariant: every system reads the same bytes — ``bench/nexmark_data.py`` writes Cairn's
generated events (fixed seed) once as CSV files, one column per field of person/auction/bid
(``p_``/``a_``/``b_``) plus ``event_type``, and each system defines the table ``events`` over
them (its file connector, ``csv``) with nexmark-flink's ``dateTime`` and ``WATERMARK ... -
INTERVAL '4' SECOND`` and the views ``person``, ``auction``, ``bid`` — nexmark-flink's views
adapted to the flat layout (its datagen table nests them in ROWs, which is what Cairn's
``nexmark`` connector offers; the benchmark reads files so that every engine parses the same
input). Cairn and Flink run the query file's text (``bench/nexmark/queries``) into its
``blackhole`` sink, Spark its Spark SQL statement (``nexmark_common.SPARK_SQL``) into ``noop``;
parallelism 2, 1 s exactly-once checkpoints (Spark: a micro-batch commit per 1 s trigger);
Cairn and Flink with nexmark-flink's table configuration (mini-batch, 2 s / 50,000 rows:
``nexmark_common.TABLE_CONFIG``). Results are checked: before the timed runs, each system runs
each query over ``--verify-events`` events (a run of its own), collected, and its final rows'
count and checksum must equal the reference (``bench/nexmark_oracle.py`` for q0, q1, q2, q5;
else Flink SQL's); a mismatch withholds the system's figure for the query (``invalid``), a
figure with no reference to compare is shown ``unchecked``.

Throughput = events / wall time from the job's submission to its end (its bounded input
read and processed): the JVM, Spark session and table environment start before it, the
job's own planning and deployment count. Latency is not reported: with the whole input
available at once, an event's latency is its wait in the queue, which says nothing about
the engine (bench/README.md).

    python -m bench.nexmark_bench --events 1000000 --queries q0,q5 --systems cairn,flink,spark
    python -m bench.nexmark_bench --report bench/out/nexmark-<stamp>/results.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))

import nexmark_common as nc  # noqa: E402

from bench.nexmark_data import DATA_ROOT, ensure_data  # noqa: E402
from bench.nexmark_oracle import oracle  # noqa: E402
from bench.report_tables import md_table  # noqa: E402
from bench.table import run_one  # noqa: E402

__all__ = ["SYSTEMS", "command", "judge", "main", "plan_runs", "section", "summarize"]

SYSTEMS = ("cairn", "flink", "spark")
PEER_NAMES = {"flink": "pyflink", "spark": "spark"}
ROOT = Path(__file__).resolve().parent.parent


def command(
    system: str,
    query: str,
    data: str,
    events: int,
    verify_data: str = "",
    executor: str = "spark",
    timeout_s: float = 1800.0,
) -> list[str]:
    """The command of one run (``verify_data``: run the verifying pass first).

    >>> command("cairn", "q5", "/d", 10)[1:5]
    ['-m', 'bench.nexmark_jobs', '--query', 'q5']
    >>> command("flink", "q0", "/d", 10)[2:6]
    ['--system', 'pyflink', '--workload', 'nexmark']
    """
    args = ["--query", query, "--data", data, *(["--verify-data", verify_data] * bool(verify_data))]
    if system == "cairn":
        return [
            sys.executable, "-m", "bench.nexmark_jobs", *args, "--events", str(events),
            "--executor", executor, "--timeout", str(timeout_s),
            *(a for k, v in nc.TABLE_CONFIG.items() for a in ("--config", f"{k}={v}")),
        ]  # fmt: skip
    return [
        sys.executable, str(PEERS / "run_peer.py"), "--system", PEER_NAMES[system],
        "--workload", "nexmark", "--records", str(events), "--parallelism", "2",
        "--checkpoint-interval-ms", "1000", "--timeout", str(int(timeout_s)), *args,
    ]  # fmt: skip


def plan_runs(
    systems: Sequence[str], queries: Sequence[str], repeat: int
) -> list[tuple[int, str, str]]:
    """``(repetition, query, system)`` in run order, the systems' order reversed in odd
    repetitions (the noise of a shared machine falls on all alike).

    >>> plan_runs(["a", "b"], ["q0"], 2)
    [(0, 'q0', 'a'), (0, 'q0', 'b'), (1, 'q0', 'b'), (1, 'q0', 'a')]
    """
    out = []
    for rep in range(repeat):
        order = list(systems) if rep % 2 == 0 else list(reversed(systems))
        out += [(rep, q, s) for q in queries for s in order]
    return out


def _figures_of(result: Mapping[str, Any]) -> dict[str, int] | None:
    if result.get("result_rows") is None or result.get("result_checksum") is None:
        return None
    return {"rows": int(result["result_rows"]), "checksum": int(result["result_checksum"])}


def judge(
    results: list[dict[str, Any]], references: Mapping[str, Mapping[str, int] | None]
) -> dict[str, dict[str, Any]]:
    """Mark every result ``verified`` (its system's verifying run of the query matched the
    reference: ``references[query]``, else Flink's figures), ``False`` on a mismatch (the
    figure moves to ``invalid_events_per_s``), ``None`` when nothing could be compared.
    Returns the reference used per query (``{"source", "rows", "checksum"}``).

    >>> rs = [{"system": "cairn", "query": "q0", "result_rows": 2, "result_checksum": 7,
    ...        "events_per_s": 100}]
    >>> judge(rs, {"q0": {"rows": 2, "checksum": 8}})["q0"]["source"], rs[0]["verified"]
    ('oracle', False)
    >>> rs[0]["events_per_s"], rs[0]["invalid_events_per_s"]
    (None, 100)
    """
    used: dict[str, dict[str, Any]] = {}
    for query in sorted({str(r["query"]) for r in results}):
        ref = references.get(query)
        if ref is not None:
            used[query] = {"source": "oracle", **ref}
            continue
        flink = [_figures_of(r) for r in results if r["system"] == "flink" and r["query"] == query]
        found = next((f for f in flink if f is not None), None)
        if found is not None:
            used[query] = {"source": "flink", **found}
    verdict: dict[tuple[str, str], bool] = {}
    for r in results:
        mine, ref = _figures_of(r), used.get(str(r["query"]))
        if mine is not None and ref is not None:
            key = (str(r["system"]), str(r["query"]))
            ok = mine == {"rows": ref["rows"], "checksum": ref["checksum"]}
            verdict[key] = verdict.get(key, True) and ok
    for r in results:
        r["verified"] = verdict.get((str(r["system"]), str(r["query"])))
        if r["verified"] is False and r.get("events_per_s") is not None:
            r["invalid_events_per_s"] = r["events_per_s"]
            r["events_per_s"] = None
    return used


def summarize(results: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{query: {system: cell}}``: the median events/s of the valid runs, min, max, the
    verification and why a system has no figure.

    >>> s = summarize([{"system": "cairn", "query": "q0", "events_per_s": 10, "verified": True},
    ...                {"system": "spark", "query": "q5", "unsupported": "refused"}])
    >>> s["q0"]["cairn"]["events_per_s"], s["q5"]["spark"]["why"]
    (10, 'unsupported: refused')
    """
    cells: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for r in sorted(results, key=lambda r: r.get("mode") == "verify"):  # timed runs first
        cells.setdefault(str(r["query"]), {}).setdefault(str(r["system"]), []).append(r)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for query, systems in cells.items():
        for system, runs in systems.items():
            rates = [r["events_per_s"] for r in runs if r.get("events_per_s")]
            timed = [r for r in runs if r.get("mode") != "verify"]
            why = None
            if not rates:
                r = runs[0]
                if r.get("unsupported"):
                    why = f"unsupported: {r['unsupported']}"
                elif r.get("verified") is False:
                    why = "invalid: results differ from the reference"
                else:
                    why = f"failed: {r.get('error') or 'no figure'}"
            out.setdefault(query, {})[system] = {
                "events_per_s": round(statistics.median(rates)) if rates else None,
                "min": min(rates, default=None),
                "max": max(rates, default=None),
                "runs": len(timed),
                "verified": runs[0].get("verified"),
                "why": why,
            }
    return out


def _ratio(summary: Mapping[str, Mapping[str, Any]], peer: str) -> float | None:
    mine = summary.get("cairn", {}).get("events_per_s")
    theirs = summary.get(peer, {}).get("events_per_s")
    return mine / theirs if mine and theirs else None


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def rows_of(summary: Mapping[str, Mapping[str, Mapping[str, Any]]], md: bool) -> list[list[str]]:
    """The table's rows: per query, each system's events/s and Cairn's ratios; then the
    geometric means (ratios over the queries both systems have a figure for)."""

    def cell(c: Mapping[str, Any] | None) -> str:
        if c is None:
            return "—"
        if c["events_per_s"] is None:
            text = str(c["why"])
            return text.split(":")[0] if md else text[:40]
        text = f"{c['events_per_s']:,}"
        if c["runs"] > 1 and c["min"] != c["max"]:
            text += f" ({c['min']:,}-{c['max']:,})"
        return text + ("" if c["verified"] else " (unchecked)")

    def ratio(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}x"

    order = [q for q in nc.QUERIES if q in summary]
    rows = []
    means: dict[str, list[float]] = {"flink": [], "spark": []}
    for q in order:
        per = summary[q]
        ratios = {p: _ratio(per, p) for p in means}
        for p, v in ratios.items():
            if v is not None:
                means[p].append(v)
        rows.append(
            [
                q,
                *(cell(per.get(s)) for s in SYSTEMS),
                ratio(ratios["flink"]),
                ratio(ratios["spark"]),
            ]
        )
    gm = {p: _geomean(v) for p, v in means.items()}
    rows.append(
        ["geometric mean", "", "", "", ratio(gm["flink"]) + f" ({len(means['flink'])} queries)",
         ratio(gm["spark"]) + f" ({len(means['spark'])} queries)"]
    )  # fmt: skip
    return rows


HEADER = ("query", "Cairn ev/s", "Flink ev/s", "Spark ev/s", "Cairn/Flink", "Cairn/Spark")


def text_table(summary: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    body = rows_of(summary, md=False)
    widths = [max(len(str(x)) for x in col) for col in zip(HEADER, *body, strict=True)]
    return "\n".join(
        "  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True))
        for line in (HEADER, *body)
    )


def section(meta: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> list[str]:
    """The RESULTS.md section of a saved run (``--report results.json``)."""
    summary = summarize(results)
    refs = meta.get("references", {})
    out = [
        "### Nexmark: Cairn vs Flink SQL vs Spark Structured Streaming SQL",
        "",
        f"`{meta['command']}` ({meta['date']}; {meta['machine']['cpus']} CPUs; medians of "
        f"{meta['repeat']} run(s), (min-max) where they differ). {meta['events']:,} events "
        f"of Cairn's Nexmark generator (seed {meta['seed']}, {meta['rate']:,} events per "
        "second of event time) in CSV files every system reads, nexmark-flink's views "
        "adapted to the flat layout, 4 s watermark; parallelism 2, 1 s exactly-once "
        "checkpoints (Spark: a micro-batch commit per 1 s trigger). Cairn and Flink SQL "
        "(PyFlink 2.3, JVM runtime) run the query files' text into `blackhole`, both with "
        "nexmark-flink's mini-batch configuration (2 s, 50,000 rows); Spark 4.3 SS "
        "its Spark SQL form into `noop`. Events/s = events / (job submission to its end). "
        f"Results checked over {meta['verify_events']:,} events against "
        + ", ".join(f"{q}: {r['source']}" for q, r in sorted(refs.items()))
        + '; a system whose rows differ has no figure (invalid); "unchecked": no '
        "reference for the query.",
        "",
    ]
    out += md_table(HEADER, [tuple(r) for r in rows_of(summary, md=True)])
    notes = [
        f"- {system} {query}: {cell['why']}"
        for query in nc.QUERIES
        for system in SYSTEMS
        if (cell := summary.get(query, {}).get(system)) and cell["events_per_s"] is None
    ]
    if notes:
        out += ["", "No figure:", "", *notes]
    out += ["", *targets(summary)]
    out.append("")
    return out


def targets(summary: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """Issue 36's targets: Cairn >= 1.0x Spark SS on every query both run, >= 0.5x Flink SQL
    on the geometric mean.

    >>> for line in targets({"q0": {"cairn": {"events_per_s": 30},
    ...                             "spark": {"events_per_s": 20},
    ...                             "flink": {"events_per_s": 100}}})[1:]:
    ...     print(line)
    - Cairn >= 1.0x Spark SS on every query both run: met (lowest 1.50x, q0)
    - Cairn >= 0.5x Flink SQL on the geometric mean: not met (0.30x over 1 queries)
    """
    spark = {q: r for q in summary if (r := _ratio(summary[q], "spark")) is not None}
    flink = [r for q in summary if (r := _ratio(summary[q], "flink")) is not None]
    out = ["Targets of issue 36:"]
    if spark:
        worst = min(spark, key=lambda q: spark[q])
        met = "met" if spark[worst] >= 1.0 else "not met"
        out.append(
            f"- Cairn >= 1.0x Spark SS on every query both run: {met} (lowest "
            f"{spark[worst]:.2f}x, {worst})"
        )
    gm = _geomean(flink)
    if gm is not None:
        met = "met" if gm >= 0.5 else "not met"
        out.append(
            f"- Cairn >= 0.5x Flink SQL on the geometric mean: {met} ({gm:.2f}x over "
            f"{len(flink)} queries)"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.nexmark_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--verify-events", type=int, default=20_000, help="at most --events")
    parser.add_argument("--queries", default=",".join(nc.QUERIES))
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--executor", choices=["spark", "inprocess"], default="spark")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per run, seconds")
    parser.add_argument("--out", default="", help="default: bench/out/nexmark-<stamp>/")
    parser.add_argument("--data-root", default=str(DATA_ROOT), help="the event files' cache")
    parser.add_argument("--report", metavar="RESULTS_JSON", help="print a saved run's section")
    args = parser.parse_args(argv)
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        sys.stdout.write("\n".join(section(saved["meta"], saved["results"])) + "\n")
        return 0
    systems = [s for s in args.systems.split(",") if s]
    queries = [q for q in args.queries.split(",") if q]
    for s in systems:
        if s not in SYSTEMS:
            parser.error(f"unknown system {s!r} (expected {', '.join(SYSTEMS)})")
    for q in queries:
        if q not in nc.QUERIES:
            parser.error(f"unknown query {q!r} (expected {', '.join(nc.QUERIES)})")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = Path(args.out or ROOT / "bench" / "out" / f"nexmark-{stamp}")
    out.mkdir(parents=True, exist_ok=True)
    data = ensure_data(args.events, args.seed, root=Path(args.data_root))
    verify_events = min(args.verify_events, args.events)
    verify_data = ensure_data(verify_events, args.seed, root=Path(args.data_root))
    references = {q: oracle(q, verify_data) for q in queries}
    meta: dict[str, Any] = {
        "command": "python -m bench.nexmark_bench "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "events": args.events,
        "verify_events": verify_events,
        "seed": args.seed,
        "rate": json.loads((data / "_manifest.json").read_text())["first_event_rate"],
        "repeat": args.repeat,
        "systems": systems,
        "queries": queries,
        "data": str(data),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    checks = [(-1, q, s) for q in queries for s in systems] if verify_events else []
    plan = checks + plan_runs(systems, queries, args.repeat)
    results: list[dict[str, Any]] = []
    for n, (rep, query, system) in enumerate(plan, 1):
        mode = "verify" if rep < 0 else "timed"
        refused = next(
            (r["unsupported"] for r in results
             if r["mode"] == "verify" and (r["system"], r["query"]) == (system, query)
             and r.get("unsupported")),
            None,
        )  # fmt: skip
        if refused:  # the verifying run found the system refuses the query: don't ask again
            results.append(dict(system=system, query=query, repetition=rep, mode=mode,
                                unsupported=refused))  # fmt: skip
            continue
        cmd = command(
            system, query, str(data) if rep >= 0 else "", args.events,
            str(verify_data) if rep < 0 else "", args.executor, args.timeout,
        )  # fmt: skip
        log = out / f"{n:03d}-{system}-{query}-{mode}.log"
        load = round(os.getloadavg()[0], 2)
        result = run_one(cmd, args.timeout + 120, log)
        result.update(
            system=system, query=query, repetition=rep, mode=mode, load_1m=load, log=str(log)
        )
        results.append(result)
        why = result.get("error") or result.get("unsupported")
        print(
            f"[{n}/{len(plan)}] {mode} {system} {query}: "
            + (
                f"rows {result.get('result_rows')}"
                if rep < 0
                else f"{result.get('events_per_s')} events/s"
            )
            + (f" — {why}" if why else ""),
            flush=True,
        )
    meta["references"] = judge(results, references)
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=1, default=str)
    )
    print()
    print(text_table(summarize(results)))
    print(f"\nresults: {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
