"""``TimeDomain`` at PyFlink's path (``pyflink.datastream.time_domain``).

Invariant: a re-export only; the definitions live in ``cairn.api.time_domain``, below the
runtime and the state backends, which import them from there.
"""

from cairn.api.time_domain import (
    TimeDomain,
)

__all__ = [
    "TimeDomain",
]
