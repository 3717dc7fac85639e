"""The committer stage of a sink with a global committer (``Sink.global_committer``).

Invariant: runs as one subtask (all writers' committables reach it over a ``global_()``
edge); the committables it received before a checkpoint's barrier become that checkpoint's
one ``CheckpointCommittables``, pre-committed in its state and handed to the sink's committer
when the checkpoint completes (again, idempotently, after a restore) — so each checkpoint is
at most one commit of the sink's committer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.api.connectors import (
    CheckpointCommittables,
    Committer,
    Sink,
    SinkWriter,
    SinkWriterContext,
)
from cairn.ids import CheckpointId

__all__ = ["GlobalCommitStage"]


class _Gatherer(SinkWriter):
    """Keeps the committables received since the last barrier."""

    def __init__(self, context: SinkWriterContext) -> None:
        self._job_id = context.job_id
        self._received: list[Any] = []

    def write(self, record: Any) -> None:
        self._received.append(record)

    def write_batch(self, records: Sequence[Any]) -> None:
        self._received.extend(records)

    def prepare_commit(self, checkpoint_id: CheckpointId) -> list[CheckpointCommittables]:
        if not self._received:
            return []
        received, self._received = tuple(self._received), []
        return [CheckpointCommittables(self._job_id, checkpoint_id, received)]


class GlobalCommitStage(Sink):
    """The committer half of ``sink`` (its writers run in a ``SINK_WRITER`` operator).

    >>> from cairn.api.connectors import SinkWriterContext
    >>> w = GlobalCommitStage(None).create_writer(SinkWriterContext(0, 1, 0, "j"), [])
    >>> w.write_batch(["f1", "f2"]); w.prepare_commit(3)
    [CheckpointCommittables(job_id='j', checkpoint_id=3, committables=('f1', 'f2'))]
    >>> w.prepare_commit(4)
    []
    """

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def create_writer(self, context: SinkWriterContext, restored_state: Sequence[Any]) -> _Gatherer:
        return _Gatherer(context)

    def create_committer(self) -> Committer | None:
        committer: Committer | None = self.sink.create_committer()
        return committer

    def check_job(self, settings: Any) -> None:
        self.sink.check_job(settings)
