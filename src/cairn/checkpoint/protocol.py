"""Pure decisions of the checkpoint protocol: when to trigger, what to subsume, what to restore
from (and when falling back to an older checkpoint would duplicate committed output), when
checkpoint failures fail the job, what to delete at termination.

Invariant: nothing here does I/O or reads a clock; every function takes the facts it decides
on and returns a typed decision, so the coordinator (the imperative shell) only executes them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cairn.checkpoint.failure import CheckpointFailureReason
from cairn.events import AlignmentMode, CheckpointOptions, CheckpointType, SavepointFormatType
from cairn.ids import CheckpointId
from cairn.settings import CheckpointSettings, RetentionPolicy

# --- trigger --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TriggerNow:
    checkpoint_id: CheckpointId


@dataclass(frozen=True, slots=True)
class WaitUntil:
    """Nothing to do before ``time_ms`` (the periodic interval or the min pause)."""

    time_ms: int
    reason: str


@dataclass(frozen=True, slots=True)
class Blocked:
    """Cannot trigger until something else happens (a pending checkpoint ends, ...)."""

    reason: str


TriggerDecision = TriggerNow | WaitUntil | Blocked


@dataclass(frozen=True, slots=True)
class TriggerPolicy:
    """The settings the trigger decision depends on."""

    interval_ms: int
    min_pause_ms: int = 0
    max_concurrent: int = 1

    @classmethod
    def from_settings(cls, settings: CheckpointSettings) -> TriggerPolicy:
        return cls(settings.interval_ms, settings.min_pause_ms, max(1, settings.max_concurrent))


@dataclass(frozen=True, slots=True)
class TriggerFacts:
    """What the coordinator knows when it asks whether to trigger."""

    now_ms: int
    next_checkpoint_id: CheckpointId
    pending: int  # checkpoints triggered and neither completed nor aborted
    started_ms: int  # when periodic checkpointing started (first one is due one interval later)
    last_trigger_ms: int | None = None
    last_completion_ms: int | None = None


def decide_trigger(
    policy: TriggerPolicy, facts: TriggerFacts, *, periodic: bool, force: bool = False
) -> TriggerDecision:
    """Whether to trigger checkpoint ``facts.next_checkpoint_id`` now (Flink's request decider).

    * ``force`` (savepoints, the final checkpoint) ignores every limit.
    * ``periodic`` requests are due one interval after the previous trigger.
    * The min pause is measured from the last *completion*, as in Flink.
    * At most ``max_concurrent`` checkpoints are pending.

    >>> p = TriggerPolicy(interval_ms=100, min_pause_ms=50)
    >>> decide_trigger(p, TriggerFacts(120, CheckpointId(2), 0, 0, last_trigger_ms=0,
    ...                                last_completion_ms=90), periodic=True)
    WaitUntil(time_ms=140, reason='min pause of 50 ms after the last completed checkpoint')
    """
    if force:
        return TriggerNow(facts.next_checkpoint_id)
    if periodic:
        if policy.interval_ms <= 0:
            return Blocked("periodic checkpointing is disabled")
        base = facts.started_ms if facts.last_trigger_ms is None else facts.last_trigger_ms
        due = base + policy.interval_ms
        if facts.now_ms < due:
            return WaitUntil(due, f"checkpoint interval of {policy.interval_ms} ms")
    if facts.pending >= policy.max_concurrent:
        return Blocked(
            f"too many concurrent checkpoints ({facts.pending} pending, "
            f"max {policy.max_concurrent})"
        )
    if facts.last_completion_ms is not None and policy.min_pause_ms > 0:
        earliest = facts.last_completion_ms + policy.min_pause_ms
        if facts.now_ms < earliest:
            return WaitUntil(
                earliest,
                f"min pause of {policy.min_pause_ms} ms after the last completed checkpoint",
            )
    return TriggerNow(facts.next_checkpoint_id)


def decide_savepoint(pending: Iterable[CheckpointOptions]) -> TriggerNow | Blocked:
    """Whether a requested savepoint may start now, given the options of the pending
    checkpoints (Flink: savepoints are forced, but never run beside an unaligned checkpoint).

    A savepoint ignores the interval, the min pause and max-concurrent, but waits while
    another savepoint is pending (one at a time) or while a checkpoint whose barriers may
    overtake records is (unaligned, or aligned with a timeout): its aligned barrier must
    not be overtaken, nor mixed into that checkpoint's channel state. The returned
    ``TriggerNow`` carries id 0: the coordinator assigns the real id.

    >>> unaligned = CheckpointOptions(alignment=AlignmentMode.UNALIGNED)
    >>> decide_savepoint([CheckpointOptions()])
    TriggerNow(checkpoint_id=0)
    >>> decide_savepoint([unaligned])
    Blocked(reason='an unaligned checkpoint is in progress')
    """
    for options in pending:
        if options.is_savepoint:
            return Blocked("another savepoint is in progress")
        if options.alignment is AlignmentMode.UNALIGNED or options.aligned_timeout_ms is not None:
            return Blocked("an unaligned checkpoint is in progress")
    return TriggerNow(CheckpointId(0))


def expired_checkpoints(
    trigger_times: Mapping[CheckpointId, int], now_ms: int, timeout_ms: int
) -> list[CheckpointId]:
    """Pending checkpoints whose timeout has passed, oldest first.

    >>> expired_checkpoints({CheckpointId(1): 0, CheckpointId(2): 50}, now_ms=100, timeout_ms=100)
    [1]
    """
    return sorted(cid for cid, t in trigger_times.items() if now_ms - t >= timeout_ms)


# --- subsumption --------------------------------------------------------------------------------


def checkpoints_to_discard(
    completed_ids: Iterable[CheckpointId], retained: int
) -> list[CheckpointId]:
    """Completed checkpoints beyond the newest ``retained`` ones, oldest first.

    >>> checkpoints_to_discard([3, 1, 2, 5, 4], retained=2)
    [1, 2, 3]
    """
    if retained < 1:
        raise ValueError(f"at least one completed checkpoint must be retained, got {retained}")
    ordered = sorted(completed_ids)
    return ordered[: max(0, len(ordered) - retained)]


# --- restore choice -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RestoreCandidate:
    """A checkpoint that could be restored; ``problem`` is None iff it verified clean.

    ``committed``: its completion was announced to the tasks (``notify_checkpoint_complete``),
    or may have been (it has ``_metadata`` but belongs to an earlier run), so two-phase sinks
    may have made its output visible.
    """

    location: str
    checkpoint_id: CheckpointId | None
    problem: str | None = None
    committed: bool = False

    @property
    def usable(self) -> bool:
        return self.problem is None

    def describe(self) -> str:
        if self.checkpoint_id is None:
            return f"the checkpoint at {self.location}"
        return f"checkpoint {self.checkpoint_id} ({self.location})"


@dataclass(frozen=True, slots=True)
class FallbackRule:
    """When the restore may skip an unusable checkpoint for an older one.

    Restoring a checkpoint older than one whose output a sink already committed replays the
    records in between into the sink, which commits them a second time: exactly-once output
    gets duplicates. So with ``committing_sinks`` (sinks that make output visible when a
    checkpoint completes: two-phase sinks, the collect sink) a fallback past a committed
    candidate is refused, unless ``allow_past_committed``
    (``cairn.recovery.allow-fallback-past-committed``) accepts the duplicates. Without such
    sinks every fallback is allowed (their output is at-least-once anyway).
    """

    committing_sinks: tuple[str, ...] = ()
    allow_past_committed: bool = False


@dataclass(frozen=True, slots=True)
class RestoreFrom:
    candidate: RestoreCandidate


@dataclass(frozen=True, slots=True)
class FallbackToPrevious:
    """The newest candidates are unusable; restore from an older one."""

    candidate: RestoreCandidate
    skipped: tuple[RestoreCandidate, ...]

    @property
    def past_committed(self) -> tuple[RestoreCandidate, ...]:
        """The skipped candidates whose output sinks may have committed (it is written again)."""
        return tuple(c for c in self.skipped if c.committed)


@dataclass(frozen=True, slots=True)
class FallbackRefused:
    """An older candidate is usable, but restoring it would commit output a second time."""

    candidate: RestoreCandidate  # the usable, older one
    skipped: tuple[RestoreCandidate, ...]  # newest first; at least one is committed
    sinks: tuple[str, ...]

    def describe(self) -> str:
        newest = next(c for c in self.skipped if c.committed)
        older = self.candidate
        sinks = ", ".join(repr(s) for s in self.sinks)
        return (
            f"refusing to fall back past {newest.describe()}: it is unusable "
            f"({newest.problem}), but its completion was announced (or, for a checkpoint of "
            f"an earlier run, may have been), so the job's sinks ({sinks}) may have committed "
            f"its output. Restoring the older "
            f"{older.describe()} would write the output committed after checkpoint "
            f"{older.checkpoint_id} (up to checkpoint {newest.checkpoint_id}) a second time: "
            f"duplicates in exactly-once output. Repair or restore checkpoint "
            f"{newest.checkpoint_id}, or set cairn.recovery.allow-fallback-past-committed: "
            f"true to restore checkpoint {older.checkpoint_id} and accept the duplicates."
        )


@dataclass(frozen=True, slots=True)
class NothingUsable:
    skipped: tuple[RestoreCandidate, ...]

    def describe(self) -> str:
        if not self.skipped:
            return "no completed checkpoint to restore from"
        return "no usable checkpoint: " + "; ".join(
            f"{c.location}: {c.problem}" for c in self.skipped
        )


RestoreDecision = RestoreFrom | FallbackToPrevious | FallbackRefused | NothingUsable


def choose_restore(
    candidates_newest_first: Sequence[RestoreCandidate], rule: FallbackRule = FallbackRule()
) -> RestoreDecision:
    """Pick the newest usable candidate, saying why newer ones were skipped; refuse when
    skipping a committed candidate would duplicate committed output (see
    :class:`FallbackRule`).

    >>> bad, good = RestoreCandidate("c2", 2, "checksum mismatch"), RestoreCandidate("c1", 1)
    >>> choose_restore([bad, good])  # doctest: +NORMALIZE_WHITESPACE
    FallbackToPrevious(candidate=RestoreCandidate(location='c1', checkpoint_id=1, problem=None,
        committed=False), skipped=(RestoreCandidate(location='c2', checkpoint_id=2,
        problem='checksum mismatch', committed=False),))
    >>> announced = RestoreCandidate("c2", 2, "checksum mismatch", committed=True)
    >>> type(choose_restore([announced, good], FallbackRule(("file-sink",)))).__name__
    'FallbackRefused'
    >>> rule = FallbackRule(("file-sink",), allow_past_committed=True)
    >>> choose_restore([announced, good], rule).past_committed == (announced,)
    True
    """
    skipped: list[RestoreCandidate] = []
    for candidate in candidates_newest_first:
        if candidate.usable:
            if not skipped:
                return RestoreFrom(candidate)
            duplicates = any(c.committed for c in skipped) and bool(rule.committing_sinks)
            if duplicates and not rule.allow_past_committed:
                return FallbackRefused(candidate, tuple(skipped), rule.committing_sinks)
            return FallbackToPrevious(candidate, tuple(skipped))
        skipped.append(candidate)
    return NothingUsable(tuple(skipped))


# --- failure manager ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tolerated:
    """The failure is within the tolerated number of consecutive failures (or not counted)."""

    consecutive_failures: int
    counted: bool


@dataclass(frozen=True, slots=True)
class FailJob:
    reason: str


FailureVerdict = Tolerated | FailJob


class CheckpointFailureManager:
    """Counts consecutive checkpoint failures (Flink's ``CheckpointFailureManager``).

    Only failures whose reason :attr:`~CheckpointFailureReason.counts_as_failure` (expired,
    declined, async or I/O errors) are counted, each checkpoint at most once, and only for
    checkpoints newer than the last success. More than ``tolerable_failures`` in a row fails
    the job (``execution.checkpointing.tolerable-failed-checkpoints``). Savepoint failures are
    counted only if a task reported them (coordinator-side ones are the user's business).

    >>> fm = CheckpointFailureManager(tolerable_failures=1)
    >>> fm.on_failure(CheckpointId(1), CheckpointFailureReason.CHECKPOINT_EXPIRED)
    Tolerated(consecutive_failures=1, counted=True)
    >>> isinstance(fm.on_failure(CheckpointId(2), CheckpointFailureReason.CHECKPOINT_EXPIRED),
    ...            FailJob)
    True
    """

    def __init__(self, tolerable_failures: int) -> None:
        if tolerable_failures < 0:
            raise ValueError(f"tolerable_failures must be >= 0, got {tolerable_failures}")
        self._tolerable = tolerable_failures
        self._counted: set[int] = set()
        self._last_success: int | None = None

    @property
    def consecutive_failures(self) -> int:
        return len(self._counted)

    def on_failure(
        self,
        checkpoint_id: CheckpointId,
        reason: CheckpointFailureReason,
        *,
        is_savepoint: bool = False,
        reported_by_task: bool = False,
    ) -> FailureVerdict:
        counted = (
            reason.counts_as_failure
            and (reported_by_task or not is_savepoint)
            and (self._last_success is None or checkpoint_id > self._last_success)
            and checkpoint_id not in self._counted
        )
        if counted:
            self._counted.add(checkpoint_id)
        if len(self._counted) > self._tolerable:
            n = len(self._counted)
            self._counted.clear()
            return FailJob(
                f"Exceeded checkpoint tolerable failure threshold ({n} consecutive failures, "
                f"{self._tolerable} tolerated); last: checkpoint {checkpoint_id} {reason.value}"
            )
        return Tolerated(len(self._counted), counted)

    def on_success(self, checkpoint_id: CheckpointId) -> None:
        if self._last_success is None or checkpoint_id > self._last_success:
            self._last_success = checkpoint_id
            self._counted.clear()


# --- retention ----------------------------------------------------------------------------------


class TerminalJobStatus(enum.Enum):
    """How a job ended, as far as checkpoint retention cares (Flink's job statuses)."""

    FINISHED = "FINISHED"
    CANCELED = "CANCELED"
    FAILED = "FAILED"
    SUSPENDED = "SUSPENDED"  # the driver stops without the job ending (it may be resumed)

    @classmethod
    def of(cls, status: enum.Enum) -> TerminalJobStatus:
        """Convert any job-status enum with Flink's member names (e.g. ``JobStatus.FAILED``).

        >>> TerminalJobStatus.of(TerminalJobStatus.FAILED)
        <TerminalJobStatus.FAILED: 'FAILED'>
        """
        try:
            return cls[status.name]
        except KeyError:
            raise ValueError(f"{status.name} is not a terminal job status") from None


# Flink's CheckpointProperties: NEVER_RETAINED, RETAINED_ON_FAILURE, RETAINED_ON_CANCELLATION.
_KEEP: Mapping[RetentionPolicy, frozenset[TerminalJobStatus]] = {
    RetentionPolicy.NO_EXTERNALIZED_CHECKPOINTS: frozenset(),
    RetentionPolicy.DELETE_ON_CANCELLATION: frozenset({TerminalJobStatus.FAILED}),
    RetentionPolicy.RETAIN_ON_CANCELLATION: frozenset(
        {TerminalJobStatus.CANCELED, TerminalJobStatus.FAILED, TerminalJobStatus.SUSPENDED}
    ),
}


def discard_on_termination(policy: RetentionPolicy, status: TerminalJobStatus) -> bool:
    """Whether the job's completed checkpoints are deleted when it ends with ``status``.

    A finished job has nothing to resume, so its checkpoints go under every policy (Flink);
    a suspended one (its driver lost its leadership) is resumed by another driver, so they
    stay under every policy.

    >>> discard_on_termination(RetentionPolicy.DELETE_ON_CANCELLATION, TerminalJobStatus.FAILED)
    False
    >>> discard_on_termination(
    ...     RetentionPolicy.NO_EXTERNALIZED_CHECKPOINTS, TerminalJobStatus.SUSPENDED)
    False
    """
    return status is not TerminalJobStatus.SUSPENDED and status not in _KEEP[policy]


# --- barrier options ------------------------------------------------------------------------------


def checkpoint_options(
    settings: CheckpointSettings,
    *,
    savepoint: bool = False,
    terminate: bool = False,
    format_type: SavepointFormatType = SavepointFormatType.CANONICAL,
    drain: bool = False,
) -> CheckpointOptions:
    """Options carried by the barriers of a checkpoint (savepoints are always aligned).

    Unaligned checkpoints with an aligned timeout start aligned and switch after the timeout
    (Flink's ``execution.checkpointing.aligned-checkpoint-timeout``).

    >>> opts = checkpoint_options(CheckpointSettings(unaligned=True, aligned_timeout_ms=500))
    >>> opts.alignment, opts.aligned_timeout_ms
    (<AlignmentMode.ALIGNED: 'aligned'>, 500)
    """
    if savepoint:
        return CheckpointOptions(
            CheckpointType.SAVEPOINT, AlignmentMode.ALIGNED, None, terminate, format_type, drain
        )
    if settings.mode is AlignmentMode.AT_LEAST_ONCE:
        return CheckpointOptions(CheckpointType.CHECKPOINT, AlignmentMode.AT_LEAST_ONCE, None)
    if settings.unaligned or settings.mode is AlignmentMode.UNALIGNED:
        if settings.aligned_timeout_ms > 0:
            return CheckpointOptions(
                CheckpointType.CHECKPOINT, AlignmentMode.ALIGNED, settings.aligned_timeout_ms
            )
        return CheckpointOptions(CheckpointType.CHECKPOINT, AlignmentMode.UNALIGNED, None)
    return CheckpointOptions(CheckpointType.CHECKPOINT, AlignmentMode.ALIGNED, None)
