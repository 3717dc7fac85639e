"""Reading back the table ``cairn demo skew`` prints (``cairn.experiments.skew``), for the
tests that run the demo: a row per variant, a cell per column of ``HEADERS``."""

from __future__ import annotations

import re

from cairn.experiments.skew import HEADERS


def skew_table(stdout: str) -> dict[str, dict[str, str]]:
    """The printed table: variant -> column -> cell."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("variant  "))
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(HEADERS), line
        rows[cells[0]] = dict(zip(HEADERS, cells, strict=True))
    return rows


def duration_ms(cell: str) -> float:
    """A duration cell (``"850 ms"``, ``"1.2 s"``) in milliseconds."""
    number, unit = cell.replace(",", "").split()
    return float(number) * (1000 if unit == "s" else 1)
