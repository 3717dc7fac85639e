"""Runtime execution modes (``pyflink.datastream.RuntimeExecutionMode``).

Invariant: Cairn executes every job in streaming mode; AUTOMATIC means STREAMING, and BATCH is
rejected at submission.
"""

from __future__ import annotations

import enum

__all__ = ["RuntimeExecutionMode"]


class RuntimeExecutionMode(enum.Enum):
    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2
