"""The checkpoint coordinator: the imperative shell around the pure checkpoint protocol.

Invariant: a checkpoint completes only when every expected task acknowledged it, and then its
``_metadata`` is written last; every aborted checkpoint's files are deleted; checkpoint ids
only increase; under high availability (a ``Fence``) nothing is completed, recorded,
announced to the tasks or deleted unless the fence passes just before. Single-threaded: the
job master calls every method from one thread. Decisions are ``protocol``'s; deleting files
is ``cleanup``'s, writing a completed one's ``_metadata`` under the fence ``publication``'s,
finding the restore point ``restore_points``', queueing savepoints ``savepoint_queue``'.
"""

from __future__ import annotations

import enum
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Literal, Protocol

from cairn.checkpoint.cleanup import CheckpointCleaner
from cairn.checkpoint.errors import CheckpointError
from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.checkpoint.ha.fence import Fence, LeadershipLost
from cairn.checkpoint.messages import (
    AckResult,
    TaskAcknowledgement,
    TaskDecline,
    TaskKey,
)
from cairn.checkpoint.metadata import CompletedCheckpoint
from cairn.checkpoint.pending import PendingCheckpoint
from cairn.checkpoint.protocol import (
    Blocked,
    CheckpointFailureManager,
    FailJob,
    FailureVerdict,
    FallbackRule,
    TerminalJobStatus,
    TriggerDecision,
    TriggerFacts,
    TriggerNow,
    TriggerPolicy,
    WaitUntil,
    checkpoint_options,
    decide_trigger,
    discard_on_termination,
    expired_checkpoints,
)
from cairn.checkpoint.publication import CheckpointPublisher
from cairn.checkpoint.restore_points import RestorePoints
from cairn.checkpoint.savepoint_queue import SavepointQueue, SavepointRequest
from cairn.checkpoint.stats import CheckpointStatsTracker
from cairn.checkpoint.storage import CheckpointStorage
from cairn.checkpoint.store import CompletedCheckpointStore
from cairn.clock import Clock, SystemClock
from cairn.events import CheckpointBarrier, CheckpointOptions, SavepointFormatType
from cairn.ids import CheckpointId, JobId, OperatorUid
from cairn.settings import DEFAULT_MAX_PARALLELISM, CheckpointSettings

log = logging.getLogger(__name__)

_GHOSTS = 1024  # how many finished ids are remembered to classify late messages


class CoordinatorGateway(Protocol):
    """The coordinator's only way out to tasks and the job master (the network edge)."""

    def trigger_sources(self, barrier: CheckpointBarrier) -> None:
        """Inject ``barrier`` at every source task."""
        ...

    def notify_complete(self, checkpoint_id: CheckpointId) -> None: ...

    def notify_aborted(
        self, checkpoint_id: CheckpointId, reason: CheckpointFailureReason, message: str
    ) -> None:
        """Tell the tasks that ``checkpoint_id`` was aborted (``message``: the detail)."""
        ...

    def fail_job(self, reason: str) -> None: ...


