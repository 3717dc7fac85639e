"""Latency markers on real Spark: markers cross the workers' network channels, and while the
job runs its control endpoint shows every operator's ``latency`` histogram under Flink's
REST ids and as Prometheus summaries."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cairn.rest.registry import JobRegistry
from cairn.testing.processes import wait_for
from tests.integration.jobs import sequence_job
from tests.integration.rest_calls import read_url

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("registry_dir")]

FAMILY = "cairn_taskmanager_job_latency_source_id_operator_id_operator_subtask_index_latency"


def test_latency_markers_on_spark_show_in_rest_and_prometheus(spark: Any, tmp_path: Path) -> None:
    conf = {"cairn.executor": "spark", "metrics.latency.interval": "100"}
    env = sequence_job(conf, str(tmp_path / "out"), records=30_000, keys=10, rate=10_000)
    client = env.execute_async("latency-spark")
    jid = client.get_job_id()
    entry = wait_for(lambda: JobRegistry().find(jid), 60, message="the job's endpoint")
    base = f"{entry.endpoint}/jobs/{jid}/metrics"

    def p99_ids() -> list[str]:
        ids = [m["id"] for m in json.loads(read_url(base, entry.token))]
        return [i for i in ids if i.startswith("latency.") and i.endswith("_p99")]

    # Both operators behind the hash edge (two subtasks each), from the source operator.
    ids = wait_for(lambda: len(p99_ids()) >= 4 and p99_ids(), 90, message="latency ids")
    prefix = "latency.source_id.sequence-source.operator_id."
    assert {i.split(".")[4] for i in ids} >= {"sequence-check", "file-sink"}
    assert all(i.startswith(prefix) for i in ids)
    query = ",".join(urllib.parse.quote(i) for i in ids)
    values = json.loads(read_url(f"{base}?get={query}", entry.token))
    assert len(values) == len(ids)
    assert all(0 <= float(v["value"]) < 60_000 for v in values)  # ms, as Flink's

    text = read_url(entry.endpoint + "/metrics", entry.token).decode()
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == FAMILY]
    assert family.type == "summary"
    quantiles = {
        (s.labels["operator_id"], s.labels["operator_subtask_index"])
        for s in family.samples
        if s.labels.get("quantile") == "0.99" and s.labels["source_id"] == "sequence-source"
    }
    assert {("sequence-check", "0"), ("sequence-check", "1")} <= quantiles
    client.get_job_execution_result(180)
