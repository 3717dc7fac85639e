"""A streaming anti join (``NOT EXISTS``, correlated) on local Spark with 300 ms exactly-once
checkpoints while a worker is SIGKILLed mid-run: the changelog the client collects retracts
only rows its view holds, and its final view equals the same query's run in-process without a
fault. The anti join retracts an auction when its first bid arrives, so the restored keyed
state of both sides (each auction's count of matching bids) is what decides the output.

The ``nexmark`` source is paced (``max-emit-speed`` off), so the kill lands while events still
flow; the fault's marker file proves it fired, the checkpoint statistics that the job
restored.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table import EnvironmentSettings, TableEnvironment
from cairn.table.sql.script import split_statements
from cairn.testing.changelog import rows_view

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

DDL = Path(__file__).resolve().parents[2] / "bench" / "nexmark" / "ddl.sql"
EVENTS, RATE = 3_000, 1_000

QUERY = (
    "SELECT a.id, a.seller FROM auction a"
    " WHERE NOT EXISTS (SELECT 1 FROM bid b WHERE b.auction = a.id AND b.price > 1000)"
)


def _view(config: dict[str, str]) -> tuple[Counter[tuple[Any, ...]], Any]:
    text = DDL.read_text()
    options = {"events.num": str(EVENTS), "first-event.rate": str(RATE)}
    for key, value in options.items():
        text = re.sub(rf"'{re.escape(key)}' = '[^']*'", f"'{key}' = '{value}'", text)
    speed = "'max-emit-speed' = 'false'," if config["cairn.executor"] == "spark" else ""
    text = text.replace(
        "'connector' = 'nexmark',", f"'connector' = 'nexmark', 'seed' = '5',{speed}"
    )
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for key, value in config.items():
        t_env.get_config().set(key, value)
    for _, statement in split_statements(text):
        t_env.execute_sql(statement)
    result = t_env.execute_sql(QUERY)
    return rows_view(result.collect()), result.get_job_client()


def test_an_anti_join_survives_a_killed_worker(tmp_path: Path) -> None:
    marker = tmp_path / "fault-marker"
    try:
        expected, _ = _view({"cairn.executor": "inprocess", "parallelism.default": "2"})
        got, client = _view(
            {
                "cairn.executor": "spark",
                "parallelism.default": "2",
                "state.backend.type": "rocksdb",
                "execution.checkpointing.interval": "300 ms",
                "state.checkpoints.dir": (tmp_path / "chk").as_uri(),
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": "3",
                "restart-strategy.fixed-delay.delay": "100 ms",
                "cairn.testing.faults": (
                    f"point=processing,attempt=0,records={EVENTS // 3},subtask=1,marker={marker}"
                ),
            }
        )
    finally:
        reset_context_defaults()
    assert marker.exists() and "processing" in marker.read_text(), "the fault did not fire"
    assert client.get_checkpoint_statistics().latest_restored is not None, "no restore"
    assert sum(expected.values()) >= 5, "the query gave rows to compare"
    assert got == expected
