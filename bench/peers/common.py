"""Shared pieces of the peer benchmark scripts: data, per-subtask probes, result JSON.

Invariant: record ``i`` is ``(key_of(i), 1)`` with exactly the key of Cairn's
``KeyedValuesGenerator`` (Fibonacci hash of ``i``), on every peer; this module imports only
the standard library, so every peer venv (and Cairn's) can load it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import uuid
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "GOLDEN64",
    "SCRIPT_START",
    "Probe",
    "add_common_args",
    "collect_probes",
    "emit",
    "key_of",
    "key_table",
    "key_width",
    "keyed_records",
    "percentile",
    "result_template",
]

# Wall-clock time this interpreter loaded the module: the start of a peer run's start-up.
SCRIPT_START = float(os.environ.get("PEER_LAUNCH_TIME", time.time()))

GOLDEN64 = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1

# The same fields as ``bench.RESULT_FIELDS`` (duplicated: the peer venvs cannot import bench).
RESULT_FIELDS = (
    "system",
    "workload",
    "records",
    "elapsed_s",
    "startup_s",
    "steady_records_per_s",
    "checkpoint_p50_ms",
    "checkpoint_p99_ms",
    "latency_p50_ms",
    "latency_p99_ms",
    "latency_max_ms",
    "versions",
    "unsupported",
    "note",
)

_PROGRESS_MASK = 127  # probes take a timestamp / write progress once per 128 records


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def key_width(num_keys: int) -> int:
    """Digits of a key's rank, as in Cairn: at least 6, so keys sort like their rank."""
    return max(6, len(str(num_keys - 1)))


def key_of(index: int, num_keys: int) -> str:
    """The key of record ``index``; equals Cairn's ``KeyedValuesGenerator`` (``skew=None``).

    >>> [key_of(i, 3) for i in range(4)]
    ['k000000', 'k000000', 'k000002', 'k000000']
    """
    rank = (((index * GOLDEN64) & MASK64) >> 32) % num_keys
    return f"k{rank:0{key_width(num_keys)}d}"


def key_table(num_keys: int) -> list[str]:
    """Every key by rank, so a record's key is one list lookup (as Cairn's generator does)."""
    width = key_width(num_keys)
    return [f"k{r:0{width}d}" for r in range(num_keys)]


def keyed_records(indices: range, keys: Sequence[str]) -> list[tuple[str, int]]:
    """Records ``(key_of(i), 1)`` for ``i`` in ``indices``; ``keys`` is ``key_table(n)``.

    >>> keyed_records(range(4), key_table(3)) == [(key_of(i, 3), 1) for i in range(4)]
    True
    """
    g, m, n = GOLDEN64, MASK64, len(keys)
    return [(keys[(((i * g) & m) >> 32) % n], 1) for i in indices]


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of ``values`` (``None`` when empty); ``values`` need not be sorted.

    >>> percentile([3.0, 1.0, 2.0, 4.0], 50)
    2.0
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


class Probe:
    """Counts the records one subtask processes, in the keyed function or the sink.

    Takes a wall-clock timestamp once per 128 records (and for each latency sample), writes
    its count to a progress file every 128 records with ``pwrite`` (so a SIGKILLed run leaves
    an almost exact count behind) and its summary to ``<dir>/<id>.json`` on ``close``.
    """

    def __init__(self, out_dir: str, latency: bool = False, run_tag: str = "run") -> None:
        self.out_dir = out_dir
        self.latency = latency
        self.run_tag = run_tag
        self.name = f"{run_tag}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.count = 0
        self.first: float | None = None
        self.last = 0.0
        self.count_at_last = 0
        self.samples: array[float] = array("d")  # (time, count) pairs, one per 128 records
        self.latencies_ms: array[float] = array("d")  # (created, latency ms) pairs
        self.final_sums: dict[str, int] = {}
        os.makedirs(out_dir, exist_ok=True)
        self._fd = os.open(
            os.path.join(out_dir, self.name + ".progress"), os.O_CREAT | os.O_WRONLY, 0o644
        )

    def record(self, created_s: float | None = None) -> None:
        """One record seen; ``created_s`` is its creation wall-clock time (latency runs)."""
        self.count += 1
        if created_s is not None:
            now = time.time()
            self.latencies_ms.append(created_s)
            self.latencies_ms.append((now - created_s) * 1000.0)
            if self.first is None:
                self.first = now
            if self.count & _PROGRESS_MASK == 0:
                self._tick(now)
            return
        if self.first is None:
            self.first = time.time()
        if self.count & _PROGRESS_MASK == 0:
            self._tick(time.time())

    def record_batch(self, n: int) -> None:
        """``n`` records seen at once (a sink's batch); no per-record timestamps."""
        if n <= 0:
            return
        if self.first is None:
            self.first = time.time()
        before = self.count
        self.count += n
        if (before >> 7) != (self.count >> 7):
            self._tick(time.time())

    def _tick(self, now: float) -> None:
        self.last = now
        self.count_at_last = self.count
        self.samples.append(now)
        self.samples.append(float(self.count))
        os.pwrite(self._fd, f"{self.count:>16d} {now:>20.6f}\n".encode(), 0)

    def close(self) -> None:
        """Write the summary file (idempotent)."""
        if self._fd < 0:
            return
        now = time.time()
        if self.count:
            self._tick(now)
        os.close(self._fd)
        self._fd = -1
        summary = {
            "name": self.name,
            "run_tag": self.run_tag,
            "count": self.count,
            "first": self.first,
            "last": self.last,
            "count_at_last": self.count_at_last,
        }
        base = os.path.join(self.out_dir, self.name)
        if self.final_sums:
            with open(base + ".sums", "w") as f:
                json.dump(self.final_sums, f)
        with open(base + ".samples", "wb") as f:
            self.samples.tofile(f)
        if self.latency:
            with open(base + ".lat", "wb") as f:
                self.latencies_ms.tofile(f)
        tmp = base + ".json.tmp"
        with open(tmp, "w") as f:
            json.dump(summary, f)
        os.replace(tmp, base + ".json")


