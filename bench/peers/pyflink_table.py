"""PyFlink 2.3 Table API / SQL peer of the Table API benchmark (Flink's JVM planner).

Invariant: the input is a ``datagen`` sequence table (``i`` from 0 to N - 1) whose computed
columns are ``table_common``'s event of ``i`` in Flink SQL (``word``, ``ts`` as a
``TIMESTAMP_LTZ(3)`` with a 500 ms bounded-out-of-orderness ``WATERMARK``, ``v``), so no
Python runs unless the query calls the ``normalize_word`` UDF (``--udf on``: a Python scalar
function, ``upper()``, where Flink pays its JVM <-> Python hop; ``python.execution-mode``
thread as the other PyFlink peers). The timed job is ``INSERT INTO`` a ``blackhole`` table of

* ``table-wordcount``: ``SELECT word, COUNT(*) AS cnt FROM events GROUP BY word``
* ``table-window``: ``SELECT word, window_start, COUNT(*), SUM(v) FROM TABLE(TUMBLE(TABLE
  events, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY word, window_start, window_end``

with 1 s exactly-once checkpoints at parallelism 2. Events/s: the source's records out (REST,
polled every 100 ms) between 10 % and 90 % of the input. ``--verify`` then runs the same
query once more, untimed, under a checksum aggregate in SQL (``COUNT(*)``, sums and the
checksum over the query's results, with mini-batches so that it emits once per batch) and
reads its final row into the ``result_*`` figures.

``--rate R`` runs the latency mode instead (``table_latency.py`` defines it): ``datagen`` at
``rows-per-second`` R (Flink releases a second's rows at once), an ``emitted`` column stamped
where the source emits each row (``CURRENT_ROW_TIMESTAMP()`` in the source's projection), the
query's sampled results stamped on leaving the query (``CURRENT_ROW_TIMESTAMP()`` in its last
projection) and read with ``collect()``: the word count carries ``MAX(emitted)`` per word, the
window run adds the stamps of the window-closing events in a ``UNION ALL`` branch.
Last stdout line: one JSON result. Run it through ``run_peer.py --workload table-...``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import common
import table_common as tc
import table_latency as tl
import window_common as wc
from pyflink_keyed_sum import CheckpointPoller, free_port

SYSTEM = "pyflink"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return json.load(resp)


class SourcePoller(threading.Thread):
    """Polls the source vertex's ``numRecordsOut`` (summed over its subtasks) every 100 ms:
    the job's input progress curve."""

    def __init__(self, port: int, job_id: str) -> None:
        super().__init__(daemon=True)
        self.base = f"http://127.0.0.1:{port}/jobs/{job_id}"
        self.curve: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self._metric: tuple[str, str] | None = None  # (vertex id, metric id)

    def _find_metric(self) -> tuple[str, str] | None:
        job = _get(self.base)
        source = next((v for v in job["vertices"] if v["name"].startswith("Source")), None)
        if source is None:
            return None
        names = [m["id"] for m in _get(f"{self.base}/vertices/{source['id']}/subtasks/metrics")]
        # The source operator's own output (before any chained local aggregation).
        wanted = [n for n in names if n.startswith("Source") and n.endswith(".numRecordsOut")]
        if not wanted:
            wanted = [n for n in names if n == "numRecordsOut"]
        return (source["id"], wanted[0]) if wanted else None

    def poll(self) -> None:
        try:
            if self._metric is None:
                self._metric = self._find_metric()
                if self._metric is None:
                    return
            vertex, metric = self._metric
            data = _get(f"{self.base}/vertices/{vertex}/subtasks/metrics?get={metric}&agg=sum")
            if data:
                self.curve.append((time.time(), int(float(data[0]["sum"]))))
        except Exception:
            return

    def run(self) -> None:
        while not self.stop.wait(0.1):
            self.poll()


