"""Cairn's side of the Table API benchmark: the word count and the tumbling window as table
programs (``python -m bench.table_jobs``; the driver is :mod:`bench.table`).

Cairn's SQL front end is not merged yet, so the queries are written with the Table API's
expression DSL, which builds the same logical plan the SQL will (``Calc`` ->
``GroupAggregate`` / ``WindowAggregate``):

* ``table-wordcount`` = ``SELECT word, COUNT(*) AS cnt FROM events GROUP BY word``::

      events.select(word.alias("word")).group_by(col("word"))
            .select(col("word"), lit(1).count.alias("cnt"))

* ``table-window`` = ``SELECT word, window_start, COUNT(*), SUM(v) FROM TABLE(TUMBLE(TABLE
  events, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY word, window_start, window_end``::

      events.select(word.alias("word"), col("ts"), col("v"))
            .window(Tumble.over(lit(1).seconds).on(col("ts")).alias("w"))
            .group_by(col("word"), col("w"))
            .select(col("word"), col("w").start, col("v").count, col("v").sum)

(``col("v").count`` is ``COUNT(*)``: ``v`` is never NULL, and a window aggregate takes only
columns as arguments).

where ``word`` is ``col("word")``, or ``normalize_word(col("word"))`` with ``--udf on`` (a Python
scalar ``udf``). Invariant: the input is ``table_common``'s events (a ``DataGeneratorSource``
of ``window_common.event(i)`` with a 500 ms bounded-out-of-orderness watermark, turned into a
table by ``from_data_stream``), the same as the peers'; the timed job writes into a
``blackhole`` table (``execute_insert``) with 1 s exactly-once checkpoints at parallelism 2,
and its events/s come from the sources' progress marks between 10 % and 90 % of the input
(as PyFlink's from its source's ``numRecordsOut``). ``--verify`` runs the same query again,
untimed, into ``to_changelog_stream`` and a sink that folds the changelog into the
``result_*`` figures the driver checks.

``--rate R`` runs the latency mode instead (``bench/peers/table_latency.py`` defines it): the
source releases ``R`` events a second, a second's worth at once (:class:`PacedTableEvents`,
``table_latency.PerSecondBursts``), stamping each batch's emission; the word count carries
``MAX(emitted)`` per word, the window's closing events' stamps are kept by the generator, and
:class:`LatencySink` (behind ``to_changelog_stream``) times the sampled results' arrival.

    python -m bench.table_jobs --workload table-wordcount --records 2000000 --keys 10000 --udf on
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))
# Spark's Python workers start from this environment: they import table_common too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(PEERS), *filter(None, [os.environ.get("PYTHONPATH")])]
)

import table_common as tc  # noqa: E402
import table_latency as tl  # noqa: E402
import window_common as wc  # noqa: E402
from common import key_table  # noqa: E402

from bench import empty_result  # noqa: E402
from bench.jobs import CairnOptions, bench_environment, cairn_versions  # noqa: E402
from cairn.common import Duration, TimestampAssigner, Types, WatermarkStrategy  # noqa: E402
from cairn.common.types import RowKind  # noqa: E402
from cairn.datastream.connectors.datagen import (  # noqa: E402
    DataGeneratorSource,
    RateLimiterStrategy,
)
from cairn.datastream.functions import SinkFunction  # noqa: E402

__all__ = ["LatencySink", "PacedTableEvents", "TableEvents", "build_query", "run_cairn"]

POLL_S = 0.1


class TableEvents:
    """The generator: ``window_common.event(i)`` in batches, each batch marked in this
    subtask's progress file (``table_common.SourceMarks``); picklable, keys built once."""

    def __init__(self, num_keys: int, events_per_second: int, marks_dir: str, records: int) -> None:
        self.num_keys = num_keys
        self.records = records
        self.events_per_second = events_per_second
        self.marks_dir = marks_dir
        self._keys: list[str] | None = None
        self._marks: tc.SourceMarks | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_keys": None, "_marks": None}

    def __call__(self, index: int) -> tuple[str, int, int]:
        return self.generate_batch(range(index, index + 1))[0]

    def generate_batch(self, indices: range) -> list[tuple[str, int, int]]:
        if self._keys is None:
            self._keys = key_table(self.num_keys)
            self._marks = tc.SourceMarks(self.marks_dir)
        batch = wc.events(indices, self._keys, self.events_per_second)
        assert self._marks is not None
        # A subtask's last batch (its next index is past the input) is always marked.
        last = indices[-1] + indices.step >= self.records if indices else False
        self._marks.add(len(batch), time.time(), force=last)
        return batch