def read_progress(out_dir: str, run_tag: str) -> tuple[int, float]:
    """Sum of the counts in the progress files of ``run_tag`` (works after a SIGKILL)."""
    total, latest = 0, 0.0
    for path in Path(out_dir).glob(f"{run_tag}-*.progress"):
        text = path.read_text().split()
        if len(text) >= 2:
            total += int(text[0])
            latest = max(latest, float(text[1]))
    return total, latest


def collect_probes(
    out_dir: str, run_tag: str = "run", latency_warmup_s: float = 0.0
) -> dict[str, Any]:
    """Aggregate the closed probes of ``run_tag``: counts, first/last times, latencies.

    ``steady_records_per_s`` counts the records after the first one seen by any subtask,
    up to the last timestamp each subtask took, over that wall-clock span. Latencies of
    records created less than ``latency_warmup_s`` after the first record are left out.
    """
    summaries = []
    for path in Path(out_dir).glob(f"{run_tag}-*.json"):
        summaries.append(json.loads(path.read_text()))
    seen = [s for s in summaries if s["count"] and s["first"] is not None]
    out: dict[str, Any] = {
        "probes": len(summaries),
        "count": sum(s["count"] for s in summaries),
        "first": min((s["first"] for s in seen), default=None),
        "last": max((s["last"] for s in seen), default=None),
        "steady_records_per_s": None,
        "latencies_ms": [],
        "samples": [],
    }
    if seen and out["last"] > out["first"]:
        counted = sum(s["count_at_last"] for s in seen) - 1
        out["steady_records_per_s"] = counted / (out["last"] - out["first"])
    # A key's running sum only grows, so its latest value is the largest any probe saw.
    latest: dict[str, int] = {}
    for path in Path(out_dir).glob(f"{run_tag}-*.sums"):
        for key, total in json.loads(path.read_text()).items():
            if total > latest.get(key, -1):
                latest[key] = total
    out["final_sum_total"] = sum(latest.values()) if latest else None
    created_lat: list[tuple[float, float]] = []
    for s in summaries:
        base = os.path.join(out_dir, s["name"])
        samples = array("d")
        if os.path.exists(base + ".samples"):
            with open(base + ".samples", "rb") as f:
                samples.frombytes(f.read())
        out["samples"].append(list(zip(samples[0::2], samples[1::2], strict=True)))
        if os.path.exists(base + ".lat"):
            lat = array("d")
            with open(base + ".lat", "rb") as f:
                lat.frombytes(f.read())
            created_lat.extend(zip(lat[0::2], lat[1::2], strict=True))
    if created_lat:
        start = min(c for c, _ in created_lat) + latency_warmup_s
        out["latencies_ms"] = [ms for c, ms in created_lat if c >= start]
    return out