def make_env(args: argparse.Namespace, work: Path, checkpoints: bool) -> Any:
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    conf = Configuration()
    conf.set_string("python.execution-mode", args.python_execution_mode)
    conf.set_string("python.executable", sys.executable)
    conf.set_string("parallelism.default", str(args.parallelism))
    conf.set_string("rest.address", "127.0.0.1")
    conf.set_string("rest.bind-address", "127.0.0.1")
    conf.set_string("rest.port", str(args.rest_port))
    conf.set_string("web.checkpoints.history", "10000")
    conf.set_string("metrics.fetcher.update-interval", "100 ms")
    conf.set_string("taskmanager.numberOfTaskSlots", str(args.parallelism))
    conf.set_string("table.local-time-zone", "UTC")
    if checkpoints and args.checkpoint_interval_ms > 0:
        conf.set_string("execution.checkpointing.interval", f"{args.checkpoint_interval_ms} ms")
        conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
        conf.set_string("execution.checkpointing.dir", (work / "checkpoints").as_uri())
        conf.set_string("state.backend.type", "hashmap")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)
    t_env = StreamTableEnvironment.create(env)
    t_env.get_config().set("table.local-time-zone", "UTC")
    return t_env


def events_ddl(records: int, num_keys: int, eps: int, rate: int = 0) -> str:
    """The input table: a datagen sequence and the event of ``i`` as computed columns;
    ``rate``: the latency run's (paced, with the ``emitted`` stamp)."""
    emitted = "emitted AS CURRENT_ROW_TIMESTAMP()," if rate else ""
    return f"""
        CREATE TEMPORARY TABLE events (
            i BIGINT,
            word AS {tc.word_sql("i", num_keys)},
            ts_ms AS {tc.ts_sql("i", eps)},
            ts AS TO_TIMESTAMP_LTZ({tc.ts_sql("i", eps)}, 3),
            v AS 1 + MOD(i, 7),
            {emitted}
            WATERMARK FOR ts AS ts - INTERVAL '{wc.BOUND_MS / 1000:g}' SECOND
        ) WITH (
            'connector' = 'datagen',
            'fields.i.kind' = 'sequence',
            'fields.i.start' = '0',
            'fields.i.end' = '{records - 1}',
            'rows-per-second' = '{rate or 1000000000}'
        )"""


def query(workload: str, udf: bool) -> str:
    """The benchmark's SQL (the same text for the timed and the verifying run)."""
    word = "normalize_word(word)" if udf else "word"
    if workload == "table-wordcount":
        return f"SELECT {word} AS word, COUNT(*) AS cnt FROM events GROUP BY {word}"
    return (
        f"SELECT {word} AS word, window_start, COUNT(*) AS cnt, SUM(v) AS total "
        "FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
        f"GROUP BY {word}, window_start, window_end"
    )


def setup(t_env: Any, args: argparse.Namespace) -> None:
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    t_env.execute_sql(events_ddl(args.records, args.keys, args.events_per_second, args.rate))
    if args.udf == "on":
        normalize = udf(tc.normalize, result_type=DataTypes.STRING())
        t_env.create_temporary_function("normalize_word", normalize)


def run_timed(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    t_env = make_env(args, work, checkpoints=True)
    setup(t_env, args)
    if args.workload == "table-wordcount":
        sink_columns = "word STRING, cnt BIGINT"
    else:
        sink_columns = "word STRING, window_start TIMESTAMP_LTZ(3), cnt BIGINT, total BIGINT"
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE sink ({sink_columns}) WITH ('connector' = 'blackhole')"
    )
    started = time.time()
    table_result = t_env.execute_sql(f"INSERT INTO sink {query(args.workload, args.udf == 'on')}")
    client = table_result.get_job_client()
    job_id = str(client.get_job_id())
    checkpoints = CheckpointPoller(args.rest_port, job_id)
    source = SourcePoller(args.rest_port, job_id)
    checkpoints.start()
    source.start()
    client.get_job_execution_result().result()
    end = time.time()
    for poller in (checkpoints, source):
        poller.stop.set()
    checkpoints.poll()
    result: dict[str, Any] = {"elapsed_s": round(end - started, 3)}
    rate = tc.steady_rate(source.curve, args.records)
    result["steady_records_per_s"] = None if rate is None else round(rate)
    first = next((t for t, n in source.curve if n > 0), None)
    result["startup_s"] = None if first is None else round(first - common.SCRIPT_START, 3)
    result["progress_samples"] = len(source.curve)
    done = [checkpoints.history[k] for k in sorted(checkpoints.history)]
    durations = [float(c["end_to_end_duration"]) for c in done]
    result["checkpoints_completed"] = len(done)
    result["checkpoint_p50_ms"] = common.percentile(durations, 50)
    result["checkpoint_p99_ms"] = common.percentile(durations, 99)
    return result


