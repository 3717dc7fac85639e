"""A job whose function counts, meters, gauges and measures what it sees with user-defined
metrics, run to its end on either executor (``test_user_metrics``, ``test_user_metrics_spark``)."""

from __future__ import annotations

from typing import Any

from cairn.common import Configuration, Types
from cairn.datastream import MapFunction, StreamExecutionEnvironment

__all__ = ["Measured", "run_measured"]


class Measured(MapFunction):
    """Counts records, meters them, gauges the last value and measures their sizes."""

    def open(self, runtime_context: Any) -> None:
        group = runtime_context.get_metrics_group().add_group("words")
        self.seen = group.counter("seen")
        self.rate = group.meter("per_second")
        self.sizes = group.distribution("length")
        self.last = 0
        group.gauge("last_length", lambda: self.last)

    def map(self, value: str) -> str:
        self.seen.inc()
        self.rate.mark_event()
        self.last = len(value)
        self.sizes.update(len(value))
        return value


def run_measured(executor: str, words: list[str]) -> Any:
    """``words`` -> rebalance -> ``Measured`` (operator ``measure``, p=2) -> print, run to
    the end on ``executor``; its job master."""
    conf = Configuration()
    conf.set_string("cairn.executor", executor)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.from_collection(words, Types.STRING()).rebalance().map(Measured()).name("measure").print()
    client = env.execute_async(f"user-metrics-{executor}")
    client.get_job_execution_result(timeout=240)
    return client.job_master
