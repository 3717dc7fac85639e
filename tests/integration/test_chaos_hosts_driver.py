"""``cairn chaos --profile hosts --driver-kills 1`` on docs/chaos.md's worked example: the
faulted run on simulated hosts of its own loses its driver host once (every process on it
SIGKILLed, once the run completed the seeded number of checkpoints), a new driver on that
host resumes the job from its latest completed checkpoint on the storage host's S3, and
what the FileSink committed over both drivers equals the reference's, every order once.

One command, in this process (the reference on the session's local Spark), with a host
fault and a worker kill besides (``--faults 2``); the example at 1,500 orders paced at
50/s, so that the first driver completes the kill's checkpoints before the job ends. The
kill is seen to land (the driver died of SIGKILL with its pid among those the host kill
hit), and the report names the checkpoint the second driver resumed from, the one its log
says.

And ``--rescale`` on the hosts: the same run's segments (stops with a savepoint into the
run's directory, restores at p+1 and p), which a local run has, under a host fault.

Needs root and iproute2 (``ip netns``); skipped with the reason elsewhere. The cluster is
the test's own (a free /24, its own namespaces), deleted when the command returns.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests._cli import cli_in_process
from tests.integration._chaos_hosts import EXAMPLE, HOSTS_MARKS

pytestmark = HOSTS_MARKS


def test_a_job_whose_driver_host_is_lost_resumes_on_a_new_driver_and_commits_the_same(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    argv = ["chaos", str(EXAMPLE), "--profile", "hosts", "--faults", "2", "--seed", "3"]
    argv += ["--driver-kills", "1", "--work-dir", str(tmp_path), "--"]
    argv += ["--orders", "1500", "--rate", "50", "--out", str(tmp_path / "totals")]
    status = cli_in_process(argv)
    out = capsys.readouterr().out
    print(out)  # the report, in the test's log
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (1500 records) committed the same"), out
    (replay,) = [line for line in out.splitlines() if line.startswith("  replay: ")]
    assert "--profile=hosts" in replay and "--driver-kills=1" in replay, replay  # the kill too
    assert "  driver kills: 1 of 1 landed, each followed by a new driver of the same run" in out
    (landed,) = [line for line in out.splitlines() if line.startswith("  landed driver kill")]
    found = re.fullmatch(
        r"  landed driver kill #0: the driver host lost [\d.]+ s after the run's \d+\w\w "
        r"completed checkpoint: at \+[\d.]+ s, once (\d+) checkpoints had completed "
        r"\(the latest: checkpoint (\d+)\); the next driver resumed from checkpoint (\d+)",
        landed,
    )
    assert found is not None, landed
    completed, latest, resumed = (int(g) for g in found.groups())
    assert completed >= 1 and resumed >= latest >= 1, landed  # none it completed is lost
    (work,) = tmp_path.glob("cairn-chaos-*")
    # Two drivers, the second a rerun of the same job that resumed by itself.
    specs = [json.loads((work / f"hosts-spec-{i}.json").read_text()) for i in (0, 1)]
    assert [s["progress_base"] for s in specs] == [0, completed]
    assert all("cairn.recovery.on-rerun=RESUME" in s["args"]["conf"] for s in specs)
    assert not (work / "hosts-spec-2.json").exists()
    log = (work / "driver.log").read_text(errors="replace")
    # Only the second driver resumed, from the checkpoint the report names, on S3.
    resumes = set(re.findall(r"resumes from checkpoint (\d+) at s3://", log))
    assert resumes == {str(resumed)}, log[-3000:]
    assert "host faults: " in out, out
    assert not (tmp_path / "totals").exists(), "the user's path was written"


def test_a_job_rescaled_on_the_hosts_through_savepoints_commits_the_same(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    """``--rescale`` on the simulated hosts: the faulted run stopped with a savepoint into
    the run's directory (a local path every host sees), restored at p+1, again at p, with
    a disk full on a worker host (seed 16) and a worker kill besides."""
    argv = ["chaos", str(EXAMPLE), "--profile", "hosts", "--faults", "2", "--seed", "16"]
    argv += ["--rescale", "--work-dir", str(tmp_path), "--"]
    argv += ["--orders", "1500", "--rate", "50", "--out", str(tmp_path / "totals")]
    status = cli_in_process(argv)
    out = capsys.readouterr().out
    print(out)
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (1500 records) committed the same"), out
    rescaled = "  rescaled: p=2 -> 3 -> 2, each step a stop with savepoint mid-run and a restore"
    assert rescaled in out, out
    (work,) = tmp_path.glob("cairn-chaos-*")
    savepoints = sorted(p.name for p in (work / "faults").glob("savepoint-*"))
    assert savepoints == ["savepoint-0", "savepoint-1"], savepoints
    assert "host faults: " in out, out
