"""How ``cairn chaos`` points one kind of sink at a place of the run's own and reads back
what it committed: one ``redirect`` function per kind (``files``, ``jdbc``, ``kafka``, and
``own`` for a user's ``Sink`` that implements ``Sink.redirected``).

Invariant: a ``Redirection`` never writes where the user's sink writes: its sink is a copy
writing under the run's ``Place`` (a directory, table schema, topic or transaction prefix
derived from ``Place.name``, which is unique to the run and the sink), and ``read`` returns
only what was committed there (what a reader of that output would see). Redirecting the
same place twice (the segments of a ``--rescale`` run) is harmless: what exists is kept.

    >>> Place("cairn_chaos_ab12_faults_j1_s1", "/tmp/x").name
    'cairn_chaos_ab12_faults_j1_s1'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cairn.api.connectors import Sink
from cairn.cli.chaos_verdict import Record

__all__ = ["Place", "Redirect", "Redirection", "nothing_to_clean"]


@dataclass(frozen=True)
class Place:
    """Where one sink of one run commits: ``name`` (``[a-z0-9_]``, unique to the run and
    the sink) and ``directory`` (a local directory of its own, not yet created)."""

    name: str
    directory: str


def nothing_to_clean() -> None:
    """The ``cleanup`` of a redirection that leaves nothing outside the work directory."""


@dataclass(frozen=True)
class Redirection:
    """A sink pointed at a run's place: the copy to deploy, where it commits (as shown to
    a person), how to read what it committed, and what to remove once that was read."""

    sink: Sink
    where: str
    read: Callable[[], list[Record]]
    cleanup: Callable[[], None] = field(default=nothing_to_clean)


# A kind's redirect: None when ``sink`` is not of its kind; raises ``ChaosSinkError`` when it
# is but cannot be redirected (then the run must not start: it would write where the user's
# sink writes).
Redirect = Callable[[Sink, Place], Redirection | None]


class ChaosSinkError(RuntimeError):
    """A sink of a kind ``cairn chaos`` compares could not be pointed at a run's place."""
