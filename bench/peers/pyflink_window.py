"""PyFlink 2.3 (thread mode) peer of the ``window`` workload: 1 s tumbling event-time windows.

Invariant: the job is NumberSequenceSource -> Python map to ``window_common``'s event (each
source subtask's contiguous split is renumbered so that subtask ``j`` of ``p`` reads events
``j, j + p, ...`` in order, as Cairn's generator does) -> ``assign_timestamps_and_watermarks``
(bounded out-of-orderness 500 ms, Python ``TimestampAssigner``) -> ``key_by`` ->
``TumblingEventTimeWindows.of(1 s)`` -> ``aggregate`` (count, sum) with a
``ProcessWindowFunction`` adding the window -> a Python map tallying the results ->
``DiscardingSink``; 1 s exactly-once checkpoints, parallelism 2. Last stdout line: one JSON
result. Run it through ``run_peer.py --workload window``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
import window_common as wc
from pyflink_keyed_sum import CheckpointPoller, free_port

SYSTEM = "pyflink"


def build_job(args: argparse.Namespace, work: Path) -> Any:
    from pyflink.common import Configuration, Duration, Time, Types
    from pyflink.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.base import Sink
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import (
        AggregateFunction,
        MapFunction,
        ProcessWindowFunction,
        RuntimeContext,
    )
    from pyflink.datastream.window import TumblingEventTimeWindows

    conf = Configuration()
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("python.executable", sys.executable)
    conf.set_string("parallelism.default", str(args.parallelism))
    conf.set_string("rest.address", "127.0.0.1")
    conf.set_string("rest.bind-address", "127.0.0.1")
    conf.set_string("rest.port", str(args.rest_port))
    conf.set_string("web.checkpoints.history", "10000")
    conf.set_string("taskmanager.numberOfTaskSlots", str(args.parallelism))
    if args.checkpoint_interval_ms > 0:
        conf.set_string("execution.checkpointing.interval", f"{args.checkpoint_interval_ms} ms")
        conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
        conf.set_string("execution.checkpointing.dir", (work / "checkpoints").as_uri())
        conf.set_string("state.backend.type", "hashmap")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)

    probes_dir = str(work / "probes")
    num_keys, eps, p = args.keys, args.events_per_second, args.parallelism
    half = args.records // p  # NumberSequenceSource: p contiguous splits of equal size

    class ToEvent(MapFunction):
        """Sequence number -> event: split ``j``'s ``k``-th number is event ``k * p + j``."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.keys = common.key_table(num_keys)

        def map(self, x: int) -> Any:
            j, k = divmod(x, half)
            return wc.event(k * p + j, self.keys, eps)

    class EventTime(TimestampAssigner):
        def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
            return int(value[1])

    class CountSum(AggregateFunction):
        def create_accumulator(self) -> Any:
            return (0, 0)

        def add(self, value: Any, accumulator: Any) -> Any:
            return (accumulator[0] + 1, accumulator[1] + value[2])

        def get_result(self, accumulator: Any) -> Any:
            return accumulator

        def merge(self, a: Any, b: Any) -> Any:
            return (a[0] + b[0], a[1] + b[1])

    class WithWindow(ProcessWindowFunction):
        def process(self, key: str, context: Any, elements: Any) -> Any:
            ((count, total),) = elements
            yield key, context.window().start, count, total

    class Tally(MapFunction):
        """The sink side: tallies each result (``window_common.WindowTally``)."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.tally = wc.WindowTally()
            self.name = f"tally-{os.getpid()}-{id(self):x}-{time.time_ns()}.json"

        def map(self, value: Any) -> Any:
            key, start, count, total = value
            self.tally.add(key, wc.window_index(start), count, total, time.time())
            return count

        def close(self) -> None:
            os.makedirs(probes_dir, exist_ok=True)
            with open(os.path.join(probes_dir, self.name), "w") as f:
                json.dump(self.tally.to_dict(), f)

    event_type = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(wc.BOUND_MS)
    ).with_timestamp_assigner(EventTime())
    source = NumberSequenceSource(0, args.records - 1)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .map(ToEvent(), output_type=event_type)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda e: e[0], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Time.milliseconds(wc.WINDOW_MS)))
        .aggregate(
            CountSum(),
            WithWindow(),
            accumulator_type=Types.TUPLE([Types.LONG(), Types.LONG()]),
            output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()]),
        )
        .map(Tally(), output_type=Types.LONG())
        .sink_to(Sink("org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink"))
    )
    return env


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    import pyflink

    if args.records % args.parallelism:
        raise SystemExit("--records must be a multiple of --parallelism (equal splits)")
    work = Path(args.work_dir)
    args.rest_port = free_port()
    env = build_job(args, work)
    client = env.execute_async("window")
    poller = CheckpointPoller(args.rest_port, str(client.get_job_id()))
    poller.start()
    client.get_job_execution_result().result()
    end = time.time()
    poller.stop.set()
    poller.poll()
    result = common.result_template(args, SYSTEM)
    result["versions"]["apache-flink"] = pyflink.version.__version__
    result["execution_mode"] = "thread"
    result["events_per_second"] = args.events_per_second
    result["elapsed_s"] = round(end - common.SCRIPT_START, 3)
    parts = wc.read_tallies(str(work / "probes"))
    result.update(
        wc.result_fields(parts, args.records, args.events_per_second, common.SCRIPT_START)
    )
    done = [poller.history[k] for k in sorted(poller.history)]
    durations = [float(c["end_to_end_duration"]) for c in done]
    result["checkpoints_completed"] = len(done)
    result["checkpoint_p50_ms"] = common.percentile(durations, 50)
    result["checkpoint_p99_ms"] = common.percentile(durations, 99)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--events-per-second", type=int, required=True)
    args = parser.parse_args()
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-pyflink-window-")
    result = run_job(args)
    result["work_dir"] = args.work_dir
    common.emit(result)
    sys.stdout.flush()
    os._exit(0)  # skip py4j's slow interpreter teardown; the JVM gateway exits with us


if __name__ == "__main__":
    main()
