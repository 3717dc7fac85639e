"""Two inputs end to end: a keyed co-process join with event-time timers and a broadcast-rules
job, each under repeated SIGKILL of workers (aligned and unaligned checkpoints), equal to the
golden (failure-free) output as a multiset and per key in order; broadcast state restored
from a savepoint at another parallelism reaches every subtask."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from cairn.cli.demo_jobs import read_visible_lines
from cairn.common.job_status import JobStatus
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
@pytest.mark.parametrize("mode", ["failure-free", "aligned", "unaligned"])
@pytest.mark.parametrize("job", sorted(JOBS))
def test_two_input_jobs_stay_exactly_once_under_sigkill(
    spark: Any, tmp_path: Any, job: str, mode: str
) -> None:
    build, golden, vertex, source = JOBS[job]
    conf = {"cairn.executor": "spark"}
    if mode != "failure-free":
        conf["cairn.testing.faults"] = _kills(mode, vertex, source)
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
    assert client.job_master.restarts == (0 if mode == "failure-free" else 3)
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
    """Stopped with a savepoint at parallelism 2 after the rules were read, restored at 3: a
    subtask without the broadcast copy would find no rule for its windows."""
    out = str(tmp_path / "run")
    conf = {"cairn.executor": "spark"}
    client = rules_job(conf, out, records=RECORDS, keys=KEYS, rate=8_000).execute_async("p2")
    assert client.wait_for_status(JobStatus.RUNNING, 180)
    deadline = time.monotonic() + 120
    while not read_visible_lines(out + "/out") and time.monotonic() < deadline:
        time.sleep(0.2)
    stopped = client.stop_with_savepoint(False, str(tmp_path / "sp")).result(timeout=120)
    first = len(read_visible_lines(out + "/out"))
    assert 0 < first < len(expected_rules(RECORDS, KEYS)), "stopped midway"
    restored = {**conf, "execution.savepoint.path": stopped}
    rules_job(restored, out, records=RECORDS, keys=KEYS, rate=None, parallelism=3).execute("p3")
    _check(out, expected_rules(RECORDS, KEYS))