WINDOW_INDEX = (
    f"(UNIX_TIMESTAMP(DATE_FORMAT(window_start, 'yyyy-MM-dd HH:mm:ss')) - {wc.T0_MS // 1000})"
)
RANK = "CAST(SUBSTRING(word, 2) AS BIGINT)"


def stamp_sql(column: str) -> str:
    """A ``TIMESTAMP_LTZ`` as text the collect can carry (its ``Instant`` does not pickle)."""
    return f"DATE_FORMAT({column}, 'yyyy-MM-dd HH:mm:ss.SSS')"


def latency_query(args: argparse.Namespace, every: int, closers: list[int]) -> str:
    """The latency run's query: the benchmark's, its sampled results stamped on leaving it."""
    udf = args.udf == "on"
    if args.workload == "table-wordcount":
        word = "normalize_word(word)" if udf else "word"
        inner = (
            f"SELECT {word} AS word, COUNT(*) AS cnt, MAX(emitted) AS emitted FROM events "
            f"GROUP BY {word}"
        )
        return (
            f"SELECT {stamp_sql('emitted')}, {stamp_sql('CURRENT_ROW_TIMESTAMP()')} FROM ({inner}) "
            f"WHERE MOD({RANK}, {every}) = 0"
        )
    closing = ", ".join(str(i) for i in closers) or "-1"
    arrived = stamp_sql("CURRENT_ROW_TIMESTAMP()")
    return (
        f"SELECT 'w' AS kind, {WINDOW_INDEX} AS id, {arrived} AS stamp "
        f"FROM ({query(args.workload, udf)}) WHERE MOD({RANK}, {every}) = 0 "
        f"UNION ALL SELECT 'c' AS kind, i AS id, {stamp_sql('emitted')} AS stamp FROM events "
        f"WHERE i IN ({closing})"
    )


def _epoch_s(text: str) -> float:
    """A :func:`stamp_sql` (UTC: ``table.local-time-zone``) as epoch seconds.

    >>> _epoch_s("1970-01-01 00:00:01.250")
    1.25
    """
    from datetime import datetime, timezone

    moment = datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f")
    return moment.replace(tzinfo=timezone.utc).timestamp()


