"""The checkpoint coordinator's way out to the running attempt of a job master.

Invariant: this is the only place a checkpoint's completion reaches the tasks (and so the
only trigger of sink commits besides a restore); under high availability it is sent only
while the job master's driver still leads the job, checked just before it goes out.
"""

from __future__ import annotations

import logging

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.deploy import control_messages as p
from cairn.deploy.job_master_ports import AttemptPort
from cairn.events import CheckpointBarrier
from cairn.ids import CheckpointId

__all__ = ["CoordinatorGatewayOf"]

log = logging.getLogger(__name__)


class CoordinatorGatewayOf:
    """What the checkpoint coordinator may do to the job master's running attempt."""

    def __init__(self, attempt: AttemptPort) -> None:
        self._m = attempt

    def trigger_sources(self, barrier: CheckpointBarrier) -> None:
        self._m.broadcast_to_current(p.TriggerCheckpoint(barrier))

    def notify_complete(self, checkpoint_id: CheckpointId) -> None:
        if not self._m.leads():
            log.error(
                "not announcing checkpoint %d: this driver lost its leadership", checkpoint_id
            )
            return
        self._m.broadcast_to_current(p.NotifyCheckpointComplete(checkpoint_id))
        self._m.emit("checkpoint", checkpoint_id)

    def notify_aborted(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason, message: str
    ) -> None:
        self._m.broadcast_to_current(p.NotifyCheckpointAborted(checkpoint_id, reason))

    def fail_job(self, reason: str) -> None:
        self._m.fail_current(reason)
