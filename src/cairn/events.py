"""Events that travel through channels between records.

Invariant: events are immutable values; in aligned mode they are queued behind the
records sent before them and are never reordered with respect to those records.
Watermarks and watermark statuses are never priority events: they keep their position
among the records, also in the in-flight data of an unaligned checkpoint. Latency markers
keep their position too, but are no channel state: a barrier that overtakes one leaves it
queued, and an unaligned checkpoint does not persist it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cairn.ids import CheckpointId


class CheckpointType(enum.Enum):
    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


class SavepointFormatType(enum.Enum):
    """How a savepoint writes keyed state (Flink's ``SavepointFormatType``).

    ``CANONICAL`` (the default): the heap backend's format whatever the backend, restorable
    into any backend; ``NATIVE``: the backend's own files (RocksDB: its checkpoint, faster to
    take and to restore, but only into RocksDB). Checkpoints are always native.
    """

    CANONICAL = "canonical"
    NATIVE = "native"


class AlignmentMode(enum.Enum):
    ALIGNED = "aligned"  # exactly-once: block channels until every barrier arrived
    AT_LEAST_ONCE = "at_least_once"  # count barriers, never block
    UNALIGNED = "unaligned"  # exactly-once: barriers overtake in-flight data (issue 4)


@dataclass(frozen=True, slots=True)
class CheckpointOptions:
    type: CheckpointType = CheckpointType.CHECKPOINT
    alignment: AlignmentMode = AlignmentMode.ALIGNED
    # Milliseconds after which an aligned checkpoint turns unaligned; None = never.
    aligned_timeout_ms: int | None = None
    # Stop-with-savepoint (Flink's terminating savepoint): a source emits nothing after this
    # barrier until the job master ends its input (savepoint completed) or resumes it (failed).
    terminate: bool = False
    format_type: SavepointFormatType = SavepointFormatType.CANONICAL  # savepoints only
    # Stop-with-savepoint with drain (Flink's ``--drain``; only with ``terminate``): a source
    # sends the final watermark (``MAX_WATERMARK``) before this barrier, so every event-time
    # timer and window fires and its output is in the savepoint's transaction.
    drain: bool = False

    @property
    def is_savepoint(self) -> bool:
        return self.type is CheckpointType.SAVEPOINT

    @property
    def canonical_state(self) -> bool:
        """Whether keyed state is written in the canonical format (canonical savepoints)."""
        return self.is_savepoint and self.format_type is SavepointFormatType.CANONICAL


DEFAULT_CHECKPOINT_OPTIONS = CheckpointOptions()
"""An aligned checkpoint's options (the default of operators' ``snapshot_state``)."""


@dataclass(frozen=True, slots=True)
class CheckpointBarrier:
    checkpoint_id: CheckpointId
    timestamp_ms: int  # when the coordinator triggered the checkpoint (wall clock)
    options: CheckpointOptions = CheckpointOptions()


@dataclass(frozen=True, slots=True)
class CancelCheckpointMarker:
    """Sent downstream by a task that aborted a checkpoint, so that nobody waits for it."""

    checkpoint_id: CheckpointId


@dataclass(frozen=True, slots=True)
class EndOfPartition:
    """The upstream subtask finished: no record or barrier follows on this channel."""


END_OF_PARTITION = EndOfPartition()

MIN_WATERMARK = -(2**63)
"""The watermark before any (Flink's ``Long.MIN_VALUE``)."""

MAX_WATERMARK = 2**63 - 1
"""The final watermark, sent at end of input (Flink's ``Long.MAX_VALUE``)."""


@dataclass(frozen=True, slots=True)
class Watermark:
    """Event time has reached ``timestamp`` (ms) on this channel: no record with a smaller or
    equal timestamp should follow (later ones are late)."""

    timestamp: int


@dataclass(frozen=True, slots=True)
class WatermarkStatus:
    """The channel became idle (it holds back no watermark) or active again."""

    idle: bool


@dataclass(frozen=True, slots=True)
class LatencyMarker:
    """Flink's ``LatencyMarker``: emitted by subtask ``subtask_index`` of source operator
    ``source_id`` at ``marked_time_ms`` (wall clock, ms), it travels behind the records sent
    before it, skips user functions, and each operator it reaches records now minus
    ``marked_time_ms`` (``cairn.runtime.latency``)."""

    marked_time_ms: float
    source_id: str
    subtask_index: int


IDLE = WatermarkStatus(True)
ACTIVE = WatermarkStatus(False)


def is_priority_event(event: object) -> bool:
    """True for a barrier that may overtake in-flight data: an unaligned one, or an aligned one
    with a timeout (it turns unaligned if alignment lasts too long). Savepoints never do.

    >>> is_priority_event(CheckpointBarrier(CheckpointId(1), 0))
    False
    >>> unaligned = CheckpointOptions(alignment=AlignmentMode.UNALIGNED)
    >>> is_priority_event(CheckpointBarrier(CheckpointId(1), 0, unaligned))
    True
    """
    if type(event) is not CheckpointBarrier:
        return False
    options = event.options
    if options.type is CheckpointType.SAVEPOINT:
        return False
    return options.alignment is AlignmentMode.UNALIGNED or options.aligned_timeout_ms is not None
