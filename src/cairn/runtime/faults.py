"""Fault injection for recovery tests: kill this worker at a chosen moment, or make it fail.

Invariant: faults fire only in the attempt they name, at most once per worker process, so a
test can script "kill during processing in attempt 0, during upload in attempt 1, ..." and
the job still finishes. Configured with ``cairn.testing.faults`` (see ``parse_faults``).
Every point kills the worker except those in ``FAILING_POINTS``, which raise
``InjectedFailure``: an ordinary error the worker has to handle, as a real one would be.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

from cairn.ids import AttemptNumber, CheckpointId

POINTS = (
    "processing",  # after the task consumed `records` input records
    "after-barrier",  # barrier forwarded, synchronous snapshot taken, before acknowledgement
    "during-upload",  # asynchronous part: after the first state file was written
    "before-commit",  # checkpoint completed, before the operators' commit (notify)
    "after-commit",  # right after the commit on notification
    "replay",  # after processing `records` records of restored in-flight data (unaligned)
    "register",  # the worker cannot register with the job master (`subtask`: worker index)
)
FAILING_POINTS = frozenset({"register"})


class SimulatedCrash(BaseException):
    """Raised instead of SIGKILL when workers are threads of the test process."""


class InjectedFailure(ConnectionError):
    """An injected error at one of ``FAILING_POINTS`` (e.g. the job master is unreachable)."""


_FIRST_ATTEMPT = AttemptNumber(0)


@dataclass(frozen=True)
class FaultSpec:
    point: str
    attempt: AttemptNumber = _FIRST_ATTEMPT
    checkpoint: CheckpointId | None = None
    subtask: int | None = None  # a subtask index, or a worker index at worker points
    vertex: str | None = None  # substring of the vertex name
    records: int = 0


def parse_faults(text: str) -> tuple[FaultSpec, ...]:
    """Parse ``point=processing,attempt=0,records=5000,subtask=1; point=during-upload,...``."""
    specs = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        fields = dict(kv.split("=", 1) for kv in part.split(","))
        point = fields.pop("point")
        if point not in POINTS:
            raise ValueError(f"unknown fault point {point!r}; expected one of {POINTS}")
        specs.append(
            FaultSpec(
                point=point,
                attempt=AttemptNumber(int(fields.pop("attempt", 0))),
                checkpoint=CheckpointId(int(fields["checkpoint"]))
                if "checkpoint" in fields
                else None,
                subtask=int(fields["subtask"]) if "subtask" in fields else None,
                vertex=fields.get("vertex"),
                records=int(fields.get("records", 0)),
            )
        )
    return tuple(specs)


class FaultInjector:
    def __init__(
        self, specs: tuple[FaultSpec, ...], attempt: AttemptNumber, hard_kill: bool
    ) -> None:
        self._specs = [s for s in specs if s.attempt == attempt]
        self._hard_kill = hard_kill

    @property
    def active(self) -> bool:
        return bool(self._specs)

    def check(
        self,
        point: str,
        vertex_name: str,
        subtask: int,
        checkpoint_id: CheckpointId | None = None,
        records: int = 0,
    ) -> None:
        for spec in self._specs:
            if spec.point != point:
                continue
            if spec.subtask is not None and spec.subtask != subtask:
                continue
            if spec.vertex is not None and spec.vertex not in vertex_name:
                continue
            if spec.checkpoint is not None and spec.checkpoint != checkpoint_id:
                continue
            if records < spec.records:
                continue
            self._specs.remove(spec)
            where = f"{point} of {vertex_name}#{subtask} (checkpoint {checkpoint_id})"
            if point in FAILING_POINTS:
                raise InjectedFailure(f"injected failure at {where}")
            self._kill(where)

    def _kill(self, where: str) -> None:
        if self._hard_kill:
            os.kill(os.getpid(), signal.SIGKILL)
        raise SimulatedCrash(f"injected crash at {where}")
