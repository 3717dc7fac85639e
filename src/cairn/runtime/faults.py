"""Fault injection for recovery tests: kill this worker (or the driver) at a chosen moment,
or make it fail.

Invariant: faults fire only in the attempt they name, at most once per worker process, so a
test can script "kill during processing in attempt 0, during upload in attempt 1, ..." and
the job still finishes. Configured with ``cairn.testing.faults`` (see ``parse_faults``).
Every point kills the worker except those in ``FAILING_POINTS``, which raise
``InjectedFailure``: an ordinary error the worker has to handle, as a real one would be.
With ``kill=driver`` a point kills the driver's whole process group instead (a driver loss),
and only if the driver leads its own process group, so a test runner is never hit; points
in ``DRIVER_POINTS`` fire on the driver itself. With ``marker=<file>`` a fault appends where
it fired (``<point> ... (checkpoint <n>)``) to that file before it kills, so a test can check
that it landed where it aimed. With ``kill=pause,for=S`` a point stops the worker's process for
S seconds instead (SIGSTOP, then SIGCONT from a helper process it started: a GC pause, a
frozen VM) and the worker goes on; its marker ends with ``resumed after <s> s`` once it did.
With ``after=<file>`` a fault fires only once that file exists (another fault's marker), so a
kill planned after a pause in the same attempt waits for the pause.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from cairn.ids import AttemptNumber, CheckpointId

POINTS = (
    "processing",  # after the task consumed `records` input records
    "alignment",  # a barrier received on some input channels, not yet on all
    "after-barrier",  # barrier forwarded, synchronous snapshot taken, before acknowledgement
    "during-upload",  # asynchronous part: after the first state file was written
    "before-commit",  # checkpoint completed, before the operators' commit (notify)
    "after-commit",  # right after the commit on notification
    "replay",  # after processing `records` records of restored in-flight data (unaligned)
    "register",  # the worker cannot register with the job master (`subtask`: worker index)
    "driver-metadata",  # on the driver: `_metadata` written aside, before it is published
    # async I/O: requests in flight, once a completed checkpoint stores >= `records` inputs
    "async-in-flight",
)
FAILING_POINTS = frozenset({"register"})
DRIVER_POINTS = frozenset({"driver-metadata"})


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
    kill: str = "worker"  # "driver": the driver's process group; "pause": stop, go on
    driver_pid: int | None = None  # filled in by the job master for kill=driver
    marker: str | None = None  # a file to append where the fault fired to, before it kills
    pause_s: float = 0.0  # kill=pause: how long the worker's process stays stopped
    after: str | None = None  # fire only once this file (another fault's marker) exists


def parse_faults(text: str) -> tuple[FaultSpec, ...]:
    """Parse ``point=processing,attempt=0,records=5000,subtask=1; point=during-upload,...``.

    >>> parse_faults("point=alignment,kill=pause,for=2.5,after=/m/fault-0")[0].pause_s
    2.5
    >>> parse_faults("point=alignment,kill=pause")
    Traceback (most recent call last):
    ...
    ValueError: fault kill=pause needs for=<seconds> > 0
    """
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
                kill=_kill_target(fields.get("kill", "worker")),
                marker=fields.get("marker"),
                pause_s=float(fields.get("for", 0)),
                after=fields.get("after"),
            )
        )
        if specs[-1].kill == "pause" and specs[-1].pause_s <= 0:
            raise ValueError("fault kill=pause needs for=<seconds> > 0")
        if specs[-1].kill == "pause" and point in FAILING_POINTS | DRIVER_POINTS:
            raise ValueError(f"fault point {point!r} cannot pause a worker")
    return tuple(specs)


def _kill_target(value: str) -> str:
    if value not in ("worker", "driver", "pause"):
        raise ValueError(f"unknown fault kill target {value!r}; expected worker, driver or pause")
    return value


def _mark(spec: FaultSpec, where: str, end: str = "\n") -> None:
    if spec.marker is not None:
        with open(spec.marker, "a", encoding="utf-8") as f:
            f.write(where + end)
            f.flush()
            os.fsync(f.fileno())


def kill_driver(spec: FaultSpec, where: str) -> None:
    """SIGKILL the driver's process group (the driver, its JVM): a driver loss at ``where``.

    Raises:
        RuntimeError: the driver does not lead its own process group (it was not started in
            a session of its own), so killing the group could hit the test runner.
    """
    pid = spec.driver_pid if spec.driver_pid is not None else os.getpid()
    if os.getpgid(pid) != pid:
        raise RuntimeError(
            f"fault kill=driver at {where}: the driver (pid {pid}) does not lead its own "
            "process group; start it in a new session (start_new_session=True)"
        )
    _mark(spec, where)
    os.killpg(pid, signal.SIGKILL)


def with_driver_pid(faults: tuple[Any, ...], first_attempt: int = 0) -> tuple[Any, ...]:
    """``faults`` as a run of the driver applies them: this process named in every
    ``kill=driver`` spec, attempts counted from the run's ``first_attempt`` (a rerun of a job
    numbers its attempts above the earlier run's)."""
    pid = os.getpid()
    out: list[Any] = []
    for f in faults:
        if isinstance(f, FaultSpec):
            f = replace(f, attempt=AttemptNumber(f.attempt + first_attempt))
            if f.kill == "driver":
                f = replace(f, driver_pid=pid)
        out.append(f)
    return tuple(out)


