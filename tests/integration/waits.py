"""Waiting on a running job's progress, for the integration tests: committed output and
completed checkpoints. Each wait polls through ``cairn.testing.processes.wait_for`` and fails
with a ``TimeoutError`` saying what it waited for; each returns what it saw.
"""

from __future__ import annotations

from typing import Any

from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import read_visible_lines

__all__ = ["committed_lines", "completed_checkpoints"]


def committed_lines(
    out: str, at_least: int = 1, timeout: float = 120.0, interval: float = 0.1
) -> list[str]:
    """The committed (visible) lines under ``out`` once there are at least ``at_least``."""

    def enough() -> list[str] | None:
        lines = read_visible_lines(out)
        return lines if len(lines) >= at_least else None

    return wait_for(enough, timeout, interval, f"{at_least} committed lines under {out}")


def completed_checkpoints(
    client: Any, at_least: int, timeout: float = 30.0, interval: float = 0.01
) -> Any:
    """The job's checkpoint statistics once it has completed at least ``at_least``
    checkpoints (``client`` is a ``JobClient`` of a job with checkpointing enabled)."""

    def enough() -> Any:
        stats = client.get_checkpoint_statistics()
        return stats if stats is not None and stats.counts.completed >= at_least else None

    return wait_for(enough, timeout, interval, f"{at_least} completed checkpoints")
