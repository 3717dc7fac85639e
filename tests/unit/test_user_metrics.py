"""User-defined metrics (PyFlink's MetricGroup): the registry's rules, and a job whose
functions count, gauge, meter and measure, seen in the job master's reports, Flink's REST
metric ids and the Prometheus text."""

from __future__ import annotations

import pytest

from cairn.observability.prometheus import facts_of, render
from cairn.rest.metric_views import aggregated_subtask_metrics, vertex_metric_values
from cairn.runtime.user_metrics import UserMetricGroup, UserMetricRegistry
from tests.unit._measured_job import run_measured


def test_the_same_name_is_the_same_metric_and_another_kind_is_refused() -> None:
    registry = UserMetricRegistry()
    group = UserMetricGroup(registry, "Map")
    a, b = group.counter("seen"), group.counter("seen")
    assert a is b
    with pytest.raises(ValueError, match="'seen' of 'Map' is a counter already, not a meter"):
        group.meter("seen")
    assert group.add_group("user", "42").counter("seen") is not a  # Map user.42.seen
    with pytest.raises(ValueError, match="no dots or spaces"):
        group.counter("a.b")
    with pytest.raises(TypeError, match="needs a callable"):
        group.gauge("g", 5)  # type: ignore[arg-type]


def test_a_meter_reports_its_rate_over_its_span_and_a_broken_gauge_is_skipped() -> None:
    registry = UserMetricRegistry()
    group = UserMetricGroup(registry, "Map")
    meter = group.meter("events", time_span_in_seconds=10)
    group.gauge("broken", lambda: 1 / 0)
    registry.snapshot(now=100.0)
    meter.mark_event(50)
    figures = {name: v for _, name, v in registry.snapshot(now=105.0)}
    assert figures == {"events.count": 50.0, "events.rate": 10.0}  # no "broken"
    meter.mark_event(30)
    registry.snapshot(now=112.0)  # the sample at 100 s falls out of the 10 s span
    meter.mark_event(20)
    figures = {name: v for _, name, v in registry.snapshot(now=117.0)}
    assert figures["events.count"] == 100.0
    assert figures["events.rate"] == pytest.approx((100 - 50) / (117 - 105))


def test_a_jobs_user_metrics_reach_rest_and_prometheus() -> None:
    words = ["a", "bb", "ccc"] * 100
    master = run_measured("inprocess", words)
    seen = {
        key.subtask_index: dict(((op, name), v) for op, name, v in report.user)
        for key, report in master.metrics.items()
        if report.user
    }
    assert sorted(seen) == [0, 1]
    assert sum(s[("measure", "words.seen")] for s in seen.values()) == len(words)
    assert sum(s[("measure", "words.length.count")] for s in seen.values()) == len(words)
    assert {s[("measure", "words.length.max")] for s in seen.values()} == {3.0}
    assert all(s[("measure", "words.last_length")] in (1.0, 2.0, 3.0) for s in seen.values())

    facts = facts_of(master)
    vertex = next(int(k.vertex_id) for k, r in master.metrics.items() if r.user)
    body = vertex_metric_values(facts, vertex, ["0.measure.words.seen", "1.measure.words.seen"])
    assert sum(int(item["value"]) for item in body) == len(words)
    ids = [m["id"] for m in aggregated_subtask_metrics(facts, vertex, None, user_only=True)]
    assert "measure.words.seen" in ids and all(i.startswith("measure.") for i in ids)
    (seen,) = aggregated_subtask_metrics(facts, vertex, ["measure.words.seen"], ["sum", "max"])
    assert seen["sum"] == len(words) and 0 < seen["max"] < len(words)  # two subtasks
    text = render(lambda: facts).decode()
    assert "cairn_taskmanager_job_task_operator_words_seen{" in text
    assert 'operator_name="measure"' in text
