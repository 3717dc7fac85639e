"""KeyedSum: Flink's keyed running sum example, with ``pyflink`` replaced by ``cairn``.

Invariant: for every key the job prints the running sums of that key's numbers in input order,
each number counted exactly once (here: the sums of the first n odd numbers are n squared).

Run it with ``cairn run --executor inprocess -p 2 examples/keyed_sum.py`` (or on local Spark
with ``cairn run examples/keyed_sum.py``, or ``python examples/keyed_sum.py``). Expected::

    even: 2 6 12 20 30 42 56 72 90 110
    odd: 1 4 9 16 25 36 49 64 81 100
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

from cairn.common import CheckpointingMode, Types
from cairn.datastream import (
    ExternalizedCheckpointCleanup,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.state import ValueStateDescriptor

NUMBERS = list(range(1, 21))


class KeyedSumFunction(KeyedProcessFunction[str, int, int]):
    """Flink's example function, verbatim: a running sum per key in ``ValueState``."""

    def open(self, runtime_context: Any) -> None:
        self.sum_state = runtime_context.get_state(ValueStateDescriptor("sum", Types.INT()))

    def process_element(self, value: int, ctx: Any) -> Iterator[int]:
        current_sum = self.sum_state.value() or 0
        updated_sum = current_sum + value
        self.sum_state.update(updated_sum)
        yield updated_sum


class LabelledKeyedSum(KeyedSumFunction):
    """The same sums, paired with their key so that the output can be printed per key."""

    def process_element(self, value: int, ctx: Any) -> Iterator[Any]:  # (key, sum)
        for total in super().process_element(value, ctx):
            yield ctx.get_current_key(), total


def parity(number: int) -> str:
    return "even" if number % 2 == 0 else "odd"


def build(env: StreamExecutionEnvironment) -> Any:
    """The checkpoint configuration of Flink's KeyedSum example and its pipeline."""
    env.enable_checkpointing(60000)
    config = env.get_checkpoint_config()
    config.set_checkpointing_mode(CheckpointingMode.EXACTLY_ONCE)
    config.set_min_pause_between_checkpoints(30000)
    config.set_checkpoint_timeout(120000)
    config.set_max_concurrent_checkpoints(1)
    config.enable_externalized_checkpoints(ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION)
    # Flink's example writes to file:///tmp/flink_checkpoints; a finished job deletes its own.
    config.set_checkpoint_storage(
        "file://" + os.path.join(tempfile.gettempdir(), "cairn-keyed-sum-checkpoints")
    )
    return env.from_collection(NUMBERS).key_by(parity).process(LabelledKeyedSum())


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    sums: dict[str, list[int]] = {}
    with build(env).execute_and_collect("keyed-sum") as results:
        for key, total in results:
            sums.setdefault(key, []).append(total)
    print(f"parallelism: {env.get_parallelism()}")
    for key in sorted(sums):
        print(f"{key}: {' '.join(str(total) for total in sums[key])}")


if __name__ == "__main__":
    main()
