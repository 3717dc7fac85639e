"""The retained completed checkpoints of a job (Flink's CompletedCheckpointStore) and their cleaner.

Invariant: the store holds at most ``retained`` checkpoints ordered by id; adding one subsumes
the oldest beyond that count, whose files are deleted only if this job owns them (a checkpoint
the job was started from belongs to the user, as in Flink's NO_CLAIM restore mode).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from cairn.checkpoint.metadata import CompletedCheckpoint
from cairn.checkpoint.protocol import checkpoints_to_discard
from cairn.ids import CheckpointId

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Entry:
    checkpoint: CompletedCheckpoint
    owned: bool


class CompletedCheckpointStore:
    """Completed checkpoints, newest last.

    ``discard`` deletes an owned checkpoint's files; its errors are logged, never raised,
    because a failed cleanup must not fail the checkpoint that subsumed it.
    """

    def __init__(self, retained: int, discard: Callable[[CompletedCheckpoint], None]) -> None:
        if retained < 1:
            raise ValueError(f"retained must be >= 1, got {retained}")
        self._retained = retained
        self._discard = discard
        self._entries: list[_Entry] = []

    def add(self, checkpoint: CompletedCheckpoint, owned: bool = True) -> list[CompletedCheckpoint]:
        """Add ``checkpoint``; return the subsumed ones (already discarded if owned)."""
        self._entries.append(_Entry(checkpoint, owned))
        self._entries.sort(key=lambda e: e.checkpoint.checkpoint_id)
        drop = set(
            checkpoints_to_discard(
                [e.checkpoint.checkpoint_id for e in self._entries], self._retained
            )
        )
        subsumed = [e for e in self._entries if e.checkpoint.checkpoint_id in drop]
        self._entries = [e for e in self._entries if e.checkpoint.checkpoint_id not in drop]
        for entry in subsumed:
            if entry.owned:
                self._safe_discard(entry.checkpoint)
        return [e.checkpoint for e in subsumed]

    def remove(self, checkpoint_id: CheckpointId) -> None:
        """Forget a checkpoint without touching its files (e.g. found unusable on restore)."""
        self._entries = [e for e in self._entries if e.checkpoint.checkpoint_id != checkpoint_id]

    def all(self) -> list[CompletedCheckpoint]:
        return [e.checkpoint for e in self._entries]

    def latest(self) -> CompletedCheckpoint | None:
        return self._entries[-1].checkpoint if self._entries else None

    def discard_all_owned(self) -> None:
        for entry in self._entries:
            if entry.owned:
                self._safe_discard(entry.checkpoint)
        self._entries = [e for e in self._entries if not e.owned]

    def _safe_discard(self, checkpoint: CompletedCheckpoint) -> None:
        try:
            self._discard(checkpoint)
        except Exception:  # cleanup is best effort; the files stay for the user to remove
            log.warning(
                "Could not discard checkpoint %s at %s",
                checkpoint.checkpoint_id,
                checkpoint.directory,
                exc_info=True,
            )