class PacedTableEvents(TableEvents):
    """The latency run's generator: ``window_common.event(i)`` plus its emission stamp
    (epoch µs, one per batch: the batch is emitted as a whole), and the stamps of the
    window-closing events (``closers``) appended to ``closers-<pid>-<id>.txt`` in
    ``marks_dir`` as ``"<index> <stamp µs>"`` lines."""

    def __init__(
        self, num_keys: int, events_per_second: int, marks_dir: str, records: int, closers: Any
    ) -> None:
        super().__init__(num_keys, events_per_second, marks_dir, records)
        self.closers = sorted(closers)
        self._file: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_file": None}

    def generate_batch(self, indices: range) -> list[Any]:  # type: ignore[override]
        batch = super().generate_batch(indices)
        stamp = time.time_ns() // 1000
        hits = [i for i in self._closers_in(indices) if (i - indices.start) % indices.step == 0]
        if hits:
            if self._file is None:
                name = f"closers-{os.getpid()}-{id(self):x}.txt"
                self._file = open(os.path.join(self.marks_dir, name), "a", encoding="ascii")  # noqa: SIM115
            self._file.write("".join(f"{i} {stamp}\n" for i in hits))
            self._file.flush()
        return [(w, ts, v, stamp) for w, ts, v in batch]

    def _closers_in(self, indices: range) -> list[int]:
        import bisect

        if not indices:
            return []
        lo = bisect.bisect_left(self.closers, indices.start)
        hi = bisect.bisect_left(self.closers, indices[-1] + 1)
        return self.closers[lo:hi]


class BurstsStrategy(RateLimiterStrategy):
    """``table_latency.PerSecondBursts`` for each subtask (a second's share at once)."""

    def create_rate_limiter(self, parallelism: int, clock: Any = time.monotonic) -> Any:
        assert self.records_per_second is not None
        return tl.PerSecondBursts(self.records_per_second / parallelism, clock)


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


def build_query(
    t_env: Any,
    workload: str,
    records: int,
    keys: int,
    eps: int,
    udf: bool,
    marks_dir: str,
    rate: int = 0,
    parallelism: int = 2,
) -> Any:
    """The benchmark's query on ``t_env`` over a fresh source (the table, not yet run);
    ``rate``: the latency run's (paced, stamped events; the word count adds
    ``MAX(emitted)``)."""
    from cairn.table import DataTypes
    from cairn.table.expressions import col, lit
    from cairn.table.udf import udf as make_udf
    from cairn.table.window import Tumble

    env = t_env.get_stream_execution_environment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(wc.BOUND_MS)
    ).with_timestamp_assigner(EventTime())
    if rate:
        closers = [i for c in tl.window_closers(records, eps, parallelism).values() for i in c]
        generator: TableEvents = PacedTableEvents(keys, eps, marks_dir, records, closers)
        source = DataGeneratorSource(generator, records, BurstsStrategy(float(rate)))
    else:
        source = DataGeneratorSource(TableEvents(keys, eps, marks_dir, records), records)
    fields = [Types.STRING(), Types.LONG(), Types.LONG()] + ([Types.LONG()] if rate else [])
    stream = env.from_source(source, strategy, "events", type_info=Types.TUPLE(fields)).uid(
        "events"
    )
    events = t_env.from_data_stream(stream).select(
        col("f0").alias("word"),
        col("f1").cast(DataTypes.TIMESTAMP(3)).alias("ts"),
        col("f2").alias("v"),
        *([col("f3").alias("emitted")] if rate else []),
    )
    word = col("word")
    if udf:
        normalize = make_udf(tc.normalize, result_type=DataTypes.STRING(), name="normalize_word")
        word = normalize(col("word"))
    if workload == "table-wordcount" and rate:
        return (
            events.select(word.alias("word"), col("emitted"))
            .group_by(col("word"))
            .select(col("word"), lit(1).count.alias("cnt"), col("emitted").max.alias("emitted"))
        )
    if workload == "table-wordcount":
        return (
            events.select(word.alias("word"))
            .group_by(col("word"))
            .select(col("word"), lit(1).count.alias("cnt"))
        )
    return (
        events.select(word.alias("word"), col("ts"), col("v"))
        .window(Tumble.over(lit(1).seconds).on(col("ts")).alias("w"))
        .group_by(col("word"), col("w"))
        .select(
            col("word"),
            col("w").start.alias("window_start"),
            col("v").count.alias("cnt"),  # COUNT(*): a window aggregate takes columns only
            col("v").sum.alias("total"),
        )
    )


