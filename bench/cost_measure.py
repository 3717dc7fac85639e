"""The figures of the cost-at-a-rate benchmark (``python -m bench.cost_curve``): CPU of a job's
process tree split by role, the sink's lines read back into a rate and latencies, the table.

Invariant: everything here but :class:`TreeSampler` and :func:`read_window` is a pure function
of the samples and lines given (no clock, no engine), so a run's figures can be recomputed
from its ``--json`` and its sink's files. A process is one ``(pid, create_time)`` (a reused pid
is another process); its CPU in a window is its last sample minus its sample at the window's
start (0 for one started inside the window).
"""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.report_tables import md_table

__all__ = [
    "ROLES",
    "Proc",
    "TreeSampler",
    "WindowFigures",
    "cost_figures",
    "cpu_by_role",
    "latency_percentiles",
    "markdown_table",
    "read_window",
    "role_of",
    "summarize",
    "window_figures",
    "writer_of",
]

ROLES = ("workers", "driver", "jvm", "other")
SATURATED_BELOW = 0.9  # a run that reached less than this share of the offered rate

ProcKey = tuple[int, float]  # (pid, create_time)


@dataclass(frozen=True)
class Proc:
    """One process as sampled: its parent, command name and CPU time so far (user + system)."""

    pid: int
    ppid: int
    name: str
    create_time: float
    cpu_s: float

    @property
    def key(self) -> ProcKey:
        return (self.pid, self.create_time)


def _is_java(p: Proc) -> bool:
    return p.name == "java"


def _is_python(p: Proc) -> bool:
    return p.name.startswith("python")


def role_of(pid: int, procs: Mapping[int, Proc], root: int, system: str) -> str:
    """The role of process ``pid`` in the tree of ``root`` (the job's own process).

    ``jvm``: a Java process (Spark's driver JVM, with its local executor; Flink's mini cluster,
    with the Python UDFs of thread mode); ``workers``: a Python process under a JVM (Spark's
    Python workers and their pyspark daemon) and, for Bytewax, its own process(es) (the
    dataflow's workers); ``driver``: the job's Python process and other Python processes not
    under a JVM; ``other``: the rest (shell wrappers).

    >>> procs = {1: Proc(1, 0, "python", 0, 0), 2: Proc(2, 1, "java", 0, 0),
    ...          3: Proc(3, 2, "python3", 0, 0), 4: Proc(4, 2, "bash", 0, 0)}
    >>> [role_of(p, procs, 1, "cairn") for p in (1, 2, 3, 4)]
    ['driver', 'jvm', 'workers', 'other']
    >>> role_of(1, procs, 1, "bytewax")
    'workers'
    """
    proc = procs[pid]
    if _is_java(proc):
        return "jvm"
    if not _is_python(proc):
        return "other"
    if system.startswith("bytewax"):
        return "workers"
    if pid == root:
        return "driver"
    seen = {pid}
    parent = procs.get(proc.ppid)
    while parent is not None and parent.pid not in seen and parent.pid != root:
        if _is_java(parent):
            return "workers"
        seen.add(parent.pid)
        parent = procs.get(parent.ppid)
    return "driver"


def cpu_by_role(
    start: Mapping[ProcKey, Proc], last: Mapping[ProcKey, Proc], root: int, system: str
) -> dict[str, float]:
    """CPU seconds per role between ``start`` (the processes at the window's start) and ``last``
    (every process seen during the window, at its latest sample); a role no process had is
    left out (Bytewax has no JVM).

    >>> a = {(1, 0.0): Proc(1, 0, "python", 0.0, 10.0), (2, 0.0): Proc(2, 1, "java", 0.0, 50.0)}
    >>> b = {(1, 0.0): Proc(1, 0, "python", 0.0, 12.0), (2, 0.0): Proc(2, 1, "java", 0.0, 53.5),
    ...      (3, 9.0): Proc(3, 2, "python", 9.0, 4.0)}
    >>> cpu_by_role(a, b, 1, "cairn")
    {'workers': 4.0, 'driver': 2.0, 'jvm': 3.5}
    """
    by_pid = {p.pid: p for p in sorted(last.values(), key=lambda p: p.create_time)}
    totals: dict[str, float] = {}
    for key, proc in last.items():
        before = start.get(key)
        used = max(0.0, proc.cpu_s - (before.cpu_s if before is not None else 0.0))
        role = role_of(proc.pid, by_pid, root, system)
        totals[role] = totals.get(role, 0.0) + used
    return {role: totals[role] for role in ROLES if role in totals}


