"""The CPU time a worker used, as it reports it with its periodic metrics.

Invariant: a reading is cumulative since the worker started (CPU seconds and wall seconds
together), so the job master derives cores from two readings without trusting their spacing,
and one reading costs two clock reads. What is measured depends on who owns the process:

- a worker that owns its process (a Spark Python worker, ``ProcessOwnership.OWNED``): the
  whole process, every thread of it (task thread, network readers and senders, snapshot
  uploads, the interpreter's own work), from ``time.process_time()`` less its value when the
  worker started (a reused Python worker's earlier tasks are not counted);
- a worker running as a thread of the driver (the in-process executor): only its task
  thread, ``time.thread_time()`` of the thread that reads it (the worker's own thread, so
  zero when it started). The driver's process also runs the job master, other workers and
  the user's code: its CPU is nobody's alone. The network and snapshot threads are left out,
  so an in-process figure is a lower bound; the scope says which.

>>> clock = CpuClock(ProcessOwnership.OWNED)
>>> reading = clock.read()
>>> reading.scope, reading.cpu_s >= 0.0, reading.elapsed_s >= 0.0
('process', True, True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from cairn.deploy.process_tuning import ProcessOwnership

__all__ = ["PROCESS", "TASK_THREAD", "CpuClock", "CpuScope", "WorkerCpu"]

CpuScope = Literal["process", "task-thread"]
PROCESS: CpuScope = "process"
TASK_THREAD: CpuScope = "task-thread"


@dataclass(frozen=True, slots=True)
class WorkerCpu:
    """One reading: ``cpu_s`` CPU seconds used in ``elapsed_s`` wall seconds since the worker
    started, measured over ``scope`` (the worker's process, or its task thread only)."""

    cpu_s: float
    elapsed_s: float
    scope: CpuScope = PROCESS


class CpuClock:
    """Reads a worker's CPU time (see the module's docstring for what it covers).

    With ``SHARED`` ownership, :meth:`read` must run on the worker's own thread (the task
    thread that sends the metrics reports): ``time.thread_time()`` reads the calling thread.
    """

    def __init__(self, ownership: ProcessOwnership) -> None:
        owned = ownership is ProcessOwnership.OWNED
        self.scope: CpuScope = PROCESS if owned else TASK_THREAD
        self._clock = time.process_time if owned else time.thread_time
        self._cpu0 = self._clock() if owned else 0.0  # a thread's clock starts with it
        self._wall0 = time.monotonic()

    def read(self) -> WorkerCpu:
        return WorkerCpu(self._clock() - self._cpu0, time.monotonic() - self._wall0, self.scope)
