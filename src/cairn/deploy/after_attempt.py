"""What the job master does once an attempt (or the restart before one) ended: the one decision
of its restart loop, as a pure function over typed facts.

Invariant: nothing here does I/O, reads a clock or touches the job master; the only call out is
to tell the restart strategy (``restart_policy.py``, itself pure) of a failure it counts —
never of an attempt whose workers found its restored state corrupt (that checkpoint is
discarded and an older one restored at once). The job master gathers the facts, calls
:func:`decide_after_attempt` and executes the typed decision it returns.

>>> from cairn.deploy.restart_policy import RestartPolicy
>>> from cairn.settings import RestartKind, RestartSettings
>>> none = RestartPolicy(RestartSettings(RestartKind.NONE))
>>> decide_after_attempt(AttemptOutcome(AttemptEnd.FINISHED), AfterAttemptFacts(), none)
Finish()
>>> decide_after_attempt(DelayCancelled(), AfterAttemptFacts(), none)
Cancel()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cairn.checkpoint.errors import CheckpointError, RestoreReadError
from cairn.deploy import control_messages as p
from cairn.deploy.attempt_errors import could_not_restore
from cairn.deploy.lifecycle import AttemptEnd, AttemptOutcome
from cairn.deploy.restart_policy import RestartDecision

__all__ = [
    "AfterAttempt",
    "AfterAttemptFacts",
    "Cancel",
    "DelayCancelled",
    "Fail",
    "Finish",
    "NoSafeRestore",
    "Restart",
    "RestartStrategy",
    "Step",
    "StorageUnreadable",
    "Suspend",
    "decide_after_attempt",
]

# --- what ended (the facts) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DelayCancelled:
    """The client cancelled the job during the restart delay (no attempt was deployed)."""


@dataclass(frozen=True, slots=True)
class NoSafeRestore:
    """Choosing the checkpoint to restart from found nothing safe (e.g. only a fallback that
    would commit output a second time): ``error`` says why."""

    error: CheckpointError


@dataclass(frozen=True, slots=True)
class StorageUnreadable:
    """The checkpoint storage failed while choosing the restore point (e.g. unreachable): no
    attempt was deployed, and this counts as a failed one for the restart strategy."""

    error: RestoreReadError


# An attempt's end (``AttemptOutcome``; SUSPENDED too when leadership was found lost before
# deploying it), or what ended the restart before the next attempt.
Step = AttemptOutcome | DelayCancelled | NoSafeRestore | StorageUnreadable


@dataclass(frozen=True, slots=True)
class AfterAttemptFacts:
    """What the job master knows besides the step: what the ended attempt restored (None: it
    started from scratch, or none ran) and the wall-clock time the strategy measures by."""

    restored: p.RestoreInfo | None = None
    now_ms: int = 0


class RestartStrategy(Protocol):
    """Flink's restart backoff strategy: told of each counted failure, says whether to
    restart and after what delay (``RestartPolicy``)."""

    def on_failure(self, now_ms: int) -> RestartDecision: ...


# --- what to do (the decision) --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finish:
    """Every task finished: the job ends FINISHED."""


@dataclass(frozen=True, slots=True)
class Cancel:
    """The client cancelled: the job ends CANCELED."""


@dataclass(frozen=True, slots=True)
class Suspend:
    """This driver lost its leadership (high availability): the job ends SUSPENDED here, and
    another driver runs it."""


@dataclass(frozen=True, slots=True)
class Fail:
    """The job ends FAILED with ``cause``; ``reason`` says why it is not restarted."""

    cause: BaseException
    reason: str


@dataclass(frozen=True, slots=True)
class Restart:
    """Restart after ``delay_ms`` (counted from the failed attempt's end, as Flink's) from the
    latest usable checkpoint, first marking ``discard`` unusable (its state was corrupt);
    ``cause`` is the failure, ``reason`` the strategy's word on it."""

    delay_ms: int
    reason: str
    cause: BaseException
    discard: p.RestoreInfo | None = None


AfterAttempt = Finish | Cancel | Suspend | Fail | Restart

# A worker found the restored checkpoint's state corrupt (it checks every byte it restores):
# restore an older one at once, as if the job master's own check had skipped it before
# deploying. The checkpoint is never offered again, so this happens once per checkpoint.
RESTORE_OLDER_REASON = "the restored checkpoint is unusable, restoring an older one (not counted)"


def decide_after_attempt(
    step: Step, facts: AfterAttemptFacts, strategy: RestartStrategy
) -> AfterAttempt:
    """What to do after ``step``.

    * A finished, cancelled or suspended attempt (or a cancel during the delay) ends the job.
    * Nothing safe to restore from fails the job, without asking the strategy.
    * A failed attempt whose workers could not read the state it restored restarts at once
      from an older checkpoint, not counted; any other failure (the storage failing while
      choosing the restore point too) is the strategy's to count: restart after its delay,
      or fail the job with the failure.
    """
    if isinstance(step, DelayCancelled):
        return Cancel()
    if isinstance(step, NoSafeRestore):
        return Fail(step.error, f"nothing safe to restore from: {step.error}")
    if isinstance(step, StorageUnreadable):
        return _counted(step.error, facts, strategy)
    if step.end is AttemptEnd.FINISHED:
        return Finish()
    if step.end is AttemptEnd.CANCELLED:
        return Cancel()
    if step.end is AttemptEnd.SUSPENDED:
        return Suspend()
    assert step.error is not None  # AttemptOutcome: a failed attempt has its error
    if facts.restored is not None and could_not_restore(step.error):
        return Restart(0, RESTORE_OLDER_REASON, step.error, discard=facts.restored)
    return _counted(step.error, facts, strategy)


def _counted(
    error: BaseException, facts: AfterAttemptFacts, strategy: RestartStrategy
) -> Restart | Fail:
    verdict = strategy.on_failure(facts.now_ms)
    if verdict.restart:
        return Restart(verdict.delay_ms, verdict.reason, error)
    return Fail(error, verdict.reason)
