"""Where concurrent runs of the fault campaign (``--parallel``) wait for each other: their
maximum's jobs warmed up and measured together, their faults begun once every job started.

Invariant: a run arrives at each gate once, and a run that gives up arrives at every gate
it had not reached, so no run waits for one that is gone.
"""

from __future__ import annotations

import threading


class StartGate:
    """Holds concurrent runs until every one arrived (or gave up): at ``started``, one
    job's host kills and storage outages would otherwise fail the others' first attempts.

    >>> gate = StartGate(1); gate.arrive(); gate.wait()
    """

    def __init__(self, runs: int) -> None:
        self._waiting = runs
        self._cond = threading.Condition()

    def arrive(self) -> None:
        with self._cond:
            self._waiting -= 1
            self._cond.notify_all()

    def wait(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._waiting <= 0)


class RunGates:
    """One run's way through the gates it shares with concurrent runs, by name (``warm``:
    its maximum's job warmed up; ``measured``: that job ended; ``started``: its faulted job
    started), and how long it waits after ``measured`` (``delay_s``: the Spark sessions
    start one after the other). A run that gives up ``leave``s: it arrives at every gate it
    had not reached, so the others do not wait for it. No gates: a run alone.

    >>> gates = RunGates({"started": StartGate(1)}); gates.meet("started"); gates.leave()
    >>> RunGates({}).meet("warm")
    """

    def __init__(self, gates: dict[str, StartGate], delay_s: float = 0.0) -> None:
        self._gates = gates
        self._arrived: set[str] = set()
        self.delay_s = delay_s

    def meet(self, name: str) -> None:
        gate = self._gates.get(name)
        if gate is None:
            return
        if name not in self._arrived:
            self._arrived.add(name)
            gate.arrive()
        gate.wait()

    def leave(self) -> None:
        for name, gate in self._gates.items():
            if name not in self._arrived:
                self._arrived.add(name)
                gate.arrive()
