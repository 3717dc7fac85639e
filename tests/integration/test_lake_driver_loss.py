"""The lakehouse sinks survive the loss of their driver: ``cairn run`` (its own process group)
writing one stream into a Delta table and an Iceberg table is SIGKILLed four times, between a
checkpoint's completion and a sink's table commit and right after the commit, once per sink
and phase, and each time started again with the same command and no ``-s``. Every rerun
resumes from the lost run's latest completed checkpoint and commits it again if the table
lacks it: both tables end with the failure-free output, no (job, checkpoint) twice among
the Delta versions or the Iceberg snapshots, no data file of a lost run left unreferenced.

As ``test_driver_loss.py``: the workers are threads of the driver (the in-process
executor), so the driver's SIGKILL takes them along, and five driver starts cost seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import cairn
from cairn.checkpoint.job_identity import identity_of
from tests.integration._delta_jobs import checkpoint_versions, unreferenced_data_files
from tests.integration._delta_jobs import table_lines as delta_lines
from tests.integration._iceberg_jobs import committed_checkpoints, sqlite_catalog
from tests.integration._iceberg_jobs import table_lines as iceberg_lines
from tests.integration.jobs import exactly_once_problems

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")
pytestmark = [pytest.mark.slow]

JOB = Path(__file__).with_name("_lake_driver_loss_job.py")
REPO = Path(__file__).resolve().parents[2]
RECORDS, KEYS, RATE = 16_000, 8, 1_000
TABLE = "lake.out"

# (point, sink): the driver is killed there, in this order, one run each.
PHASES = [
    ("before-commit", "delta"),
    ("after-commit", "iceberg"),
    ("before-commit", "iceberg"),
    ("after-commit", "delta"),
]


class Driver:
    """Runs ``cairn run _lake_driver_loss_job.py -- ...`` again and again, the same command."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.delta, self.catalog = str(tmp / "delta"), sqlite_catalog(str(tmp))
        checkpoints = tmp / "chk"
        self.faults, self.marker = tmp / "faults", tmp / "fault-marker"
        self.job_id = identity_of(None, "lake-driver-loss", f"file://{checkpoints}").job_id
        self.job_dir = checkpoints / self.job_id
        script = Path(sys.executable).with_name("cairn")
        cli = [str(script)] if script.exists() else [sys.executable, "-m", "cairn.cli.main"]
        args = [checkpoints, self.delta, tmp, TABLE, self.faults, RECORDS, KEYS, RATE]
        self.argv = [*cli, "run", str(JOB), "--", *map(str, args)]
        self.logs: list[str] = []

    def run(self, faults: str, timeout: float) -> int:
        self.faults.write_text(faults)
        env = dict(os.environ, TMPDIR=str(self.tmp))
        src = str(Path(cairn.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, str(REPO), env.get("PYTHONPATH")]))
        log = self.tmp / f"run-{len(self.logs)}.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                self.argv, cwd=self.tmp, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,  # its own process group
            )  # fmt: skip
            try:
                code = proc.wait(timeout)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        self.logs.append(log.read_text())
        return code

    def completed(self) -> list[int]:
        if not self.job_dir.is_dir():
            return []
        return sorted(int(p.parent.name[4:]) for p in self.job_dir.glob("chk-*/_metadata"))


@pytest.mark.timeout(600)
def test_driver_killed_around_each_table_commit_resumes_exactly_once(tmp_path: Path) -> None:
    d = Driver(tmp_path)
    for run, (point, sink) in enumerate(PHASES):
        aim = max(d.completed(), default=0) + 3  # numbering goes on above the lost runs'
        spec = f"point={point},vertex={sink}: Committer,checkpoint={aim},kill=driver"
        d.run(f"{spec},marker={d.marker}", 240)
        # A driver killed before its first progress line (~1 s in) printed nothing: that
        # it ran to the fault point is the marker's line below, not its log.
        assert "Traceback" not in d.logs[-1], d.logs[-1][-3000:]
        landed = d.marker.read_text().splitlines()
        assert len(landed) == run + 1, d.logs[-1][-3000:]
        assert landed[-1].startswith(f"{point} of {sink}: Committer#0 (checkpoint {aim})")
        assert max(d.completed()) == aim  # completed, then lost before/after the commit
        if run:
            assert "earlier run was lost without ending" in d.logs[-1], d.logs[-1][-3000:]
    # The same command once more: it resumes and finishes.
    assert d.run("", 300) == 0, d.logs[-1][-3000:]
    assert "resumes from checkpoint " in d.logs[-1]

    assert exactly_once_problems(delta_lines(d.delta), RECORDS, KEYS) == []
    assert exactly_once_problems(iceberg_lines(d.catalog, TABLE), RECORDS, KEYS) == []
    versions = checkpoint_versions(d.delta)
    assert Counter(versions).most_common(1)[0][1] == 1, f"a checkpoint twice: {versions}"
    snapshots = committed_checkpoints(d.catalog, TABLE)
    assert {job for job, _ in snapshots} == {d.job_id}
    assert Counter(snapshots).most_common(1)[0][1] == 1, f"a checkpoint twice: {snapshots}"
    assert unreferenced_data_files(d.delta) == [], "files of the lost runs were left"
