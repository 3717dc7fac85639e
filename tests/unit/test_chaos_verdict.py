"""``cairn chaos``'s pure parts: the seeded fault plan, the comparison of committed outputs,
the first difference and the fault before it, and the cause class."""

from __future__ import annotations

import pytest

from cairn.cli.chaos_report import fault_before, report
from cairn.cli.chaos_verdict import (
    LOST,
    LOST_STATE_RESCALE,
    NON_DETERMINISTIC,
    NOT_EXACTLY_ONCE,
    SIDE_EFFECT,
    Difference,
    Record,
    classify,
    compare_output,
    compare_outputs,
)
from cairn.runtime.faults import parse_faults
from cairn.testing.fault_plan import FiredFault, PlannedFault, Vertex, faults_text, plan_faults


def _records(*texts: str, at: float = 0.0) -> list[Record]:
    return [Record(t, at, f"f:{n}") for n, t in enumerate(texts, 1)]


def _one(parallelism: int) -> tuple[Vertex, ...]:
    return (Vertex("orders -> Sink", parallelism, True),)


_SHAPE = (
    Vertex("orders", 2, True),
    Vertex("enrich -> Map", 3, False),
    Vertex("totals -> Sink: totals-file", 2, False),
)


def test_the_plan_is_a_function_of_the_seed_and_parses_as_fault_specs() -> None:
    plan = plan_faults(11, 20, vertices=_one(3), records_per_subtask=100, pauses=0)
    assert plan == plan_faults(11, 20, vertices=_one(3), records_per_subtask=100, pauses=0)
    assert plan != plan_faults(12, 20, vertices=_one(3), records_per_subtask=100, pauses=0)
    assert [f.attempt for f in plan] == list(range(20))
    assert plan[0].kind != "restore"  # nothing to restore in the first attempt
    assert {f.subtask for f in plan} <= {0, 1, 2}
    specs = parse_faults(faults_text(plan, "/tmp/markers"))
    assert [(s.point, s.attempt, s.subtask, s.vertex) for s in specs] == [
        (f.point, f.attempt, f.subtask, "orders -> Sink") for f in plan
    ]
    assert all(1 <= f.records < 100 for f in plan if f.kind == "processing")
    assert specs[3].marker == "/tmp/markers/fault-3"


def test_no_alignment_kill_at_parallelism_one_and_bad_counts_refused() -> None:
    plan = plan_faults(5, 50, vertices=_one(1), records_per_subtask=10)
    assert "alignment" not in {f.kind for f in plan}
    assert {f.subtask for f in plan} == {0}
    with pytest.raises(ValueError):
        plan_faults(5, -1, vertices=_one(1), records_per_subtask=10)
    with pytest.raises(ValueError):
        plan_faults(5, 1, vertices=(), records_per_subtask=10)
    with pytest.raises(ValueError, match="marker directory"):
        faults_text(plan, "/tmp/a,b")


def test_faults_spread_over_every_vertex_within_its_parallelism_and_no_source_aligns() -> None:
    plan = plan_faults(3, 60, vertices=_SHAPE, records_per_subtask=10)
    by_vertex = {v.name: [f for f in plan if f.vertex == v.name] for v in _SHAPE}
    assert all(len(faults) >= 10 for faults in by_vertex.values()), by_vertex
    assert {f.subtask for f in by_vertex["enrich -> Map"]} == {0, 1, 2}
    assert {f.subtask for f in by_vertex["orders"]} == {0, 1}
    assert "alignment" not in {f.kind for f in by_vertex["orders"]}
    assert "alignment" in {f.kind for f in plan}
    # A name inside another's would also match that vertex: aimed at by no name.
    shadowed = (Vertex("a", 1, True), Vertex("a -> b", 1, False))
    assert {f.vertex for f in plan_faults(1, 20, vertices=shadowed, records_per_subtask=5)} == {
        None,
        "a -> b",
    }


def test_segments_take_turns_and_each_counts_its_own_attempts() -> None:
    plan = plan_faults(9, 7, vertices=_SHAPE, records_per_subtask=10, segments=3, pauses=0)
    assert [(f.segment, f.attempt) for f in plan] == [
        (0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2)
    ]  # fmt: skip
    assert plan[0].kind != "restore"  # a later segment's attempt 0 is a restore already
    second = parse_faults(faults_text(plan, "/m", segment=1))
    assert [(s.attempt, s.marker) for s in second] == [(0, "/m/fault-1"), (1, "/m/fault-4")]
    assert "(segment 1, attempt 0)" in plan[1].describe()


def test_pauses_end_no_attempt_and_the_next_fault_of_their_segment_waits_for_them() -> None:
    plan = plan_faults(4, 200, vertices=_SHAPE, records_per_subtask=10, segments=2)
    pauses = [f for f in plan if f.action == "pause"]
    assert 20 <= len(pauses) <= 60  # about a fifth
    assert all(1.0 <= f.pause_s <= 3.0 for f in pauses)
    for segment in (0, 1):
        faults = [f for f in plan if f.segment == segment]
        kills = 0
        for before, fault in zip([None, *faults], faults, strict=False):
            assert fault.attempt == kills  # only kills start a new attempt
            paused = before is not None and before.action == "pause"
            assert fault.after == (before.index if paused else None)
            assert not (paused and fault.kind == "restore")
            kills += fault.action == "kill"
    # The points are the same draws with or without pauses (a restore after a pause is a
    # processing fault at the same early record).
    no_pauses = plan_faults(4, 200, vertices=_SHAPE, records_per_subtask=10, pauses=0)
    for fault, alone in zip(plan, no_pauses, strict=True):
        assert (fault.kind, fault.records, fault.subtask, fault.vertex) == (
            alone.kind if fault.kind == alone.kind else "processing",
            alone.records,
            alone.subtask,
            alone.vertex,
        )
    chained = next(f for f in plan if f.after is not None)
    (spec,) = parse_faults(faults_text((chained,), "/m", chained.segment))
    assert spec.after == f"/m/fault-{chained.after}"
    first = pauses[0]
    (paused,) = parse_faults(faults_text((first,), "/m", first.segment))
    assert (paused.kill, paused.pause_s) == ("pause", first.pause_s)


