"""The restart loop that docs/driver-loss.md shows, run as written: its driver is SIGKILLed
mid-job, the loop starts the same command again, the rerun resumes by itself and the job
finishes exactly once — on a standalone Spark cluster on 127.0.0.1 (master and two workers),
where Spark cannot supervise a Python driver itself. (On local Spark the same rerun is what
``test_driver_loss.py`` does five times; this test is about the loop and the cluster.)"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

import cairn
from cairn.checkpoint.job_identity import identity_of
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.jobs import exactly_once_problems

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "driver-loss.md"
JOB = Path(__file__).with_name("driver_loss_job.py")
RECORDS, KEYS, RATE = 24_000, 20, 1_500


def restart_loop() -> str:
    """The shell loop under "A restart loop" in the docs, as written there."""
    text = DOC.read_text()
    section = text[text.index("### A restart loop") :]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "docs/driver-loss.md shows no restart loop"
    return match.group(1)


def _cairn() -> list[str]:
    script = Path(sys.executable).with_name("cairn")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cairn.cli.main"]


def _drivers(loop: subprocess.Popen[str]) -> list[psutil.Process]:
    """The loop's running ``cairn run`` processes (its children, not their JVMs)."""
    found = []
    for child in psutil.Process(loop.pid).children():
        try:
            if "run" in child.cmdline() and str(JOB) in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def _run_the_loop(tmp_path: Path, master: str) -> None:
    out, checkpoints = tmp_path / "out", tmp_path / "chk"
    args = [out, checkpoints, "-", "-", "-", "-", tmp_path / "no-faults", RECORDS, KEYS, RATE]
    args.append(master)
    command = shlex.join([*_cairn(), "run", str(JOB), "--", *map(str, args)])
    loop = restart_loop()
    assert "cairn run job.py" in loop
    script = loop.replace("cairn run job.py", command)
    env = dict(os.environ)
    src = str(Path(cairn.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, str(REPO), env.get("PYTHONPATH")]))
    job_dir = checkpoints / identity_of(None, "driver-loss", f"file://{checkpoints}").job_id
    log = tmp_path / "loop.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # the loop, its drivers and their JVMs: one group to clean
        )
        try:
            deadline = time.monotonic() + 300
            while not (
                max((int(p.parent.name[4:]) for p in job_dir.glob("chk-*/_metadata")), default=0)
                >= 2
                and read_visible_lines(str(out))
            ):
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "no checkpoint within 300 s"
                time.sleep(0.1)
            (driver,) = _drivers(proc)
            driver.send_signal(signal.SIGKILL)  # the driver alone: the loop must restart it
            assert len(read_visible_lines(str(out))) < RECORDS
            assert proc.wait(600) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    text = log.read_text()
    assert text.count("cairn run exited with status 137; restarting in 5 s") == 1, text[-3000:]
    assert "its earlier run was lost without ending" in text and "resumes from checkpoint" in text
    assert exactly_once_problems(read_visible_lines(str(out)), RECORDS, KEYS) == []
    assert not job_dir.exists()  # the job finished: nothing of it is left


@pytest.mark.cluster
def test_the_docs_restart_loop_resumes_a_killed_driver_on_a_standalone_cluster(
    tmp_path: Path, standalone_cluster: Any
) -> None:
    _run_the_loop(tmp_path, standalone_cluster.master_url)
