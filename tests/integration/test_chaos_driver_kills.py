"""``cairn chaos --driver-kills``: the docs' correct example job passes with its faulted
run's driver SIGKILLed once, between a checkpoint's completion and the sink's commit of it,
and started again as a new driver that resumes from that checkpoint by itself; the kill is
seen to land (its marker, the new driver's log) and the committed output equals the
reference's, every order once; with ``--rescale`` and ``--upgrade`` the driver after a kill
takes the run up in the segment where it stood, and the run still goes through every one.

The drivers run their workers as threads (``--executor inprocess``), so each driver life
costs a second rather than a cold Spark start: what is under test (a driver process group
killed at a fault point, the rerun's resume, the file sink's recommit of what the lost
driver left pending, the comparison) is the driver's. The same on local Spark is
``cairn chaos ... --driver-kills`` without ``--executor`` (docs/chaos.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from cairn.cli.chaos_driver import DriverKill, run_with_driver_kills
from tests._cli import cli_in_process
from tests.integration._readme import (
    CHAOS_DRIVER_KILLS,
    CHAOS_DRIVER_KILLS_RESCALE,
    REPO_ROOT,
    readme_line,
)

EXAMPLE = REPO_ROOT / "examples" / "chaos_orders.py"


def _in_process(argv: list[str], tmp: Path, capsys: Any) -> tuple[int, str]:
    """``cairn chaos`` with ``argv`` (the example's path first) on the example of this
    checkout, its workers in-process, its runs under ``tmp``: exit status and stdout."""
    argv = [argv[0], str(EXAMPLE), *argv[2:], "--executor", "inprocess"]
    status = cli_in_process([*argv, "--work-dir", str(tmp)])
    return status, capsys.readouterr().out


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
    status, out = _in_process(readme_line(CHAOS_DRIVER_KILLS).split()[1:], tmp_path, capsys)
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (6000 records) committed the same"), out
    assert "  driver kills: 2 of 2 landed" in out, out


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_driver_killed_in_a_rescaled_run_is_followed_where_the_run_stood(
    tmp_path: Path, capsys: Any
) -> None:
    """docs/chaos.md's ``--driver-kills=1 --rescale`` line as written (its workers
    in-process): the kill lands in one of the three segments, the second driver takes the
    run up there (the segment's job resumed, or the next segment restored from the savepoint
    the lost driver completed), and the run still goes p=2 -> 3 -> 2 and commits every order
    once, as the reference does."""
    line = readme_line(CHAOS_DRIVER_KILLS_RESCALE)
    status, out = _in_process(line.split()[1:], tmp_path, capsys)
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (6000 records) committed the same"), out
    assert "  rescaled: p=2 -> 3 -> 2, each step a stop with savepoint mid-run" in out, out
    assert "  driver kills: 1 of 1 landed" in out, out
    (landed,) = [line for line in out.splitlines() if line.startswith("  landed driver kill")]
    (work,) = tmp_path.glob("cairn-chaos-*")
    assert (work / "fault-markers" / "driver-0").read_text().strip(), "no marker"
    second = json.loads((work / "faults-life-1.json").read_text())
    assert second["segments"] == [2, 3, 2], second
    k = second["first"]  # where the second driver took the run up (0-based)
    nth = ("first", "second", "third")
    if second["restore"] is None:  # the segment's own job, resumed by the rerun
        here = f"the {nth[k]} of 3 segments (p={(2, 3, 2)[k]})"
        assert f", in {here}" in landed, landed
        assert f"; the next driver resumed {here} from " in landed, landed
        log = (work / "faults-driver-1.log").read_text()
        assert "its earlier run was lost without ending" in log, log[-3000:]
    else:  # the lost driver's stop with savepoint completed: the next segment from it
        assert f"{work}/faults/savepoint-{k - 1}" in second["restore"], second
        stopped = f"the {nth[k - 1]} of 3 segments (p={(2, 3, 2)[k - 1]})"
        assert f", in {stopped}, during its stop with savepoint {k}, which completed" in landed
        following = f"the {nth[k]} of 3 segments (p={(2, 3, 2)[k]})"
        assert f"; the next driver restored {following} from savepoint {k}" in landed, landed


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_driver_killed_in_an_upgraded_run_still_upgrades_and_commits_the_same(
    tmp_path: Path, capsys: Any
) -> None:
    """``--driver-kills=1 --upgrade`` (workers in-process): each driver life gets the
    savepoint check of the upgrade, and after the kill the run still switches to the new
    script through a savepoint and commits what the new script from scratch does."""
    argv = ["chaos", "examples/chaos_orders.py", "--seed=5", "--driver-kills=1"]
    argv += ["--upgrade", str(REPO_ROOT / "examples" / "chaos_orders_v2.py")]
    status, out = _in_process(argv, tmp_path, capsys)
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (6000 records) committed the same"), out
    assert "  upgraded: chaos_orders.py -> chaos_orders_v2.py, a stop with savepoint" in out
    assert "  driver kills: 1 of 1 landed" in out, out
    (landed,) = [line for line in out.splitlines() if line.startswith("  landed driver kill")]
    assert " of 2 segments (chaos_orders" in landed, landed
    (work,) = tmp_path.glob("cairn-chaos-*")
    second = json.loads((work / "faults-life-1.json").read_text())
    assert second["scripts"][1].endswith("chaos_orders_v2.py"), second
    assert second["check"] and Path(second["check"]).exists(), second
