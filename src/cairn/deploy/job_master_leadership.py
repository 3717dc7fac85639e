"""The job master's side of high availability: stand by, then start as the leader.

Invariant: ``lead`` returns True only once the driver holds the lease, renews it on its own
thread, has planned its run, and knows where to resume (the HA pointer's checkpoint, or the
run-status record's when there is no pointer yet); a lost lease reaches the job master's
thread as a ``LostLeadership`` message, which ends the attempt SUSPENDED.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cairn.deploy.control_server import Envelope
from cairn.deploy.high_availability import End, LostLeadership, await_leadership
from cairn.deploy.warm_standby import warm_standby_for

if TYPE_CHECKING:
    from cairn.deploy.job_master import JobMaster

__all__ = ["lead"]

log = logging.getLogger(__name__)


def lead(master: JobMaster) -> bool:
    """Stand by until ``master``'s driver leads its job; False if it must not run it (the
    leader ended the job meanwhile, or it was cancelled or fenced). True without HA."""
    ha, coordinator = master.leadership, master.coordinator
    if ha is None:
        return True
    args = (master.job_id, master.graph, master.settings, master.storage.job_dir)
    # A standby keeps Spark's Python workers warm for a takeover (``warm_standby``).
    warm = warm_standby_for(master.executor, master.payload, master.num_workers)
    if warm is not None:
        ha.on_standby.append(warm.start)
    try:
        start = await_leadership(ha, master._cancel, *args)
    finally:
        if warm is not None:
            warm.stop()
    if warm is not None and warm.worker_pids:
        master.listeners.append(_report_warm_workers(master, warm.worker_pids))
    if isinstance(start, End):
        master.error = start.error
        master._set_status(start.status)
        return False
    master.restores.ha_restore = start.restore_path
    coordinator.set_next_checkpoint_id(max(start.first_id, coordinator.next_checkpoint_id))

    def lost(reason: str) -> None:  # on the renewal thread: end the attempt on the master's
        state = master._state
        attempt = state.attempt if state is not None else master.attempt
        master._server.inbox.put(Envelope(attempt, -1, LostLeadership(reason)))

    ha.on_lost.append(lost)
    ha.start_renewing()
    master.on_leading()
    if start.decided:  # the HA pointer, not the run-status record, says where to resume
        master.restores.resume_from = ()
    return True


def _report_warm_workers(master: JobMaster, warm: tuple[int, ...]) -> Callable[[str, Any], None]:
    """A listener: log, once, how many of the first attempt's workers are the Python workers
    the standby kept warm (Spark reused them: no process start, no imports)."""
    done = [False]

    def listener(event: str, payload: Any) -> None:
        if event != "running" or done[0]:
            return
        done[0] = True
        reused = len(set(master.worker_pids.values()) & set(warm))
        log.info(
            "attempt %s runs on %d of the %d Python workers the standby kept warm",
            payload,
            reused,
            len(warm),
        )

    return listener