def driver_fault_hook(faults: tuple[Any, ...]) -> Callable[[CheckpointId], None] | None:
    """The checkpoint coordinator's hook for ``driver-metadata`` faults, if any is set."""
    specs = tuple(f for f in faults if isinstance(f, FaultSpec) and f.point in DRIVER_POINTS)
    if not specs:
        return None
    driver = DriverFaults(specs)
    return lambda cid: driver.check("driver-metadata", cid)


class DriverFaults:
    """The driver's fault points (``DRIVER_POINTS``): each spec fires at most once."""

    def __init__(self, specs: tuple[FaultSpec, ...]) -> None:
        self._specs = [s for s in specs if s.point in DRIVER_POINTS]

    def check(self, point: str, checkpoint_id: CheckpointId) -> None:
        for spec in self._specs:
            if spec.point == point and spec.checkpoint in (None, checkpoint_id):
                self._specs.remove(spec)
                kill_driver(spec, f"{point} (checkpoint {checkpoint_id})")


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
            if spec.after is not None and not os.path.exists(spec.after):
                continue
            self._specs.remove(spec)
            where = f"{point} of {vertex_name}#{subtask} (checkpoint {checkpoint_id})"
            if point in FAILING_POINTS:
                raise InjectedFailure(f"injected failure at {where}")
            if spec.kill == "pause":
                self._pause(spec, where)
                return
            if spec.kill == "driver":
                kill_driver(spec, where)
            else:
                _mark(spec, where)
            self._kill(where)

    def _pause(self, spec: FaultSpec, where: str) -> None:
        """Stop this worker for ``spec.pause_s``: its whole process (a helper process sends
        SIGSTOP and, after the pause, SIGCONT: a stopped process cannot wake itself), or
        with workers as threads of the test process, this thread only."""
        _mark(spec, f"{where}, paused for {spec.pause_s:g} s", end="")
        started = time.monotonic()
        if self._hard_kill:
            # The helper stops this process while it waits here, at the point, and wakes it
            # after the pause: no race between the stop and the wake-up.
            script = f"kill -STOP {os.getpid()}; sleep {spec.pause_s}; kill -CONT {os.getpid()}"
            subprocess.run(["sh", "-c", script], stdin=subprocess.DEVNULL, start_new_session=True)
        else:
            time.sleep(spec.pause_s)
        _mark(spec, f"; resumed after {time.monotonic() - started:.2f} s")

    def _kill(self, where: str) -> None:
        if self._hard_kill:
            os.kill(os.getpid(), signal.SIGKILL)
        raise SimulatedCrash(f"injected crash at {where}")
