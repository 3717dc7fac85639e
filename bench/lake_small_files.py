"""Small files in the lakehouse sinks, measured: the data files ``--checkpoints`` checkpoints
of a 1 s interval leave in a Delta and an Iceberg table (``--parallelism`` writer subtasks,
``--rate`` rows a second), the time to read each table whole before and after a compaction
(``cairn table optimize``'s call), and the compaction's own time.

The sinks' writers and committer are driven as the engine drives them (each checkpoint: every
subtask's files, one commit), without waiting a second between checkpoints: the files and
commits are those of ``--checkpoints`` seconds of a job at 1 s checkpoints, made faster.

Invariant: prints one JSON object as its last stdout line; the tables are written under a
temporary directory and removed; the rows read back are checked against the rows written.

    python -m bench.lake_small_files --checkpoints 600 --parallelism 2 --rate 1000
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from cairn.api.connectors import CheckpointCommittables, SinkWriterContext
from cairn.common import Row, Types
from cairn.datastream.connectors.delta import DeltaSink
from cairn.datastream.connectors.iceberg import IcebergSink
from cairn.datastream.connectors.lake_tables import optimize_table, table_facts
from cairn.ids import CheckpointId
from cairn.observability.doctor.table_rules import small_files

ROW = Types.ROW_NAMED(["id", "key", "amount"], [Types.LONG(), Types.STRING(), Types.DOUBLE()])


def _fill(sink: Any, checkpoints: int, parallelism: int, rate: int) -> float:
    """Commit ``checkpoints`` checkpoints of ``rate`` rows; seconds per commit (median)."""
    committer = sink.create_committer()
    writers = [
        sink.create_writer(SinkWriterContext(s, parallelism, 0, "bench"), [])  # type: ignore[arg-type]
        for s in range(parallelism)
    ]
    commit_s = []
    for c in range(1, checkpoints + 1):
        results = []
        for s, writer in enumerate(writers):
            base = c * rate
            writer.write_batch(
                [Row(i, f"k{i % 100}", i * 0.5) for i in range(base + s, base + rate, parallelism)]
            )
            results += writer.prepare_commit(CheckpointId(c))
        start = time.perf_counter()
        committer.commit([CheckpointCommittables("bench", CheckpointId(c), tuple(results))])  # type: ignore[arg-type]
        commit_s.append(time.perf_counter() - start)
    return float(statistics.median(commit_s))


def _timed_read(read: Callable[[], int], expected: int, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        rows = read()
        times.append(time.perf_counter() - start)
        if rows != expected:
            raise AssertionError(f"read {rows} rows, wrote {expected}")
    return float(statistics.median(times))


def measure(table: str, props: dict[str, str], sink: Any, read: Callable[[], int], a: Any) -> Any:
    sink.check_job(None)
    commit_s = _fill(sink, a.checkpoints, a.parallelism, a.rate)
    expected = a.checkpoints * a.rate
    facts = table_facts(table, props)
    before_s = _timed_read(read, expected)
    start = time.perf_counter()
    result = optimize_table(table, props)
    optimize_s = time.perf_counter() - start
    after_s = _timed_read(read, expected)
    return {
        "rows": expected,
        "commit_s_p50": round(commit_s, 4),
        "files_before": facts.data_files,
        "mean_file_kib": round(facts.total_bytes / max(1, facts.data_files) / 1024, 1),
        "doctor_finding": (f := small_files(facts)) is not None and f.rule,
        "read_s_before": round(before_s, 3),
        "optimize_s": round(optimize_s, 3),
        "files_after": result.files_after,
        "read_s_after": round(after_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoints", type=int, default=600)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--rate", type=int, default=1000, help="rows per checkpoint (1 s)")
    a = parser.parse_args()
    out: dict[str, Any] = {
        "checkpoints": a.checkpoints,
        "parallelism": a.parallelism,
        "rate": a.rate,
        "machine": f"{platform.machine()} {platform.python_version()}",
    }
    with tempfile.TemporaryDirectory() as tmp:
        import deltalake
        from pyiceberg.catalog import load_catalog

        path = f"{tmp}/delta"
        sink = DeltaSink.for_row_data(path, ROW).with_app_id("bench").build()
        out["delta"] = measure(
            path, {}, sink, lambda: deltalake.DeltaTable(path).to_pyarrow_table().num_rows, a
        )
        catalog = {"type": "sql", "uri": f"sqlite:///{tmp}/catalog.db", "warehouse": tmp}
        ice = IcebergSink("bench.events", catalog, ROW)

        def read_iceberg() -> int:
            table = load_catalog("cairn", **catalog).load_table("bench.events")
            return int(table.scan().to_arrow().num_rows)

        out["iceberg"] = measure("bench.events", catalog, ice, read_iceberg, a)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
