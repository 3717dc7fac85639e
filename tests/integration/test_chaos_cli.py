"""``cairn chaos`` on docs/chaos.md's worked example, as the page shows it: the correct job
passes (exit 0) under seeded worker kills and a rescale (p=2 -> 3 -> 2 through stops with
savepoint), and each planted bug is found (exit 1) with its cause class named.

The three commands run in this process on the session's local Spark (one JVM for all six
runs), the example's orders cut to 3,000 so that each run takes a few seconds.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests._cli import cli_in_process
from tests.integration._readme import (
    CHAOS,
    CHAOS_PAUSES,
    CHAOS_RANDOM_KEY,
    CHAOS_SIDE_EFFECT,
    CHAOS_UPGRADE,
    CHAOS_UPGRADE_UID,
    REPO_ROOT,
    readme_line,
)


def _chaos(line: str, tmp: Path, capsys: Any, *extra: str) -> tuple[int, str]:
    """The docs line in this process (the example at 3,000 orders, outputs under ``tmp``):
    its exit status and what it printed on stdout."""
    line = readme_line(line).replace("/tmp/alerts.log", str(tmp / "alerts.log"))
    argv = [str(REPO_ROOT / a) if a.startswith("examples/") else a for a in shlex.split(line)]
    argv = argv[1:]
    if "--" not in argv:
        argv.append("--")
    argv += ["--orders", "3000", "--out", str(tmp / "totals")]
    argv[1:1] = ["--faults", "2", "--work-dir", str(tmp), *extra]
    status = cli_in_process(argv)
    return status, capsys.readouterr().out


@pytest.mark.spark
def test_chaos_passes_the_correct_job_and_finds_both_planted_bugs(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    status, out = _chaos(CHAOS, tmp_path / "correct", capsys, "--rescale")
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (3000 records)"), out
    assert "rescaled: p=2 -> 3 -> 2, each step a stop with savepoint mid-run" in out, out
    assert not (tmp_path / "correct" / "totals").exists(), "the user's path was written"

    status, out = _chaos(CHAOS_RANDOM_KEY, tmp_path / "random-key", capsys)
    assert status == 1, out
    assert "first difference, in Sink 'totals-file'" in out, out
    assert "likely cause: non-deterministic function or key: two runs without faults" in out
    assert "replay: cairn chaos" in out and "--seed=7" in out

    status, out = _chaos(CHAOS_SIDE_EFFECT, tmp_path / "side-effect", capsys)
    assert status == 1, out
    assert "first difference, in --compare" in out and "written again" in out, out
    assert "fault just before: #" in out, out
    assert "likely cause: a side effect outside a sink" in out, out
    assert "Sink 'totals-file'" not in out.split("likely cause")[0].split("first")[1], out


@pytest.mark.spark
def test_a_paused_worker_goes_on_and_the_kill_after_it_waits_for_it(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    """docs/chaos.md's pauses on Spark: seed 15 draws a pause of a source subtask's process
    (SIGSTOP for 2.8 s, seen resumed) and then, in the same attempt, a kill after the
    synchronous snapshot, which fires only after the pause; the job commits the same."""
    status, out = _chaos(CHAOS_PAUSES, tmp_path, capsys)
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (3000 records) committed the same with 2 of 2"), out
    fired = [line for line in out.splitlines() if line.startswith("  fired #")]
    assert len(fired) == 2, out
    pause, kill = fired
    assert pause.startswith("  fired #0 pause subtask") and "(attempt 0)" in pause, out
    planned = float(re.search(r"for ([\d.]+) s", pause).group(1))  # type: ignore[union-attr]
    resumed = re.search(r"; resumed after ([\d.]+) s$", pause)
    assert resumed is not None and float(resumed.group(1)) >= planned, out
    assert kill.startswith("  fired #1 kill subtask") and "(attempt 0)" in kill, out
    assert "after-barrier of " in kill, out


@pytest.mark.spark
def test_chaos_upgrade_passes_a_refactor_and_refuses_a_changed_uid(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    """docs/chaos.md's upgrades on Spark: the old example stopped with a savepoint mid-run
    and restored by its refactored version under faults commits what the new version does
    from scratch; a version that changed the totals' uid is refused before it restores,
    the operator, its state and the remedy named."""
    status, out = _chaos(CHAOS_UPGRADE, tmp_path / "refactor", capsys)
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (3000 records)"), out
    assert "upgraded: chaos_orders.py -> chaos_orders_v2.py, a stop with savepoint" in out, out
    assert not (tmp_path / "refactor" / "totals").exists(), "the user's path was written"

    status, out = _chaos(CHAOS_UPGRADE_UID, tmp_path / "uid", capsys)
    assert status == 1, out
    lines = out.splitlines()
    assert lines[0] == (
        "INCOMPATIBLE: chaos_orders_v2.py cannot restore the old job's savepoint (1 problem)"
    ), out
    assert lines[1].startswith(
        "  operator 'KeyedProcess' (uid 'totals'): the savepoint holds its state (keyed state "
        "'total'), but the new job has no operator with uid 'totals' (the new job's "
        "'KeyedProcess' has uid 'running-totals'). Give it .uid('totals')"
    ), out
    assert "EQUAL" not in out and "DIFFERENT" not in out, out
