"""``cairn chaos`` and a sink of the user's own: through the two optional methods every
``Sink`` has, ``Sink.redirected(name, directory)`` (a copy committing where nothing else
writes) and ``Sink.committed_records()`` (what that copy's committed output holds). Its
records carry no commit time (0: unknown).

Invariant: a sink whose ``redirected`` returns None is never run redirected and never
read: it is listed as not compared, and the reason says which methods would make it so.
"""

from __future__ import annotations

import os

from cairn.api.connectors import Sink
from cairn.cli.chaos_sinks import ChaosSinkError, Place, Redirection
from cairn.cli.chaos_verdict import Record

__all__ = ["redirect"]


def redirect(sink: Sink, place: Place) -> Redirection | None:
    """``sink.redirected(place.name, place.directory)``; None when the sink does not say
    where a test run of it may commit."""
    if type(sink).redirected is Sink.redirected:
        return None
    os.makedirs(place.directory, exist_ok=True)
    moved = sink.redirected(place.name, place.directory)
    if moved is None:
        return None
    if not isinstance(moved, Sink):
        raise ChaosSinkError(
            f"{type(sink).__name__}.redirected returned {type(moved).__name__}, not a Sink"
        )

    def read() -> list[Record]:
        records = moved.committed_records()
        if records is None:
            raise ChaosSinkError(
                f"{type(moved).__name__}.committed_records returned None after "
                "redirected() returned a sink: return the committed records"
            )
        return [Record(str(r), 0.0, f"{place.name}:{n}") for n, r in enumerate(records, 1)]

    return Redirection(moved, f"{type(sink).__name__} at {place.directory}", read)
