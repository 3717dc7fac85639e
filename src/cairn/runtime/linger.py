"""When an idle worker wakes up, and when a rate-limited source is polled: the linger that
makes a busy worker's cost follow its records, not its wake-ups.

A worker that just did work is likely to get more soon: it sleeps until its next deadline (a
timer, a source's next batch) but at most ``linger`` seconds, without waking for input meanwhile;
what arrived is read when it wakes, in one turn. A worker whose last wake-up found nothing
waits for input and wakes at once, so the first record after a quiet spell travels without
delay (TCP's Nagle with a bound: send at once on an idle wire, coalesce while frames follow
each other closely). A rate-limited source is polled no more often than every ``linger``
seconds while it keeps producing: its records wait in its limiter and leave as one batch.

Invariants: no input waits more than ``linger`` seconds for a worker that is not busy with
other input (and none at all after a quiet spell); a deadline is never slept past; with
``linger == 0`` every input wakes the worker and sources are polled as soon as they are due.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Wait", "plan_wait", "source_due"]


@dataclass(frozen=True)
class Wait:
    """How an idle worker sleeps: ``seconds`` at most, woken by input or not."""

    seconds: float
    wake_on_input: bool


def plan_wait(worked_since_last_wait: bool, until_deadline_s: float, linger_s: float) -> Wait:
    """The worker's next sleep, given whether its last wake-up led to work.

    >>> plan_wait(True, 0.010, 0.002)  # busy: a turn every 2 ms at most, input waits for it
    Wait(seconds=0.002, wake_on_input=False)
    >>> plan_wait(True, 0.001, 0.002)  # ... but never past a deadline
    Wait(seconds=0.001, wake_on_input=False)
    >>> plan_wait(False, 0.050, 0.002)  # quiet: the first input wakes it
    Wait(seconds=0.05, wake_on_input=True)
    >>> plan_wait(True, 0.050, 0.0)  # no linger
    Wait(seconds=0.05, wake_on_input=True)
    """
    if worked_since_last_wait and linger_s > 0:
        return Wait(min(until_deadline_s, linger_s), False)
    return Wait(until_deadline_s, True)


def source_due(now: float, due_in_s: float, last_batch_at: float | None, linger_s: float) -> float:
    """When to poll a rate-limited source next: when its records are due, but no sooner than
    ``linger`` after its last batch (monotonic seconds).

    >>> source_due(10.0, 0.001, 10.0, 0.002)  # records every 1 ms: polled every 2 ms
    10.002
    >>> source_due(10.0, 0.004, 10.0, 0.002)  # slower than the linger: when due
    10.004
    >>> source_due(10.0, 0.001, None, 0.002)  # after an empty poll: when due
    10.001
    """
    due = now + due_in_s
    if last_batch_at is not None and last_batch_at + linger_s > due:
        return last_batch_at + linger_s
    return due
