"""Publishing a completed checkpoint: the step that makes it visible to a restore.

Invariant: a checkpoint's ``_metadata`` is written last (its state files are already there),
after the ``before_publish`` hook; under high availability (a ``Fence``) it is written only
exclusively (never over another leader's) and then recorded in the HA pointer, and if a newer
leader refuses that record the ``_metadata`` is withdrawn again, so no driver that lost its
leadership leaves a checkpoint the pointer does not name. A savepoint is copied into its own
target directory and published there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from cairn.checkpoint.ha.fence import Fence, LeadershipLost
from cairn.checkpoint.metadata import CheckpointMetadata, CompletedCheckpoint
from cairn.checkpoint.storage import CheckpointStorage
from cairn.ids import CheckpointId, JobId

__all__ = ["CheckpointPublisher"]

log = logging.getLogger(__name__)


class CheckpointPublisher:
    """Publishes job ``job_id``'s checkpoints to ``storage``, under ``fence`` if given.

    ``before_publish`` is called with a checkpoint's id once its ``_metadata`` is written
    aside, before it is published (recovery tests lose the driver there:
    ``runtime/faults.py``).
    """

    def __init__(
        self,
        job_id: JobId,
        storage: CheckpointStorage,
        fence: Fence | None,
        before_publish: Callable[[CheckpointId], None] | None = None,
    ) -> None:
        self._job_id = job_id
        self._storage = storage
        self._fence = fence
        self._before_publish = before_publish

    def leads(self, action: str) -> bool:
        """Whether this driver may ``action`` now (always, without high availability)."""
        if self._fence is None:
            return True
        try:
            self._fence.check(action)
        except LeadershipLost as e:
            log.error("Job %s: %s", self._job_id, e)
            return False
        return True

    def publish_savepoint(
        self, metadata: CheckpointMetadata, target_dir: str
    ) -> CompletedCheckpoint:
        return self._storage.write_savepoint(metadata, target_dir)

    def publish_checkpoint(
        self, cid: CheckpointId, metadata: CheckpointMetadata
    ) -> CompletedCheckpoint:
        """Write ``chk-<cid>/_metadata``; under HA record it in the pointer too.

        Raises:
            LeadershipLost: a newer leader refused the record (the ``_metadata`` is withdrawn).
        """
        hook = self._before_publish
        before = None if hook is None else lambda: hook(cid)
        # Under HA: never over another leader's _metadata; the pointer has the last word.
        exclusive = self._fence is not None
        completed = self._storage.write_metadata(metadata, before, exclusive)
        if self._fence is not None:
            self._record_in_pointer(self._fence, cid, completed.directory)
        return completed

    def _record_in_pointer(self, fence: Fence, cid: CheckpointId, directory: str) -> None:
        """Record ``cid`` in the HA pointer; if a newer leader refuses it, withdraw the
        ``_metadata`` just written (exclusively: ours) and raise ``LeadershipLost``."""
        try:
            fence.checkpoint_completed(cid, directory)
        except LeadershipLost:
            try:
                self._storage.withdraw_metadata(cid)
            except Exception:  # left: an incomplete checkpoint no pointer names
                log.warning("Could not withdraw the _metadata of checkpoint %d", cid)
            raise
