"""The RESULTS.md sections of the core workloads: targets, keyed-sum, overhead, latency,
recovery, state size, skew, and the notes and versions of the runs.

Invariant: a section renderer reads only the groups by case and the cases' parameters and
returns its markdown lines ending with a blank line, or ``[]`` when the results hold none of
its cases (so a partial run renders only what it measured); a system with no figures still
gets its row, saying why (``empty_row``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.report_tables import Group, empty_row, md_table, num, row_label, system_name, why_empty
from cairn.experiments.skew import VARIANTS, variant_label

__all__ = [
    "keyed_sum_section",
    "latency_section",
    "notes_section",
    "overhead_section",
    "recovery_section",
    "skew_section",
    "state_size_section",
    "targets_section",
]


def _groups(by_case: Mapping[str, list[Group]], prefix: str) -> list[tuple[str, Group]]:
    return [(case, g) for case, gs in by_case.items() if case.startswith(prefix) for g in gs]


def _find(by_case: Mapping[str, list[Group]], case: str, system: str) -> Group | None:
    return next((g for g in by_case.get(case, []) if g.system == system), None)


def targets_section(by_case: Mapping[str, list[Group]]) -> list[str]:
    def med(case: str, system: str, name: str) -> float | None:
        g = _find(by_case, case, system)
        return g.cell(name).median if g else None

    rows = []
    cp = med("keyed-sum/checkpoints-1s", "cairn", "steady_records_per_s")
    nocp = med("keyed-sum/no-checkpoints", "cairn", "steady_records_per_s")
    # Against Bytewax's faster way to run on this machine (threads or processes).
    bytewax = [
        (x, name)
        for name in ("bytewax", "bytewax-2p")
        if (x := med("keyed-sum/checkpoints-1s", name, "steady_records_per_s"))
    ]
    if cp and bytewax:
        bw, name = max(bytewax)
        rows.append(
            (
                f"keyed-sum, 1 s checkpoints: ≥ 2x {system_name(name)}",
                f"{cp / bw:.2f}x",
                _ok(cp / bw >= 2),
            )
        )
    long_runs = med("overhead", "cairn", "overhead_pct")
    if long_runs is not None:
        rows.append(
            (
                "checkpointing overhead ≤ 10 % (section 1b)",
                f"{long_runs:.1f} %",
                _ok(long_runs <= 10),
            )
        )
    elif cp and nocp:
        overhead = 100 * (1 - cp / nocp)
        rows.append(("checkpointing overhead ≤ 10 %", f"{overhead:.1f} %", _ok(overhead <= 10)))
    p99 = med("latency", "cairn", "latency_p99_ms")
    if p99 is not None:
        rows.append(
            ("latency p99 ≤ 50 ms at half of max throughput", f"{p99:,.1f} ms", _ok(p99 <= 50))
        )
    rec = med("recovery", "cairn", "recovery_s")
    if rec is not None:
        rows.append(("recovery: output resumes ≤ 5 s after SIGKILL", f"{rec:.2f} s", _ok(rec <= 5)))
    biggest = max(
        (c for c in by_case if c.startswith("state-size/")),
        key=lambda c: int(c.rsplit("-", 1)[-1]),
        default=None,
    )
    dip = med(biggest, "cairn", "async_dip_pct") if biggest else None
    if biggest and dip is not None:
        rows.append(
            (
                f"async checkpoint part, {biggest.split('/')[1]}: dip ≤ 20 %",
                f"{dip:.1f} %",
                _ok(dip <= 20),
            )
        )
    if not rows:
        return []
    return [
        "### Cairn against the targets of issue 3",
        "",
        *md_table(("target", "measured (median)", "met"), rows),
        "",
    ]


def _ok(flag: bool) -> str:
    return "yes" if flag else "**no**"


def keyed_sum_section(
    repeat: int, by_case: Mapping[str, list[Group]], cases: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    items = _groups(by_case, "keyed-sum/")
    if not items:
        return []
    spec = cases[items[0][0]]
    out = [
        "### 1. keyed-sum",
        "",
        f"{spec['records']:,} records over {spec['keys']:,} keys, parallelism 2, key_by + "
        "keyed process function (running sum in a value state) + discarding sink. Steady "
        "state: records/s between 10 % and 90 % of the input; start-up: submission to the "
        "first record processed (includes starting Spark/the JVM).",
        "",
    ]
    cairn_cp = _find(by_case, "keyed-sum/checkpoints-1s", "cairn")
    ref = cairn_cp.cell("steady_records_per_s").median if cairn_cp else None
    rows = []
    for case, g in items:
        label = "1 s, exactly-once" if case.endswith("checkpoints-1s") else "none"
        empty = empty_row(g, repeat, 7, label)
        if empty:
            rows.append(empty)
            continue
        steady = g.cell("steady_records_per_s")
        ratio = f"{ref / steady.median:.1f}x" if ref and steady.median else "—"
        rows.append(
            (
                row_label(g, repeat),
                label,
                steady.format(),
                g.cell("startup_s").format(1),
                g.cell("checkpoint_p50_ms").format(),
                g.cell("checkpoint_p99_ms").format(),
                ratio,
            )
        )
    out += md_table(
        (
            "system",
            "checkpoints",
            "steady records/s",
            "start-up s",
            "checkpoint p50 ms",
            "checkpoint p99 ms",
            "Cairn (1 s) / this",
        ),
        rows,
    )
    return [*out, ""]


def overhead_section(
    by_case: Mapping[str, list[Group]], cases: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    g = _find(by_case, "overhead", "cairn")
    if g is None:
        return []
    spec = cases["overhead"]
    out = [
        "### 1b. checkpointing overhead (Cairn)",
        "",
        f"The keyed-sum job with {spec['records']:,} records per run (several seconds of "
        "steady state, a checkpoint a second), in one Spark session after a warm-up job: "
        "with 1 s exactly-once checkpoints, without, without, with (a drift of the "
        "machine falls on both alike). Overhead = 1 - mean with / mean without, per "
        "repetition.",
        "",
    ]
    why = why_empty(g)
    if why:
        return [*out, why, ""]
    rows = [
        (
            str(r.get("repetition", i + 1)),
            num(r["steady_records_per_s"], 0),
            num(r["no_checkpoint_records_per_s"], 0),
            f"{r['overhead_pct']:.1f} %",
            str(r.get("overhead_runs", "")),
        )
        for i, r in enumerate(g.runs)
        if r.get("overhead_pct") is not None
    ]
    out += md_table(
        (
            "repetition",
            "with checkpoints records/s",
            "without records/s",
            "overhead",
            "the four runs (with, without, without, with)",
        ),
        rows,
    )
    return [*out, ""]


def latency_section(
    repeat: int, by_case: Mapping[str, list[Group]], cases: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    items = _groups(by_case, "latency")
    if not items:
        return []
    spec = cases[items[0][0]]
    out = [
        "### 2. latency",
        "",
        f"The keyed-sum job fed at {spec['rate']:,.0f} records/s (half of Cairn's steady "
        f"keyed-sum rate with checkpoints), {spec['records']:,} records, 1 s checkpoints. "
        "The sink measures now - the record's scheduled creation time (a source that falls "
        "behind counts as latency); records created in the first "
        f"{spec.get('warmup_s', 1):g} s are warm-up, not timed.",
        "",
    ]
    rows = []
    for _, g in items:
        empty = empty_row(g, repeat, 5)
        if empty:
            rows.append(empty)
            continue
        rows.append(
            (
                row_label(g, repeat),
                g.cell("latency_p50_ms").format(1),
                g.cell("latency_p99_ms").format(1),
                g.cell("latency_max_ms").format(1),
                g.cell("steady_records_per_s").format(),
            )
        )
    out += md_table(("system", "p50 ms", "p99 ms", "max ms", "sustained records/s"), rows)
    return [*out, ""]


def recovery_section(
    repeat: int, by_case: Mapping[str, list[Group]], cases: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    items = _groups(by_case, "recovery")
    if not items:
        return []
    spec = cases[items[0][0]]
    out = [
        "### 3. recovery",
        "",
        f"The keyed-sum job at {spec['rate']:,.0f} records/s ({spec['records']:,} records), "
        "1 s checkpoints. Cairn: one worker process is SIGKILLed after 40 % of the input and "
        "two completed checkpoints; peers: see their notes. Recovery: kill → first record "
        "processed by the restored job. Replayed: records processed twice (before the "
        "kill and again after restoring).",
        "",
    ]
    rows = []
    for _, g in items:
        empty = empty_row(g, repeat, 5)
        if empty:
            rows.append(empty)
            continue
        rows.append(
            (
                row_label(g, repeat),
                g.cell("recovery_s").format(2),
                g.cell("replayed_records").format(),
                g.cell("restarts").format(),
                "; ".join(g.notes[:1]),
            )
        )
    out += md_table(
        ("system", "recovery s", "replayed records", "restarts", "phases (1st run)"), rows
    )
    return [*out, ""]


def state_size_section(
    repeat: int, by_case: Mapping[str, list[Group]], cases: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    items = sorted(
        _groups(by_case, "state-size/"), key=lambda i: (cases[i[0]]["keys"], i[1].system)
    )
    if not items:
        return []
    out = [
        "### 4. checkpoint cost vs. state size",
        "",
        "Record i has key i mod K (every key is touched), 1 s checkpoints (Cairn: with a "
        f"{_min_pause(items, cases)} min pause between checkpoints, so that checkpoints "
        "longer than the interval leave quiet windows for the dip), unthrottled. "
        "Checkpoint p50 over all completed checkpoints (end to end); sync/async part: the "
        "slowest subtask's, median over checkpoints; last = the final checkpoint (full "
        "state); on disk = files of the newest checkpoint seen. Dip: mean records/s in "
        "100 ms windows overlapping a checkpoint's asynchronous part vs. windows with no "
        "checkpoint activity (the synchronous part excluded), between 10 % and 90 % of "
        "the input.",
        "",
    ]
    rows = []
    for case, g in items:
        keys = f"{cases[case]['keys']:,}"
        empty = empty_row(g, repeat, 10, keys)
        if empty:
            rows.append(empty)
            continue
        rows.append(
            (
                row_label(g, repeat),
                keys,
                f"{cases[case]['records']:,}",
                g.cell("checkpoint_p50_ms").format(),
                g.cell("checkpoint_sync_p50_ms").format(),
                g.cell("checkpoint_async_p50_ms").format(),
                g.cell("checkpoint_last_ms").format(),
                g.cell("checkpoint_bytes").format(1, 1e-6),
                g.cell("steady_records_per_s").format(),
                g.cell("async_dip_pct").format(1),
            )
        )
    out += md_table(
        (
            "system",
            "keys",
            "records",
            "checkpoint p50 ms",
            "sync part p50 ms",
            "async part p50 ms",
            "last checkpoint ms",
            "on disk MB",
            "steady records/s",
            "async dip %",
        ),
        rows,
    )
    return [*out, ""]


def _min_pause(items: Sequence[tuple[str, Group]], cases: Mapping[str, Mapping[str, Any]]) -> str:
    pauses = {cases[case].get("min_pause_ms") or 0 for case, _ in items}
    return " / ".join(f"{p / 1000:g} s" for p in sorted(pauses))


def skew_section(
    repeat: int, by_case: Mapping[str, list[Group]], cases: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    items = _groups(by_case, "skew/")
    if not items:
        return []
    spec = cases[items[0][0]]
    out = [
        "### 5. skew: checkpoint alignment under backpressure (seed 000)",
        "",
        f"Unbounded source (a 2 once per 1,000 records, else 1) -> key_by(v % 2 == 0) -> "
        f"map spinning {spec['record_cost_ms']:g} ms per record with a counter in state, "
        f"parallelism 2, a checkpoint every {spec['interval_ms'] / 1000:g} s, "
        f"{spec['seconds']:g} s per variant. End to end: trigger -> last acknowledgement; "
        "alignment: first -> last barrier at the slowest subtask; persisted: in-flight "
        "data written with one checkpoint; figures over completed checkpoints; open: "
        "checkpoints still running when the time was up.",
        "",
    ]
    rows = []
    for case, g in sorted(
        items, key=lambda i: (VARIANTS.index(cases[i[0]]["variant"]), i[1].system)
    ):
        label = variant_label(cases[case]["variant"], cases[case]["alignment_timeout_ms"])
        empty = empty_row(g, repeat, 10, label)
        if empty:
            rows.append(empty)
            continue
        rows.append(
            (
                row_label(g, repeat),
                label,
                g.cell("checkpoints_completed").format(),
                g.cell("checkpoints_open").format(),
                g.cell("checkpoint_p50_ms").format(),
                g.cell("checkpoint_max_ms").format(),
                g.cell("alignment_max_ms").format(),
                g.cell("persisted_max_bytes").format(1, 1 / 1024),
                g.cell("unaligned_checkpoints").format(),
                g.cell("steady_records_per_s").format(),
            )
        )
    out += md_table(
        (
            "system",
            "variant",
            "completed",
            "open",
            "e2e p50 ms",
            "e2e max ms",
            "alignment max ms",
            "persisted max KiB",
            "unaligned",
            "map records/s",
        ),
        rows,
    )
    return [*out, ""]


def notes_section(groups: Sequence[Group]) -> list[str]:
    rows = [
        (
            g.case,
            system_name(g.system),
            g.notes[0] + (f" (and {len(g.notes) - 1} similar)" if len(g.notes) > 1 else ""),
        )
        for g in groups
        if g.notes and not g.case.startswith("recovery")
    ]
    versions: dict[str, dict[str, str]] = {}
    for g in groups:
        for r in g.runs:
            if isinstance(r.get("versions"), dict) and r["versions"]:
                versions.setdefault(system_name(g.system), {}).update(r["versions"])
    out: list[str] = []
    if versions:
        out += ["### Versions", ""]
        out += [
            f"- {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(vs.items()))
            for name, vs in versions.items()
        ]
        out.append("")
    if rows:
        out += ["### Notes from the runs", "", *md_table(("case", "system", "note"), rows), ""]
    return out
