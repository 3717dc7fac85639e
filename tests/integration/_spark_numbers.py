"""A table of ``(k, v)`` numbers from a paced generator on local Spark, checkpointed every
100 ms with restarts, for the Table API's Spark tests; ``faults`` injects worker kills."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cairn.common import Types
from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.table import Schema, StreamTableEnvironment


def numbers_table(
    tmp_path: Path,
    faults: str | None,
    value: Callable[[int], Any],
    records: int,
    per_second: int,
    row_type: Any = None,
    schema: Schema | None = None,
) -> tuple[StreamTableEnvironment, Any]:
    """The table environment and the table of ``value(i)`` for ``i < records`` (rows of
    ``row_type``, default ``(k STRING, v BIGINT)``, declared by ``schema`` if given)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = {
        "parallelism.default": "2",
        "execution.checkpointing.interval": "100 ms",
        "state.checkpoints.dir": (tmp_path / "chk").as_uri(),
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "100 ms",
    }
    if faults:
        conf["cairn.testing.faults"] = faults
    env.configure(conf)
    if row_type is None:
        row_type = Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()])
    rate = RateLimiterStrategy.per_second(per_second)
    source = DataGeneratorSource(value, records, rate, row_type)
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers", row_type)
    t_env = StreamTableEnvironment.create(env)
    if schema is not None:
        return t_env, t_env.from_data_stream(ds.uid("numbers"), schema)
    return t_env, t_env.from_data_stream(ds.uid("numbers"))
