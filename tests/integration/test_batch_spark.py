"""BATCH mode on real local Spark: stages as Spark stages with a shuffle per exchange; the
same results as in process; print() reaching the driver's stdout with PyFlink's subtask
prefixes; a failed stage rerun after the restart strategy's delay, from its inputs; a user
function's error reaching the driver with the user's traceback; the job's monitor counting
its stages and records from the Spark tasks' results."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from cairn.common import RestartStrategies
from cairn.common.exceptions import JobExecutionException
from tests.unit.batch_jobs import (
    LINES,
    collect,
    environment,
    process_with_timers,
    word_count,
)

pytestmark = pytest.mark.spark


@pytest.mark.timeout(600)  # three Spark jobs; the first may start the session
def test_batch_jobs_on_spark_match_in_process_and_print_on_the_driver(
    spark: Any, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    assert Counter(collect(process_with_timers, "BATCH", "spark")) == Counter(
        collect(process_with_timers, "BATCH")
    )

    marker = tmp_path / "failed-once"

    def fail_once(pair: Any) -> Any:  # in the stage after the shuffle, once
        if not os.path.exists(marker):
            marker.write_text("x")
            raise OSError("a lost executor")
        return pair

    env = environment("BATCH", "spark")
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    word_count(env).map(fail_once).print()
    capsys.readouterr()
    client = env.execute_async("word count")
    client.get_job_execution_result()
    printed = capsys.readouterr().out.splitlines()
    assert marker.exists()
    # What the progress line, the endpoint and cairn list read: the Spark tasks' counts.
    view = client.job_master.view
    assert view.restarts == 1 and view.attempt == 1 and view.ended
    stages = view.stages
    assert stages is not None and stages.done == stages.total == len(client.plan.stages) >= 2
    sources = set(client.job_master.plan.source_tasks)
    assert sum(m.records_out for k, m in view.metrics.items() if k in sources) == len(LINES)
    assert sum(m.records_in for m in view.metrics.values()) >= sum(len(x.split()) for x in LINES)
    expected = dict(collect(word_count, "BATCH"))
    # Two print subtasks: PyFlink's "N> " prefixes; each word's final count, once.
    assert {line[:3] for line in printed} == {"1> ", "2> "}
    assert sorted(line[3:] for line in printed) == sorted(str(p) for p in expected.items())

    # Without restarts a user function's error fails the job with the user's traceback.
    env = environment("BATCH", "spark")
    word_count(env).map(_reject_to).print()
    with pytest.raises(JobExecutionException) as info:
        env.execute("failing word count")
    message = str(info.value)
    assert "stage 'Reduce -> Map -> Print to Std. Out' (" in message
    assert "ValueError: no 'to' here" in message
    line = _reject_to.__code__.co_firstlineno + 2
    assert f'File "{__file__}", line {line}, in _reject_to' in message


def _reject_to(pair: Any) -> Any:
    if pair[0] == "to":
        raise ValueError("no 'to' here")
    return pair
