"""The ``window`` workload (issue 13): 1 s tumbling event-time windows with ``aggregate``.

Every system runs the same job on the same events (``bench/peers/window_common.py``: event
``i`` at a fixed number of events per second of event time, up to 200 ms out of order, over
``--keys`` keys; a 500 ms bounded-out-of-orderness watermark, so no event is late): key by the
key, 1 s tumbling event-time windows, count and sum per key and window (an
``AggregateFunction``), results to a sink that tallies them; 1 s exactly-once checkpoints,
parallelism 2. Cairn runs here (``python -m bench.windows``); the peers run
``bench/peers/<system>_window.py`` through ``run_peer.py --workload window``.

Invariant: a run counts only if its results equal :func:`window_common.expected` (number of
window results, events in them and the checksum): :func:`verify` marks every row, so no
system is timed doing less work. Events/s come from when windows complete (the last result
of each window at the sinks, ``window_common.steady_rate``), the same for every system except
Spark, whose output appears per micro-batch (its rate comes from the batches, as in
keyed-sum). Cairn also reports the latency from the watermark passing a window's end (the
first result of that window fired on the subtask) to each of its results at the sink.

    python -m bench --systems cairn,pyflink,spark,spark-tws,bytewax --workloads window --quick
    python -m bench.windows --records 1000000 --keys 10000 --events-per-second 100000
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))
# Spark's Python workers start from this environment: they import window_common too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(PEERS), *filter(None, [os.environ.get("PYTHONPATH")])]
)

import window_common as wc  # noqa: E402
from common import key_table  # noqa: E402

from bench import empty_result  # noqa: E402
from bench.measure import nearest_rank  # noqa: E402
from cairn.common import Duration, Time, TimestampAssigner, Types, WatermarkStrategy  # noqa: E402
from cairn.datastream import AggregateFunction, ProcessWindowFunction  # noqa: E402
from cairn.datastream.connectors.datagen import DataGeneratorSource  # noqa: E402
from cairn.datastream.functions import SinkFunction  # noqa: E402
from cairn.datastream.window import TumblingEventTimeWindows  # noqa: E402

__all__ = [
    "EVENTS_PER_SECOND_FULL",
    "EVENTS_PER_SECOND_QUICK",
    "SYSTEMS",
    "command",
    "expected_results",
    "plan_cases",
    "run_cairn",
    "verify",
]

EVENTS_PER_SECOND_FULL = 1_000_000  # of event time: 100 events per key and window at 10k keys
EVENTS_PER_SECOND_QUICK = 100_000
RECORDS_FULL = 10_000_000
RECORDS_QUICK = 1_000_000
SYSTEMS = ("cairn", "pyflink", "spark", "spark-tws", "bytewax", "bytewax-2p")
_time_ns = time.time_ns


def plan_cases(quick: bool, keys: int = 10_000) -> list[dict[str, Any]]:
    """One case: ten windows' worth of events (10M at 1M events/s; quick: 1M at 100k/s).

    >>> c = plan_cases(quick=True)[0]
    >>> c["case"], c["records"], c["events_per_second"], c["interval_ms"]
    ('window', 1000000, 100000, 1000)
    """
    return [
        dict(
            case="window",
            workload="window",
            records=RECORDS_QUICK if quick else RECORDS_FULL,
            keys=keys,
            interval_ms=1000,
            rate=None,
            events_per_second=EVENTS_PER_SECOND_QUICK if quick else EVENTS_PER_SECOND_FULL,
        )
    ]


def command(system: str, case: dict[str, Any], executor: str, timeout_s: float) -> list[str]:
    """The runner's command for one (system, window case)."""
    args = [
        "--records", str(case["records"]),
        "--keys", str(case["keys"]),
        "--checkpoint-interval-ms", str(case["interval_ms"]),
        "--parallelism", "2",
        "--events-per-second", str(case["events_per_second"]),
    ]  # fmt: skip
    if system == "cairn":
        return [sys.executable, "-m", "bench.windows", *args, "--executor", executor]
    return [
        sys.executable, str(PEERS / "run_peer.py"), "--system", system, "--workload", "window",
        *args, "--timeout", str(max(60, int(timeout_s) - 30)),
    ]  # fmt: skip


def expected_results(case: dict[str, Any]) -> dict[str, int]:
    """What every system must produce for ``case`` (pure Python over every event: about
    4 s per million events here)."""
    return wc.expected(case["records"], case["keys"], case["events_per_second"])


def verify(result: dict[str, Any], expected: dict[str, int]) -> None:
    """Mark ``result`` with ``verified`` (its window results equal ``expected``) and say what
    differs in its note; a run that was not verified has no events/s (it did other work)."""
    got = {name: result.get(f"window_{name}") for name in expected}
    if all(v is None for v in got.values()):
        return
    result["verified"] = got == expected
    if not result["verified"]:
        diff = ", ".join(f"{k} {got[k]} (expected {v})" for k, v in expected.items() if got[k] != v)
        result["note"] = "; ".join(filter(None, [f"results differ: {diff}", result.get("note")]))
        result["unverified_events_per_s"] = result.get("steady_records_per_s")
        result["steady_records_per_s"] = None


# ---- the Cairn job, as a user writes it ---------------------------------------------------


class WindowEvents:
    """The generator: ``window_common.event(i)`` in batches (picklable; keys built once)."""

    def __init__(self, num_keys: int, events_per_second: int) -> None:
        self.num_keys = num_keys
        self.events_per_second = events_per_second
        self._keys: list[str] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_keys": None}

    def __call__(self, index: int) -> tuple[str, int, int]:
        return self.generate_batch(range(index, index + 1))[0]

    def generate_batch(self, indices: range) -> list[tuple[str, int, int]]:
        if self._keys is None:
            self._keys = key_table(self.num_keys)
        return wc.events(indices, self._keys, self.events_per_second)


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


