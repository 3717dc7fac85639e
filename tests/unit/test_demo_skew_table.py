"""The skew demo's table: checkpoint statistics -> one row per variant -> text.

The statistics come from the real ``CheckpointStatsTracker`` fed with chosen acknowledgements,
so every figure of a row is known exactly; the variants' settings are read back from the job
settings the environment would submit (no Spark).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
from cairn.checkpoint.stats import CheckpointStats, CheckpointStatsTracker
from cairn.cli.demo_skew import parse_variants
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.functions import FunctionInitializationContext, FunctionSnapshotContext
from cairn.datastream.state import ListStateDescriptor
from cairn.experiments import skew
from cairn.experiments.skew import (
    CheckpointSample,
    build_skew_job,
    configure_variant,
    format_table,
    summarize,
    table_rows,
)
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.state.operator_state import DefaultOperatorStateBackend

SRC0, SRC1 = TaskKey(VertexId(0), SubtaskIndex(0)), TaskKey(VertexId(0), SubtaskIndex(1))
MAP0, MAP1 = TaskKey(VertexId(1), SubtaskIndex(0)), TaskKey(VertexId(1), SubtaskIndex(1))
M = SubtaskCheckpointMetrics


def _tracker(checkpoints: list[tuple[int, int, dict[TaskKey, M], str]]) -> CheckpointStatsTracker:
    """(id, end-to-end ms, per-subtask metrics, "completed" | "failed" | "open")."""
    t = CheckpointStatsTracker(history_size=100)
    for cid, e2e, acks, outcome in checkpoints:
        trigger = 10_000 * cid
        t.report_pending(CheckpointId(cid), trigger, num_subtasks=4)
        for i, (task, metrics) in enumerate(acks.items()):
            t.report_ack(CheckpointId(cid), task, metrics, trigger + min(e2e, i + 1))
        if outcome == "completed":
            t.report_completed(CheckpointId(cid), trigger + e2e, f"/c/chk-{cid}")
        elif outcome == "failed":
            t.report_failed(CheckpointId(cid), trigger + e2e, "CHECKPOINT_EXPIRED", "timeout")
    return t


def _history(t: CheckpointStatsTracker) -> tuple[CheckpointStats, ...]:
    return t.snapshot().history


ALIGNED_ACKS = {
    SRC0: M(),
    SRC1: M(),
    MAP0: M(start_delay_ms=3, alignment_duration_ms=5200),
    MAP1: M(start_delay_ms=5100, alignment_duration_ms=2),
}


def _unaligned_acks(persisted: int) -> dict[TaskKey, M]:
    return {
        SRC0: M(unaligned=True),
        SRC1: M(unaligned=True),
        MAP0: M(start_delay_ms=4, unaligned=True),
        MAP1: M(start_delay_ms=40, persisted_bytes=persisted, unaligned=True),
    }


def test_sample_takes_slowest_subtask_durations_and_summed_bytes() -> None:
    t = _tracker(
        [
            (1, 7300, ALIGNED_ACKS, "completed"),
            (
                2,
                80,
                {MAP0: M(persisted_bytes=100, unaligned=True), MAP1: M(persisted_bytes=900)},
                "completed",
            ),
        ]
    )
    first, second = (
        CheckpointSample.from_stats(s) for s in sorted(_history(t), key=lambda s: s.checkpoint_id)
    )
    assert first == CheckpointSample(
        1,
        "COMPLETED",
        7300,
        alignment_ms=5200,
        start_delay_ms=5100,
        persisted_bytes=0,
        unaligned=False,
    )
    assert (second.persisted_bytes, second.unaligned) == (1000, True)  # any subtask: unaligned


def test_aligned_row_percentiles_are_nearest_rank_over_completed_only() -> None:
    t = _tracker(
        [
            (1, 5000, ALIGNED_ACKS, "completed"),
            (2, 9000, ALIGNED_ACKS, "completed"),
            (3, 7000, ALIGNED_ACKS, "completed"),
            (4, 60_000, ALIGNED_ACKS, "failed"),
            (5, 3000, ALIGNED_ACKS, "open"),
        ]
    )
    row = summarize("aligned", _history(t), records_per_s=812.5)
    assert (row.completed, row.failed, row.in_progress) == (3, 1, 1)
    assert (row.e2e_p50_ms, row.e2e_max_ms) == (7000, 9000)  # 5000, 7000, 9000: not 60 s
    assert (row.alignment_p50_ms, row.alignment_max_ms) == (5200, 5200)
    assert row.start_delay_max_ms == 5100
    assert (row.unaligned, row.persisted_max_bytes, row.persisted_total_bytes) == (0, 0, 0)
    assert row.failure_reasons == ("CHECKPOINT_EXPIRED",)
    assert row.records_per_s == 812.5


def test_unaligned_row_counts_unaligned_checkpoints_and_persisted_bytes() -> None:
    t = _tracker(
        [
            (1, 80, _unaligned_acks(40_000), "completed"),
            (2, 120, _unaligned_acks(10_000), "completed"),
        ]
    )
    row = summarize("unaligned", _history(t))
    assert (row.completed, row.unaligned) == (2, 2)
    assert (row.e2e_p50_ms, row.e2e_max_ms) == (80, 120)
    assert (row.persisted_max_bytes, row.persisted_total_bytes) == (40_000, 50_000)
    assert (row.alignment_p50_ms, row.start_delay_max_ms) == (0, 40)


def test_a_checkpoint_polled_several_times_counts_once_with_its_finished_status() -> None:
    seen_open = CheckpointSample(7, "IN_PROGRESS", 1500)
    done = CheckpointSample(7, "COMPLETED", 8000, alignment_ms=4000)
    for order in ([seen_open, done], [done, seen_open]):
        row = summarize("aligned", order)
        assert (row.completed, row.in_progress, row.e2e_max_ms) == (1, 0, 8000)


def test_no_completed_checkpoint_gives_empty_figures_not_zeros() -> None:
    row = summarize("aligned", [CheckpointSample(1, "IN_PROGRESS", 1999)])
    assert (row.completed, row.in_progress) == (0, 1)
    assert row.e2e_p50_ms is None and row.alignment_max_ms is None
    line = format_table([row]).splitlines()[2].split()
    assert line[:6] == ["aligned", "0", "0", "1", "-", "-"]


def test_rows_keep_variant_order_and_table_shows_labels_units_and_ratios() -> None:
    aligned = _tracker([(1, 12_500, ALIGNED_ACKS, "completed")])
    unaligned = _tracker([(1, 81, _unaligned_acks(39_629), "completed")])
    rows = table_rows(
        {"unaligned": _history(unaligned), "aligned": _history(aligned)},
        {"unaligned": 855.2, "aligned": None},
    )
    assert [r.variant for r in rows] == ["unaligned", "aligned"]
    text = format_table(rows, {"unaligned": "unaligned (!)"})
    header, rule, first, second = text.splitlines()
    assert header.split()[:3] == ["variant", "completed", "failed"]
    assert set(rule) <= {"-", " "}
    assert first.startswith("unaligned (!)")
    assert "81 ms" in first and "38.7 KiB" in first and "1/1" in first and "855" in first
    assert "12.5 s" in second and "5,200 ms" in second and "0/1" in second
    assert second.rstrip().endswith("-")  # no rate measured


def test_rows_and_samples_survive_json() -> None:
    sample = CheckpointSample(3, "FAILED", 60_000, 10, 20, 30, True, "CHECKPOINT_EXPIRED")
    assert CheckpointSample.from_dict(json.loads(json.dumps(sample.to_dict()))) == sample
    row = summarize("timeout", [sample])
    assert json.loads(json.dumps(row.to_dict()))["failure_reasons"] == ["CHECKPOINT_EXPIRED"]


def test_parse_variants() -> None:
    assert parse_variants("debloat, aligned,aligned") == ["debloat", "aligned"]
    with pytest.raises(ValueError, match=r"unknown variant.*fast"):
        parse_variants("aligned,fast")
    with pytest.raises(ValueError):
        parse_variants(" , ")


@pytest.mark.parametrize(
    ("variant", "unaligned", "aligned_timeout_ms", "debloat"),
    [
        ("aligned", False, 0, False),
        ("unaligned", True, 0, False),
        ("timeout", True, 1500, False),
        ("debloat", True, 0, True),
    ],
)
def test_variants_reach_the_submitted_job_settings(
    variant: str, unaligned: bool, aligned_timeout_ms: int, debloat: bool
) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(2000)
    configure_variant(env, variant, alignment_timeout_ms=1500)
    build_skew_job(env)
    settings = env.prepare_job("skew").settings
    assert settings.checkpoint.unaligned is unaligned
    assert settings.checkpoint.aligned_timeout_ms == aligned_timeout_ms
    assert settings.network.debloat_enabled is debloat
    assert settings.network.debloat_target_ms == 1000


def test_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown variant"):
        configure_variant(StreamExecutionEnvironment.get_execution_environment(), "fast")


class _InitContext(FunctionInitializationContext):
    """What the runtime hands ``initialize_state``, over a real operator state backend."""

    def __init__(self, backend: DefaultOperatorStateBackend, restored: bool) -> None:
        self.backend, self.restored = backend, restored

    def is_restored(self) -> bool:
        return self.restored

    def get_operator_state_store(self) -> Any:
        return self.backend

    def get_keyed_state_store(self) -> None:
        return None


class _SnapshotContext(FunctionSnapshotContext):
    def get_checkpoint_id(self) -> int:
        return 4

    def get_checkpoint_timestamp(self) -> int:
        return 0


def test_seed_map2_counts_values_in_operator_list_state_and_merges_on_restore() -> None:
    backend = DefaultOperatorStateBackend()
    mapper = skew.CheckpointMapper()
    mapper.initialize_state(_InitContext(backend, restored=False))
    assert [mapper.map(v) for v in (1, 2, 1)] == [1, 2, 1]
    mapper.snapshot_state(_SnapshotContext())
    descriptor = ListStateDescriptor("map-state", None)
    assert backend.get_list_state(descriptor).get() == [{1: 2, 2: 1}]

    # After a rescale one subtask may get the lists of two old subtasks: counts add up.
    rescaled = DefaultOperatorStateBackend()
    rescaled.get_list_state(descriptor).update([{1: 5, 2: 1}, {1: 3}])
    restored = skew.CheckpointMapper()
    restored.initialize_state(_InitContext(rescaled, restored=True))
    restored.map(2)
    restored.snapshot_state(_SnapshotContext())
    assert rescaled.get_list_state(descriptor).get() == [{1: 8, 2: 2}]


def test_bench_skew_workload_is_registered_and_rendered_from_samples() -> None:
    from bench import WORKLOADS, empty_result
    from bench.__main__ import QUICK, command, plan_cases
    from bench.report import render_results
    from bench.saved_runs import group_results
    from bench.skew import skew_fields

    assert "skew" in WORKLOADS
    cases = plan_cases(["skew"], QUICK, None)
    assert [c["case"] for c in cases] == [f"skew/{v}" for v in skew.VARIANTS]
    cmd = command("pyflink", cases[2], "spark", 600)
    assert cmd[1:3] == ["-m", "bench.skew"] and cmd[cmd.index("--variant") + 1] == "timeout"

    samples = [
        CheckpointSample(1, "COMPLETED", 40, persisted_bytes=2048, unaligned=True),
        CheckpointSample(2, "COMPLETED", 60, persisted_bytes=1024, unaligned=True),
        CheckpointSample(3, "IN_PROGRESS", 5),
    ]
    fields = skew_fields(samples, seconds=10.0, records_in=9_000)
    assert (fields["checkpoints_completed"], fields["checkpoints_open"]) == (2, 1)
    assert (fields["checkpoint_p50_ms"], fields["checkpoint_max_ms"]) == (40, 60)
    assert (fields["persisted_max_bytes"], fields["unaligned_checkpoints"]) == (2048, 2)
    assert fields["steady_records_per_s"] == 900

    result = {
        **empty_result("cairn", "skew", 0),
        **fields,
        "elapsed_s": 30.0,
        "case": "skew/unaligned",
        "variant": "unaligned",
    }
    unsupported = {
        **empty_result("spark", "skew", 0),
        "case": "skew/unaligned",
        "unsupported": "no unaligned checkpoints",
    }
    meta = {"date": "today", "command": "python -m bench", "repeat": 1, "machine": {}}
    text = render_results(group_results([result, unsupported]), meta, {c["case"]: c for c in cases})
    section = text[text.index("### 5. skew") :]
    assert "| Cairn | unaligned | 2 | 1 | 40 | 60 |" in section
    assert "2.0 | 2 | 900 |" in section  # persisted max KiB, unaligned, records/s
    assert "| Spark SS | unaligned | not run: no unaligned checkpoints |" in section
