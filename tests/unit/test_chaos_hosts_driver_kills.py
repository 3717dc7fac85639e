"""``cairn chaos --profile hosts --driver-kills K``'s decisions, without hosts: the kills a
seed draws (the local profile's moments in each life, a gap within a checkpoint interval),
whether one landed from the evidence, each driver life's spec, the progress file and the
report's lines on the kills."""

from __future__ import annotations

import copy
import signal
from typing import Any

import pytest

from cairn.cli.chaos_driver import KillOutcome, driver_kill_lines, plan_driver_kills
from cairn.cli.chaos_hosts_lives import life_spec
from cairn.cli.chaos_hosts_plan import (
    HostDriverKill,
    driver_host_outcome,
    parse_progress,
    plan_host_driver_kills,
)
from cairn.cli.chaos_verdict import Difference, Record
from cairn.testing.fault_plan import Vertex

VERTICES = (Vertex("orders", 2, True), Vertex("KeyedProcess -> Sink", 2))


def test_the_kills_are_the_local_profiles_moments_of_each_life_with_a_seeded_gap() -> None:
    kills = plan_host_driver_kills(5, 3, checkpoints=40, vertices=VERTICES, interval_s=0.3)
    local = plan_driver_kills(5, 3, checkpoints=40, vertices=VERTICES)
    assert [(k.index, k.checkpoint) for k in kills] == [(k.index, k.checkpoint) for k in local]
    assert all(1 <= k.checkpoint <= 10 for k in kills)  # each life gets its share
    assert all(0.0 <= k.gap_s <= 0.3 for k in kills)
    assert kills == plan_host_driver_kills(5, 3, checkpoints=40, vertices=VERTICES, interval_s=0.3)
    gaps = {
        k.gap_s
        for seed in range(20)
        for k in plan_host_driver_kills(seed, 2, checkpoints=9, vertices=VERTICES, interval_s=1.0)
    }
    assert len(gaps) > 10  # the moment within the interval is drawn, not fixed
    assert plan_host_driver_kills(5, 0, checkpoints=9, vertices=VERTICES, interval_s=0.3) == ()


def test_a_kill_reads_as_the_driver_host_lost_counted_over_the_whole_run() -> None:
    kill = HostDriverKill(1, "metadata", 2, None, 0.07)
    assert kill.describe() == (
        "driver kill #1: the driver host lost 0.07 s after the run's 2nd completed checkpoint"
    )
    ordinals = [
        HostDriverKill(0, "metadata", n).describe().split("run's ")[1].split(" ")[0]
        for n in (1, 3, 11, 12, 13, 21, 22, 111)
    ]
    assert ordinals == ["1st", "3rd", "11th", "12th", "13th", "21st", "22nd", "111th"]
    assert "run's 9th completed" in kill.describe(base=7)


def _outcome(**evidence: Any) -> KillOutcome:
    facts: dict[str, Any] = {
        "code": -signal.SIGKILL,
        "driver_hit": True,
        "ended_first": False,
        "at": 130.0,
        "started": 100.0,
        "progress": (12, 14),
        **evidence,
    }
    return driver_host_outcome(HostDriverKill(0, "completed", 3, None, 0.1), 4, **facts)