class CountSum(AggregateFunction[Any, Any, Any]):
    """Count and sum of the values per key and window."""

    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + 1, accumulator[1] + value[2])

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


class FiredAt(ProcessWindowFunction[Any, Any, str, Any]):
    """``(key, window start, count, sum, fired_ns)``: ``fired_ns`` is when this subtask fired
    its first result of the window, i.e. when the watermark passed the window's end."""

    def open(self, runtime_context: Any) -> None:
        self.fired: dict[int, int] = {}

    def process(self, key: str, context: Any, elements: Any) -> Iterator[Any]:
        ((count, total),) = elements
        start = context.window().start
        fired = self.fired.get(start)
        if fired is None:
            fired = self.fired[start] = _time_ns()
        yield key, start, count, total, fired


class WindowResultSink(SinkFunction):
    """Tallies results (``window_common.WindowTally``) and keeps ``now - fired_ns`` per result;
    writes both as JSON per subtask and attempt when it closes."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir

    def open(self, runtime_context: Any) -> None:
        self._name = (
            f"tally-{runtime_context.get_index_of_this_subtask()}-"
            f"{runtime_context.get_attempt_number()}.json"
        )
        self._tally = wc.WindowTally()
        self._latency_ns = array("q")

    def invoke(self, value: Any, context: Any) -> None:
        now = _time_ns()
        key, start, count, total, fired = value
        self._latency_ns.append(now - fired)
        self._tally.add(key, wc.window_index(start), count, total, now / 1e9)

    def close(self) -> None:
        tally = getattr(self, "_tally", None)
        if tally is None:
            return
        data = {**tally.to_dict(), "latency_ns": self._latency_ns.tolist()}
        with open(os.path.join(self.out_dir, self._name), "w", encoding="ascii") as f:
            json.dump(data, f)


def _window_job(env: Any, records: int, keys: int, eps: int, out_dir: str) -> None:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(wc.BOUND_MS)
    ).with_timestamp_assigner(EventTime())
    (
        env.from_source(DataGeneratorSource(WindowEvents(keys, eps), records), strategy, "events")
        .uid("events")
        .key_by(lambda e: e[0], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Time.milliseconds(wc.WINDOW_MS)))
        .aggregate(CountSum(), FiredAt())
        .uid("windows")
        .name("count+sum per 1 s window")
        .add_sink(WindowResultSink(out_dir))
        .uid("tally-sink")
    )


def run_cairn(
    records: int,
    keys: int,
    events_per_second: int,
    interval_ms: int = 1000,
    parallelism: int = 2,
    executor: str = "spark",
    state_backend: str = "hashmap",
    incremental: bool = False,
) -> dict[str, Any]:
    """Run the Cairn job once in this process; the result object the runner reads."""
    from bench.workloads import CairnOptions, bench_environment, cairn_versions, run_job

    opts = CairnOptions(parallelism, executor, state_backend=state_backend, incremental=incremental)
    work = tempfile.mkdtemp(prefix="cairn-bench-window-")
    try:
        out = os.path.join(work, "sink")
        os.makedirs(out)
        env = bench_environment(opts, interval_ms, os.path.join(work, "checkpoints"))
        _window_job(env, records, keys, events_per_second, out)
        seen = run_job(env, "bench-window")
        parts = []
        latencies: list[int] = []
        for path in glob.glob(os.path.join(out, "tally-*.json")):
            with open(path, encoding="ascii") as f:
                part = json.load(f)
            latencies += part.pop("latency_ns")
            parts.append(part)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = empty_result("cairn", "window", records)
    result.update(
        keys=keys,
        parallelism=parallelism,
        state_backend=state_backend + (" (incremental)" if incremental else ""),
        checkpoint_interval_ms=interval_ms,
        events_per_second=events_per_second,
        versions=cairn_versions(),
        elapsed_s=round(seen.ended - seen.submitted, 3),
        checkpoint_p50_ms=seen.p50_ms,
        checkpoint_p99_ms=seen.p99_ms,
        checkpoints_completed=len(seen.checkpoints),
        restarts=seen.restarts,
    )
    result.update(wc.result_fields(parts, records, events_per_second, seen.submitted))
    if latencies:
        latencies.sort()
        result.update(
            latency_p50_ms=round(nearest_rank(latencies, 0.5) / 1e6, 2),
            latency_p99_ms=round(nearest_rank(latencies, 0.99) / 1e6, 2),
            latency_max_ms=round(latencies[-1] / 1e6, 2),
        )
        result["note"] = (
            "latency: from the first result of a window fired on a subtask (the watermark "
            "passing its end) to each of its results at the sink"
        )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.windows",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--records", type=int, default=RECORDS_QUICK)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--events-per-second", type=int, default=EVENTS_PER_SECOND_QUICK)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--executor", choices=["spark", "inprocess"], default="spark")
    parser.add_argument("--state-backend", choices=["hashmap", "rocksdb"], default="hashmap")
    parser.add_argument(
        "--incremental", action="store_true", help="incremental checkpoints (RocksDB backend)"
    )
    parser.add_argument(
        "--verify", action="store_true", help="compute the expected results and check them"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        result = run_cairn(
            args.records,
            args.keys,
            args.events_per_second,
            args.checkpoint_interval_ms,
            args.parallelism,
            args.executor,
            args.state_backend,
            args.incremental,
        )
        if args.verify:
            verify(result, wc.expected(args.records, args.keys, args.events_per_second))
    except Exception as exc:  # report, don't crash: the runner records the reason
        result = empty_result("cairn", "window", args.records)
        result["note"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        print(json.dumps(result), flush=True)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
