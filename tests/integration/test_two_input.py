"""Two inputs end to end: a keyed co-process join with event-time timers and a broadcast-rules
job, each under repeated SIGKILL of workers (aligned and unaligned checkpoints), equal to the
golden (failure-free) output as a multiset and per key in order; broadcast state restored
from a retained checkpoint at another parallelism reaches every subtask.

(Not from a stop-with-savepoint: stopping an event-time job ends its inputs, which passes the
final watermark and fires every timer; the output of those timers is committed, so a restore
of the savepoint emits those windows again, also with one input: a bug outside this file.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cairn.common import JobExecutionException
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.two_input_jobs import (
    expected_join,
    expected_rules,
    join_job,
    per_key_order_problems,
    rules_job,
)

RECORDS, KEYS = 40_000, 10

JOBS: dict[str, tuple[Callable[..., Any], Callable[[int, int], list[str]], str, str]] = {
    # job, golden output, its two-input vertex, its first source
    "join": (join_job, expected_join, "Join", "orders"),
    "rules": (rules_job, expected_rules, "Rules", "events"),
}


def _kills(mode: str, vertex: str, source: str) -> str:
    """Three kills per run; timers registered before each must fire after it."""
    if mode == "aligned":
        return (
            f"point=processing,attempt=0,records=10000,subtask=1,vertex={vertex};"
            f"point=after-barrier,attempt=1,subtask=0,vertex={vertex};"
            "point=during-upload,attempt=2,subtask=1"
        )
    return (
        f"point=processing,attempt=0,records=10000,subtask=0,vertex={vertex};"
        f"point=after-barrier,attempt=1,subtask=1,vertex={vertex};"
        f"point=processing,attempt=2,records=2000,subtask=1,vertex={source}"
    )


def _check(out: str, golden: list[str]) -> None:
    assert read_visible_lines(out + "/late") == [], "bounded disorder: nothing is late"
    lines = read_visible_lines(out + "/out")
    assert per_key_order_problems(lines) == []
    assert sorted(lines) == golden


@pytest.mark.parametrize("job", sorted(JOBS))
def test_two_input_jobs_match_the_golden_output_in_process(tmp_path: Any, job: str) -> None:
    build, golden, _, _ = JOBS[job]
    out = str(tmp_path)
    env = build({"cairn.executor": "inprocess"}, out, records=RECORDS, keys=KEYS, rate=None)
    env.execute_async(job).get_job_execution_result(timeout=240)
    _check(out, golden(RECORDS, KEYS))


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["aligned", "unaligned"])
@pytest.mark.parametrize("job", sorted(JOBS))
def test_two_input_jobs_stay_exactly_once_under_sigkill(
    spark: Any, tmp_path: Any, job: str, mode: str
) -> None:
    """On Spark the job gives the golden output under exactly the three kills scheduled (no
    other restart): what a failure-free run on Spark would show, and more."""
    build, golden, vertex, source = JOBS[job]
    conf = {"cairn.executor": "spark", "cairn.testing.faults": _kills(mode, vertex, source)}
    unaligned = mode == "unaligned"
    out = str(tmp_path)
    env = build(
        conf,
        out,
        records=RECORDS,
        keys=KEYS,
        unaligned=unaligned,
        rate=None if unaligned else 20_000,
        cost_us=40 if unaligned else 0,
    )
    client = env.execute_async(f"{job}-{mode}")
    client.get_job_execution_result(timeout=300)
    assert client.job_master.restarts == 3
    if unaligned:
        stats = client.get_checkpoint_statistics()
        assert stats is not None
        persisted = [c.persisted_bytes for c in stats.history]
        assert any(p > 0 for p in persisted), f"no in-flight data was persisted: {persisted}"
    _check(out, golden(RECORDS, KEYS))


@pytest.mark.spark
def test_broadcast_state_is_restored_on_every_subtask_at_another_parallelism(
    spark: Any, tmp_path: Any
) -> None:
    """A run at parallelism 2 is killed (no restart) after rules were read; its retained
    checkpoint is restored at parallelism 3: a subtask without a copy of the broadcast state
    would find no rule for its windows (and fail), and the output must be the golden one."""
    out, chk = str(tmp_path / "run"), str(tmp_path / "chk")
    kill = "point=processing,attempt=0,records=12000,subtask=1,vertex=Rules"
    conf = {"cairn.executor": "spark"}
    env = rules_job(
        {**conf, "cairn.testing.faults": kill},
        out,
        records=RECORDS,
        keys=KEYS,
        restarts=0,
        checkpoint_dir=chk,
    )
    client = env.execute_async("p2")
    with pytest.raises(JobExecutionException):
        client.get_job_execution_result(timeout=240)
    latest = client.job_master.coordinator.latest_completed()
    assert latest is not None
    first = len(read_visible_lines(out + "/out"))
    assert 0 < first < len(expected_rules(RECORDS, KEYS)), "killed midway"
    restored = {**conf, "execution.savepoint.path": latest.directory}
    rules_job(restored, out, records=RECORDS, keys=KEYS, rate=None, parallelism=3).execute("p3")
    _check(out, expected_rules(RECORDS, KEYS))
