"""A pandas (vectorized) scalar function in a table job on local Spark, with checkpoints: the
same results as the general function computing the same values, also when a worker is
SIGKILLed mid-run and the job restores from its latest checkpoint.

Each row's value goes through a pandas function (a batch of rows per call) and through a
general one (a row per call); a retracting ``GROUP BY`` sums both per key. The changelog the
client collected (released with completed checkpoints) must end, per key, in the two sums
being equal to each other and to the sums computed here from the input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cairn.table import DataTypes
from cairn.table.expressions import col
from cairn.table.udf import udf

from ._spark_numbers import numbers_table

pytestmark = pytest.mark.spark

RECORDS = 4_000
KEYS = 5


def _value(i: int) -> Any:
    return (f"k{i % KEYS}", None if i % 11 == 0 else i)


@udf(result_type=DataTypes.BIGINT(), func_type="pandas")
def score_batch(v: pd.Series) -> pd.Series:
    return v * 3 + 1


@udf(result_type=DataTypes.BIGINT())
def score_row(v: int | None) -> int | None:
    return None if v is None else v * 3 + 1


def _job(tmp_path: Path, faults: str | None) -> Any:
    t_env, table = numbers_table(tmp_path, faults, _value, RECORDS, 3_000)
    t_env.get_config().set("python.fn-execution.arrow.batch.size", "64")
    scored = table.select(
        col("k"), score_batch(col("v")).alias("p"), score_row(col("v")).alias("g")
    )
    return scored.group_by(col("k")).select(
        col("k"), col("p").sum.alias("p"), col("g").sum.alias("g"), col("k").count.alias("n")
    )


def _final(rows: list[Any]) -> dict[str, tuple[int, int, int]]:
    view: dict[str, tuple[int, int, int]] = {}
    for r in rows:
        kind = r.get_row_kind().short_string()
        if kind == "-U":
            assert view.get(r.k) == (r.p, r.g, r.n), f"-U of a row {r.k} does not hold"
        elif kind in ("+I", "+U"):
            view[r.k] = (r.p, r.g, r.n)
    return view


def _expected() -> dict[str, tuple[int, int, int]]:
    out: dict[str, tuple[int, int, int]] = {}
    for i in range(RECORDS):
        k, v = _value(i)
        total, _, n = out.get(k, (0, 0, 0))
        total += 0 if v is None else v * 3 + 1
        out[k] = (total, total, n + 1)
    return out


def test_a_pandas_udf_job_restores_and_matches_the_general_udf(tmp_path: Path) -> None:
    marker = tmp_path / "fault-marker"
    faults = f"point=processing,attempt=0,records=1500,subtask=1,marker={marker}"
    result = _job(tmp_path, faults).execute()
    view = _final(list(result.collect()))
    assert marker.exists() and "processing" in marker.read_text(), "the fault did not fire"
    assert all(p == g for p, g, _ in view.values())
    assert view == _expected()
