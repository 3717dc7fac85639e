"""``cairn chaos --upgrade``'s decisions, without I/O: which savepoint states a new version
of a job cannot restore (a uid gone, a max parallelism changed, a state's type changed),
what became of the state across the upgrade, the cause class and the report's lines; then
docs/chaos.md's renamed state and changed state type on the in-process executor (marked
slow: 4 to 7 s each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.cli.chaos_report import report
from cairn.cli.chaos_upgrade import (
    Incompatibility,
    JobOperator,
    SavedOperator,
    carried_lines,
    incompatibilities,
    migration_incompatibility,
    refusal_text,
)
from cairn.cli.chaos_verdict import NOT_CARRIED, Difference, Record, classify
from tests._cli import cli_in_process
from tests.integration._readme import (
    CHAOS_UPGRADE_STATE_NAME,
    CHAOS_UPGRADE_STATE_TYPE,
    REPO_ROOT,
    readme_line,
)

TOTALS = SavedOperator("totals", 2, 128, {"total": "value state of Long"}, keyed=True)
SOURCE = SavedOperator("orders", 2, 128, operator_states=("_cairn_source_splits",))
OLD = {"orders": "orders", "totals": "KeyedProcess", "totals-file": "Sink", "map-3": "Map"}


def _new(*changes: tuple[str, str, int]) -> list[JobOperator]:
    ops = {
        "orders": JobOperator("orders", "orders", 2, 128),
        "totals": JobOperator("totals", "KeyedProcess", 2, 128),
        "totals-file": JobOperator("totals-file", "Sink", 2, 128),
    }
    for uid, new_uid, max_parallelism in changes:
        op = ops.pop(uid)
        ops[new_uid] = JobOperator(new_uid, op.name, op.parallelism, max_parallelism)
    return list(ops.values())


def test_a_refactor_with_the_same_uids_restores() -> None:
    stateless = SavedOperator("map-3", 2, 128)  # a stateless operator may go
    refactor = [*_new(), JobOperator("map-9", "Map", 3, 128)]  # other parallelism: fine
    assert incompatibilities([SOURCE, TOTALS, stateless], OLD, refactor) == []


def test_a_changed_uid_names_the_operator_its_state_and_the_new_uid() -> None:
    [problem] = incompatibilities([SOURCE, TOTALS], OLD, _new(("totals", "running-totals", 128)))
    assert (problem.uid, problem.operator, problem.state) == ("totals", "KeyedProcess", None)
    text = problem.describe()
    assert text.startswith("operator 'KeyedProcess' (uid 'totals'): the savepoint holds its")
    assert "keyed state 'total'" in text and "has uid 'running-totals'" in text, text
    assert "Give it .uid('totals'), or drop the state with --allow-non-restored-state" in text
    allowed = incompatibilities([TOTALS], OLD, _new(("totals", "x", 128)), True)
    assert allowed == []


def test_a_removed_operator_without_a_namesake_gets_the_general_remedy() -> None:
    new = [op for op in _new() if op.uid != "totals"]
    [problem] = incompatibilities([TOTALS], OLD, new)
    assert "(removed, or its uid changed: an operator without .uid()" in problem.describe()
    assert "Give the operator that owns it .uid('totals')" in problem.describe()


def test_a_changed_max_parallelism_breaks_keyed_state_only() -> None:
    new = _new(("totals", "totals", 256), ("orders", "orders", 256))
    [problem] = incompatibilities([SOURCE, TOTALS], OLD, new)
    assert problem.uid == "totals"
    assert "written with max parallelism 128 (its key groups), the new job has 256" in (
        problem.describe()
    )
    assert "Keep max parallelism 128" in problem.describe()


def test_a_state_whose_type_changed_is_read_from_the_restore_error() -> None:
    error = (
        "StateMigrationError: operator 'totals': keyed state 'total' cannot be restored: the "
        "value type is Long in the snapshot but String in the job (the snapshot's value state "
        "of Long, the job's value state of String); keep the old descriptor, or give the "
        "state a new name (the old state is then dropped)"
    )
    problem = migration_incompatibility(error, OLD)
    assert problem is not None
    assert (problem.operator, problem.state) == ("KeyedProcess", "total")
    assert "Keep the old descriptor (value state of Long)" in problem.describe()
    assert migration_incompatibility("JobExecutionException: boom", OLD) is None


def test_the_refusal_lists_every_problem_and_the_savepoint() -> None:
    problems = [
        Incompatibility("a", "A", None, "p1", "r1"),
        Incompatibility("b", "", "s", "p2", "r2"),
    ]
    text = refusal_text(problems, "/x/v2.py", "file:///w/savepoint-0")
    assert text.splitlines() == [
        "INCOMPATIBLE: v2.py cannot restore the old job's savepoint (2 problems)",
        "  operator 'A' (uid 'a'): p1. r1",
        "  operator uid 'b': p2. r2",
        "  savepoint: file:///w/savepoint-0",
    ]


def test_what_became_of_the_state_names_a_renamed_or_dropped_state() -> None:
    renamed = SavedOperator("totals", 2, 128, {"total": "value", "sum": "value"})
    [line] = carried_lines([SOURCE, TOTALS], [renamed], OLD, [op.uid for op in _new()])
    assert line.startswith("'KeyedProcess' (uid 'totals'): the new version has keyed state 'sum'")
    assert "if it is 'total' renamed, keep the name 'total'" in line
    [dropped] = carried_lines([TOTALS], [], OLD, ["orders"])
    assert dropped == (
        "'KeyedProcess' (uid 'totals'): keyed state 'total' dropped: the new job has no uid "
        "'totals'"
    )
    assert carried_lines([SOURCE], [], OLD, ["orders"]) == []  # Cairn's own state: not shown


def test_an_upgrade_that_differs_without_faults_is_named_as_such() -> None:
    diffs = [Difference("o", "changed", "c1,10", Record("c1,2", 1.0, "p:1"))]
    cause = classify(diffs, control_differs=False, upgrade_differs=True)
    assert cause is not None and cause.name == NOT_CARRIED
    assert classify(diffs, control_differs=True, upgrade_differs=True).name != NOT_CARRIED  # type: ignore[union-attr]
    text = report(
        command="cairn chaos a.py --upgrade b.py",
        seed=7,
        plan=(),
        fired=(),
        diffs=diffs,
        cause=cause,
        sinks=(),
        compared=1,
        records=2,
        restores=[(0.5, "restored with b.py from savepoint 1")],
        upgrade="a.py -> b.py, a stop with savepoint mid-run and a restore from it",
        held=["'KeyedProcess' (uid 'totals'): ..."],
    )
    assert "  upgrade just before: restored with b.py from savepoint 1" in text, text
    assert f"  likely cause: {NOT_CARRIED}: " in text, text
    assert "  state across the upgrade: 'KeyedProcess' (uid 'totals'): ..." in text, text
    assert "  upgraded: a.py -> b.py, a stop with savepoint" in text, text


def _upgrade(line: str, tmp: Path, capsys: Any) -> tuple[int, str]:
    """docs/chaos.md's line on the in-process executor, 3,000 orders, outputs under tmp."""
    argv = readme_line(line).split()[1:]
    argv[1] = str(REPO_ROOT / argv[1])
    argv[argv.index("--upgrade") + 1] = str(REPO_ROOT / "examples" / "chaos_orders_v2.py")
    argv[2:2] = ["--executor", "inprocess", "--faults", "1", "--work-dir", str(tmp)]
    argv += ["--orders", "3000", "--out", str(tmp / "totals")]
    status = cli_in_process(argv)
    return status, capsys.readouterr().out


