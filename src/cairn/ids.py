"""Typed identifiers shared by every layer.

Invariant: ids are plain values (str/int) wrapped in ``NewType`` so that mypy keeps a
checkpoint id from being passed where a subtask index is expected, at zero runtime cost.
"""

from __future__ import annotations

from typing import NewType

JobId = NewType("JobId", str)
"""Hex id of one job run; checkpoints of a job live under ``<storage>/<job_id>/``."""

CheckpointId = NewType("CheckpointId", int)
"""Monotonically increasing over the whole life of a job, across restarts."""

AttemptNumber = NewType("AttemptNumber", int)
"""Deployment attempt of a job: 0 for the first deployment, +1 for every restart."""

OperatorUid = NewType("OperatorUid", str)
"""Stable operator id (``DataStream.uid``); state in checkpoints is keyed by it."""

VertexId = NewType("VertexId", int)
"""Id of a job vertex (a chain of operators executed by one task)."""

SubtaskIndex = NewType("SubtaskIndex", int)

KeyGroup = NewType("KeyGroup", int)
"""A key's shard in ``[0, max_parallelism)``; the unit of keyed-state redistribution."""
