"""``cairn demo skew`` end to end on local Spark: seed 000's skewed job, aligned and unaligned.

Called in-process through ``cairn.cli.main.main`` (the session's local Spark is reused). The
busy loop is cheaper than the demo's default (0.25 ms instead of 1 ms per record) so that an
aligned checkpoint, which waits behind every buffered record of the hot subtask, completes
within the short run; the backlog is the same, so aligned still takes much longer.
"""

from __future__ import annotations

from typing import Any

import pytest

from cairn.cli.main import main
from tests.integration.skew_table import duration_ms, skew_table


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_demo_skew_prints_aligned_and_unaligned_side_by_side(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "demo",
            "skew",
            "--seconds",
            "8",
            "--variants",
            "aligned,unaligned",
            "--record-cost-ms",
            "0.25",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    rows = skew_table(out)
    assert list(rows) == ["aligned", "unaligned"], out
    for row in rows.values():
        assert int(row["completed"]) >= 1, out
        assert int(row["failed"]) == 0, out
        assert float(row["map rec/s"].replace(",", "")) > 0, out
    aligned, unaligned = rows["aligned"], rows["unaligned"]
    assert aligned["unaligned"] == f"0/{aligned['completed']}", out
    assert aligned["persisted max"] == "0 B", out
    # Every unaligned checkpoint overtook the backlog and persisted (part of) it.
    assert unaligned["unaligned"] == f"{unaligned['completed']}/{unaligned['completed']}", out
    assert unaligned["persisted max"] != "0 B", out
    assert duration_ms(unaligned["e2e p50"]) < duration_ms(aligned["e2e p50"]), out
