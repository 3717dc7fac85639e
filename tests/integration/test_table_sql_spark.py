"""A SQL job on local Spark: a ``datagen`` table, a retracting ``GROUP BY``, a worker killed.

The datagen table's rows are a pure function of their index, checkpointed as the source's
split positions; after a worker is SIGKILLed mid-run the job restores from the latest
checkpoint, and the changelog the client received must end at the batch aggregation of the
rows, each retraction matching the row the view holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.table import EnvironmentSettings, TableEnvironment

pytestmark = pytest.mark.spark

ROWS = 3_000
KEYS = 7


def test_a_sql_group_by_over_datagen_stays_exactly_once_when_a_worker_is_killed(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "fault-marker"
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    for key, value in {
        "parallelism.default": "2",
        "execution.checkpointing.interval": "100 ms",
        "state.checkpoints.dir": (tmp_path / "chk").as_uri(),
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "100 ms",
        "cairn.testing.faults": (
            f"point=processing,attempt=0,records=1000,subtask=1,marker={marker}"
        ),
    }.items():
        config.set(key, value)
    t_env.execute_sql(
        f"CREATE TABLE numbers (id BIGINT) WITH ('connector' = 'datagen',"
        f" 'rows-per-second' = '3000', 'fields.id.kind' = 'sequence',"
        f" 'fields.id.start' = '1', 'fields.id.end' = '{ROWS}')"
    )
    result = t_env.execute_sql(
        f"SELECT k, SUM(id) AS total, COUNT(*) AS n"
        f" FROM (SELECT MOD(id, {KEYS}) AS k, id FROM numbers) GROUP BY k"
    )
    view: dict[Any, tuple[int, int]] = {}
    for row in result.collect():
        kind, key, value = row.get_row_kind().short_string(), row.k, (row.total, row.n)
        if kind in ("+I", "+U"):
            assert kind == "+U" or key not in view, f"a second +I for {key}: a duplicate"
            view[key] = value
        else:
            assert view.pop(key) == value, f"{kind} {value} for {key} retracts another row"
    assert marker.exists() and "processing" in marker.read_text(), "the fault did not fire"
    expected: dict[Any, tuple[int, int]] = {}
    for i in range(1, ROWS + 1):
        total, n = expected.get(i % KEYS, (0, 0))
        expected[i % KEYS] = (total + i, n + 1)
    assert view == expected