def _t_env(opts: CairnOptions, interval_ms: int, checkpoint_dir: str) -> Any:
    from cairn.table import StreamTableEnvironment

    return StreamTableEnvironment.create(bench_environment(opts, interval_ms, checkpoint_dir))


def _watch(client: Any, timeout_s: float) -> tuple[float, dict[str, Any]]:
    """Poll the job master until the job ends: (end time, checkpoint figures)."""
    master = client.job_master
    deadline = time.monotonic() + timeout_s
    while master.end_ms is None:
        if time.monotonic() > deadline:
            client.cancel()
            break
        time.sleep(POLL_S)
    client.get_job_execution_result(timeout=60)
    figures: dict[str, Any] = {"restarts": master.restarts}
    coordinator = master.coordinator
    if coordinator is not None:
        snapshot = coordinator.stats.snapshot()
        summary = snapshot.end_to_end_duration
        figures["checkpoints_completed"] = summary.count
        if summary.count:
            figures["checkpoint_p50_ms"] = summary.p50
            figures["checkpoint_p99_ms"] = summary.p99
    return (master.end_ms or time.time() * 1000) / 1000.0, figures


class TallySink(SinkFunction):
    """The verifying run's sink: folds the changelog of the query (``Row``s with their kind)
    into this subtask's final results and writes them as JSON when it closes — the word
    count's latest count per word, the window's figures (additive over subtasks)."""

    def __init__(self, out_dir: str, workload: str) -> None:
        self.out_dir = out_dir
        self.workload = workload

    def open(self, runtime_context: Any) -> None:
        self._name = f"tally-{runtime_context.get_index_of_this_subtask()}.json"
        self._latest: dict[str, int] = {}
        self._windows = wc.WindowTally()

    def invoke(self, value: Any, context: Any) -> None:
        from cairn.table.timestamps import epoch_millis

        kind = value.get_row_kind()
        if self.workload == "table-wordcount":
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                self._latest[value[0]] = value[1]
            elif kind is RowKind.DELETE:
                self._latest.pop(value[0], None)
            return
        word, start, count, total = value[0], epoch_millis(value[1]), value[2], value[3]
        self._windows.add("k" + word[1:], wc.window_index(start), count, total)

    def close(self) -> None:
        if not hasattr(self, "_name"):
            return
        data = self._latest if self.workload == "table-wordcount" else self._windows.figures()
        with open(os.path.join(self.out_dir, self._name), "w", encoding="ascii") as f:
            json.dump(data, f)


class LatencySink(SinkFunction):
    """The latency run's sink: for the results of the sampled words (rank a multiple of
    ``every``), the word count's ``(emitted µs, arrival µs)`` of each ``+I``/``+U`` row, the
    window's ``(window index, arrival µs)``; written as JSON per subtask when it closes."""

    def __init__(self, out_dir: str, workload: str, every: int) -> None:
        self.out_dir = out_dir
        self.workload = workload
        self.every = every

    def open(self, runtime_context: Any) -> None:
        self._name = (
            f"latency-{runtime_context.get_index_of_this_subtask()}-"
            f"{runtime_context.get_attempt_number()}.json"
        )
        self._rows: list[tuple[int, int]] = []

    def invoke(self, value: Any, context: Any) -> None:
        now = time.time_ns() // 1000
        if tc.word_rank(value[0]) % self.every:
            return
        if self.workload == "table-wordcount":
            if value.get_row_kind() in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                self._rows.append((int(value[2]), now))
            return
        from cairn.table.timestamps import epoch_millis

        self._rows.append((wc.window_index(epoch_millis(value[1])), now))

    def close(self) -> None:
        if not hasattr(self, "_name"):
            return
        with open(os.path.join(self.out_dir, self._name), "w", encoding="ascii") as f:
            json.dump(self._rows, f)