def throughput_series(
    per_probe_samples: Iterable[Sequence[tuple[float, float]]], bin_s: float = 0.25
) -> list[tuple[float, float]]:
    """Summed records/s of all probes per ``bin_s`` wall-clock bin: ``[(bin_start, rate)]``."""
    bins: dict[int, float] = {}
    for samples in per_probe_samples:
        prev_t, prev_n = None, 0.0
        for t, n in samples:
            if prev_t is not None:
                bins[int(t // bin_s)] = bins.get(int(t // bin_s), 0.0) + (n - prev_n)
            prev_t, prev_n = t, n
    return [(b * bin_s, bins[b] / bin_s) for b in sorted(bins)]


def async_dip_pct(
    series: Sequence[tuple[float, float]],
    windows: Sequence[tuple[float, float]],
    bin_s: float = 0.25,
) -> float | None:
    """Percent drop of the mean rate in bins overlapping ``windows`` against the other bins.

    Start-up and drain bins (the first and last 10 % of the run) are left out of both sides.
    """
    if len(series) < 10 or not windows:
        return None
    cut = max(1, len(series) // 10)
    inner = series[cut:-cut]
    inside: list[float] = []
    outside: list[float] = []
    for start, rate in inner:
        end = start + bin_s
        hit = any(ws < end and we > start for ws, we in windows)
        (inside if hit else outside).append(rate)
    if not inside or not outside:
        return None
    base = sum(outside) / len(outside)
    if base <= 0:
        return None
    return 100.0 * (1.0 - (sum(inside) / len(inside)) / base)


def result_template(args: argparse.Namespace, system: str) -> dict[str, Any]:
    """A result dict with every shared field present, and the run's parameters."""
    result: dict[str, Any] = dict.fromkeys(RESULT_FIELDS)
    result.update(
        system=system,
        workload=args.workload,
        records=args.records,
        versions={"python": sys.version.split()[0]},
        keys=args.keys,
        parallelism=args.parallelism,
        checkpoint_interval_ms=args.checkpoint_interval_ms,
        rate=args.rate,
    )
    return result


def latency_fields(result: dict[str, Any], latencies_ms: Sequence[float]) -> None:
    """Fill ``latency_p50_ms``, ``latency_p99_ms``, ``latency_p999_ms`` and ``latency_max_ms``
    from the samples."""
    if latencies_ms:
        result["latency_p50_ms"] = round(percentile(latencies_ms, 50) or 0.0, 3)
        result["latency_p99_ms"] = round(percentile(latencies_ms, 99) or 0.0, 3)
        result["latency_p999_ms"] = round(percentile(latencies_ms, 99.9) or 0.0, 3)
        result["latency_max_ms"] = round(max(latencies_ms), 3)
        result["latency_samples"] = len(latencies_ms)


def kafka_job_parser(description: str | None, tool: str) -> argparse.ArgumentParser:
    """The command line of a peer's Kafka job: the common options, the broker and topics, and
    ``--<tool>`` (the connector the peer loads: a jar path or a Maven coordinate)."""
    parser = argparse.ArgumentParser(description=description)
    add_common_args(parser)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--source-topic", required=True)
    parser.add_argument("--sink-topic", required=True)
    parser.add_argument(f"--{tool}", required=True)
    return parser


def run_main(parser: argparse.ArgumentParser, prefix: str, job: Any) -> None:
    """Parse, give the run a fresh scratch folder unless one was named, emit ``job(args)``."""
    args = parser.parse_args()
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix=prefix)
    emit(job(args))


def keyed_sum_main(
    args: argparse.Namespace,
    run_job: Any,
    run_recovery: Any,
    recovery_note: str,
) -> None:
    """The tail every keyed-sum peer shares: check the workload's options, run the job (or the
    recovery harness, ``run_recovery(args)``, noting how the peer recovers), emit the result
    and leave at once (``os._exit``: py4j's and Spark's teardown only cost time)."""
    if args.workload == "latency" and args.rate <= 0:
        raise SystemExit("--workload latency needs --rate > 0")
    if args.workload == "recovery" and args.role == "main":
        if args.checkpoint_interval_ms <= 0:
            raise SystemExit("--workload recovery needs checkpoints")
        result = run_recovery(args)
        result["note"] = recovery_note
    else:
        result = run_job(args)
    result["work_dir"] = args.work_dir
    emit(result)
    sys.stdout.flush()
    os._exit(0)


def add_common_args(parser: argparse.ArgumentParser) -> None:
    """The options every peer script and ``run_peer.py`` share."""
    parser.add_argument(
        "--workload",
        default="keyed-sum",
        choices=(
            "keyed-sum",
            "latency",
            "recovery",
            "state-size",
            "window",
            "kafka-job",
            "table-wordcount",
            "table-window",
            "nexmark",
        ),
    )
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument(
        "--checkpoint-interval-ms",
        type=int,
        default=1000,
        help="exactly-once checkpoints every N ms; 0 turns checkpointing off",
    )
    parser.add_argument(
        "--rate", type=float, default=0.0, help="records/s of the whole source (latency runs)"
    )
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument(
        "--work-dir", default="", help="scratch folder (default: a fresh one under /tmp)"
    )
    parser.add_argument(
        "--latency-warmup-s",
        type=float,
        default=2.0,
        help="latency runs: leave out records created in the first N s after the first one",
    )
    parser.add_argument(
        "--kill-after-s",
        type=float,
        default=0.0,
        help="recovery: SIGKILL the job N s after its first record (default: once 40 %% of the "
        "input is processed and 2.5 checkpoint intervals passed, as Cairn's harness does)",
    )


def emit(result: dict[str, Any]) -> None:
    """Print ``result`` as one JSON object on the last stdout line."""
    sys.stdout.flush()
    print(json.dumps(result, default=str), flush=True)
