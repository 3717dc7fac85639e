"""Checkpointing consistency modes (PyFlink ``CheckpointingMode``).

Invariant: ``EXACTLY_ONCE`` runs aligned barriers (``AlignmentMode.ALIGNED``), ``AT_LEAST_ONCE``
only counts barriers and never blocks a channel (``AlignmentMode.AT_LEAST_ONCE``).
"""

from __future__ import annotations

import enum

from cairn.events import AlignmentMode

__all__ = ["CheckpointingMode"]


class CheckpointingMode(enum.Enum):
    """The consistency guarantee of checkpoints.

    >>> CheckpointingMode.EXACTLY_ONCE.to_alignment_mode()
    <AlignmentMode.ALIGNED: 'aligned'>
    """

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1

    def to_alignment_mode(self) -> AlignmentMode:
        if self is CheckpointingMode.EXACTLY_ONCE:
            return AlignmentMode.ALIGNED
        return AlignmentMode.AT_LEAST_ONCE
