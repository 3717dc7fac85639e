"""``cairn chaos --profile hosts``'s decisions, without hosts: which host faults the seed
draws (bench's kinds that make sense for a user's job), where each one aims, what runs
there at all, and the report's lines on them."""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bench.chaos_plan import EXTERNAL_KINDS

from cairn.cli.chaos_hosts_plan import (
    HOST_KINDS,
    HostFault,
    HostOutcome,
    host_fault_before,
    host_lines,
    job_events,
    plan_host_faults,
    refusal,
    replay_with_profile,
    split_faults,
    unavailable_text,
    unreachable_sinks,
)
from cairn.cli.chaos_verdict import Difference, Record
from cairn.testing.host_faults import HOST_FAULTS, ON_A_JOB_HOST, aim

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chaos_orders.py"


def test_the_profile_draws_only_host_faults_bench_knows_and_every_one_of_them() -> None:
    assert set(HOST_KINDS) <= set(EXTERNAL_KINDS)
    assert set(HOST_KINDS) <= HOST_FAULTS  # each one made by make_and_heal
    plan = plan_host_faults(seed=11, count=300)
    assert {f.kind for f in plan} == set(HOST_KINDS)
    assert [f.index for f in plan] == list(range(300))
    assert all(2.0 <= f.duration_s <= 5.0 and 0.0 <= f.gap_s <= 1.0 for f in plan)
    assert {f.target for f in plan} == {0, 1}
    assert {f.target for f in plan_host_faults(seed=11, count=300, workers=3)} == {0, 1, 2}


def test_a_seed_replays_the_same_host_faults_and_another_seed_does_not() -> None:
    assert plan_host_faults(5, 20) == plan_host_faults(5, 20)
    assert plan_host_faults(5, 20) != plan_host_faults(6, 20)
    assert plan_host_faults(5, 0) == ()


@pytest.mark.parametrize("count", [0, 1, 2, 3, 7, 200])
def test_faults_split_into_kills_and_host_faults_that_add_up(count: int) -> None:
    kills, hosts = split_faults(count)
    assert kills + hosts == count
    assert hosts >= kills >= hosts - 1


def test_a_fault_on_the_jobs_part_aims_at_a_host_that_runs_a_worker_of_it() -> None:
    assert aim("kill-host", 0, [False, True]) == 1
    assert aim("disk-full", 1, [True, False]) == 0
    assert aim("partition-driver", 1, [True, True]) == 1
    assert aim("kill-host", 0, [False, False]) == 0  # nowhere better: missed where aimed
    assert aim("storage-down", 0, [False, True]) == 0  # not about one host
    assert "storage-down" not in ON_A_JOB_HOST and "kill-host" in ON_A_JOB_HOST


def test_options_the_profile_does_not_run_are_refused_with_the_remedy() -> None:
    def args(**kw: object) -> argparse.Namespace:
        return argparse.Namespace(**{"rescale": False, "upgrade": None, "executor": None, **kw})

    assert refusal(args()) is None
    assert refusal(args(executor="spark")) is None
    assert refusal(args(rescale=True)) is None  # run_job's segments run on the hosts too
    assert refusal(args(driver_kills=2)) is None
    for given, named in (
        (args(rescale=True, driver_kills=1), "--driver-kills and --rescale"),
        (args(upgrade="v2.py"), "--upgrade"),
        (args(executor="inprocess"), "--executor inprocess"),
    ):
        text = refusal(given)
        assert text is not None and named in text and "--profile local" in text
        assert "\n" not in text


def test_without_root_or_ip_the_line_names_the_cause_and_the_remedy() -> None:
    text = unavailable_text("simulated hosts need root (network namespaces)")
    assert "\n" not in text
    assert "need root" in text and "run it as root on Linux with iproute2" in text


def test_only_sinks_whose_place_the_hosts_see_are_compared() -> None:
    assert unreachable_sinks([]) is None
    assert unreachable_sinks([("Sink 'a'", "FileSink", True), ("print", "Print", False)]) is None
    for kind in ("JdbcSink", "KafkaSink"):
        text = unreachable_sinks([("Sink 'a'", "FileSink", True), ("Sink 'b'", kind, True)])
        assert text is not None and "Sink 'b'" in text and kind in text