def latency_samples(
    workload: str, rows: list[tuple[int, int]], closer_stamps: dict[int, int], closers: Any
) -> list[tuple[float, float, float]]:
    """``table_latency.latency_fields``' samples from :class:`LatencySink`'s rows: the word
    count's ``(emitted, arrival)``; the window's ``(window, arrival)`` against the latest
    stamp of the window's closing events (windows the end of input closed are left out).

    >>> latency_samples("table-wordcount", [(1_000_000, 1_250_000)], {}, {})
    [(1.0, 250.0, 1)]
    >>> latency_samples("table-window", [(3, 9_000_000), (4, 1)], {7: 8_000_000, 8: 8_500_000},
    ...                 {3: (7, 8)})
    [(8.5, 500.0, 1)]
    """
    if workload == "table-wordcount":
        return [(e / 1e6, (a - e) / 1000.0, 1) for e, a in rows]
    out = []
    for window, arrived in rows:
        indices = closers.get(window)
        if indices is None or any(i not in closer_stamps for i in indices):
            continue
        ref = max(closer_stamps[i] for i in indices)
        out.append((ref / 1e6, (arrived - ref) / 1000.0, 1))
    return out


def _read_closers(marks_dir: str) -> dict[int, int]:
    stamps: dict[int, int] = {}
    if os.path.isdir(marks_dir):
        for name in os.listdir(marks_dir):
            if name.startswith("closers-"):
                with open(os.path.join(marks_dir, name), encoding="ascii") as f:
                    for line in f:
                        i, stamp = line.split()
                        stamps[int(i)] = int(stamp)
    return stamps


def _measure_latency(
    t_env: Any,
    table: Any,
    workload: str,
    work: str,
    records: int,
    keys: int,
    rate: int,
    parallelism: int,
    warmup_s: float,
    timeout_s: float,
) -> dict[str, Any]:
    """Run the latency query into :class:`LatencySink`; the result's latency fields."""
    out_dir = os.path.join(work, "latency")
    os.makedirs(out_dir, exist_ok=True)
    every = tl.sample_every(keys, rate)
    t_env.to_changelog_stream(table).add_sink(LatencySink(out_dir, workload, every))
    submitted = time.time()
    client = t_env.get_stream_execution_environment().execute_async("bench-table-latency")
    ended, figures = _watch(client, timeout_s)
    rows: list[tuple[int, int]] = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name), encoding="ascii") as f:
            rows += [(int(a), int(b)) for a, b in json.load(f)]
    closers = tl.window_closers(records, rate, parallelism) if workload == "table-window" else {}
    samples = latency_samples(workload, rows, _read_closers(os.path.join(work, "marks")), closers)
    curve = tc.merge_marks(tc.read_marks(os.path.join(work, "marks")))
    fields: dict[str, Any] = {
        **figures,
        **tl.latency_fields(samples, warmup_s),
        "elapsed_s": round(ended - submitted, 3),
        "latency_rate": rate,
        "sample_every": every,
        "events_read": curve[-1][1] if curve else 0,
    }
    return fields


def _verify(
    t_env: Any, table: Any, workload: str, out_dir: str, timeout_s: float
) -> dict[str, int]:
    """Run the query into :class:`TallySink` and merge what its subtasks wrote."""
    os.makedirs(out_dir, exist_ok=True)
    t_env.to_changelog_stream(table).add_sink(TallySink(out_dir, workload))
    client = t_env.get_stream_execution_environment().execute_async("bench-table-verify")
    _watch(client, timeout_s)
    parts = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name), encoding="ascii") as f:
            parts.append(json.load(f))
    if workload == "table-wordcount":
        tally = tc.WordCountTally()
        for part in parts:  # a word's changes all reach one subtask: the parts are disjoint
            tally.update(part.items())
        return tally.figures()
    return {
        k: sum(int(p[k]) for p in parts) for k in ("results", "events", "value_sum", "checksum")
    }


