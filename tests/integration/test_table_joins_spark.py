"""A full outer join of two updating tables and an event-time interval join on local Spark,
checkpointed every 100 ms, with a worker SIGKILLed mid-run: the changelog the client collects
(released only with completed checkpoints) retracts only rows its view holds, and its final
view equals the join computed in Python from the input — nothing lost, nothing twice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cairn.common import Types
from cairn.common.time import Instant
from cairn.table import DataTypes, Schema
from cairn.table.expressions import col, lit
from cairn.testing.changelog import rows_view

from ._spark_numbers import numbers_table

pytestmark = pytest.mark.spark

RECORDS = 3_000


def _value(i: int) -> Any:
    # even i: the left side, keys k0..k6; odd i: the right side, keys k4..k8
    return (f"k{i % 7}" if i % 2 == 0 else f"k{i % 5 + 4}", i)


def _faults(marker: Path) -> str:
    return f"point=processing,attempt=0,records=800,subtask=1,marker={marker}"


def test_a_full_outer_join_of_updating_tables_survives_a_killed_worker(tmp_path: Path) -> None:
    marker = tmp_path / "fault-marker"
    _, numbers = numbers_table(tmp_path, _faults(marker), _value, RECORDS, 3_000)
    left = (
        numbers.filter(col("v") % 2 == 0)
        .group_by(col("k"))
        .select(col("k"), col("v").sum.alias("total"))
    )
    right = (
        numbers.filter(col("v") % 2 == 1)
        .group_by(col("k"))
        .select(col("k").alias("rk"), col("v").count.alias("n"))
    )
    view = rows_view(list(left.full_outer_join(right, col("k") == col("rk")).execute().collect()))
    assert marker.exists() and "processing" in marker.read_text(), "the fault did not fire"
    totals: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for i in range(RECORDS):
        k, v = _value(i)
        if v % 2 == 0:
            totals[k] += v
        else:
            counts[k] += 1
    expected = Counter(
        (k if k in totals else None, totals.get(k), k if k in counts else None, counts.get(k))
        for k in set(totals) | set(counts)
    )
    assert view == expected


def _timed(i: int) -> Any:
    return (*_value(i), Instant.of_epoch_milli(i * 10))  # each row 10 ms after the last


def test_an_interval_join_survives_a_killed_worker(tmp_path: Path) -> None:
    marker = tmp_path / "fault-marker"
    row_type = Types.ROW_NAMED(["k", "v", "at"], [Types.STRING(), Types.LONG(), Types.INSTANT()])
    schema = (
        Schema.new_builder()
        .column("k", DataTypes.STRING())
        .column("v", DataTypes.BIGINT())
        .column_by_expression("ts", "CAST(at AS TIMESTAMP(3))")
        .watermark("ts", "ts - INTERVAL '1' HOUR")  # no row is late
        .build()
    )
    _, timed = numbers_table(tmp_path, _faults(marker), _timed, RECORDS, 3_000, row_type, schema)
    left = timed.filter(col("v") % 2 == 0).select(col("k"), col("v"), col("ts"))
    right = timed.filter(col("v") % 2 == 1).select(
        col("k").alias("rk"), col("v").alias("rv"), col("ts").alias("rts")
    )
    near = col("ts").between(col("rts") - lit(50).milli, col("rts") + lit(30).milli)
    joined = left.full_outer_join(right, (col("k") == col("rk")) & near)
    assert "IntervalJoin(joinType=[FullOuterJoin]" in joined.explain()
    got: Counter[tuple[Any, ...]] = Counter()
    for r in joined.execute().collect():
        assert r.get_row_kind().short_string() == "+I"
        got[(r[0], r[1], r[3], r[4])] += 1
    assert marker.exists() and "processing" in marker.read_text(), "the fault did not fire"
    rows = [_value(i) for i in range(RECORDS)]
    lefts = [(k, v) for k, v in rows if v % 2 == 0]
    rights = [(k, v) for k, v in rows if v % 2 == 1]
    expected: Counter[tuple[Any, ...]] = Counter()
    matched: set[int] = set()
    for k, v in lefts:
        for rk, rv in rights:
            if k == rk and -50 <= (v - rv) * 10 <= 30:
                expected[(k, v, rk, rv)] += 1
                matched.update((v, rv))
    expected.update((k, v, None, None) for k, v in lefts if v not in matched)
    expected.update((None, None, k, v) for k, v in rights if v not in matched)
    assert len(matched) > 100 and len(matched) < RECORDS, "pairs joined, others padded"
    assert got == expected
