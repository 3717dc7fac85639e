"""``cairn chaos --driver-kills``: the docs' correct example job passes with its faulted
run's driver SIGKILLed once, between a checkpoint's completion and the sink's commit of it,
and started again as a new driver that resumes from that checkpoint by itself; the kill is
seen to land (its marker, the new driver's log) and the committed output equals the
reference's, every order once.

The drivers run their workers as threads (``--executor inprocess``), so each driver life
costs a second rather than a cold Spark start: what is under test (a driver process group
killed at a fault point, the rerun's resume, the file sink's recommit of what the lost
driver left pending, the comparison) is the driver's. The same on local Spark is
``cairn chaos ... --driver-kills`` without ``--executor`` (docs/chaos.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from cairn.cli.chaos_driver import DriverKill, run_with_driver_kills
from tests._cli import cli_in_process
from tests.integration._readme import CHAOS_DRIVER_KILLS, REPO_ROOT, readme_line

EXAMPLE = REPO_ROOT / "examples" / "chaos_orders.py"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_driver_killed_before_the_sinks_commit_resumes_and_commits_the_same(
    tmp_path: Path, capsys: Any
) -> None:
    # Seed 14 draws one driver kill "after checkpoint n completed, before the sink committed
    # it", n past the first (the reference completes >= 4 in its 2 s), and one worker kill in
    # the driver that ends the run.
    argv = ["chaos", str(EXAMPLE), "--seed=14", "--faults=1", "--driver-kills=1"]
    argv += ["--executor", "inprocess", "--work-dir", str(tmp_path)]
    argv += ["--", "--orders", "6000", "--out", str(tmp_path / "totals")]
    status = cli_in_process(argv)
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (6000 records) committed the same"), out
    assert "--driver-kills=1" in out  # the replay command replays the driver kill too
    assert "  driver kills: 1 of 1 landed" in out, out
    (landed,) = [line for line in out.splitlines() if line.startswith("  landed driver kill")]
    assert "completed, before the sink committed it" in landed, landed
    assert "before-commit of KeyedProcess -> Sink#" in landed, landed
    assert "the next driver resumed from checkpoint " in landed, landed
    (work,) = tmp_path.glob("cairn-chaos-*")
    marker = (work / "fault-markers" / "driver-0").read_text()
    assert marker.startswith("before-commit of KeyedProcess -> Sink#"), marker
    # Past the first checkpoint: the lost driver committed files a fresh start would repeat.
    aimed = int(marker.split("(checkpoint ")[1].split(")")[0])
    assert aimed >= 2, marker
    second = (work / "faults-driver-1.log").read_text()
    assert "its earlier run was lost without ending" in second, second[-3000:]
    assert not (tmp_path / "totals").exists(), "the user's path was written"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_driver_kill_aimed_past_the_jobs_end_is_reported_as_not_landed(tmp_path: Path) -> None:
    """The job ends before checkpoint 1000: the driver exits 0, the kill is listed with why,
    the one after it never had a driver, and the outputs of the run that ended are read."""
    args = argparse.Namespace(
        script=str(EXAMPLE),
        script_args=["--orders", "600", "--out", str(tmp_path / "totals")],
        compare=[],
        minutes=2.0,
        checkpoint_interval=300,
        parallelism=None,
        executor="inprocess",
        conf=[],
    )
    markers = tmp_path / "fault-markers"
    markers.mkdir()
    kills = (DriverKill(0, "completed", 1000), DriverKill(1, "metadata", 1))
    run = run_with_driver_kills(args, str(tmp_path), kills, (), str(markers))
    assert run.error is None
    (output,) = run.outputs.values()
    assert len(output) == 600
    assert [o.landed for o in run.outcomes] == [False, False]
    lines = run.lines()
    assert (
        lines[0] == "  driver kills: 0 of 2 landed, each followed by a new driver of the same run"
    )
    assert lines[1] == (
        "  did not land: driver kill #0 after checkpoint 1000 completed and a subtask "
        "committed it: the job ended before it (give it more input or a shorter "
        "--checkpoint-interval)"
    )
    assert lines[2].startswith("  did not land: driver kill #1 during checkpoint 1: ")
    assert lines[2].endswith(
        ": no driver left to kill: the job ended before it (give it "
        "more input or a shorter --checkpoint-interval)"
    )
    assert not list(markers.iterdir())


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_docs_driver_kills_line_runs_as_shown(tmp_path: Path, capsys: Any) -> None:
    """docs/chaos.md's ``--driver-kills=2`` line as written (its workers in-process): every
    planned driver kill lands and the output is the reference's."""
    argv = readme_line(CHAOS_DRIVER_KILLS).split()[1:]
    argv[1] = str(EXAMPLE)
    argv += ["--executor", "inprocess", "--work-dir", str(tmp_path)]
    status = cli_in_process(argv)
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (6000 records) committed the same"), out
    assert "  driver kills: 2 of 2 landed" in out, out
