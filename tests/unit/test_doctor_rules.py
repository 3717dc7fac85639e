"""The doctor's rules on recorded statistics: the skew demo's aligned run (seed 000's job,
recorded with ``facts_to_json``) gets the unaligned / alignment-timeout advice and its
unaligned run does not; every other rule fires on statistics that show its problem, stays
silent on healthy ones, and names the figures and keys behind its advice."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
from cairn.checkpoint.stats import CheckpointStats, CheckpointStatus, SubtaskStats
from cairn.ids import CheckpointId, SubtaskIndex, VertexId
from cairn.observability.doctor import rules
from cairn.observability.doctor.fact_sources import config_from_properties
from cairn.observability.doctor.facts import (
    CheckpointConfigFacts,
    DoctorFacts,
    VertexShape,
    facts_from_json,
    facts_to_json,
)
from cairn.settings import JobSettings

DATA = Path(__file__).parent / "data"
MIB = 1 << 20
CONFIG = CheckpointConfigFacts(
    interval_ms=60_000,
    timeout_ms=600_000,
    min_pause_ms=30_000,
    unaligned=False,
    aligned_timeout_ms=0,
    debloat=False,
    backend="hashmap",
    incremental=False,
)


def recorded(name: str) -> DoctorFacts:
    return facts_from_json(json.loads((DATA / name).read_text()))


def checkpoint(
    cid: int,
    duration_ms: int,
    alignment_ms: int = 0,
    *,
    state: int = MIB,
    persisted: int = 0,
    unaligned: bool = False,
    savepoint: bool = False,
    status: CheckpointStatus = CheckpointStatus.COMPLETED,
    failure: str | None = None,
) -> CheckpointStats:
    trigger = cid * 100_000
    subtasks = {}
    for i, share in enumerate((0.5, 1.0)):  # subtask 1 of vertex 1 acknowledges last
        key = TaskKey(VertexId(1), SubtaskIndex(i))
        metrics = SubtaskCheckpointMetrics(
            alignment_duration_ms=alignment_ms,
            state_size=state // 2,
            persisted_bytes=persisted // 2,
            unaligned=unaligned,
        )
        subtasks[key] = SubtaskStats(key, trigger + int(duration_ms * share), metrics)
    return CheckpointStats(
        CheckpointId(cid),
        savepoint,
        status,
        trigger,
        2,
        subtasks,
        end_ms=trigger + duration_ms,
        failure_reason=failure,
    )


def healthy() -> DoctorFacts:
    return DoctorFacts(
        tuple(checkpoint(i, 800, 20) for i in range(5, 0, -1)),
        CONFIG,
        vertices=(VertexShape("src", 2), VertexShape("sum", 2, (("hash", 2),))),
        vertex_names={0: "src", 1: "sum"},
        backpressure={"src (1)": 0.05, "sum (1)": 0.0},
    )


def fired(facts: DoctorFacts) -> list[str]:
    return [f.rule for f in rules.diagnose(facts)]


def test_a_healthy_job_gets_no_findings() -> None:
    assert fired(healthy()) == []


def test_the_skew_demos_aligned_run_gets_the_unaligned_and_timeout_advice() -> None:
    facts = recorded("doctor_skew_aligned.json")
    finding = rules.alignment_dominates(facts)
    assert finding is not None
    figures = dict(finding.figures)
    alignment = int(figures["alignment p50"].removesuffix(" ms").replace(",", ""))
    assert alignment > 1_000 and figures["most backpressured"].startswith("skewed source")
    timeout = alignment // 2
    assert finding.keys[0] == "execution.checkpointing.unaligned.enabled: true"
    key, value = finding.keys[1].split(": ")
    assert key == "execution.checkpointing.aligned-checkpoint-timeout"
    assert abs(int(value.removesuffix(" ms")) - timeout) <= 10


def test_the_skew_demos_unaligned_run_gets_no_alignment_advice() -> None:
    facts = recorded("doctor_skew_unaligned.json")
    assert facts.config is not None and facts.config.unaligned
    assert "alignment-dominates" not in fired(facts)
    assert "unaligned-without-effect" not in fired(facts)  # key_by at parallelism 2


def test_alignment_without_backpressure_is_not_blamed_on_alignment() -> None:
    slow = replace(healthy(), checkpoints=(checkpoint(1, 4_000, 3_000),))
    assert rules.alignment_dominates(slow) is None
    pressed = replace(slow, backpressure={"src (1)": 0.9})
    assert rules.alignment_dominates(pressed) is not None
    unknown = replace(slow, backpressure={})  # a retained checkpoint: alignment alone decides
    assert rules.alignment_dominates(unknown) is not None


def test_large_in_flight_data_of_unaligned_checkpoints_asks_for_debloating() -> None:
    unaligned = replace(CONFIG, unaligned=True)
    big = (checkpoint(1, 900, persisted=100 * MIB, unaligned=True),)
    facts = replace(healthy(), checkpoints=big, config=unaligned)
    finding = rules.large_in_flight(facts)
    assert finding is not None and finding.keys == (
        "taskmanager.network.memory.buffer-debloat.enabled: true",
    )
    assert dict(finding.figures)["persisted in-flight p50"] == "100.0 MiB"
    assert rules.large_in_flight(replace(facts, config=replace(unaligned, debloat=True))) is None
    small = (checkpoint(1, 900, persisted=MIB, unaligned=True),)
    assert rules.large_in_flight(replace(facts, checkpoints=small)) is None


def test_unaligned_checkpoints_at_parallelism_one_or_forward_only_change_nothing() -> None:
    config = replace(CONFIG, unaligned=True)
    chain = (VertexShape("src", 1), VertexShape("map", 1, (("rebalance", 1),)))
    finding = rules.unaligned_without_effect(replace(healthy(), config=config, vertices=chain))
    assert finding is not None and "map (p=1, rebalance)" in dict(finding.figures)["vertices"]
    forward = (VertexShape("src", 4), VertexShape("map", 4, (("forward", 4),)))
    assert rules.unaligned_without_effect(replace(healthy(), config=config, vertices=forward))
    assert rules.unaligned_without_effect(replace(healthy(), config=config)) is None


def test_checkpoints_near_the_timeout_name_the_slowest_subtask() -> None:
    config = replace(CONFIG, timeout_ms=10_000)
    facts = replace(healthy(), config=config, checkpoints=(checkpoint(3, 9_000),))
    finding = rules.near_timeout(facts)
    assert finding is not None
    assert dict(finding.figures)["slowest subtask"].startswith("sum (2) of checkpoint 3")
    assert finding.keys == ("execution.checkpointing.timeout: 20000 ms",)
    expired = checkpoint(4, 10_000, status=CheckpointStatus.FAILED, failure="CHECKPOINT_EXPIRED")
    facts = replace(healthy(), config=config, checkpoints=(expired, checkpoint(3, 2_000)))
    finding = rules.near_timeout(facts)
    assert finding is not None and dict(finding.figures)["timed out"] == "1"


def test_a_min_pause_shorter_than_the_checkpoints_runs_them_back_to_back() -> None:
    config = replace(CONFIG, interval_ms=1_000, min_pause_ms=0)
    facts = replace(healthy(), config=config, checkpoints=(checkpoint(1, 3_000),))
    finding = rules.back_to_back(facts)
    assert finding is not None and finding.keys == ("execution.checkpointing.min-pause: 3000 ms",)
    assert rules.back_to_back(replace(facts, config=replace(config, min_pause_ms=5_000))) is None


def test_an_interval_far_from_the_seeds_advice_is_named() -> None:
    long = replace(healthy(), config=replace(CONFIG, interval_ms=30 * 60_000))
    finding = rules.interval_off_advice(long)
    assert finding is not None and finding.rule == "interval-long"
    short = replace(
        healthy(),
        config=replace(CONFIG, interval_ms=1_000, min_pause_ms=2_000),
        checkpoints=(checkpoint(1, 900),),
    )
    finding = rules.interval_off_advice(short)
    assert finding is not None and finding.rule == "interval-short"
    assert finding.keys == ("execution.checkpointing.interval: 3600 ms",)


def test_large_full_checkpoints_of_the_heap_backend_suggest_rocksdb_incremental() -> None:
    facts = replace(healthy(), checkpoints=(checkpoint(1, 5_000, state=512 * MIB),))
    finding = rules.heap_full_large(facts)
    assert finding is not None and finding.keys == (
        "state.backend.type: rocksdb",
        "execution.checkpointing.incremental: true",
    )
    rocks = replace(CONFIG, backend="rocksdb", incremental=True)
    assert rules.heap_full_large(replace(facts, config=rocks)) is None


def test_stateful_operators_without_uid_are_named() -> None:
    finding = rules.stateful_without_uid(replace(healthy(), stateful_without_uid=("sum",)))
    assert finding is not None and finding.keys == (".uid(...) on sum",)


def test_savepoints_slowed_by_alignment_are_not_helped_by_unaligned_checkpoints() -> None:
    savepoint = checkpoint(6, 8_000, 6_000, savepoint=True)
    finding = rules.slow_savepoints(replace(healthy(), checkpoints=(savepoint,)))
    assert finding is not None and "will not make them faster" in finding.advice


def test_state_growing_at_every_checkpoint_asks_for_a_ttl() -> None:
    def facts(sizes: list[int]) -> DoctorFacts:
        n = len(sizes)
        history = tuple(checkpoint(n - i, 800, 20, state=sizes[n - 1 - i]) for i in range(n))
        return replace(healthy(), checkpoints=history)  # newest first

    growing = facts([MIB, 2 * MIB, 3 * MIB, 4 * MIB, 6 * MIB])
    finding = next(f for f in rules.diagnose(growing) if f.rule == "state-grows")
    assert finding.title == "the state of sum grew at each of the last 5 checkpoints"
    assert dict(finding.figures)["state size"] == "1.0 MiB -> 6.0 MiB"
    assert "table.exec.state.ttl: 1 h" in finding.keys
    # bounded (a TTL's), levelled off once, too short a history, or too small: silent
    assert "state-grows" not in fired(facts([MIB, 2 * MIB, 3 * MIB, 3 * MIB, 6 * MIB]))
    assert "state-grows" not in fired(facts([2 * MIB, 3 * MIB, 3 * MIB, 2 * MIB, 3 * MIB]))
    assert "state-grows" not in fired(facts([MIB, 2 * MIB, 4 * MIB, 8 * MIB]))
    assert "state-grows" not in fired(facts([MIB // 8, MIB // 4, MIB // 3, MIB // 2, MIB // 2 + 1]))
    assert "state-grows" not in fired(facts([100 * MIB + i * MIB for i in range(5)]))  # +4 %


def test_rules_without_their_facts_stay_silent() -> None:
    bare = DoctorFacts(tuple(checkpoint(i, 9_000, 8_000) for i in (2, 1)))  # no config
    assert fired(bare) == ["alignment-dominates"]


def test_facts_round_trip_through_json_and_checkpoint_properties() -> None:
    facts = recorded("doctor_skew_aligned.json")
    assert facts_from_json(json.loads(json.dumps(facts_to_json(facts)))) == facts
    settings = JobSettings("j", 2)
    config = config_from_properties(settings.checkpoint_properties())
    assert config is not None and config.timeout_ms == settings.checkpoint.timeout_ms


@pytest.mark.parametrize("rule", rules.RULES)
def test_every_rule_has_a_docstring(rule: rules.Rule) -> None:
    assert rule.__doc__
