"""The exactly-once Kafka sink's protocol, without I/O: transactional ids, the marker,
the pool, and what a writer must do with the transactions a checkpoint left pending.

Invariant: the transactional ids ``<prefix>-<parallelism>-<subtask>-<slot>`` (``slot <
pool``) are used by exactly one live writer: subtask ``i`` of a job at parallelism ``p``
owns the ``p``/``i`` ids, and the transactions a restored checkpoint left pending are settled
by the writer that receives their writer state, before it writes (at the same parallelism
that is their owner; on a rescale, ids of another parallelism that no writer owns). Every
transaction of a subtask carries the next number of the subtask's sequence, and commits,
atomically with its records, that number as the offset of the subtask's marker group
``<prefix>-<parallelism>-<subtask>``; transactions commit in sequence order, so once all the
subtask's ids are fenced, "was transaction ``n`` committed?" is exactly "marker >= n".

>>> ids = TransactionIds("orders", parallelism=2, subtask=1)
>>> ids.transactional_id(0), ids.marker_group
('orders-2-1-0', 'orders-2-1')
>>> p = PendingTransaction(slot=0, seq=7, checkpoint_id=12, records=())
>>> to_redo([p], marker=6) == [p], to_redo([p], marker=7)
(True, [])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cairn.ids import CheckpointId

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "KafkaCommittable",
    "PendingTransaction",
    "StoredRecord",
    "TransactionIds",
    "WriterState",
    "check_pool",
    "free_slot",
    "marker_metadata",
    "to_redo",
]

# Flink's KafkaSink default (DEFAULT_KAFKA_TRANSACTION_TIMEOUT): one hour. Brokers refuse
# more than their transaction.max.timeout.ms (15 min by default) at init_transactions.
DEFAULT_TRANSACTION_TIMEOUT_MS = 3_600_000
# One transaction open, one pre-committed awaiting its checkpoint's completion, and room
# for two checkpoints that failed after their barrier (their transactions wait for the
# next completed checkpoint).
DEFAULT_POOL_SIZE = 4

# (topic, partition or None, key, value, timestamp ms or None): a message as sent, so that
# a transaction aborted by a crash or a timeout can be sent again identically.
StoredRecord = tuple[str, int | None, bytes | None, bytes | None, int | None]


@dataclass(frozen=True)
class TransactionIds:
    """The names of one subtask's transactions and its marker group.

    >>> TransactionIds("p", 4, 3).transactional_id(2)
    'p-4-3-2'
    """

    prefix: str
    parallelism: int
    subtask: int

    @property
    def marker_group(self) -> str:
        return f"{self.prefix}-{self.parallelism}-{self.subtask}"

    def transactional_id(self, slot: int) -> str:
        return f"{self.marker_group}-{slot}"


@dataclass(frozen=True)
class PendingTransaction:
    """A transaction pre-committed at a barrier (flushed) and not yet known
    to be committed, with its records in case it must be sent again."""

    slot: int
    seq: int
    checkpoint_id: CheckpointId
    records: tuple[StoredRecord, ...]


@dataclass(frozen=True)
class WriterState:
    """A writer's state in a checkpoint: one element per writer, so that on a restore at any
    parallelism every old subtask's ids reach exactly one new writer (split redistribution).
    """

    ids: TransactionIds
    pool_size: int
    marker_topic: str
    pending: tuple[PendingTransaction, ...]


@dataclass(frozen=True)
class KafkaCommittable:
    """The committable of one transaction: which live writer holds it and its number. The
    records travel in the writer's state, not here.

    ``live`` is true only for the object the writer returned; a copy read back from a
    checkpoint (unpickled) is not live: the writer that restores the checkpoint's state
    settles its transaction, never a producer of the attempt that wrote it, which may
    survive as a zombie (a crashed thread of the in-process executor).

    >>> import pickle
    >>> c = KafkaCommittable("job", 0, TransactionIds("p", 1, 0), 0, 1, 1)
    >>> c.live, pickle.loads(pickle.dumps(c)).live
    (True, False)
    """

    job_id: str
    attempt: int
    ids: TransactionIds
    slot: int
    seq: int
    checkpoint_id: CheckpointId
    live: bool = field(default=True, compare=False)

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.job_id, self.attempt, self.ids, self.slot, self.seq, self.checkpoint_id)
        return (KafkaCommittable, (*fields, False))


def to_redo(pending: Iterable[PendingTransaction], marker: int) -> list[PendingTransaction]:
    """The pending transactions the marker does not cover, in sequence order: they were
    aborted (by a crash, a fence or a timeout) and must be sent again, oldest first.

    >>> a, b = (PendingTransaction(0, n, n, ()) for n in (3, 4))
    >>> [p.seq for p in to_redo([b, a], marker=3)]
    [4]
    >>> [p.seq for p in to_redo([b, a], marker=2)]
    [3, 4]
    """
    return sorted((p for p in pending if p.seq > marker), key=lambda p: p.seq)


def free_slot(pool_size: int, busy: Iterable[int]) -> int | None:
    """The lowest slot neither open nor pending, or None when the pool is exhausted.

    >>> free_slot(3, [0, 2]), free_slot(2, [1, 0])
    (1, None)
    """
    taken = set(busy)
    for slot in range(pool_size):
        if slot not in taken:
            return slot
    return None


def marker_metadata(job_id: str, attempt: int, checkpoint_id: CheckpointId) -> str:
    """The marker's offset metadata, for people reading the group's offsets.

    >>> marker_metadata("ab12", 1, 7)
    'cairn job ab12 attempt 1 checkpoint 7'
    """
    return f"cairn job {job_id} attempt {attempt} checkpoint {checkpoint_id}"


def check_pool(pending: Sequence[PendingTransaction], pool_size: int) -> None:
    """Refuse a restored state whose pending transactions use slots outside the pool.

    >>> check_pool([PendingTransaction(5, 1, 1, ())], 4)
    Traceback (most recent call last):
    ...
    ValueError: a restored Kafka transaction uses slot 5 of a pool of 4
    """
    for p in pending:
        if not 0 <= p.slot < pool_size:
            raise ValueError(
                f"a restored Kafka transaction uses slot {p.slot} of a pool of {pool_size}"
            )