def test_equal_multisets_in_any_order_do_not_differ() -> None:
    assert compare_output("o", ["a,1", "b,2", "a,1"], _records("b,2", "a,1", "a,1")) == []


def test_a_changed_value_is_paired_with_the_missing_record_of_its_key() -> None:
    diffs = compare_output("o", ["a,1", "b,2"], _records("a,1", "b,5"))
    assert [(d.kind, d.expected, d.actual and d.actual.text) for d in diffs] == [
        ("changed", "b,2", "b,5")
    ]
    assert diffs[0].key == "b"


def test_duplicates_extras_and_missing_are_told_apart_earliest_commit_first() -> None:
    got = [Record("x,9", 5.0, "late:1"), Record("a,1", 1.0, "early:1"), Record("a,1", 2.0, "b:1")]
    diffs = compare_output("o", ["a,1", "c,3"], got)
    assert [(d.kind, d.expected, d.actual and d.actual.where) for d in diffs] == [
        ("duplicated", "a,1", "b:1"),
        ("extra", None, "late:1"),
        ("missing", "c,3", None),
    ]


def test_outputs_ordered_by_their_first_differing_commit() -> None:
    reference = {"early": ["a"], "late": ["b"], "same": ["c"]}
    actual = {
        "late": [Record("b2", 9.0, "l:1")],
        "early": [Record("a2", 1.0, "e:1")],
        "same": [Record("c", 0.0, "s:1")],
    }
    assert [d.output for d in compare_outputs(reference, actual)] == [
        "early",
        "early",
        "late",
        "late",
    ]
    # An output only one run wrote counts as empty in the other.
    assert [d.kind for d in compare_outputs({}, {"new": _records("n")})] == ["extra"]


def _diff(kind: str, output: str = "o") -> Difference:
    actual = None if kind == "missing" else Record("k,1", 0.0, "f:1")
    return Difference(output, kind, "k,0" if kind != "extra" else None, actual)


def test_cause_classes() -> None:
    assert classify([]) is None
    dup, changed, missing = _diff("duplicated"), _diff("changed"), _diff("missing")
    assert classify([dup]).name == NOT_EXACTLY_ONCE  # type: ignore[union-attr]
    assert classify([changed]).name == NON_DETERMINISTIC  # type: ignore[union-attr]
    assert classify([missing]).name == LOST  # type: ignore[union-attr]
    assert classify([missing], rescaled=True).name == LOST_STATE_RESCALE  # type: ignore[union-attr]
    outside = frozenset({"o"})
    assert classify([dup], outside_sinks=outside).name == SIDE_EFFECT  # type: ignore[union-attr]
    # A control run that differs without faults outweighs everything else.
    control = classify([dup], outside_sinks=outside, control_differs=True)
    assert control is not None and control.name == NON_DETERMINISTIC
    assert "without faults" in control.why
    # A rescaled run without faults differs, one at a fixed parallelism does not.
    rescale = classify([changed], control_differs=False, rescale_differs=True)
    assert rescale is not None and rescale.name == LOST_STATE_RESCALE
    assert classify([changed], control_differs=False, rescale_differs=False).name == (  # type: ignore[union-attr]
        NON_DETERMINISTIC
    )


def test_the_report_names_the_first_difference_the_fault_before_and_the_replay() -> None:
    plan = plan_faults(7, 2, vertices=_one(2), records_per_subtask=50)
    fired = [
        FiredFault(plan[0], "after-barrier of x#0 (checkpoint 1)", 1.0),
        FiredFault(plan[1], "processing of x#1 (checkpoint None)", 3.0),
    ]
    diff = Difference("Sink 'out'", "extra", None, Record("z,1", 2.0, "part-0:4"))
    assert fault_before(diff, fired) is fired[0]
    assert fault_before(_diff("missing"), fired) is fired[1]
    assert fault_before(Difference("o", "extra", None, Record("z", 0.5, "p")), fired) is None
    text = report(
        command="cairn chaos job.py --seed=7",
        seed=7,
        plan=plan,
        fired=fired,
        diffs=[diff],
        cause=classify([diff]),
        sinks=[],
        compared=1,
        records=10,
    )
    lines = text.splitlines()
    assert lines[0].startswith("DIFFERENT: 1 of 1 outputs")
    assert lines[1] == "  first difference, in Sink 'out': 'z,1' not in the reference (part-0:4)"
    assert lines[2].startswith("  fault just before: #0 kill subtask")
    assert "likely cause: non-deterministic function or key" in lines[3]
    assert lines[4] == "  replay: cairn chaos job.py --seed=7"


def test_an_equal_report_says_how_many_faults_fired() -> None:
    plan = (PlannedFault(0, "upload", 0, 0),)
    text = report(
        command="c",
        seed=3,
        plan=plan,
        fired=[],
        diffs=[],
        cause=None,
        sinks=[],
        compared=0,
        records=0,
    )
    assert text.splitlines() == [
        "EQUAL: 0 outputs (0 records) committed the same with 0 of 1 faults as without",
        "  replay: c",
        "  nothing was compared: the job has no sink it reads and no --compare",
    ]
