"""The source and sink contracts every connector implements (PyFlink: ``connectors.base``).

Invariant: a ``Source``/``Sink`` object is a picklable description created on the driver;
readers, writers and committers are created on the workers, one per subtask, and all their
recoverable state is what ``snapshot_state``/``prepare_commit`` returned at a checkpoint.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn.ids import AttemptNumber, CheckpointId, JobId, SubtaskIndex

if TYPE_CHECKING:
    from cairn.settings import JobSettings

__all__ = [
    "CheckpointCommittables",
    "Committer",
    "DeliveryGuarantee",
    "Sink",
    "SinkWriter",
    "SinkWriterContext",
    "Source",
    "SourceReader",
    "SourceReaderContext",
    "SplitBatch",
    "TimestampedBatch",
    "commits_on_checkpoints",
]


class DeliveryGuarantee(enum.Enum):
    """What a sink promises about its output after failures (PyFlink's names and values).

    ``EXACTLY_ONCE``: each record is visible once (two-phase commit on checkpoints);
    ``AT_LEAST_ONCE``: nothing is lost, records since the last checkpoint may repeat after a
    restart; ``NONE``: records may be lost or repeated.

    >>> DeliveryGuarantee.AT_LEAST_ONCE.name
    'AT_LEAST_ONCE'
    """

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2


class SplitBatch(list[Any]):
    """Records a split-aware reader polled, with their source timestamps and splits.

    ``timestamps`` has one entry per record (epoch ms, or ``None``); ``split_runs`` lists
    ``(split id, count)`` for consecutive records of one split, in order, summing to the
    batch's length. Returned only by readers whose ``split_ids()`` is not ``None``; the source
    operator turns it into the runtime's own batch (it never travels further).

    >>> b = SplitBatch.of(["a", "b", "c"], [1, 2, 5], [("t-0", 2), ("t-1", 1)])
    >>> list(b), b.timestamps, b.split_runs
    (['a', 'b', 'c'], [1, 2, 5], [('t-0', 2), ('t-1', 1)])
    """

    __slots__ = ("split_runs", "timestamps")

    timestamps: list[int | None]
    split_runs: list[tuple[str, int]]

    @staticmethod
    def of(
        records: list[Any], timestamps: list[int | None], split_runs: list[tuple[str, int]]
    ) -> SplitBatch:
        batch = SplitBatch(records)
        batch.timestamps = timestamps
        batch.split_runs = split_runs
        return batch


class TimestampedBatch(list[Any]):
    """Records a reader stamped itself (Flink's ``ReaderOutput.collect(record, timestamp)``
    with a watermark generator pushed into the source).

    ``timestamps`` has one entry per record (epoch ms); ``max_read`` is the largest event time
    among every row the reader read to produce them, rows it dropped included (a filter
    pushed into the source), or ``None``. The source operator's watermark generator sees
    ``max_read``, so a pushed-down filter does not change the watermarks; a strategy without
    a timestamp assigner keeps the records' timestamps. Any reader may return one; it never
    travels past the source operator.

    >>> b = TimestampedBatch.of(["a", "b"], [3, 5], max_read=9)
    >>> list(b), b.timestamps, b.max_read
    (['a', 'b'], [3, 5], 9)
    """

    __slots__ = ("max_read", "timestamps")

    timestamps: list[int | None]
    max_read: int | None

    @staticmethod
    def of(
        records: list[Any], timestamps: list[int | None], max_read: int | None
    ) -> TimestampedBatch:
        batch = TimestampedBatch(records)
        batch.timestamps = timestamps
        batch.max_read = max_read
        return batch


@dataclass(frozen=True)
class SourceReaderContext:
    subtask_index: SubtaskIndex
    parallelism: int
    attempt_number: AttemptNumber
    job_id: JobId


class SourceReader(ABC):
    """Reads the splits assigned to one subtask. Called from the task thread only."""

    @abstractmethod
    def poll_batch(self, max_records: int) -> list[Any] | None:
        """Return up to ``max_records`` records.

        ``[]`` means nothing is available right now (the task retries later); ``None`` means
        every split of this reader is exhausted (bounded sources). Must not block for long
        (a few milliseconds at most): barriers are injected between two calls.
        """

    @abstractmethod
    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[Any]:
        """Split states that resume reading right after the last record returned.

        Elements must be picklable; on restore they are redistributed across subtasks
        according to ``Source.split_redistribution`` and passed to ``create_reader``.
        """

    def available_in_s(self) -> float | None:
        """After ``poll_batch`` returned ``[]``: seconds until records may be there again.

        The task thread sleeps until then unless other work wakes it (``0.0``: poll again
        at once). ``None`` (the default) means unknown: the task polls again after at most
        50 ms. Flink's counterpart is the future of ``SourceReader.isAvailable()``.
        """
        return None

    def records_due_in_s(self) -> float | None:
        """Seconds until ``poll_batch`` can return records again, exactly: a poll before then
        returns nothing (a rate-limited reader's next permit: Flink's ``isAvailable()``
        future of a ``RateLimitedSourceReader``), so the task does not poll before then.
        Asked after every poll that returned fewer records than asked for. ``None`` (the
        default): unknown, records may come any time (the task polls whenever it runs, and
        sleeps per ``available_in_s`` after an empty poll).
        """
        return None

    def split_ids(self) -> list[str] | None:
        """Per-split event time (Flink's per-split watermark generation): the ids of the
        splits this reader reads now, or ``None`` (the default): one watermark generator per
        subtask, and ``poll_batch`` returns plain lists.

        A reader that returns a list here returns ``SplitBatch``es from ``poll_batch``; the
        source operator then keeps one generator per split, asks again on every watermark
        interval (new splits join, finished ones leave) and emits the minimum over the
        splits that are not idle (idle when all are, or when there are none).
        """
        return None

    def notify_checkpoint_complete(self, checkpoint_id: CheckpointId) -> None:  # noqa: B027
        """The checkpoint completed on every task (optional hook)."""

    def close(self) -> None:  # noqa: B027
        """Release resources; never called twice, and nothing is called after it."""


class Source(ABC):
    """A picklable source description (``env.from_source(source, watermark_strategy, name)``)."""

    # "split": each restored split state goes to exactly one subtask (round-robin on rescale);
    # "union": every subtask receives every restored element and picks its own.
    split_redistribution: str = "split"

    @abstractmethod
    def is_bounded(self) -> bool: ...

    @abstractmethod
    def create_splits(self, parallelism: int) -> list[Any]:
        """Initial split states of a fresh start, distributed round-robin over subtasks."""

    @abstractmethod
    def create_reader(self, splits: Sequence[Any], context: SourceReaderContext) -> SourceReader:
        """A reader for ``splits`` (initial or restored split states)."""


@dataclass(frozen=True)
class SinkWriterContext:
    subtask_index: SubtaskIndex
    parallelism: int
    attempt_number: AttemptNumber
    job_id: JobId


class SinkWriter(ABC):
    """Writes the records of one subtask. Called from the task thread only."""

    @abstractmethod
    def write(self, record: Any) -> None: ...

    def write_batch(self, records: Sequence[Any]) -> None:
        for record in records:
            self.write(record)

    def write_watermark(self, watermark: int) -> None:  # noqa: B027
        """Event time reached ``watermark`` at this writer (Flink's ``writeWatermark``), for
        writers that decide by event time; ignored by default."""

    def prepare_commit(self, checkpoint_id: CheckpointId) -> list[Any]:
        """Pre-commit at a checkpoint barrier (or at end of input).

        Make everything written so far durable but not yet visible, and return picklable
        committables that a ``Committer`` can make visible later. Writers of sinks without a
        committer return ``[]``.
        """
        return []

    def snapshot_state(self, checkpoint_id: CheckpointId) -> list[Any]:
        """Writer state to restore with (e.g. part counters); picklable elements."""
        return []

    def flush(self, end_of_input: bool) -> None:  # noqa: B027
        """Flush buffered data (end of input, before a checkpoint, or when
        ``next_flush_ms`` has come)."""

    def next_flush_ms(self) -> int | None:
        """Wall-clock ms at which buffered data is due even if no record arrives (a batch
        interval), or ``None``; the task then calls ``flush(False)``."""
        return None

    def close(self) -> None:  # noqa: B027
        """Release resources; uncommitted data may be left for recovery to abort."""


class Committer(ABC):
    """Makes pre-committed data visible (second phase of a two-phase commit)."""

    @abstractmethod
    def commit(self, committables: Sequence[Any]) -> None:
        """Commit; must be idempotent: after a restore the same committables come again."""

    def abort_leftovers(self, context: SinkWriterContext) -> None:  # noqa: B027
        """After a restore (or a restart), once every restored committable was committed:
        remove data of earlier attempts of this job, and of the earlier run a restored job
        started from, that no committable refers to any more. Called on subtask 0 only;
        writers of the current attempt may already be writing (keep their data)."""

    def close(self) -> None:  # noqa: B027
        """Release resources (connections); called once, when the sink operator closes."""


@dataclass(frozen=True)
class CheckpointCommittables:
    """What the committer of a sink with a global committer commits at once: every
    writer's committables that reached the one committer subtask before the barrier of
    ``checkpoint_id`` (usually those the writers prepared at that checkpoint; under
    unaligned checkpoints some may come one checkpoint later), of job ``job_id``.

    >>> CheckpointCommittables("9f2c", 7, ("a", "b")).checkpoint_id
    7
    """

    job_id: JobId
    checkpoint_id: CheckpointId
    committables: tuple[Any, ...]


class Sink(ABC):
    """A picklable sink description (``DataStream.sink_to(sink)``).

    ``global_committer`` (Flink's SinkV2 with a global pre-commit topology, as its Iceberg
    sink): the writers run in parallel and, at each barrier, send their committables to a
    single committer subtask, whose committer receives them as one
    ``CheckpointCommittables`` per checkpoint (so a checkpoint is one commit); otherwise
    each subtask commits its own writer's committables.
    """

    global_committer: bool = False

    @abstractmethod
    def create_writer(
        self, context: SinkWriterContext, restored_state: Sequence[Any]
    ) -> SinkWriter: ...

    def create_committer(self) -> Committer | None:
        """A committer makes the sink two-phase (exactly-once); ``None`` for plain sinks."""
        return None

    def check_job(self, settings: JobSettings) -> None:  # noqa: B027
        """Refuse a job this sink cannot serve correctly (e.g. a transaction timeout shorter
        than the checkpoint interval): called on the driver by ``prepare_job`` with the
        job's validated settings, before anything is deployed. Raises ``ConfigurationError``.
        """

    def redirected(self, name: str, directory: str) -> Sink | None:
        """Optional, for ``cairn chaos`` (Cairn's): a copy of this sink that commits where
        nothing else writes, for one test run; ``name`` is unique to the run and this sink
        (letters, digits and ``_``: a table, topic or prefix suffix), ``directory`` an empty
        local directory of its own. ``None`` (the default): the sink's output is not
        compared. Called on the driver before the run; the copy is the one the run deploys,
        and ``committed_records`` is then asked of the copy.

        >>> class Lines(Sink):
        ...     def __init__(self, path): self.path = path
        ...     def create_writer(self, context, restored_state): ...
        ...     def redirected(self, name, directory): return Lines(f"{directory}/out")
        ...     def committed_records(self): return open(self.path).read().splitlines()
        >>> Lines("/data/out").redirected("run_1", "/tmp/run-1").path
        '/tmp/run-1/out'
        """
        return None

    def committed_records(self) -> Sequence[Any] | None:
        """Optional, for ``cairn chaos``: every record this (redirected) sink's committed
        output holds now, the job having ended (what a reader of the output would see: only
        what committers made visible); compared as ``str(record)``, in any order. ``None``
        (the default): not compared."""
        return None


def commits_on_checkpoints(sink: Sink) -> bool:
    """Whether ``sink`` is two-phase: its class provides a committer, which makes output
    visible when a checkpoint completes. Decided on the driver without creating a committer
    (committers are created on the workers); a class that overrides ``create_committer``
    counts even if it may return None, so that recovery errs on the side of exactly-once.

    >>> class Plain(Sink):
    ...     def create_writer(self, context, restored_state): ...
    >>> commits_on_checkpoints(Plain())
    False
    """
    return type(sink).create_committer is not Sink.create_committer
