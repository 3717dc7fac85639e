"""The checkpoint coordinator's way out to the running attempt of a job master.

Invariant: this is the only place a checkpoint's completion reaches the tasks (and so the
only trigger of sink commits besides a restore); under high availability it is sent only
while the job master's driver still leads the job, checked just before it goes out.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.deploy import control_messages as p
from cairn.events import CheckpointBarrier
from cairn.ids import CheckpointId

if TYPE_CHECKING:
    from cairn.deploy.job_master import JobMaster

__all__ = ["CoordinatorGatewayOf"]

log = logging.getLogger(__name__)


class CoordinatorGatewayOf:
    """What the checkpoint coordinator may do to the job master's running attempt."""

    def __init__(self, master: JobMaster) -> None:
        self._m = master

    def trigger_sources(self, barrier: CheckpointBarrier) -> None:
        self._m._broadcast_current(p.TriggerCheckpoint(barrier))

    def notify_complete(self, checkpoint_id: CheckpointId) -> None:
        leadership = self._m.leadership
        if leadership is not None and not leadership.holds():
            log.error(
                "not announcing checkpoint %d: this driver lost its leadership", checkpoint_id
            )
            return
        self._m._broadcast_current(p.NotifyCheckpointComplete(checkpoint_id))
        self._m._emit("checkpoint", checkpoint_id)

    def notify_aborted(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason, message: str
    ) -> None:
        self._m._broadcast_current(p.NotifyCheckpointAborted(checkpoint_id, reason))

    def fail_job(self, reason: str) -> None:
        self._m._fail_current(reason)
