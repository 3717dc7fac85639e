"""The job status transition table and the typed outcomes, as pure values."""

from __future__ import annotations

import itertools

import pytest

from cairn.common.job_status import JobStatus
from cairn.deploy.lifecycle import (
    JOB_STATUS_TRANSITIONS,
    AttemptEnd,
    AttemptOutcome,
    IllegalJobStatusTransition,
    WorkerOutcome,
    transition,
)

S = JobStatus
TERMINAL = {S.FINISHED, S.CANCELED, S.FAILED}
UNUSED = {S.FAILING, S.CANCELLING, S.RECONCILING}


def _reachable(start: JobStatus) -> set[JobStatus]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in JOB_STATUS_TRANSITIONS.get(todo.pop(), frozenset()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_table_declares_exactly_the_moves_of_cairns_job_master() -> None:
    assert dict(JOB_STATUS_TRANSITIONS) == {
        S.CREATED: {S.INITIALIZING, S.FAILED, S.FINISHED, S.CANCELED, S.SUSPENDED},
        S.INITIALIZING: {S.RUNNING, S.RESTARTING, S.CANCELED, S.FAILED, S.SUSPENDED},
        S.RUNNING: {S.FINISHED, S.RESTARTING, S.CANCELED, S.FAILED, S.SUSPENDED},
        S.RESTARTING: {S.RUNNING, S.RESTARTING, S.CANCELED, S.FAILED, S.SUSPENDED},
    }


def test_transition_allows_the_table_and_refuses_everything_else() -> None:
    for old, new in itertools.product(JobStatus, repeat=2):
        if new in JOB_STATUS_TRANSITIONS.get(old, frozenset()):
            assert transition(old, new) is new
        else:
            with pytest.raises(IllegalJobStatusTransition, match=f"from {old.name} to {new.name}"):
                transition(old, new)


def test_terminal_statuses_never_change_and_every_other_one_can_end() -> None:
    for status in TERMINAL:
        assert status.is_globally_terminal_state()
        assert status not in JOB_STATUS_TRANSITIONS
    assert S.SUSPENDED.is_terminal_state() and S.SUSPENDED not in JOB_STATUS_TRANSITIONS
    for status in JOB_STATUS_TRANSITIONS:  # no dead ends: each may still end every way
        assert not status.is_terminal_state()
        assert TERMINAL.issubset(_reachable(status))


def test_only_a_running_job_finishes_and_statuses_cairn_does_not_use_are_unreachable() -> None:
    # CREATED: a standby whose leader finished the job (high availability).
    assert [old for old, targets in JOB_STATUS_TRANSITIONS.items() if S.FINISHED in targets] == [
        S.CREATED,
        S.RUNNING,
    ]
    reachable = _reachable(S.CREATED)
    assert reachable == set(JobStatus) - UNUSED
    assert not any(UNUSED & targets for targets in JOB_STATUS_TRANSITIONS.values())


def test_the_refusal_names_what_is_allowed() -> None:
    with pytest.raises(IllegalJobStatusTransition) as refused:
        transition(S.CREATED, S.RUNNING)
    assert "allowed from CREATED: CANCELED, FAILED, FINISHED, INITIALIZING, SUSPENDED" in str(
        refused.value
    )
    with pytest.raises(IllegalJobStatusTransition, match="none, it is terminal"):
        transition(S.CANCELED, S.CANCELED)


def test_only_a_failed_attempt_carries_an_error() -> None:
    error = RuntimeError("boom")
    assert AttemptOutcome.failed(error) == AttemptOutcome(AttemptEnd.FAILED, error)
    assert AttemptOutcome(AttemptEnd.FINISHED).error is None
    with pytest.raises(ValueError):
        AttemptOutcome(AttemptEnd.CANCELLED, error)
    with pytest.raises(ValueError):
        AttemptOutcome(AttemptEnd.FAILED)


def test_worker_outcomes_keep_their_wire_names() -> None:
    # Spark returns them to the driver as text: the names must stay stable.
    assert {o.value for o in WorkerOutcome} == {
        "finished",
        "cancelled",
        "failed",
        "crashed",
        "master-lost",
    }
