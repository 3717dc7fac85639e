"""``TimerService`` at PyFlink's path (``pyflink.datastream.timerservice``).

Invariant: a re-export only; the definitions live in ``cairn.api.timerservice``, below the
runtime and the state backends, which import them from there.
"""

from cairn.api.timerservice import (
    MIN_WATERMARK,
    TimerService,
)

__all__ = [
    "MIN_WATERMARK",
    "TimerService",
]
