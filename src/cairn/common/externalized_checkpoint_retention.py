"""What happens to retained checkpoints when a job is cancelled (PyFlink
``ExternalizedCheckpointRetention``, formerly ``ExternalizedCheckpointCleanup``).

Invariant: the two names are one enum, so values from either compare equal; members map 1:1
onto ``cairn.settings.RetentionPolicy`` by name.
"""

from __future__ import annotations

import enum

from cairn.settings import RetentionPolicy

__all__ = ["ExternalizedCheckpointCleanup", "ExternalizedCheckpointRetention"]


class ExternalizedCheckpointRetention(enum.Enum):
    """Retention of checkpoints on cancellation.

    >>> ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION.to_policy()
    <RetentionPolicy.RETAIN_ON_CANCELLATION: 'RETAIN_ON_CANCELLATION'>
    """

    DELETE_ON_CANCELLATION = 0
    """Delete retained checkpoints when the job is cancelled (kept if it fails)."""
    RETAIN_ON_CANCELLATION = 1
    """Keep retained checkpoints when the job is cancelled; delete them by hand."""
    NO_EXTERNALIZED_CHECKPOINTS = 2
    """Checkpoints are deleted when the job ends in any way."""

    def to_policy(self) -> RetentionPolicy:
        return RetentionPolicy[self.name]


ExternalizedCheckpointCleanup = ExternalizedCheckpointRetention