def test_the_report_lists_every_host_fault_landed_or_missed_and_the_one_before_a_diff() -> None:
    faults = plan_host_faults(3, 3)
    outcomes = [
        HostOutcome(faults[0], 1, made_at=110.0, healed_at=113.0),
        HostOutcome(faults[1], 0, made_at=120.0, healed_at=124.5),
        HostOutcome(faults[2], 0, missed="the job had ended"),
    ]
    diff = Difference("Sink 'out'", "duplicated", None, Record("c1,4", 121.0, "part-0:3"))
    lines = host_lines(outcomes, started=100.0, diff=diff)
    assert lines[0] == "  host faults: 2 of 3 landed"
    assert lines[1] == f"  host fault just before: {faults[1].describe(0)}"
    assert lines[2].endswith(": landed at +10.0 s, healed at +13.0 s")
    assert lines[3].endswith(": landed at +20.0 s, healed at +24.5 s")
    assert lines[4].endswith(": missed (the job had ended)")
    missing = Difference("Sink 'out'", "missing", Record("c1,4", 1.0, "p:1"), None)
    assert host_fault_before(missing, outcomes) == outcomes[1]  # the last that landed
    early = Difference("Sink 'out'", "extra", None, Record("x", 105.0, "p:1"))
    assert host_fault_before(early, outcomes) is None
    assert len(host_lines(outcomes, 100.0)) == 4  # no diff: no "just before"


def test_a_fault_reads_as_what_it_does_and_where() -> None:
    assert (
        HostFault(0, "kill-host", 1, 3.0).describe() == "#h0 worker host lost: worker-1 for 3.0 s"
    )
    storage = HostFault(2, "storage-down", 0, 2.5).describe()
    assert storage == "#h2 storage outage (the S3 server down) for 2.5 s"


def test_the_replay_command_keeps_the_profile_before_the_jobs_own_arguments() -> None:
    assert replay_with_profile("cairn chaos 'my job.py' --faults=2 --seed=9") == (
        "cairn chaos 'my job.py' --faults=2 --seed=9 --profile=hosts"
    )


def _chaos_hosts(env: dict[str, str], *prefix: str) -> subprocess.CompletedProcess[str]:
    """``cairn chaos <the docs example> --profile hosts`` in a process of its own."""
    argv = [sys.executable, "-m", "cairn.cli.main", "chaos", str(EXAMPLE), "--profile", "hosts"]
    return subprocess.run(
        [*prefix, *argv], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _one_line_and_exit_2(done: subprocess.CompletedProcess[str], cause: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert cause in lines[0] and "or use --profile local" in lines[0], lines[0]


def test_without_iproute2_the_profile_fails_with_one_line_and_exit_2() -> None:
    done = _chaos_hosts({**os.environ, "PATH": "/nonexistent"})
    _one_line_and_exit_2(done, "need iproute2's 'ip' command")


@pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root without setpriv"
)
def test_without_root_the_profile_fails_with_one_line_and_exit_2() -> None:
    # As root, the capabilities dropped (no CAP_SYS_ADMIN: no namespaces); else as it is.
    drop = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []
    done = _chaos_hosts(dict(os.environ), *drop)
    _one_line_and_exit_2(done, "need root" if os.geteuid() else "no CAP_SYS_ADMIN")


def test_what_the_drivers_log_shows_while_a_host_fault_lasts() -> None:
    log = "\n".join(
        [
            "2026-12-06 02:29:20,000 cairn.checkpoint.coordinator Completed checkpoint 1 (1 bytes)",
            "2026-12-06 02:29:22,758 cairn.checkpoint.coordinator Aborting checkpoint 2 of j",
            "2026-12-06 02:29:22,900 cairn.checkpoint.coordinator Aborting checkpoint 3 of j",
            "2026-12-06 02:29:23,186 cairn.deploy.job_master job j: attempt 0 failed (lost ...)",
            "2026-12-06 02:29:24,186 cairn.deploy.job_master job j: attempt 1 failed (lost ...)",
            "2026-12-06 02:29:32,549 cairn.deploy.restore_choice job j, attempt 2: restored "
            "checkpoint 1 in 9363 ms: choosing ...",
            "   at a stack frame that mentions Completed checkpoint 7",
        ]
    )
    start = datetime.datetime(2026, 12, 6, 2, 29, 22).timestamp()
    assert job_events(log, start, start + 11) == (
        "2 attempts failed, a restore took 9.4 s, 2 checkpoints aborted, no checkpoint completed"
    )
    assert job_events(log, start - 5, start) == "1 checkpoint completed"
    assert job_events(log, start + 20, start + 30) == "no checkpoint completed"
