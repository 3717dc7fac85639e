"""Table API jobs on local Spark: the same results as in process, and exactly-once changelogs
when a worker is SIGKILLed mid-run.

A retracting ``GROUP BY`` over a rate-limited source runs with 100 ms checkpoints; a worker
is killed after it processed a chosen number of records (the fault's marker file proves it
fired there), the job restores its keyed accumulators from the latest checkpoint, and the
changelog the client collected (released only with completed checkpoints) must be one a
fault-free run could have produced: per key one ``+I`` then one ``-U``/``+U`` pair per
further record, every retraction matching the row the view holds, and a final view equal to
the batch aggregation of the input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.table import DataTypes
from cairn.table.expressions import col

from ._spark_numbers import numbers_table

pytestmark = pytest.mark.spark

RECORDS = 6_000
KEYS = 7


def _value(i: int) -> Any:
    return (f"k{i % KEYS}", i + 1)


def _job(tmp_path: Path, faults: str | None) -> Any:
    _, table = numbers_table(tmp_path, faults, _value, RECORDS, 4_000)
    return table.group_by(col("k")).select(
        col("k"), col("v").sum.alias("total"), col("v").count.alias("n")
    )


def _check_changelog(rows: list[Any]) -> dict[str, tuple[int, int]]:
    view: dict[str, tuple[int, int]] = {}
    changes: dict[str, int] = {}
    for r in rows:
        kind, key, value = r.get_row_kind().short_string(), r.k, (r.total, r.n)
        changes[key] = changes.get(key, 0) + 1
        if kind == "+I":
            assert key not in view, f"a second +I for {key}: a duplicate"
            view[key] = value
        elif kind == "-U":
            assert view.get(key) == value, f"-U {value} for {key} retracts {view.get(key)}"
        elif kind == "+U":
            assert value[1] == view[key][1] + 1, f"{key} skipped or repeated a record"
            view[key] = value
        else:
            raise AssertionError(f"unexpected {kind}")
    for key, (_, n) in view.items():
        assert changes[key] == 1 + 2 * (n - 1), f"{key}: {changes[key]} changes for {n} rows"
    return view


def _expected() -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for i in range(RECORDS):
        k, v = _value(i)
        total, n = out.get(k, (0, 0))
        out[k] = (total + v, n + 1)
    return out


def test_a_group_by_on_spark_gives_the_in_process_result(tmp_path: Path) -> None:
    summed = _job(tmp_path, None)
    view = _check_changelog(list(summed.execute().collect()))
    assert view == _expected()
    assert str(summed.get_schema().types[1]) == "BIGINT"
    assert DataTypes.BIGINT(False) == summed.get_schema().types[2]


def test_a_group_by_stays_exactly_once_when_a_worker_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "fault-marker"
    faults = f"point=processing,attempt=0,records=2000,subtask=1,marker={marker}"
    summed = _job(tmp_path, faults)
    result = summed.execute()
    view = _check_changelog(list(result.collect()))
    assert marker.exists() and "processing" in marker.read_text(), "the fault did not fire"
    assert view == _expected()
