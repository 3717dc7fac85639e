"""Which clock a timer is based on (``pyflink.datastream.TimeDomain``).

Invariant: Cairn fires PROCESSING_TIME timers only; EVENT_TIME exists for API compatibility
until event time is implemented.
"""

from __future__ import annotations

import enum

__all__ = ["TimeDomain"]


class TimeDomain(enum.Enum):
    EVENT_TIME = 0
    PROCESSING_TIME = 1