class TreeSampler:
    """Samples the CPU times of a process and all its descendants (psutil); remembers every
    process it ever saw at its latest sample, so one that ends inside a window still counts
    up to its last sample."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[ProcKey, Proc] = {}

    def sample(self) -> dict[ProcKey, Proc]:
        """The tree now (empty once the root is gone)."""
        import psutil

        now: dict[ProcKey, Proc] = {}
        try:
            top = psutil.Process(self.root)
            tree = [top, *top.children(recursive=True)]
        except psutil.Error:
            return now
        for p in tree:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    proc = Proc(p.pid, p.ppid(), p.name(), p.create_time(), t.user + t.system)
            except psutil.Error:
                continue
            now[proc.key] = proc
        self.seen.update(now)
        return now

    def start_window(self) -> dict[ProcKey, Proc]:
        """Sample the tree and forget every earlier sample: the start of a window."""
        self.seen = {}
        return self.sample()

    def pids(self) -> list[int]:
        """Every pid seen so far (for cleaning up what outlived the root)."""
        return sorted({p.pid for p in self.seen.values()})


# ---- the sink's lines -----------------------------------------------------------------------


@dataclass(frozen=True)
class WindowFigures:
    """The records that reached the sink inside a window, and their latency histogram (µs)."""

    records: int
    latency_us: Mapping[int, int]  # latency in whole µs -> records
    lines: int  # lines read (all of the run's committed output looked at)
    torn: int  # lines that did not parse (a killed writer's last line)


def window_figures(lines: Iterable[str], start_ns: int, end_ns: int) -> WindowFigures:
    """Records whose arrival (the last field of ``key,count,created_ns,arrival_ns``) is in
    ``[start_ns, end_ns)``, with their latency ``arrival - created``; a line of other than
    four fields is torn (``read_window`` passes a file's last line without its newline as
    ``""``).

    >>> w = window_figures(["k1,1,100000,2000000", "k2,1,0,9000000", "k3,1,10", "k4,2,0,500"],
    ...                    1_000_000, 9_000_000)
    >>> w.records, dict(w.latency_us), w.lines, w.torn
    (1, {1900: 1}, 4, 1)
    """
    counts: Counter[int] = Counter()
    records = read = torn = 0
    for line in lines:
        read += 1
        parts = line.split(",")
        if len(parts) != 4:
            torn += 1
            continue
        try:
            created, arrival = int(parts[2]), int(parts[3])
        except ValueError:
            torn += 1
            continue
        if start_ns <= arrival < end_ns:
            records += 1
            counts[(arrival - created) // 1000] += 1
    return WindowFigures(records, counts, read, torn)


def writer_of(name: str) -> str:
    """The writer a sink's file belongs to: the name without its part counter (Cairn's
    ``part-<uuid>-<subtask>-<n>``, Flink's ``part-<uuid>-<n>``); a file without one (Bytewax's
    ``part_0``) is its own writer.

    >>> writer_of("part-9f2c-1-12"), writer_of("part-ab-cd-3"), writer_of("part_0")
    ('part-9f2c-1', 'part-ab-cd', 'part_0')
    """
    head, _, tail = name.rpartition("-")
    return head if head and tail.isdigit() else name


def read_window(out_dir: str, start_ns: int, end_ns: int) -> WindowFigures:
    """:func:`window_figures` over every visible file under ``out_dir`` (hidden ones are a
    sink's uncommitted files), skipping files last written before the window began."""

    def lines() -> Iterable[str]:
        for folder, dirs, files in os.walk(out_dir):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                path = os.path.join(folder, name)
                if name.startswith(".") or os.stat(path).st_mtime_ns < start_ns:
                    continue
                with open(path, encoding="ascii", errors="replace") as f:
                    for line in f:
                        yield line if line.endswith("\n") else ""  # a killed writer's tail

    return window_figures(lines(), start_ns, end_ns)


def latency_percentiles(histogram: Mapping[int, int], qs: Sequence[float]) -> list[float | None]:
    """Nearest-rank percentiles (ms) of a µs histogram.

    >>> latency_percentiles({1000: 98, 5000: 1, 20000: 1}, [50, 99, 99.9])
    [1.0, 5.0, 20.0]
    """
    total = sum(histogram.values())
    if not total:
        return [None for _ in qs]
    ranks = [max(1, math.ceil(q / 100.0 * total)) for q in qs]
    out: list[float | None] = [None] * len(qs)
    seen = 0
    for us in sorted(histogram):
        seen += histogram[us]
        for i, rank in enumerate(ranks):
            if out[i] is None and seen >= rank:
                out[i] = us / 1000.0
    return out


def cost_figures(
    cpu_s: Mapping[str, float], wall_s: float, window: WindowFigures, rate: float
) -> dict[str, Any]:
    """A run's figures: cores per role and in all, achieved rate, CPU µs per record, latency
    percentiles, and whether it fell more than 10 % short of the offered ``rate``; a role
    without processes has ``None`` cores.

    >>> w = WindowFigures(records=9_000, latency_us={2000: 9_000}, lines=9_500, torn=0)
    >>> f = cost_figures({"workers": 1.5, "driver": 0.5, "jvm": 2.0}, 10.0, w, 1000.0)
    >>> f["cores"], f["workers_cores"], f["other_cores"], f["achieved_per_s"], f["us_per_record"]
    (0.4, 0.15, None, 900.0, 444.4)
    >>> f["saturated"]
    False
    """
    total = sum(cpu_s.values())
    p50, p99, p999 = latency_percentiles(window.latency_us, (50, 99, 99.9))
    achieved = window.records / wall_s if wall_s > 0 else 0.0
    return {
        **{
            f"{role}_cores": round(cpu_s[role] / wall_s, 4) if role in cpu_s else None
            for role in ROLES
        },
        "cores": round(total / wall_s, 4),
        "cpu_s": round(total, 3),
        "window_s": round(wall_s, 3),
        "records": window.records,
        "achieved_per_s": round(achieved, 1),
        "us_per_record": round(1e6 * total / window.records, 1) if window.records else None,
        "latency_p50_ms": p50,
        "latency_p99_ms": p99,
        "latency_p999_ms": p999,
        "saturated": achieved < SATURATED_BELOW * rate,
    }


# ---- the table ------------------------------------------------------------------------------

TABLE_FIGURES = (
    ("achieved_per_s", "achieved/s", "{:,.0f}"),
    ("workers_cores", "workers", "{:.3f}"),
    ("driver_cores", "driver", "{:.3f}"),
    ("jvm_cores", "JVM", "{:.3f}"),
    ("cores", "total cores", "{:.3f}"),
    ("us_per_record", "µs/record", "{:,.1f}"),
    ("latency_p50_ms", "p50 ms", "{:.1f}"),
    ("latency_p99_ms", "p99 ms", "{:.1f}"),
    ("latency_p999_ms", "p99.9 ms", "{:.1f}"),
)


def summarize(results: Iterable[Mapping[str, Any]]) -> dict[tuple[float, str], dict[str, Any]]:
    """Medians over repeats per ``(rate, system)``; ``runs``, ``saturated`` (any run was) and
    ``errors`` beside them.

    >>> s = summarize([{"rate": 10, "system": "cairn", "cores": 0.2, "saturated": False},
    ...                {"rate": 10, "system": "cairn", "cores": 0.4, "saturated": True},
    ...                {"rate": 10, "system": "cairn", "error": "timed out"}])
    >>> s[(10, "cairn")]["cores"], s[(10, "cairn")]["runs"], s[(10, "cairn")]["saturated"]
    (0.30000000000000004, 3, True)
    """
    groups: dict[tuple[float, str], list[Mapping[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["rate"], r["system"]), []).append(r)
    out: dict[tuple[float, str], dict[str, Any]] = {}
    for key, runs in groups.items():
        row: dict[str, Any] = {"runs": len(runs)}
        for name, _, _ in TABLE_FIGURES:
            values = [float(r[name]) for r in runs if isinstance(r.get(name), int | float)]
            row[name] = statistics.median(values) if values else None
        row["saturated"] = any(r.get("saturated") for r in runs)
        row["errors"] = [str(r["error"]) for r in runs if r.get("error")]
        out[key] = row
    return out


def markdown_table(results: Iterable[Mapping[str, Any]], systems: Sequence[str]) -> list[str]:
    """One row per offered rate and system (medians over repeats), in ``systems`` order.

    >>> rows = markdown_table([{"rate": 100, "system": "cairn", "achieved_per_s": 99.5,
    ...     "cores": 0.5, "workers_cores": 0.3, "driver_cores": 0.05, "jvm_cores": 0.15,
    ...     "us_per_record": 5000.0, "latency_p50_ms": 3.0, "latency_p99_ms": 9.5,
    ...     "latency_p999_ms": 12.0, "saturated": False},
    ...     {"rate": 100, "system": "bytewax", "error": "timed out"}], ["cairn", "bytewax"])
    >>> rows[0][:43]
    '| offered/s | system | achieved/s | workers'
    >>> rows[2]
    '| 100 | cairn | 100 | 0.300 | 0.050 | 0.150 | 0.500 | 5,000.0 | 3.0 | 9.5 | 12.0 |  |'
    >>> rows[3]
    '| 100 | bytewax | - | - | - | - | - | - | - | - | - | failed: timed out |'
    """
    summary = summarize(results)
    header = ["offered/s", "system", *(label for _, label, _ in TABLE_FIGURES), "note"]
    rows = []
    for rate in sorted({rate for rate, _ in summary}):
        for system in systems:
            row = summary.get((rate, system))
            if row is None:
                continue
            cells = [
                "-" if row[name] is None else fmt.format(row[name])
                for name, _, fmt in TABLE_FIGURES
            ]
            notes = []
            if row["saturated"]:
                notes.append("saturated")
            if row["errors"]:
                notes.append("failed: " + "; ".join(dict.fromkeys(row["errors"])))
            rows.append([f"{rate:,.0f}", system, *cells, ", ".join(notes)])
    return md_table(header, rows)
