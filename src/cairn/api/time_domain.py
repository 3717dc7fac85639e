"""Which clock a timer is based on (``pyflink.datastream.TimeDomain``).

Invariant: ``OnTimerContext.time_domain()`` is EVENT_TIME for a timer a watermark fired and
PROCESSING_TIME for one the wall clock fired.
"""

from __future__ import annotations

import enum

__all__ = ["TimeDomain"]


class TimeDomain(enum.Enum):
    EVENT_TIME = 0
    PROCESSING_TIME = 1