@pytest.mark.slow
def test_a_renamed_state_is_found_and_named(tmp_path: Path, capsys: Any) -> None:
    status, out = _upgrade(CHAOS_UPGRADE_STATE_NAME, tmp_path, capsys)
    assert status == 1, out
    assert out.startswith("DIFFERENT: 1 of 1 outputs differ"), out
    assert "first difference, in Sink 'totals-file': key 'c" in out, out
    assert f"likely cause: {NOT_CARRIED}: an upgrade without faults differs too" in out, out
    assert (
        "state across the upgrade: 'KeyedProcess' (uid 'totals'): the new version has keyed "
        "state 'sum', which the savepoint does not hold (it holds 'total')"
    ) in out, out
    assert "upgraded: chaos_orders.py -> chaos_orders_v2.py, a stop with savepoint" in out, out
    assert not (tmp_path / "totals").exists(), "the user's path was written"


@pytest.mark.slow
def test_a_state_of_another_type_is_refused_with_its_operator(tmp_path: Path, capsys: Any) -> None:
    status, out = _upgrade(CHAOS_UPGRADE_STATE_TYPE, tmp_path, capsys)
    assert status == 1, out
    lines = out.splitlines()
    assert lines[0] == (
        "INCOMPATIBLE: chaos_orders_v2.py cannot restore the old job's savepoint (1 problem)"
    ), out
    assert lines[1] == (
        "  operator 'KeyedProcess' (uid 'totals'): keyed state 'total' no longer reads: the "
        "value type is Long in the snapshot but String in the job. Keep the old descriptor "
        "(value state of Long), or give the state a new name (the old state is then dropped)"
    ), out
    assert "/faults/savepoint-0" in lines[2], out
    assert "--change state-type" in lines[3], out


def test_a_job_that_ends_before_the_upgrade_is_not_passed(tmp_path: Path, capsys: Any) -> None:
    argv = ["chaos", str(REPO_ROOT / "examples" / "chaos_orders.py"), "--faults", "0"]
    argv += ["--upgrade", str(REPO_ROOT / "examples" / "chaos_orders_v2.py")]
    argv += ["--executor", "inprocess", "--work-dir", str(tmp_path), "--"]
    argv += ["--orders", "100", "--out", str(tmp_path / "totals")]  # 33 ms of orders
    status = cli_in_process(argv)
    out = capsys.readouterr().out
    assert status == 1, out
    assert out.startswith("NOT UPGRADED: the job ended before the stop with savepoint 1"), out
    assert "EQUAL" not in out, out
