"""User-defined metrics from Spark's Python workers: they travel with each task's metrics
report over the job's authenticated connection and reach the job master's REST ids."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.observability.prometheus import facts_of
from cairn.rest.metric_views import vertex_metric_values
from tests.unit._measured_job import run_measured

pytestmark = pytest.mark.spark


def test_user_metrics_of_spark_workers_reach_the_job_master(spark: Any) -> None:
    words = ["a", "bb", "ccc"] * 2000
    master = run_measured("spark", words)
    vertex = next(int(k.vertex_id) for k, r in master.metrics.items() if r.user)
    body = vertex_metric_values(
        facts_of(master), vertex, ["0.measure.words.seen", "1.measure.words.seen"]
    )
    assert len(body) == 2
    assert sum(int(item["value"]) for item in body) == len(words)
