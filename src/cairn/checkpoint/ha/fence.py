"""What the checkpoint coordinator asks before it acts for a job under high availability.

Invariant: a coordinator given a ``Fence`` writes a checkpoint's ``_metadata``, records it
as the job's latest, tells the tasks it completed (sinks commit) and deletes checkpoint files
only while ``check`` passes; once it failed, it never passes again in this process.
"""

from __future__ import annotations

from typing import Protocol

from cairn.ids import CheckpointId

__all__ = ["Fence", "LeadershipLost"]


class LeadershipLost(Exception):
    """This driver no longer leads its job: it must not complete, commit or delete."""


class Fence(Protocol):
    def check(self, action: str) -> None:
        """Raise ``LeadershipLost`` unless this driver still leads (``action``: what it was
        about to do, for the log)."""
        ...

    def holds(self) -> bool:
        """Whether this driver still leads (as ``check``, without raising)."""
        ...

    def checkpoint_completed(self, checkpoint_id: CheckpointId, directory: str) -> None:
        """Point the job's HA pointer at a checkpoint whose ``_metadata`` was written; raise
        ``LeadershipLost`` if a newer leader wrote the pointer."""
        ...
