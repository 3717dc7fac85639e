"""The faulted run's drivers on the simulated driver host, under ``cairn chaos --profile hosts
--driver-kills K``: the driver host lost K times at seeded moments, a new driver started on
it each time, which resumes the job from its latest completed checkpoint by itself.

Invariant: every life is ``python -m cairn.cli.chaos_hosts_driver`` of the same spec but for
its ``minutes`` (what is left of the run's), its ``plan`` (the seeded worker kills, in the
last life only, as the local profile's) and its ``progress_base`` (the checkpoints the run
completed before it), with ``cairn.recovery.on-rerun: RESUME`` when there are several; so
every life checkpoints to the same directory (on the storage host's S3) and commits to the
same sink places (the run's directory). Kill ``i`` is made in life ``i`` only, ``gap_s``
after the run's progress reached that life's base plus the kill's ``checkpoint``, as
``NetnsCluster.kill_host("driver")``: every process on the host, SIGKILL. It counts as
landed only on evidence (``chaos_hosts_plan.driver_host_outcome``): the driver exited of
SIGKILL, its pid among those the kill hit, its result not written; a next life is started
only after a kill that landed, so the life that ends is the one that writes the result.
Each life's log is its part of the host's ``driver.log`` (appended to, life after life),
where the checkpoint the next life resumed from is read (``chaos_driver.resumed_checkpoint``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from cairn.cli.chaos_driver import KillOutcome, resumed_checkpoint, why_not_landed
from cairn.cli.chaos_hosts_plan import HostDriverKill, driver_host_outcome, parse_progress

__all__ = ["DriverLives", "life_spec"]

_RESULT_S = 30.0  # what a life keeps of the run's time to write its result once cancelled


def life_spec(
    spec: dict[str, Any],
    *,
    life: int,
    lives: int,
    base: int,
    plan: Sequence[dict[str, Any]],
    minutes: float,
) -> dict[str, Any]:
    """The spec of driver life ``life`` of ``lives`` (``chaos_hosts_driver``'s), from the
    run's ``spec``: ``plan`` (the worker kills, each a ``PlannedFault``'s fields) in the
    last life only, RESUME when there are several lives, ``base`` checkpoints completed
    before it.

    >>> spec = {"args": {"conf": ["a=1"], "minutes": 10.0}, "plan": [], "work": "/w"}
    >>> first = life_spec(spec, life=0, lives=2, base=0, plan=[{"index": 0}], minutes=10.0)
    >>> first["args"]["conf"], first["plan"], first["progress_base"]
    (['a=1', 'cairn.recovery.on-rerun=RESUME'], [], 0)
    >>> last = life_spec(spec, life=1, lives=2, base=7, plan=[{"index": 0}], minutes=4.5)
    >>> last["plan"], last["progress_base"], last["args"]["minutes"], last["work"]
    ([{'index': 0}], 7, 4.5, '/w')
    >>> life_spec(spec, life=0, lives=1, base=0, plan=[], minutes=1.0)["args"]["conf"]
    ['a=1']
    """
    resume = ["cairn.recovery.on-rerun=RESUME"] if lives > 1 else []
    return {
        **spec,
        "args": {**spec["args"], "minutes": minutes, "conf": [*spec["args"]["conf"], *resume]},
        "plan": list(plan) if life == lives - 1 else [],
        "progress_base": base,
    }


class DriverLives:
    """The faulted run's driver lives on ``cluster``'s driver host (see the module's
    invariant). Between two calls it is the current life's driver to its caller
    (``poll``, ``wait``, ``returncode``, as a ``Popen``'s); ``kill_if_due`` makes the
    pending driver kill once its moment came and starts the next life; ``outcomes``: each
    kill's, in order; ``floor``: the run's checkpoint count when the last kill landed."""

    def __init__(
        self,
        cluster: Any,
        spec: dict[str, Any],
        work: str,
        kills: Sequence[HostDriverKill],
        plan: Sequence[dict[str, Any]],
        deadline: float,
    ) -> None:
        self.cluster, self.spec, self.work = cluster, spec, work
        self.kills, self.plan, self.deadline = tuple(kills), tuple(plan), deadline
        self.outcomes: list[KillOutcome] = []
        self.floor = 0
        self.started = time.time()
        self._base = 0
        self._offsets: list[int] = []
        self._driver: subprocess.Popen[bytes] | None = None

    # -- the current life, as a Popen ----------------------------------------------------------

    @property
    def driver(self) -> subprocess.Popen[bytes]:
        if self._driver is None:
            raise RuntimeError("no driver life started")
        return self._driver

    def poll(self) -> int | None:
        return self.driver.poll()

    def wait(self, timeout: float) -> int:
        return self.driver.wait(timeout)

    @property
    def returncode(self) -> int | None:
        return self.driver.returncode

    # -- the lives -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the first life."""
        self.started = time.time()
        self._start_life(0)

    def kill_if_due(self) -> None:
        """Make the pending driver kill if its moment came (then start the next life), or
        record that it cannot be made (its life ended first)."""
        kill = self._pending()
        if kill is None:
            return
        code = self.driver.poll()
        if code is not None:
            self._not_made(kill, why_not_landed(code, None, self._error() if code == 0 else None))
            return
        if self._progress()[0] < self._base + kill.checkpoint:
            return
        time.sleep(kill.gap_s)
        result = self.spec["result"]
        at = time.time()
        hit = self.cluster.kill_host("driver")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.driver.wait(30)
        outcome = driver_host_outcome(
            kill,
            self._base,
            code=self.driver.returncode,
            driver_hit=self.driver.pid in hit,
            ended_first=os.path.exists(result),
            at=at,
            started=self.started,
            progress=self._progress(),  # final: no driver writes it now
            failed=self._error(),
        )
        self.outcomes.append(outcome)
        if not outcome.landed:
            self._not_made(None, outcome.why or "")
            return
        self.floor = self._progress()[0]
        self._start_life(len(self.outcomes))

    def finish(self) -> None:
        """Make the driver kills still pending, each once its moment comes, before the
        run's deadline (those left: out of time)."""
        while self._pending() is not None and time.monotonic() < self.deadline:
            self.kill_if_due()
            time.sleep(0.1)
        kill = self._pending()
        if kill is not None:
            self._not_made(kill, why_not_landed(None, None))

    def with_resumes(self) -> list[KillOutcome]:
        """The kills' outcomes, each landed one with the checkpoint the next life's part of
        the host's ``driver.log`` says it resumed from."""
        try:
            data = (self.cluster.host("driver").dir / "driver.log").read_bytes()
        except OSError:
            data = b""
        ends = [*self._offsets[1:], len(data)]
        parts = [
            data[a:b].decode(errors="replace") for a, b in zip(self._offsets, ends, strict=False)
        ]
        return [
            dataclasses.replace(o, resumed_from=resumed_checkpoint(parts[i + 1]))
            if o.landed and i + 1 < len(parts)
            else o
            for i, o in enumerate(self.outcomes)
        ]

    # -- helpers -------------------------------------------------------------------------------

    def _pending(self) -> HostDriverKill | None:
        done = len(self.outcomes)
        return self.kills[done] if done < len(self.kills) else None

    def _not_made(self, kill: HostDriverKill | None, why: str) -> None:
        """``kill`` (if any) did not land, ``why``; nor will any after it: no driver left."""
        if kill is not None:
            self.outcomes.append(KillOutcome(kill, self._base, why=why))
        for later in self.kills[len(self.outcomes) :]:
            self.outcomes.append(KillOutcome(later, why="no driver left to kill: " + why))

    def _progress(self) -> tuple[int, int | None]:
        try:
            with open(self.spec["progress"], encoding="ascii") as f:
                return parse_progress(f.read())
        except OSError:
            return 0, None

    def _error(self) -> str | None:
        """The job's error in the result a life wrote (None: none, or none written)."""
        try:
            with open(self.spec["result"], encoding="utf-8") as f:
                error = json.load(f).get("error")
        except (OSError, ValueError):
            return None
        return str(error) if error is not None else None

    def _start_life(self, life: int) -> None:
        from cairn.cli.chaos_run import say

        self._base = self._progress()[0]
        left = (self.deadline - time.monotonic() - _RESULT_S) / 60
        spec = life_spec(
            self.spec,
            life=life,
            lives=len(self.kills) + 1,
            base=self._base,
            plan=self.plan,
            minutes=max(0.05, min(float(self.spec["args"]["minutes"]), left)),
        )
        path = os.path.join(self.work, f"hosts-spec-{life}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f, default=str)  # an option of another type: as text
        log = self.cluster.host("driver").dir / "driver.log"
        self._offsets.append(log.stat().st_size if log.exists() else 0)
        if self.kills:
            what = (
                self.kills[life].describe(self._base)
                if life < len(self.kills)
                else "no driver kill, the worker kills"
            )
            say(f"driver {life + 1} of the faulted run on the driver host ({what})")
        self._driver = self.cluster.start_driver(
            [sys.executable, "-m", "cairn.cli.chaos_hosts_driver", path]
        )
