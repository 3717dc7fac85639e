"""The job master's decision after an attempt, as a table: no job, no storage, no clock."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from cairn.checkpoint.errors import CheckpointError, RestoreReadError
from cairn.deploy import control_messages as p
from cairn.deploy.after_attempt import (
    RESTORE_OLDER_REASON,
    AfterAttemptFacts,
    Cancel,
    DelayCancelled,
    Fail,
    Finish,
    NoSafeRestore,
    Restart,
    Step,
    StorageUnreadable,
    Suspend,
    decide_after_attempt,
)
from cairn.deploy.attempt_errors import TaskFailure, WorkerLost
from cairn.deploy.lifecycle import AttemptEnd, AttemptOutcome
from cairn.deploy.restart_policy import RestartDecision, RestartPolicy
from cairn.ids import AttemptNumber, CheckpointId
from cairn.settings import RestartKind, RestartSettings

RESTORED = p.RestoreInfo("/cp/job/chk-7", CheckpointId(7), None)


RESTART = RestartDecision(True, 250, "fixed-delay restart 1/3")
EXHAUSTED = RestartDecision(False, 0, "fixed-delay restart strategy exhausted its 3 attempts")


@dataclass
class Strategy:
    """A restart strategy that answers ``verdict`` and records when it was asked."""

    verdict: RestartDecision = RESTART
    asked: list[int] = field(default_factory=list)

    def on_failure(self, now_ms: int) -> RestartDecision:
        self.asked.append(now_ms)
        return self.verdict


def task_failed(restore_failed: bool = False) -> TaskFailure:
    return TaskFailure(
        p.TaskFailed(
            attempt=AttemptNumber(1),
            task=None,
            error_type="ValueError",
            message="boom",
            traceback="...",
            restore_failed=restore_failed,
        )
    )


def decide(step: Step, strategy: Strategy, restored: p.RestoreInfo | None = None) -> object:
    return decide_after_attempt(step, AfterAttemptFacts(restored, now_ms=1_000), strategy)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (AttemptOutcome(AttemptEnd.FINISHED), Finish()),
        (AttemptOutcome(AttemptEnd.CANCELLED), Cancel()),
        (AttemptOutcome(AttemptEnd.SUSPENDED), Suspend()),  # leadership lost
        (DelayCancelled(), Cancel()),  # cancel requested during the restart delay
    ],
)
def test_steps_that_end_the_job_never_ask_the_restart_strategy(
    step: Step, expected: object
) -> None:
    strategy = Strategy()
    assert decide(step, strategy, RESTORED) == expected
    assert strategy.asked == []


def test_a_failed_attempt_restarts_after_the_strategys_delay() -> None:
    strategy, error = Strategy(), WorkerLost("worker 1 died")
    decision = decide(AttemptOutcome.failed(error), strategy, RESTORED)
    assert decision == Restart(250, "fixed-delay restart 1/3", error)
    assert strategy.asked == [1_000]


def test_the_job_fails_with_the_attempts_error_when_the_strategy_is_exhausted() -> None:
    strategy, error = Strategy(EXHAUSTED), task_failed()
    decision = decide(AttemptOutcome.failed(error), strategy)
    assert decision == Fail(error, EXHAUSTED.reason)


def test_corrupt_restored_state_restarts_at_once_from_an_older_checkpoint_uncounted() -> None:
    strategy, error = Strategy(EXHAUSTED), task_failed(restore_failed=True)
    decision = decide(AttemptOutcome.failed(error), strategy, RESTORED)
    assert decision == Restart(0, RESTORE_OLDER_REASON, error, discard=RESTORED)
    assert strategy.asked == []  # even an exhausted strategy is not told


def test_a_restore_failure_without_a_restored_checkpoint_is_counted() -> None:
    strategy, error = Strategy(), task_failed(restore_failed=True)
    decision = decide(AttemptOutcome.failed(error), strategy, restored=None)
    assert isinstance(decision, Restart) and decision.discard is None
    assert strategy.asked == [1_000]


def test_an_ordinary_failure_after_a_restore_discards_nothing() -> None:
    decision = decide(AttemptOutcome.failed(task_failed()), Strategy(), RESTORED)
    assert isinstance(decision, Restart) and decision.discard is None


def test_nothing_safe_to_restore_fails_the_job_without_asking_the_strategy() -> None:
    # e.g. only a fallback past a committed checkpoint is left: it would commit twice.
    strategy = Strategy()
    error = CheckpointError("falling back to checkpoint 5 would commit output a second time")
    decision = decide(NoSafeRestore(error), strategy)
    assert decision == Fail(error, f"nothing safe to restore from: {error}")
    assert strategy.asked == []


@pytest.mark.parametrize(("verdict", "restarts"), [(RESTART, True), (EXHAUSTED, False)])
def test_unreadable_storage_counts_as_a_failed_attempt(
    verdict: RestartDecision, restarts: bool
) -> None:
    strategy, error = Strategy(verdict), RestoreReadError("could not choose: unreachable")
    decision = decide(StorageUnreadable(error), strategy, RESTORED)
    assert strategy.asked == [1_000]
    if restarts:
        assert decision == Restart(250, verdict.reason, error)
    else:
        assert decision == Fail(error, verdict.reason)


def test_with_the_real_policy_only_counted_failures_use_up_its_attempts() -> None:
    policy = RestartPolicy(RestartSettings(RestartKind.FIXED_DELAY, attempts=1, delay_ms=10))
    facts = AfterAttemptFacts(RESTORED, now_ms=0)
    corrupt = AttemptOutcome.failed(task_failed(restore_failed=True))
    ordinary = AttemptOutcome.failed(task_failed())
    decisions = [
        decide_after_attempt(corrupt, facts, policy),
        decide_after_attempt(corrupt, facts, policy),
        decide_after_attempt(ordinary, facts, policy),
        decide_after_attempt(ordinary, facts, policy),
    ]
    assert [type(d).__name__ for d in decisions] == ["Restart", "Restart", "Restart", "Fail"]
