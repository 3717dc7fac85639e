"""PyFlink 2.3 (thread mode) peer of the cost-at-a-rate benchmark (``python -m bench.cost_curve``),
run until killed.

Invariant: the job is ``NumberSequenceSource`` -> a Python map pacing each subtask to
``rate / parallelism`` records/s (``cost_common.Pacer``: record ``(key, 1, created_ns)``
stamped with its schedule, Cairn's key of the index) -> ``key_by`` -> ``KeyedProcessFunction``
counting per key in a ``ValueState`` -> a map chained to the sink stamping the arrival ->
``FileSink`` (row format, rolled at every checkpoint, exactly once), parallelism 2, 1 s
exactly-once checkpoints, hashmap state, the network buffer timeout ``--buffer-timeout-ms``
(Flink's default 100 ms); every committed line is ``key,count,created_ns,arrival_ns``. PyFlink
has no Python ``DataGeneratorSource``, hence the pacing map (as in ``pyflink_keyed_sum.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import common
import cost_common

GRANT_LIMIT = 1 << 20  # records one grant may release when behind schedule


def build_job(args: argparse.Namespace) -> Any:
    from pyflink.common import Configuration, Types
    from pyflink.common.serialization import Encoder
    from pyflink.common.watermark_strategy import WatermarkStrategy
    from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import BucketAssigner, FileSink, RollingPolicy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import KeyedProcessFunction, MapFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    conf = Configuration()
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("python.executable", sys.executable)
    conf.set_string("parallelism.default", str(args.parallelism))
    conf.set_string("taskmanager.numberOfTaskSlots", str(args.parallelism))
    conf.set_string("rest.address", "127.0.0.1")
    conf.set_string("rest.bind-address", "127.0.0.1")
    conf.set_string("rest.port", str(common.free_port()))
    conf.set_string("state.backend.type", "hashmap")
    conf.set_string("execution.checkpointing.dir", Path(args.work_dir, "checkpoints").as_uri())
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(args.checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    env.set_buffer_timeout(args.buffer_timeout_ms)

    keys = common.key_table(args.keys)
    rate_per_subtask = args.rate / args.parallelism
    golden, mask, n_keys = common.GOLDEN64, (1 << 64) - 1, len(keys)

    class Paced(MapFunction):
        """Index -> ``(key, 1, created_ns)``, released by the subtask's schedule."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.pacer = cost_common.Pacer(rate_per_subtask, time.time_ns())
            self.granted = 0
            self.n = 0

        def map(self, index: int) -> Any:
            if not self.granted:
                pacer = self.pacer
                self.n = pacer.next
                while True:
                    now = time.time_ns()
                    self.granted = pacer.grant(now, GRANT_LIMIT)
                    if self.granted:
                        break
                    time.sleep((pacer.ready_ns() - now) / 1e9)
            created = self.pacer.due_ns(self.n)
            self.n += 1
            self.granted -= 1
            return keys[(((index * golden) & mask) >> 32) % n_keys], 1, created

    class Count(KeyedProcessFunction):
        """The records of each key so far, in a ``ValueState``."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

        def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
            count = (self.count.value() or 0) + 1
            self.count.update(count)
            yield value[0], count, value[2]

    def stamp_arrival(value: Any) -> str:
        return f"{value[0]},{value[1]},{value[2]},{time.time_ns()}"

    record = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
    sink = (
        FileSink.for_row_format(args.out, Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )
    (
        env.from_source(
            NumberSequenceSource(0, (1 << 62) - 1), WatermarkStrategy.no_watermarks(), "numbers"
        )
        .map(Paced(), output_type=record)
        .key_by(lambda r: r[0], key_type=Types.STRING())
        .process(Count(), output_type=record)
        .map(stamp_arrival, output_type=Types.STRING())
        .sink_to(sink)
    )
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    cost_common.add_cost_args(parser)
    parser.add_argument("--buffer-timeout-ms", type=int, default=100)
    args = parser.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    build_job(args).execute("cost-at-a-rate")  # runs until the harness kills it


if __name__ == "__main__":
    main()