def run_latency(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The latency run: the paced query, collected; the result's latency fields."""
    from pyflink.common import RowKind

    t_env = make_env(args, work, checkpoints=True)
    setup(t_env, args)
    every = tl.sample_every(args.keys, args.rate)
    closers = tl.window_closers(args.records, args.rate, args.parallelism)
    flat = sorted(i for c in closers.values() for i in c)
    started = time.time()
    samples: list[tuple[float, float, float]] = []
    rows_w: list[tuple[int, float]] = []
    stamps: dict[int, float] = {}
    with t_env.execute_sql(latency_query(args, every, flat)).collect() as rows:
        for row in rows:
            if args.workload == "table-wordcount":
                if row.get_row_kind() in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                    emitted, arrived = _epoch_s(row[0]), _epoch_s(row[1])
                    samples.append((emitted, (arrived - emitted) * 1000.0, 1))
            elif row[0] == "w":
                rows_w.append((int(row[1]), _epoch_s(row[2])))
            else:
                stamps[int(row[1])] = _epoch_s(row[2])
    for window, arrived in rows_w:
        indices = closers.get(window)
        if indices is None or any(i not in stamps for i in indices):
            continue
        ref = max(stamps[i] for i in indices)
        samples.append((ref, (arrived - ref) * 1000.0, 1))
    return {
        **tl.latency_fields(samples, args.latency_warmup_s),
        "elapsed_s": round(time.time() - started, 3),
        "latency_rate": args.rate,
        "sample_every": every,
    }


def run_verify(args: argparse.Namespace, work: Path) -> dict[str, int]:
    """The query again, its final results folded into figures."""
    from pyflink.common import RowKind

    t_env = make_env(args, work, checkpoints=True)
    # Mini-batches: the stacked checksum aggregate emits once per batch, not per row.
    for key, value in (
        ("table.exec.mini-batch.enabled", "true"),
        ("table.exec.mini-batch.allow-latency", "500 ms"),
        ("table.exec.mini-batch.size", "100000"),
    ):
        t_env.get_config().set(key, value)
    setup(t_env, args)
    inner = query(args.workload, args.udf == "on")
    rank = "CAST(SUBSTRING(word, 2) AS BIGINT)"
    if args.workload == "table-wordcount":
        names = ("results", "events", "checksum")
        checksum = (
            f"SELECT COUNT(*), SUM(cnt), SUM({rank} * 1000003 + cnt * ({rank} + 1) * 31) "
            f"FROM ({inner})"
        )
    else:  # window_common.result_hash, the window's index from its start (UTC)
        names = ("results", "events", "value_sum", "checksum")
        index = WINDOW_INDEX
        checksum = (
            f"SELECT COUNT(*), SUM(cnt), SUM(total), SUM({rank} * 1000003 + w * 7919 + "
            f"cnt * ({rank} + 1) * 31 + total * (w + 3)) FROM "
            f"(SELECT word, {index} AS w, cnt, total FROM ({inner}))"
        )
    last = None
    with t_env.execute_sql(checksum).collect() as rows:
        for row in rows:
            if row.get_row_kind() in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                last = row
    if last is None:
        return dict.fromkeys(names, 0)
    return {name: int(last[i]) for i, name in enumerate(names)}


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    import pyflink

    if args.records >= 1 << 31:
        raise SystemExit("--records must stay below 2**31 (the SQL key hash)")
    work = Path(args.work_dir)
    args.rest_port = free_port()
    result = common.result_template(args, SYSTEM)
    result["versions"]["apache-flink"] = pyflink.version.__version__
    result["execution_mode"] = args.python_execution_mode
    result["udf"] = args.udf == "on"
    result["events_per_second"] = args.events_per_second
    if args.rate:
        result.update(run_latency(args, work))
        result["note"] = (
            f"latency run: Flink SQL, datagen at rows-per-second {args.rate:,}; "
            + tl.NOTE[args.workload]
            + ("; Python UDF normalize_word(word)" if args.udf == "on" else "")
        )
        return result
    result.update(run_timed(args, work))
    result["note"] = (
        "Flink SQL on the JVM planner, datagen sequence source, blackhole sink"
        + ("; Python UDF normalize_word(word)" if args.udf == "on" else "; no Python in the job")
        + "; events/s from the source's numRecordsOut between 10 % and 90 % of the input"
    )
    if args.verify:
        args.rest_port = free_port()
        started = time.time()
        figures = run_verify(args, work)
        result["verify_s"] = round(time.time() - started, 3)
        result.update({f"result_{k}": v for k, v in figures.items()})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--events-per-second", type=int, required=True)
    parser.add_argument("--udf", choices=("on", "off"), default="off")
    parser.add_argument("--verify", action="store_true")
    parser.add_argument(
        "--python-execution-mode",
        choices=("thread", "process"),
        default="thread",
        help="Flink's python.execution-mode: thread (pemja, in the JVM's process) or process"
        " (Flink's default: Python workers beside the JVM)",
    )
    args = parser.parse_args()
    args.rate = int(args.rate)
    if args.rate:
        args.events_per_second = args.rate  # event time advances as fast as wall time
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-pyflink-table-")
    result = run_job(args)
    result["work_dir"] = args.work_dir
    common.emit(result)
    sys.stdout.flush()
    os._exit(0)  # skip py4j's slow interpreter teardown; the JVM gateway exits with us


if __name__ == "__main__":
    main()
