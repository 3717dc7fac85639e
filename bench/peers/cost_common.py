"""The peers' side of the cost-at-a-rate benchmark (``python -m bench.cost_curve``): pacing by
a schedule, and the options every cost job takes.

Invariant: record ``n`` of a subtask paced at ``r`` records/s is due at ``start + (n + 1) / r``
and is stamped with that due time (``created_ns``), never with the time it was made: a job that
falls behind shows it as latency (no coordinated omission). Records are released in batches of
``max(1, r * 1 ms)`` once a batch's last record is due — the grant rule of Cairn's
``RateLimiter`` — so no record leaves before it is due. Standard library only: every peer venv
loads it.
"""

from __future__ import annotations

import argparse

__all__ = ["BATCH_S", "Pacer", "add_cost_args"]

BATCH_S = 0.001  # a grant is at least this much of the rate's records (as Cairn's limiter)


class Pacer:
    """One subtask's schedule at ``rate`` records/s from ``start_ns`` (epoch ns).

    >>> p = Pacer(1000.0, start_ns=0)  # one record per ms, batches of one record
    >>> p.due_ns(0), p.due_ns(1)
    (1000000, 2000000)
    >>> p.grant(now_ns=500_000, limit=100)  # the first record is not due yet
    0
    >>> p.ready_ns()
    1000000
    >>> p.grant(now_ns=3_500_000, limit=100)  # three are due: released together
    3
    >>> p.next, p.ready_ns()
    (3, 4000000)
    """

    def __init__(self, rate: float, start_ns: int, batch_s: float = BATCH_S) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.step_ns = 1e9 / rate
        self.start_ns = start_ns
        self.batch = max(1, int(rate * batch_s))
        self.next = 0  # the next record's number in this subtask

    def due_ns(self, n: int) -> int:
        """When record ``n`` is due (its ``created_ns``)."""
        return self.start_ns + int((n + 1) * self.step_ns)

    def grant(self, now_ns: int, limit: int) -> int:
        """How many records may leave now (at most ``limit``): every due one, but none until a
        whole batch is due; the granted ones are ``next .. next + granted - 1`` before the
        call."""
        due = int((now_ns - self.start_ns) / self.step_ns) - self.next
        if due < min(self.batch, limit):
            return 0
        granted = min(due, limit)
        self.next += granted
        return granted

    def ready_ns(self) -> int:
        """When the next batch is due (its last record's due time)."""
        return self.due_ns(self.next + self.batch - 1)


def add_cost_args(parser: argparse.ArgumentParser) -> None:
    """The options of every system's cost job (``bench/cost_job.py`` and the peers')."""
    parser.add_argument("--rate", type=float, required=True, help="records/s of the source")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument("--out", required=True, help="the file sink's directory")
    parser.add_argument("--work-dir", required=True, help="checkpoints and scratch")