def test_a_kill_lands_only_on_evidence_the_driver_died_of_it_before_it_ended() -> None:
    landed = _outcome()
    assert landed.landed and landed.base == 4 and landed.at == 130.0
    assert landed.where == (
        "at +30.0 s, once 12 checkpoints had completed (the latest: checkpoint 14)"
    )
    # The driver wrote its result first (the job had ended): killed, but not a driver loss.
    late = _outcome(ended_first=True)
    assert not late.landed and "the job ended before it" in str(late.why)
    failed = _outcome(ended_first=True, failed="JobExecutionException: boom")
    assert failed.why == "the job failed before it: JobExecutionException: boom"
    # SIGKILLed, but the kill hit no process of the driver: something else killed it.
    other = _outcome(driver_hit=False)
    assert not other.landed and "SIGKILLed by something else" in str(other.why)
    for code, why in ((0, "the job ended before it"), (1, "exited with 1"), (None, "--minutes")):
        outcome = _outcome(code=code)
        assert not outcome.landed and why in str(outcome.why), outcome
    assert "latest" not in str(_outcome(progress=(3, None)).where)


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("12 27", (12, 27)),
        ("3", (3, None)),
        ("", (0, None)),
        ("x 1", (0, None)),
        ("5 \n", (5, None)),
    ],
)
def test_the_progress_file_reads_as_a_count_and_the_latest_checkpoint(
    text: str, read: tuple[int, int | None]
) -> None:
    assert parse_progress(text) == read


def test_each_life_resumes_the_same_run_and_only_the_last_carries_the_worker_kills() -> None:
    spec = {
        "args": {"conf": ["cairn.spark.master=spark://m:7077"], "minutes": 10.0, "script": "j"},
        "work": "/w",
        "plan": [],
        "progress": "/w/hosts-progress",
        "result": "/w/hosts-result.json",
    }
    kept = copy.deepcopy(spec)
    kills = [{"index": 0, "kind": "processing", "attempt": 0, "subtask": 1, "records": 9}]
    lives = [
        life_spec(spec, life=i, lives=3, base=4 * i, plan=kills, minutes=9.0 - i) for i in range(3)
    ]
    assert spec == kept  # the run's spec is the template of every life, unchanged
    assert [life["plan"] for life in lives] == [[], [], kills]
    assert [life["progress_base"] for life in lives] == [0, 4, 8]
    assert [life["args"]["minutes"] for life in lives] == [9.0, 8.0, 7.0]
    for life in lives:
        assert life["args"]["conf"] == [*spec["args"]["conf"], "cairn.recovery.on-rerun=RESUME"]
        assert (life["progress"], life["result"], life["work"]) == (
            spec["progress"],
            spec["result"],
            spec["work"],
        )
    alone = life_spec(spec, life=0, lives=1, base=0, plan=kills, minutes=10.0)
    assert alone["args"]["conf"] == spec["args"]["conf"]  # no kill: the run as before
    assert alone["plan"] == kills


def test_the_report_says_where_each_kill_landed_and_what_the_next_driver_resumed_from() -> None:
    kills = [HostDriverKill(0, "metadata", 3, None, 0.12), HostDriverKill(1, "completed", 2)]
    landed = driver_host_outcome(
        kills[0],
        0,
        code=-9,
        driver_hit=True,
        ended_first=False,
        at=125.0,
        started=100.0,
        progress=(4, 4),
    )
    outcomes = [
        KillOutcome(landed.kill, landed.base, landed.where, landed.at, None, 4),
        driver_host_outcome(
            kills[1],
            4,
            code=0,
            driver_hit=False,
            ended_first=True,
            at=150.0,
            started=100.0,
            progress=(20, 22),
        ),
    ]
    diff = Difference("Sink 'out'", "extra", None, Record("c1,4", 126.0, "part-0:3"))
    assert driver_kill_lines(outcomes, 2, [diff]) == [
        "  driver kills: 1 of 2 landed, each followed by a new driver of the same run",
        "  driver kill just before: driver kill #0: the driver host lost 0.12 s after the "
        "run's 3rd completed checkpoint",
        "  landed driver kill #0: the driver host lost 0.12 s after the run's 3rd completed "
        "checkpoint: at +25.0 s, once 4 checkpoints had completed (the latest: checkpoint 4); "
        "the next driver resumed from checkpoint 4",
        "  did not land: driver kill #1: the driver host lost 0.00 s after the run's 6th "
        "completed checkpoint: the job ended before it (give it more input or a shorter "
        "--checkpoint-interval)",
    ]
