"""The vocabulary of the RESULTS.md tables: runs grouped per case and system, cells, rows.

Invariant: pure: run records in, markdown text out; no file is read or written here and
nothing knows a particular workload, so every section renderer (``bench.report_sections``,
``bench.window_report``) formats a figure, names a system and says why a row is empty alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SYSTEM_NAMES",
    "Cell",
    "Group",
    "empty_row",
    "md_table",
    "num",
    "row_label",
    "system_name",
    "why_empty",
]

SYSTEM_NAMES = {
    "cairn": "Cairn",
    "pyflink": "PyFlink",
    "spark": "Spark SS",
    "spark-tws": "Spark SS (transformWithState)",
    "bytewax": "Bytewax",
    "bytewax-2p": "Bytewax (2 processes)",
}


@dataclass(frozen=True)
class Group:
    """All runs of one system on one case (a workload with its parameters)."""

    case: str  # e.g. "keyed-sum/checkpoints-1s"
    system: str
    runs: tuple[Mapping[str, Any], ...]

    def values(self, name: str) -> list[float]:
        return [
            float(r[name])
            for r in self.runs
            if isinstance(r.get(name), int | float) and not isinstance(r.get(name), bool)
        ]

    def cell(self, name: str) -> Cell:
        return Cell.of(self.values(name))

    @property
    def unsupported(self) -> str | None:
        return next((str(r["unsupported"]) for r in self.runs if r.get("unsupported")), None)

    @property
    def notes(self) -> list[str]:
        seen: list[str] = []
        for r in self.runs:
            note = r.get("note")
            if note and str(note) not in seen:
                seen.append(str(note))
        return seen


@dataclass(frozen=True)
class Cell:
    """Median with min-max of a metric over repeated runs.

    >>> str(Cell.of([3.0, 1.0, 2.0])), str(Cell.of([])), Cell.of([5]).median
    ('2 (1-3)', '—', 5)
    """

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Iterable[float]) -> Cell:
        return cls(tuple(sorted(values)))

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def format(self, digits: int = 0, scale: float = 1.0) -> str:
        if not self.values:
            return "—"
        med = self.median
        assert med is not None
        text = num(med * scale, digits)
        if self.values[0] != self.values[-1]:
            text += f" ({num(self.values[0] * scale, digits)}-"
            text += f"{num(self.values[-1] * scale, digits)})"
        return text

    def __str__(self) -> str:
        return self.format()


def num(x: float, digits: int) -> str:
    return f"{x:,.{digits}f}"


def system_name(system: str) -> str:
    return SYSTEM_NAMES.get(system, system)


def row_label(group: Group, repeat: int) -> str:
    """The system's name, with its number of runs where that differs from the rest."""
    n = len(group.runs)
    return system_name(group.system) + (f" ({n} run{'s' if n > 1 else ''})" if n != repeat else "")


def md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def why_empty(group: Group) -> str | None:
    """Why a system has no figures for a case (unsupported, or every run failed)."""
    if group.unsupported:
        return f"not run: {group.unsupported}"
    if not any(isinstance(r.get("elapsed_s"), int | float) for r in group.runs):
        errors = list(dict.fromkeys(str(r["error"]) for r in group.runs if r.get("error")))
        return "failed: " + ("; ".join(group.notes or errors) or "no result")
    return None


def empty_row(group: Group, repeat: int, width: int, *lead: str) -> tuple[str, ...] | None:
    """The row of a system with no figures for a case (``None`` if it has some): its name,
    the ``lead`` cells, why it is empty, blank cells up to ``width``.

    >>> empty_row(Group("c", "bytewax", ({"unsupported": "no API"},)), 1, 4, "1 s")
    ('Bytewax', '1 s', 'not run: no API', '')
    """
    why = why_empty(group)
    if not why:
        return None
    return (row_label(group, repeat), *lead, why, *[""] * (width - len(lead) - 2))