def run_cairn(
    workload: str,
    records: int,
    keys: int,
    events_per_second: int,
    udf: bool,
    interval_ms: int = 1000,
    parallelism: int = 2,
    executor: str = "spark",
    verify: bool = False,
    timeout_s: float = 1800.0,
    rate: int = 0,
    warmup_s: float = 2.0,
) -> dict[str, Any]:
    """Run the timed job (and, with ``verify``, the verifying one) in this process; with
    ``rate``, the latency run instead (``events_per_second`` must equal it)."""
    from cairn.table import TableDescriptor

    opts = CairnOptions(parallelism, executor)
    work = tempfile.mkdtemp(prefix="cairn-bench-table-")
    result = empty_result("cairn", workload, records)
    result.update(
        keys=keys,
        parallelism=parallelism,
        checkpoint_interval_ms=interval_ms,
        events_per_second=events_per_second,
        udf=udf,
        versions=cairn_versions(),
        executor=executor,
    )
    if rate:
        try:
            t_env = _t_env(opts, interval_ms, os.path.join(work, "checkpoints"))
            marks = os.path.join(work, "marks")
            os.makedirs(marks, exist_ok=True)
            table = build_query(t_env, workload, records, keys, rate, udf, marks, rate, parallelism)
            result.update(
                _measure_latency(
                    t_env, table, workload, work, records, keys, rate, parallelism, warmup_s,
                    timeout_s,
                )
            )  # fmt: skip
        finally:
            shutil.rmtree(work, ignore_errors=True)
        result["events_per_second"] = rate
        result["note"] = (
            f"latency run: {rate:,} events/s released a second's worth at a time; "
            + tl.NOTE[workload]
            + ("; Python UDF normalize_word(word)" if udf else "")
        )
        return result
    try:
        marks = os.path.join(work, "marks")
        t_env = _t_env(opts, interval_ms, os.path.join(work, "checkpoints"))
        table = build_query(t_env, workload, records, keys, events_per_second, udf, marks)
        t_env.create_temporary_table("sink", TableDescriptor.for_connector("blackhole").build())
        submitted = time.time()
        client = table.execute_insert("sink").get_job_client()
        ended, figures = _watch(client, timeout_s)
        result.update(figures)
        curve = tc.merge_marks(tc.read_marks(marks))
        rate = tc.steady_rate(curve, records)
        result["steady_records_per_s"] = None if rate is None else round(rate)
        result["elapsed_s"] = round(ended - submitted, 3)
        result["startup_s"] = round(curve[0][0] - submitted, 3) if curve else None
        if curve and curve[-1][1] != records:
            result["note"] = f"sources read {curve[-1][1]:,} of {records:,} events"
        if verify:
            started = time.time()
            v_env = _t_env(opts, interval_ms, os.path.join(work, "verify-checkpoints"))
            v_table = build_query(
                v_env, workload, records, keys, events_per_second, udf, marks + "-verify"
            )
            figures = _verify(v_env, v_table, workload, os.path.join(work, "tally"), timeout_s)
            result["verify_s"] = round(time.time() - started, 3)
            result.update({f"result_{k}": v for k, v in figures.items()})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["note"] = "; ".join(
        filter(
            None,
            [
                result.get("note"),
                "Table API expression DSL (the logical plan SQL will build), blackhole sink"
                + ("; Python UDF normalize_word(word)" if udf else "")
                + "; events/s from the sources' progress between 10 % and 90 % of the input",
            ],
        )
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.table_jobs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workload", choices=tc.WORKLOADS, default="table-wordcount")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--events-per-second", type=int, default=0, help="default: records/10")
    parser.add_argument("--udf", choices=("on", "off"), default="off")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--executor", choices=["spark", "inprocess"], default="spark")
    parser.add_argument("--verify", action="store_true", help="run the query again, collected")
    parser.add_argument(
        "--rate",
        type=int,
        default=0,
        help="the latency run: events/s (bench/peers/table_latency.py)",
    )
    parser.add_argument("--latency-warmup-s", type=float, default=2.0)
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    eps = args.rate or args.events_per_second or tc.default_events_per_second(args.records)
    try:
        result = run_cairn(
            args.workload,
            args.records,
            args.keys,
            eps,
            args.udf == "on",
            args.checkpoint_interval_ms,
            args.parallelism,
            args.executor,
            args.verify and not args.rate,
            rate=args.rate,
            warmup_s=args.latency_warmup_s,
        )
    except Exception as exc:  # report, don't crash: the driver records the reason
        result = empty_result("cairn", args.workload, args.records)
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        print(json.dumps(result), flush=True)
        return 1
    print(json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