class CheckpointCoordinator:
    """Triggers checkpoints, collects acknowledgements, completes, aborts and restores.

    The job master calls :meth:`tick` regularly (at the latest at :meth:`next_tick_ms`),
    forwards task messages to :meth:`receive_ack`/:meth:`receive_decline`, calls
    :meth:`abort_all_pending` on failover, :meth:`restore_point` to find what to deploy
    from, and :meth:`shutdown` when the job ends.

    >>> class Gateway:
    ...     def trigger_sources(self, barrier): print("barrier", barrier.checkpoint_id)
    ...     def notify_complete(self, checkpoint_id): print("complete", checkpoint_id)
    ...     def notify_aborted(self, checkpoint_id, reason, message): print("aborted", reason)
    ...     def fail_job(self, reason): print("fail job:", reason)
    >>> task = TaskKey(0, 0)
    >>> storage = CheckpointStorage("memory://doc-coordinator", "job")
    >>> coord = CheckpointCoordinator("job", CheckpointSettings(), storage, Gateway(),
    ...                               [task], [task], {"src": (1, 128)})
    >>> coord.trigger_checkpoint(force=True)
    barrier 1
    TriggerNow(checkpoint_id=1)
    >>> coord.receive_ack(TaskAcknowledgement(CheckpointId(1), task))
    complete 1
    <AckResult.SUCCESS: 'success'>
    >>> coord.latest_completed().directory
    'memory:///doc-coordinator/job/chk-1'
    """

    def __init__(
        self,
        job_id: JobId,
        settings: CheckpointSettings,
        storage: CheckpointStorage,
        gateway: CoordinatorGateway,
        expected_tasks: Iterable[TaskKey],
        source_tasks: Iterable[TaskKey],
        operator_parallelism: Mapping[OperatorUid, tuple[int, int]],
        clock: Clock | None = None,
        first_checkpoint_id: CheckpointId = CheckpointId(1),
        max_parallelism: int = DEFAULT_MAX_PARALLELISM,
        properties: Mapping[str, str] | None = None,
        fallback: FallbackRule = FallbackRule(),
        before_publish: Callable[[CheckpointId], None] | None = None,
        fence: Fence | None = None,
    ) -> None:
        self.job_id = job_id
        self.settings = settings
        self.storage = storage
        self.expected_tasks = frozenset(expected_tasks)
        self.source_tasks = frozenset(source_tasks)
        if not self.source_tasks <= self.expected_tasks:
            raise ValueError("source tasks must be among the expected tasks")
        self._gateway = gateway
        self._operators = dict(operator_parallelism)
        self._clock = clock or SystemClock()
        self._max_parallelism = max_parallelism
        self._properties = dict(properties or {})
        self._policy = TriggerPolicy.from_settings(settings)
        self._failures = CheckpointFailureManager(settings.tolerable_failures)
        self._fence = fence
        self._publisher = CheckpointPublisher(job_id, storage, fence, before_publish)
        self._cleaner = CheckpointCleaner(job_id, storage, fence.holds if fence else lambda: True)
        self._store = CompletedCheckpointStore(
            max(1, settings.retained), self._cleaner.discard_completed
        )
        self._restore_points = RestorePoints(job_id, storage, self._store, fallback)
        self._stats = CheckpointStatsTracker()
        self._next_id = first_checkpoint_id
        self._first_own: CheckpointId | None = None  # lowest id made here or inherit_run's
        self._pending: dict[CheckpointId, PendingCheckpoint] = {}
        self._savepoints = SavepointQueue()
        self._ghosts: OrderedDict[CheckpointId, Literal["completed", "aborted"]] = OrderedDict()
        self._periodic_base_ms: int | None = self._clock.now_ms()
        self._last_trigger_ms: int | None = None
        self._last_completion_ms: int | None = None
        self._shut_down = False

    # --- queries ---------------------------------------------------------------------------

    @property
    def stats(self) -> CheckpointStatsTracker:
        return self._stats

    @property
    def next_checkpoint_id(self) -> CheckpointId:
        return self._next_id

    def pending_checkpoint_ids(self) -> list[CheckpointId]:
        return sorted(self._pending)

    def completed_checkpoints(self) -> list[CompletedCheckpoint]:
        """Retained completed checkpoints (not savepoints), newest last."""
        return self._store.all()

    def latest_completed(self) -> CompletedCheckpoint | None:
        return self._store.latest()

    def latest_completed_id(self) -> CheckpointId | None:
        latest = self._store.latest()
        return None if latest is None else latest.checkpoint_id

    def has_pending(self) -> bool:
        """Whether a checkpoint or savepoint is in flight."""
        return bool(self._pending)

    def next_tick_ms(self) -> int | None:
        """When :meth:`tick` has something to do next (a timeout or a due trigger), if known."""
        times = [p.trigger_ms + self.settings.timeout_ms for p in self._pending.values()]
        decision = self._decide(periodic=True, force=False)
        if isinstance(decision, TriggerNow):
            times.append(self._clock.now_ms())
        elif isinstance(decision, WaitUntil):
            times.append(decision.time_ms)
        return min(times, default=None)

    # --- triggering ------------------------------------------------------------------------

    def start_periodic(self) -> None:
        """(Re)start periodic checkpoints: the next one is due one interval from now.

        Periodic checkpoints are started by the constructor; call this after a restart.
        """
        self._periodic_base_ms = self._clock.now_ms()
        self._last_trigger_ms = None

    def stop_periodic(self) -> None:
        self._periodic_base_ms = None

    def wait_for_cleanup(self, timeout: float | None = None) -> bool:
        """Block until the files of every checkpoint given up so far are deleted (they are
        deleted in the background, in order); False if ``timeout`` passed."""
        return self._cleaner.wait_for_deletions(timeout)

    def inherit_run(self, first_id: CheckpointId) -> None:
        """This run resumes a lost run of the job whose checkpoints number from ``first_id``:
        they are this run's as if it had made them, so the retention policy removes them at
        its end (also those older than the one it restores, which the lost run had not yet
        deleted when it was killed)."""
        self._first_own = first_id

    def set_next_checkpoint_id(self, next_id: CheckpointId) -> None:
        """Continue numbering at ``next_id`` (e.g. after the id of the restored checkpoint)."""
        if next_id < self._next_id:
            raise ValueError(
                f"checkpoint ids only increase: next is {self._next_id}, got {next_id}"
            )
        self._next_id = next_id

    def tick(self) -> TriggerDecision:
        """Abort expired checkpoints, then trigger a periodic one if it is due."""
        if self._shut_down:
            return Blocked("the checkpoint coordinator is shut down")
        if self._fence is not None and not self._fence.holds():
            return Blocked("this driver no longer leads the job")
        now = self._clock.now_ms()
        deadlines = {cid: p.trigger_ms for cid, p in self._pending.items()}
        for cid in expired_checkpoints(deadlines, now, self.settings.timeout_ms):
            verdict = self._abort(
                cid,
                CheckpointFailureReason.CHECKPOINT_EXPIRED,
                f"checkpoint expired before completing (timeout {self.settings.timeout_ms} ms, "
                f"waiting for {self._describe_missing(cid)})",
            )
            if isinstance(verdict, FailJob):
                return Blocked(f"the job is failing: {verdict.reason}")
        self._start_queued_savepoint()
        if self._periodic_base_ms is None:
            return Blocked("periodic checkpointing is stopped")
        decision = self._decide(periodic=True, force=False)
        if isinstance(decision, TriggerNow):
            self._trigger(decision.checkpoint_id, checkpoint_options(self.settings))
        return decision

    def trigger_checkpoint(self, force: bool = False) -> TriggerDecision:
        """Trigger a checkpoint now unless max-concurrent or the min pause forbid it.

        ``force`` ignores both (the final checkpoint after all sources finished).
        """
        if self._shut_down:
            return Blocked("the checkpoint coordinator is shut down")
        if self._fence is not None and not self._fence.holds():
            return Blocked("this driver no longer leads the job")
        decision = self._decide(periodic=False, force=force)
        if isinstance(decision, TriggerNow):
            self._trigger(decision.checkpoint_id, checkpoint_options(self.settings))
        return decision

    def trigger_savepoint(
        self,
        target_dir: str,
        terminate: bool = False,
        format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
        drain: bool = False,
    ) -> Future[CompletedCheckpoint]:
        """Trigger an aligned savepoint written to ``target_dir`` (which must not hold one).

        The future resolves to the savepoint, or fails with :class:`CheckpointFailedError`.
        Savepoints are not retained checkpoints: they never subsume or get subsumed, and
        tasks are not notified of their completion (no side effects are committed for them,
        as in Flink since 1.15, so restoring an older checkpoint cannot duplicate output).
        A savepoint waits (queued; started by :meth:`tick`) while an unaligned checkpoint
        or another savepoint is pending (:func:`~cairn.checkpoint.protocol.decide_savepoint`),
        and periodic checkpoints wait while a savepoint is pending or queued.

        ``terminate`` (stop-with-savepoint): sources emit nothing after its barrier, and its
        completion is announced to the tasks (sinks commit), as the job ends after it.
        ``format_type``: how keyed state is written (``SavepointFormatType``). ``drain`` (with
        ``terminate``): sources send the final watermark before its barrier.
        """
        future: Future[CompletedCheckpoint] = Future()
        if self._shut_down:
            future.set_exception(CheckpointError("the checkpoint coordinator is shut down"))
            return future
        try:
            self.storage.check_savepoint_target(target_dir)
        except (FileExistsError, OSError) as e:
            future.set_exception(e)
            return future
        self._savepoints.enqueue(
            SavepointRequest(target_dir, terminate, future, format_type, drain)
        )
        self._start_queued_savepoint()
        return future

    def _start_queued_savepoint(self) -> None:
        """Start the oldest queued savepoint if :func:`decide_savepoint` allows it."""
        pending = (p.options for p in self._pending.values())
        request = self._savepoints.start_next(pending, self._next_id)
        if request is None:
            return
        options = checkpoint_options(
            self.settings,
            savepoint=True,
            terminate=request.terminate,
            format_type=request.format_type,
            drain=request.drain,
        )
        self._trigger(self._next_id, options)

    def _decide(self, *, periodic: bool, force: bool) -> TriggerDecision:
        if periodic and self._periodic_base_ms is None:
            return Blocked("periodic checkpointing is stopped")
        if not force and self._savepoints:
            return Blocked("a savepoint is in progress")
        facts = TriggerFacts(
            now_ms=self._clock.now_ms(),
            next_checkpoint_id=self._next_id,
            pending=len(self._pending),
            started_ms=self._periodic_base_ms or 0,
            last_trigger_ms=self._last_trigger_ms,
            last_completion_ms=self._last_completion_ms,
        )
        return decide_trigger(self._policy, facts, periodic=periodic, force=force)

    def _trigger(self, cid: CheckpointId, options: CheckpointOptions) -> None:
        now = self._clock.now_ms()
        pending = PendingCheckpoint(cid, now, options, self.expected_tasks)
        self._pending[cid] = pending
        self._next_id = CheckpointId(cid + 1)
        if self._first_own is None:
            self._first_own = cid
        if not options.is_savepoint:
            self._last_trigger_ms = now
        self._stats.report_pending(cid, now, len(self.expected_tasks), options.is_savepoint)
        log.info("Triggering %s %d @ %d for job %s.", options.type.value, cid, now, self.job_id)
        try:
            self._gateway.trigger_sources(CheckpointBarrier(cid, now, options))
        except Exception as e:
            self._abort(cid, CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, repr(e))

    # --- acknowledgements ------------------------------------------------------------------

    def receive_ack(self, ack: TaskAcknowledgement) -> AckResult:
        """Count ``ack``; completes the checkpoint when it is the last expected one."""
        cid, pending = ack.checkpoint_id, self._pending.get(ack.checkpoint_id)
        if pending is None:
            return self._late_ack(ack)
        now = self._clock.now_ms()
        result = pending.acknowledge(ack, now)
        if result is AckResult.SUCCESS:
            self._stats.report_ack(cid, ack.task, ack.metrics, now)
            if pending.is_fully_acknowledged:
                self._complete(pending)
        elif result is AckResult.UNKNOWN:
            log.warning("Checkpoint %d expects no acknowledgement from %s.", cid, ack.task)
        else:
            log.debug("%s acknowledgement of checkpoint %d from %s.", result.name, cid, ack.task)
        return result

    def _late_ack(self, ack: TaskAcknowledgement) -> AckResult:
        cid, ghost = ack.checkpoint_id, self._ghosts.get(ack.checkpoint_id)
        if ghost == "completed":
            return AckResult.DUPLICATE
        if ghost == "aborted":
            # The task wrote its files after the abort removed the directory: remove again.
            log.debug("Late ack of aborted checkpoint %d from %s; discarding it.", cid, ack.task)
            self._cleaner.discard_files(cid)
            self._cleaner.discard_unregistered_shared(ack.states.values())
            return AckResult.DISCARDED
        log.warning("Acknowledgement of unknown checkpoint %d from %s.", cid, ack.task)
        return AckResult.UNKNOWN

    def receive_decline(self, decline: TaskDecline) -> bool:
        """Abort the declined checkpoint; False if it was not pending (late or unknown)."""
        if decline.checkpoint_id not in self._pending:
            log.debug("Decline of checkpoint %d ignored: not pending.", decline.checkpoint_id)
            return False
        detail = f"declined by {decline.task}"
        if decline.message:
            detail += f": {decline.message}"
        self._abort(decline.checkpoint_id, decline.reason, detail, reported_by_task=True)
        return True

    # --- completion and abortion -----------------------------------------------------------

    def _complete(self, pending: PendingCheckpoint) -> None:
        cid = pending.checkpoint_id
        now = self._clock.now_ms()
        try:
            metadata = pending.finalize(
                self.job_id, now, self._operators, self._max_parallelism, self._properties
            )
        except ValueError as e:
            log.error("Cannot finalize checkpoint %d of job %s: %s", cid, self.job_id, e)
            self._abort(cid, CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE, str(e))
            return
        metadata = metadata.with_subtask_stats(self._stats.get(cid))  # kept in _metadata
        kind = "savepoint" if pending.is_savepoint else "checkpoint"
        if not self._publisher.leads(f"complete {kind} {cid}"):
            self._drop_fenced(cid)
            return
        try:
            if pending.is_savepoint:
                target = self._savepoints.target_dir(cid)
                completed = self._publisher.publish_savepoint(metadata, target)
                self._cleaner.discard_files(cid)  # the working copy in the checkpoint directory
                self._cleaner.savepoint_completed(cid, metadata)
            else:
                completed = self._publisher.publish_checkpoint(cid, metadata)
        except LeadershipLost as e:
            log.error("Checkpoint %d of job %s is not completed: %s", cid, self.job_id, e)
            self._drop_fenced(cid)
            return
        except Exception as e:
            reason = CheckpointFailureReason.IO_EXCEPTION
            self._abort(cid, reason, f"could not write checkpoint {cid}: {e!r}")
            return
        del self._pending[cid]
        self._remember(cid, "completed")
        self._last_completion_ms = now
        self._stats.report_completed(cid, now, completed.directory)
        size, took = metadata.state_size, metadata.duration_ms
        log.info(
            "Completed %s %d (%d bytes, %d ms) at %s.", kind, cid, size, took, completed.directory
        )
        if pending.is_savepoint:
            request = self._savepoints.finish(cid)
            announce = f"announce savepoint {cid} (sinks commit)"
            if request.terminate and self._publisher.leads(announce):
                self._gateway.notify_complete(cid)  # the job ends after it: its sinks commit it
            request.future.set_result(completed)
            return
        self._failures.on_success(cid)
        self._cleaner.checkpoint_completed(cid, metadata)
        for old in self._store.add(completed):
            log.debug("Subsumed checkpoint %d of job %s.", old.checkpoint_id, self.job_id)
        subsumed = CheckpointFailureReason.CHECKPOINT_SUBSUMED
        for older in [c for c, p in self._pending.items() if c < cid and not p.is_savepoint]:
            self._abort(older, subsumed, f"checkpoint {cid} completed first")
        self._restore_points.completed(completed.directory)
        self._restore_points.announced(cid)  # before the tasks hear of it: a sink may commit
        if self._publisher.leads(f"announce checkpoint {cid} (sinks commit)"):
            self._gateway.notify_complete(cid)

    def _drop_fenced(self, cid: CheckpointId) -> None:
        """Forget a checkpoint a driver without leadership must not complete: nothing is
        deleted (the new leader may use the same directory) and nothing is counted."""
        self._pending.pop(cid, None)
        self._remember(cid, "aborted")
        self.stop_periodic()

    def _abort(
        self,
        cid: CheckpointId,
        reason: CheckpointFailureReason,
        message: str,
        reported_by_task: bool = False,
    ) -> FailureVerdict:
        pending = self._pending.pop(cid)
        self._cleaner.discard_unregistered_shared(
            st for ack in pending.acknowledgements.values() for st in ack.states.values()
        )
        pending.discard()
        self._remember(cid, "aborted")
        self._stats.report_failed(cid, self._clock.now_ms(), reason.value, message)
        kind = "savepoint" if pending.is_savepoint else "checkpoint"
        log.warning(
            "Aborting %s %d of job %s: %s: %s", kind, cid, self.job_id, reason.value, message
        )
        self._cleaner.discard_files(cid)
        if pending.is_savepoint:
            self._savepoints.fail(cid, reason.value, message)
        self._gateway.notify_aborted(cid, reason, message)
        verdict = self._failures.on_failure(
            cid, reason, is_savepoint=pending.is_savepoint, reported_by_task=reported_by_task
        )
        if isinstance(verdict, FailJob):
            log.error("Failing job %s: %s", self.job_id, verdict.reason)
            self._gateway.fail_job(verdict.reason)
        return verdict

    def abort_all_pending(self, reason: str) -> None:
        """Abort every pending checkpoint and savepoint (failover); not counted as failures."""
        for cid in sorted(self._pending):
            self._abort(cid, CheckpointFailureReason.JOB_FAILOVER_REGION, reason)
        self._cleaner.backends_gone()  # the new attempt's backends are new ones
        self._savepoints.fail_queued(CheckpointFailureReason.JOB_FAILOVER_REGION, reason)

    def _remember(self, cid: CheckpointId, outcome: Literal["completed", "aborted"]) -> None:
        self._ghosts[cid] = outcome
        while len(self._ghosts) > _GHOSTS:
            self._ghosts.popitem(last=False)

    # --- restore ---------------------------------------------------------------------------

    def restore_point(
        self,
        explicit_path: str | Sequence[str] | None = None,
        claim: bool = False,
        resumed: bool = False,
    ) -> CompletedCheckpoint | None:
        """The verified checkpoint to deploy from, or None for a fresh start, as
        :meth:`RestorePoints.choose <cairn.checkpoint.restore_points.RestorePoints.choose>`
        finds it (fallback to older checkpoints, the rule for announced ones, ``claim``, the
        errors raised). From an ``explicit_path``, numbering continues after its id.
        ``resumed``: the path is this job's lost run; what it left above the chosen
        checkpoint (checkpoints it never completed), and from :meth:`inherit_run`'s id on
        below it, is this run's to discard at its end.
        """
        chosen = self._restore_points.choose(explicit_path, claim)
        if chosen is None:
            return None
        if resumed:
            above = CheckpointId(chosen.checkpoint_id + 1)
            inherited = self._first_own  # from inherit_run, if called
            self._first_own = above if inherited is None else min(inherited, above)
        if explicit_path is not None and chosen.checkpoint_id >= self._next_id:
            self._next_id = CheckpointId(chosen.checkpoint_id + 1)
        now, where = self._clock.now_ms(), chosen.directory
        self._stats.report_restored(chosen.checkpoint_id, now, where, chosen.is_savepoint)
        return chosen

    def mark_unusable(self, directory: str, checkpoint_id: CheckpointId, problem: str) -> None:
        """Never restore the checkpoint at ``directory`` again in this job (e.g. its state
        failed its checks while a worker restored it); the next :meth:`restore_point` tries
        the next older one, subject to the fallback rule. Its files are left alone."""
        self._restore_points.mark_unusable(directory, checkpoint_id, problem)

    # --- termination -----------------------------------------------------------------------

    def shutdown(self, status: TerminalJobStatus | enum.Enum) -> None:
        """Abort pending checkpoints and apply the retention policy for ``status``.

        ``status`` is FINISHED, CANCELED, FAILED or SUSPENDED (a :class:`TerminalJobStatus`
        or any enum with those names, e.g. ``cairn.common.JobStatus``). Idempotent. Deletes
        what this run's checkpointing made when the policy says so
        (see :func:`~cairn.checkpoint.protocol.discard_on_termination`), and the job
        directory if nothing else is left in it.
        """
        terminal = TerminalJobStatus.of(status)
        if self._shut_down:
            return
        reason = CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN
        for cid in sorted(self._pending):
            self._abort(cid, reason, f"job {terminal.value}")
        self._savepoints.fail_queued(reason, f"job {terminal.value}")
        self._shut_down = True
        policy, job_dir = self.settings.retention.value, self.storage.job_dir
        if not discard_on_termination(self.settings.retention, terminal):
            aborted = [c for c, outcome in self._ghosts.items() if outcome == "aborted"]
            self._cleaner.tidy_kept_job_dir(aborted)
            log.info("Job %s %s: kept %s (%s).", self.job_id, terminal.value, job_dir, policy)
            return
        self._store.discard_all_owned()
        # Only what this run made: an earlier run's retained checkpoints (or HA records, or a
        # user's files) in the job directory stay, and so does the directory then.
        left = self._cleaner.discard_run(self._first_own)
        kept = f"; kept {', '.join(left[:5])}, not this run's" if left else ""
        ended = terminal.value
        log.info("Job %s %s: cleaned %s (%s)%s.", self.job_id, ended, job_dir, policy, kept)

    def _describe_missing(self, cid: CheckpointId) -> str:
        missing = sorted(self._pending[cid].not_yet_acknowledged)
        shown = ", ".join(str(t) for t in missing[:5])
        return shown + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
