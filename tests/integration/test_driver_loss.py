"""A job survives the loss of its driver: ``cairn run`` (its own process group) is SIGKILLed
five times — while processing, while a checkpoint's ``_metadata`` is being written, while the
sinks commit a checkpoint — and each time started again with the same command and no ``-s``.
Every rerun resumes from the lost run's latest completed checkpoint; the file sink's and the
JDBC sink's output is the failure-free output, every record once, each key's records in
order, no prepared transaction left behind; the finished job leaves no checkpoint behind.

The workers run as threads of the driver (the in-process executor), so the driver's SIGKILL
takes them along, as killing a Spark driver's process group does, and six driver starts
cost seconds rather than six cold Spark starts: what is under test (the rerun's decision,
the restore, the sinks' recommit and cleanup) is the driver's, not Spark's. A driver killed
on real Spark and restarted is ``test_driver_supervisor.py`` (standalone cluster) and
``test_ha_two_drivers.py`` (local Spark)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn.checkpoint.job_identity import identity_of
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.jdbc_jobs import (
    new_table,
    out_of_order_keys,
    prepared_transactions,
    table_lines,
)
from tests.integration.jobs import exactly_once_problems

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

JOB = Path(__file__).with_name("driver_loss_job.py")
REPO = Path(__file__).resolve().parents[2]
RECORDS, KEYS, RATE = 45_000, 20, 1_500


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(cairn.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, str(REPO), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp)
    return env


class Driver:
    """Runs ``cairn run driver_loss_job.py -- ...`` again and again, the same command."""

    def __init__(self, tmp: Path, pg: Any, table: str) -> None:
        self.tmp = tmp
        self.out, self.checkpoints = tmp / "out", tmp / "chk"
        self.faults, self.marker = tmp / "faults", tmp / "fault-marker"
        job_id = identity_of(None, "driver-loss", f"file://{self.checkpoints}").job_id
        self.job_dir = self.checkpoints / job_id
        script = Path(sys.executable).with_name("cairn")
        cli = [str(script)] if script.exists() else [sys.executable, "-m", "cairn.cli.main"]
        args = [self.out, self.checkpoints, pg.jdbc_url(), pg.user, pg.password, table]
        args += [self.faults, RECORDS, KEYS, RATE, "inprocess"]
        self.argv = [*cli, "run", str(JOB), "--", *map(str, args)]
        self.runs: list[str] = []  # each run's stderr
        self.proc: subprocess.Popen[str] | None = None

    def start(self, faults: str = "") -> None:
        self.faults.write_text(faults)
        log = self.tmp / f"run-{len(self.runs)}.log"
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            self.argv,
            cwd=self.tmp,
            env=_env(self.tmp),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: the driver and its JVM
        )

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self._log.close()
            self.runs.append((self.tmp / f"run-{len(self.runs)}.log").read_text())
        return code

    def kill(self) -> int:
        """SIGKILL the driver's process group: the driver is lost."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        return self.wait(60)

    def completed(self) -> list[int]:
        if not self.job_dir.is_dir():
            return []
        return sorted(int(p.parent.name[4:]) for p in self.job_dir.glob("chk-*/_metadata"))

    def until(self, condition: Callable[[], bool], what: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.proc is not None and self.proc.poll() is None, (
                f"the driver ended (exit {self.proc.returncode}) before {what}"
            )
            assert time.monotonic() < deadline, f"no {what} within {timeout} s"
            time.sleep(0.05)

    def kill_while_processing(self) -> None:
        """Kill once this run completed two checkpoints of its own and output grew."""
        before, lines = max(self.completed(), default=0), len(read_visible_lines(str(self.out)))
        self.until(
            lambda: (
                max(self.completed(), default=0) >= before + 2  # one retained at a time
                and len(read_visible_lines(str(self.out))) > lines
            ),
            "two new checkpoints and new output",
        )
        assert self.kill() == -signal.SIGKILL
        assert len(read_visible_lines(str(self.out))) < RECORDS  # killed mid-way

    def resumed(self, run: int) -> None:
        """Run ``run`` said it resumed, and from which checkpoint (the path)."""
        log = self.runs[run]
        assert "earlier run was lost without ending" in log, log[-3000:]
        assert "resumes from checkpoint " in log and f"at file://{self.job_dir}/chk-" in log


@pytest.mark.timeout(600)
def test_driver_killed_five_times_resumes_exactly_once(tmp_path: Path, postgres: Any) -> None:
    table = new_table(postgres)
    d = Driver(tmp_path, postgres, table)

    # 1. While processing.
    d.start()
    d.kill_while_processing()

    # 2. While the _metadata of a checkpoint is written (aside, not yet published).
    aim = max(d.completed()) + 4  # numbering continues above the lost run's checkpoints
    d.start(f"point=driver-metadata,checkpoint={aim},marker={d.marker}")
    assert d.wait(240) == -signal.SIGKILL, d.runs[-1][-3000:]
    d.resumed(1)
    assert d.marker.read_text().splitlines() == [f"driver-metadata (checkpoint {aim})"]
    chk = d.job_dir / f"chk-{aim}"
    assert not (chk / "_metadata").exists() and list(chk.glob("_metadata.inprogress-*"))
    assert max(d.completed()) == aim - 1

    # 3. While processing.
    d.start()
    d.kill_while_processing()
    d.resumed(2)
    assert not chk.exists()  # the lost run's incomplete checkpoint was removed

    # 4. While the sinks commit: subtask 0 committed checkpoint `aim`, subtask 1 may not have.
    aim = max(d.completed()) + 3
    d.marker.unlink()
    d.start(
        f"point=after-commit,vertex=Sink,subtask=0,checkpoint={aim},kill=driver,marker={d.marker}"
    )
    assert d.wait(240) == -signal.SIGKILL, d.runs[-1][-3000:]
    d.resumed(3)
    (landed,) = d.marker.read_text().splitlines()
    assert landed.startswith("after-commit of ") and f"#0 (checkpoint {aim})" in landed
    assert max(d.completed()) == aim  # completed, then lost while committing

    # 5. While processing.
    d.start()
    d.kill_while_processing()
    d.resumed(4)

    # The same command once more: it resumes and finishes.
    d.start()
    assert d.wait(600) == 0, d.runs[-1][-3000:]
    d.resumed(5)
    # A finished job removes its checkpoints, the lost runs' too.
    assert not d.job_dir.exists(), sorted(p.name for p in d.job_dir.iterdir())

    files = read_visible_lines(str(d.out))
    assert exactly_once_problems(files, RECORDS, KEYS) == []
    rows = table_lines(postgres, table)
    assert exactly_once_problems(rows, RECORDS, KEYS) == []
    assert out_of_order_keys(rows) == []
    assert prepared_transactions(postgres) == []
