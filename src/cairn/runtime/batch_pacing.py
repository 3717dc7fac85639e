"""Time-bounded batches: how many records a task hands its chain at once.

Invariant: after every batch, ``records`` is within ``[1, cap]``, at most twice the previous
size (slow start: a task begins at ``initial`` records, so a slow first batch costs few slow
calls), and no more than the batch time budget allows under the cost model fitted to recent
batches: a batch of ``n`` records costs ``fixed + n * per_record`` (a least-squares fit over
exponentially weighted batches; a batch slower than the model counts as slower records at
once, so the next batch shrinks at once). The budget is ``budget_s``, or twice the fixed cost
when that is larger: shrinking a batch whose time is mostly a per-call cost (a pandas function
over a model, say) would not shorten it, only multiply the calls. A size that repeats for
``PROBE_AFTER`` batches is doubled once, since one size alone cannot tell a fixed cost from a
per-record one.

Between two batches the task thread comes back to its worker's loop and to its priority
events: a checkpoint trigger of a source, a barrier on another channel, an unaligned barrier,
a timeout. Bounding each batch by time as well as by count is what lets a barrier in between
records when records are slow (Flink's mailbox runs such actions between two records).

The policy is pure arithmetic over what the task measured; the task holds one per input (a
source's polls, a network input's slices) and calls :meth:`BatchPacing.learn` after each
batch with its size and duration. At the cap with batches well within the budget (the full
speed path), ``learn`` returns after one comparison.
"""

from __future__ import annotations

# A batch's user work, at most: small next to a checkpoint interval (a barrier or trigger
# waits for at most this, plus one record, per task: 2 % of a 1 s interval), large next to
# the fixed cost of a batch (tens of microseconds: a poll, a call down the chain, a slice put
# back), so bounding costs well under 1 % where it applies; and three times the work of 1,024
# records of the keyed sum's source chain (about 6 us each, wall time, two tasks sharing one
# interpreter), so full-speed batches stay at the count cap on a busy machine too.
BATCH_BUDGET_S = 0.020
PROBE_AFTER = 8  # batches of one size before one batch twice as large
_WEIGHT = 0.3  # of the newest batch in the fitted moments


class BatchPacing:
    """The next batch's size from the costs measured on the previous ones.

    >>> p = BatchPacing(budget_s=0.010, cap=1024)
    >>> p.records  # nothing measured yet: one record
    1
    >>> p.learn(1, 0.020)  # 20 ms per record: one at a time
    >>> p.records
    1
    >>> fast = BatchPacing(budget_s=0.010, cap=1024)
    >>> sizes = []
    >>> for _ in range(11):
    ...     fast.learn(fast.records, fast.records * 2e-6)  # 2 us per record
    ...     sizes.append(fast.records)
    >>> sizes  # slow start, doubling up to the cap
    [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1024]
    >>> fast.learn(1024, 1024 * 0.001)  # records turned slow: 1 ms each
    >>> fast.records
    10
    """

    __slots__ = (
        "_fixed_s",
        "_mn",
        "_mnn",
        "_mnt",
        "_mt",
        "_per_record_s",
        "_repeats",
        "_settled_s",
        "budget_s",
        "cap",
        "records",
    )

    def __init__(
        self, budget_s: float = BATCH_BUDGET_S, cap: int = 1 << 20, initial: int = 1
    ) -> None:
        if budget_s <= 0 or cap < 1 or not 1 <= initial <= cap:
            raise ValueError(
                f"batch pacing needs budget_s > 0 and 1 <= initial <= cap, got "
                f"budget_s={budget_s}, initial={initial}, cap={cap}"
            )
        self.budget_s = budget_s
        self.cap = cap
        self.records = initial
        # Weighted means of n, t, n * n and n * t over recent batches (0.0: none yet).
        self._mn = self._mt = self._mnn = self._mnt = 0.0
        self._per_record_s = 0.0
        self._fixed_s = 0.0
        self._repeats = 0  # batches in a row sized ``records``
        # At the cap, a batch faster than this changes nothing: learn returns at once.
        self._settled_s = -1.0

    @property
    def cost_per_record_s(self) -> float:
        """The fitted cost of one more record in a batch (0.0 before the first batch)."""
        return self._per_record_s

    @property
    def fixed_cost_s(self) -> float:
        """The fitted cost of a batch beside its records (0.0 until sizes differed)."""
        return self._fixed_s

    def learn(self, records: int, seconds: float) -> None:
        """``records`` took ``seconds`` of work: size the next batch."""
        if seconds <= self._settled_s or records <= 0:
            return
        n, t = float(records), seconds
        if self._mn == 0.0:
            self._mn, self._mt, self._mnn, self._mnt = n, t, n * n, n * t
        else:
            self._mn += _WEIGHT * (n - self._mn)
            self._mt += _WEIGHT * (t - self._mt)
            self._mnn += _WEIGHT * (n * n - self._mnn)
            self._mnt += _WEIGHT * (n * t - self._mnt)
        mn, mt = self._mn, self._mt
        variance = self._mnn - mn * mn
        if variance > 0.01 * self._mnn:  # sizes differed enough to fit both costs
            per = max(0.0, (self._mnt - mn * mt) / variance)
            fixed = mt - per * mn
            if fixed < 0.0:
                fixed, per = 0.0, mt / mn
        else:  # one size: keep the fixed cost known, the rest is per record
            fixed = min(self._fixed_s, mt)
            per = (mt - fixed) / mn
        if t > fixed + per * n:  # slower than the model: slower records, at once
            per = (t - fixed) / n
        self._per_record_s, self._fixed_s = per, fixed
        budget = self.budget_s if self.budget_s > 2.0 * fixed else 2.0 * fixed
        grown = 2 * self.records
        size = int((budget - fixed) / per) if per > 0.0 else grown
        size = 1 if size < 1 else (grown if size > grown else size)
        if size > self.cap:
            size = self.cap
        if size != self.records:
            self._repeats = 0
        elif size < self.cap:
            self._repeats += 1
            if self._repeats >= PROBE_AFTER:  # one size cannot tell the two costs apart
                self._repeats = 0
                size = grown if grown < self.cap else self.cap
        self.records = size
        self._settled_s = 0.5 * self.budget_s if size == self.cap else -1.0
