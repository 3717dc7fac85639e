"""End-to-end exactly-once into PostgreSQL: worker processes are SIGKILLed at chosen moments
(while processing, between barrier and acknowledgement, during the upload, between the
checkpoint's completion and the commit, right after the commit), several times per run, and
the table must hold the failure-free output: every record once, each key's records in
order, no prepared transaction left behind."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.datastream import CheckpointingMode
from cairn.testing.processes import wait_for
from tests.integration.jdbc_jobs import (
    jdbc_sequence_job,
    new_table,
    out_of_order_keys,
    prepared_transactions,
    table_lines,
)
from tests.integration.jobs import KILL_SCHEDULES, exactly_once_problems, expected_lines

pytestmark = pytest.mark.postgres

RECORDS, KEYS = 120_000, 20  # as test_exactly_once: the kill schedules count records


def _run(conf: dict[str, str], pg: Any, table: str, **kwargs: Any) -> Any:
    env = jdbc_sequence_job(conf, pg, table, records=RECORDS, keys=KEYS, **kwargs)
    client = env.execute_async("jdbc-exactly-once")
    client.get_job_execution_result(timeout=240)
    return client


@pytest.mark.spark
@pytest.mark.parametrize("schedule", sorted(KILL_SCHEDULES))
def test_sigkill_at_chosen_moments_keeps_the_table_exactly_once(
    spark: Any, postgres: Any, schedule: str
) -> None:
    table = new_table(postgres)
    conf = {"cairn.executor": "spark", "cairn.testing.faults": KILL_SCHEDULES[schedule]}
    client = _run(conf, postgres, table)
    # Exactly the scheduled kills (no other restart), every record once, in order per key,
    # nothing prepared left: this proves what a failure-free run on Spark would, too.
    assert client.job_master.restarts == 3, "every scheduled kill must have happened"
    lines = table_lines(postgres, table)
    assert exactly_once_problems(lines, RECORDS, KEYS) == []
    assert out_of_order_keys(lines) == []
    assert prepared_transactions(postgres) == []


@pytest.mark.spark
def test_the_at_least_once_sink_loses_nothing_after_kills(spark: Any, postgres: Any) -> None:
    table = new_table(postgres)
    conf = {
        "cairn.executor": "spark",
        "cairn.testing.faults": "point=processing,attempt=0,records=20000,subtask=1;"
        "point=after-barrier,attempt=1,subtask=0",
    }
    client = _run(conf, postgres, table, exactly_once=False, mode=CheckpointingMode.EXACTLY_ONCE)
    assert client.job_master.restarts == 2
    lines = table_lines(postgres, table)
    assert set(expected_lines(RECORDS, KEYS)) <= set(lines), "the at-least-once sink lost rows"
    assert not any(line.startswith("!") for line in lines)


@pytest.mark.slow  # seconds of work without Spark: not in the fast tier
def test_inprocess_crashes_keep_the_table_exactly_once(postgres: Any) -> None:
    """The commit-side schedule on the in-process executor (crash = abrupt thread death,
    which leaves the dead writer's session and its open transaction to the server)."""
    table = new_table(postgres)
    conf = {
        "cairn.executor": "inprocess",
        "cairn.testing.faults": KILL_SCHEDULES["barrier-to-ack-and-commit"],
    }
    client = _run(conf, postgres, table)
    assert client.job_master.restarts == 3
    lines = table_lines(postgres, table)
    assert exactly_once_problems(lines, RECORDS, KEYS) == []
    assert out_of_order_keys(lines) == []


@pytest.mark.slow  # seconds of work without Spark: not in the fast tier
@pytest.mark.timeout(300)
def test_stop_with_savepoint_then_restore_at_another_parallelism(postgres: Any) -> None:
    """Stop-with-savepoint commits what the savepoint covers; a new run (another job id)
    restored from it at parallelism 3 commits the savepoint's transactions again (already
    done: no error, nothing twice), rolls back nothing it needs, and finishes the table."""
    import tempfile

    from cairn.common.job_status import JobStatus

    table = new_table(postgres)
    conf = {"cairn.executor": "inprocess"}
    records = 60_000
    client = jdbc_sequence_job(
        conf, postgres, table, records=records, keys=KEYS, rate=10_000
    ).execute_async("jdbc-before-rescale")
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    wait_for(lambda: table_lines(postgres, table), 60, 0.1, "rows in the table")
    target = tempfile.mkdtemp(prefix="cairn-jdbc-savepoint-")
    stopped = client.stop_with_savepoint(False, target).result(timeout=120)
    assert client.get_job_status() is JobStatus.FINISHED
    first = table_lines(postgres, table)
    assert 0 < len(first) < records
    assert len(set(first)) == len(first) and out_of_order_keys(first) == []
    assert prepared_transactions(postgres) == []  # the stop committed what it covered

    restored = {**conf, "execution.savepoint.path": stopped}
    jdbc_sequence_job(
        restored, postgres, table, records=records, keys=KEYS, rate=None, parallelism=3
    ).execute("jdbc-after-rescale")
    lines = table_lines(postgres, table)
    assert lines[: len(first)] == first
    assert exactly_once_problems(lines, records, KEYS) == []
    assert out_of_order_keys(lines) == []
    assert prepared_transactions(postgres) == []
