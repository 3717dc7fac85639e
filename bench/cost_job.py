"""Cairn's job of the cost-at-a-rate benchmark (``python -m bench.cost_curve``), written
against the PyFlink-compatible API as a user would, run until killed.

Invariant: the job is ``DataGeneratorSource`` paced by ``RateLimiterStrategy.per_second(rate)``
(records ``(key, 1, created_ns)``, stamped with their schedule) -> ``key_by`` -> a
``KeyedProcessFunction`` counting per key in a ``ValueState`` -> a map chained to the sink that
stamps the arrival -> ``FileSink`` (row format, exactly once), at parallelism 2 with 1 s
exactly-once checkpoints on local Spark; every committed line is
``key,count,created_ns,arrival_ns``.

    python -m bench.cost_job --rate 1000 --out /tmp/cost/out --work-dir /tmp/cost
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))

import cost_common  # noqa: E402

from bench.cairn_functions import TimedKeyedValuesGenerator  # noqa: E402
from cairn.common import Configuration, Types, WatermarkStrategy  # noqa: E402
from cairn.common.serialization import Encoder  # noqa: E402
from cairn.datastream import (  # noqa: E402
    CheckpointingMode,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.connectors.datagen import (  # noqa: E402
    DataGeneratorSource,
    RateLimiterStrategy,
)
from cairn.datastream.connectors.file_system import FileSink  # noqa: E402
from cairn.datastream.state import ValueStateDescriptor  # noqa: E402

__all__ = ["Count", "build_job", "stamp_arrival"]


class Count(KeyedProcessFunction):
    """The records of each key so far, in a ``ValueState``: emits ``(key, count, created_ns)``."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Iterator[tuple[str, int, int]]:
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        yield value[0], count, value[2]


def stamp_arrival(value: tuple[str, int, int]) -> str:
    """The sink's line: ``key,count,created_ns,arrival_ns`` (arrival: now, at the sink)."""
    return f"{value[0]},{value[1]},{value[2]},{time.time_ns()}"


def build_job(args: argparse.Namespace) -> Any:
    """The environment holding the job (see the module's invariant)."""
    conf = Configuration()
    for item in args.conf:
        key, _, value = item.partition("=")
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(args.checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    env.get_checkpoint_config().set_checkpoint_storage(
        Path(args.work_dir, "checkpoints").resolve().as_uri()
    )
    source = DataGeneratorSource(
        TimedKeyedValuesGenerator(args.keys, args.rate),
        None,
        RateLimiterStrategy.per_second(args.rate),
    )
    sink = FileSink.for_row_format(args.out, Encoder.simple_string_encoder()).build()
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "generator")
        .uid("generator")
        .key_by(lambda r: r[0], key_type=Types.STRING())
        .process(Count(), output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]))
        .uid("count")
        .map(stamp_arrival, output_type=Types.STRING())
        .uid("stamp-arrival")
        .sink_to(sink)
        .uid("file-sink")
    )
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cost_job", description=__doc__)
    cost_common.add_cost_args(parser)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    build_job(args).execute("cost-at-a-rate")  # runs until the harness kills it
    return 0


if __name__ == "__main__":
    sys.exit(main())
