"""The job master's side of high availability: stand by, then start as the leader.

Invariant: ``lead`` returns True only once the driver holds the lease, renews it on its own
thread, has planned its run, and knows where to resume (the HA pointer's checkpoint, or the
run-status record's when there is no pointer yet); a lost lease reaches the job master's
thread as a ``LostLeadership`` message, which ends the attempt SUSPENDED.
"""

from __future__ import annotations

import logging
from typing import Any

from cairn.deploy.high_availability import End, LostLeadership, await_leadership
from cairn.deploy.job_master_ports import LeadershipPort, Listener
from cairn.deploy.warm_standby import warm_standby_for

__all__ = ["lead"]

log = logging.getLogger(__name__)


def lead(master: LeadershipPort) -> bool:
    """Stand by until ``master``'s driver leads its job; False if it must not run it (the
    leader ended the job meanwhile, or it was cancelled or fenced). True without HA."""
    ha = master.leadership
    if ha is None:
        return True
    args = (master.job_id, master.graph, master.settings, master.storage.job_dir)
    # A standby keeps Spark's Python workers warm for a takeover (``warm_standby``).
    warm = warm_standby_for(master.executor, master.payload, master.num_workers)
    if warm is not None:
        ha.on_standby.append(warm.start)
    try:
        start = await_leadership(ha, master.cancelled, *args)
    finally:
        if warm is not None:
            warm.stop()
    if warm is not None and warm.worker_pids:
        master.add_listener(_report_warm_workers(master, warm.worker_pids))
    if isinstance(start, End):
        master.end_unled(start.status, start.error)
        return False
    master.take_over(start.restore_path, start.first_id)

    def lost(reason: str) -> None:  # on the renewal thread: end the attempt on the master's
        master.post(LostLeadership(reason))

    ha.on_lost.append(lost)
    ha.start_renewing()
    master.start_leading(start.decided)
    return True


def _report_warm_workers(master: LeadershipPort, warm: tuple[int, ...]) -> Listener:
    """A listener: log, once, how many of the first attempt's workers are the Python workers
    the standby kept warm (Spark reused them: no process start, no imports)."""
    done = [False]

    def listener(event: str, payload: Any) -> None:
        if event != "running" or done[0]:
            return
        done[0] = True
        reused = len(set(master.current_worker_pids().values()) & set(warm))
        log.info(
            "attempt %s runs on %d of the %d Python workers the standby kept warm",
            payload,
            reused,
            len(warm),
        )

    return listener
