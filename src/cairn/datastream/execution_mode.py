"""Runtime execution modes (``pyflink.datastream.RuntimeExecutionMode``).

Invariant: STREAMING runs a job as one pipelined streaming job; BATCH runs a bounded job
stage by stage (``cairn.batch``, see docs/batch-mode.md); AUTOMATIC is BATCH when every
source of the job is bounded, STREAMING otherwise (Flink's rule).
"""

from __future__ import annotations

import enum

__all__ = ["RuntimeExecutionMode"]


class RuntimeExecutionMode(enum.Enum):
    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2
