"""The metric bodies of the control endpoint, shaped like Flink's REST API:
``/jobs/:jobid/metrics`` and ``/jobs/:jobid/vertices/:vertexid/metrics`` (``[{"id"}]``
without ``get``, ``[{"id", "value"}]`` with ``?get=a,b``; a vertex's metric ids are
``<subtask>.<name>``), ``/jobs/:jobid/vertices/:vertexid/subtasks/metrics`` (the same metrics
aggregated over the subtasks: ``[{"id", "min", "max", "avg", "sum"}]``, ``?agg=`` picks),
``/jobs/:jobid/vertices/:vertexid/backpressure`` (levels and ratios per subtask, measured in
the runtime rather than sampled).

Invariant: pure functions of :class:`MetricsFacts`; values are strings as Flink sends them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cairn.ids import VertexId
from cairn.observability.cpu import cpu_metric_values
from cairn.observability.metrics import JOB_METRICS, SUBTASK_METRICS, backpressure_level
from cairn.observability.prometheus import MetricsFacts

__all__ = [
    "AGGREGATIONS",
    "aggregated_subtask_metrics",
    "backpressure",
    "job_metric_values",
    "latency_metric_values",
    "latency_overview",
    "requested",
    "user_metric_aggregates",
    "vertex_io_metrics",
    "vertex_metric_values",
]


def requested(get: str | None) -> list[str] | None:
    """The metric ids of a ``?get=`` parameter (``None``: list the available ids).

    >>> requested("a, b,,c"), requested(None)
    (['a', 'b', 'c'], None)
    """
    if get is None:
        return None
    return [g.strip() for g in get.split(",") if g.strip()]


def _format(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def _answer(values: dict[str, float], get: Sequence[str] | None) -> list[dict[str, str]]:
    if get is None:
        return [{"id": name} for name in values]
    return [{"id": n, "value": _format(values[n])} for n in get if n in values]


def job_metric_values(facts: MetricsFacts, get: Sequence[str] | None) -> list[dict[str, str]]:
    """``GET /jobs/:jobid/metrics`` (unknown ids are left out, as Flink does), with the
    job's CPU figures (``cpuCores``, ``cpuTime``, ``cpuTimePerRecordUs``: Cairn's, see
    ``observability/cpu.py``) and the latency histograms' fields under Flink's ids
    (:func:`latency_metric_values`).

    >>> from cairn.observability.metrics import job_metrics
    >>> facts = MetricsFacts("j", "n", {}, {}, job_metrics(None, 3))
    >>> job_metric_values(facts, ["numRestarts", "nope"])
    [{'id': 'numRestarts', 'value': '3'}]
    """
    values = {n: facts.job.value(n) for n in JOB_METRICS}
    values.update(cpu_metric_values(facts.cpu))
    values.update(latency_metric_values(facts))
    return _answer(values, get)


def latency_metric_values(facts: MetricsFacts) -> dict[str, float]:
    """Every latency histogram's fields by Flink's job-level id,
    ``latency.source_id.<uid>.operator_id.<uid>.operator_subtask_index.<i>.latency_p99``
    (``_min``, ``_max``, ``_mean``, ``_median``, ``_stddev``, ``_p75`` ... ``_p999``)."""
    values: dict[str, float] = {}
    for key in sorted(facts.subtasks, key=lambda k: (k.vertex_id, k.subtask_index)):
        for report in facts.subtasks[key].latency:
            for field, value in report.stats.fields().items():
                values[report.scope.metric_id(field)] = value
    return values


LATENCY_OVERVIEW_FIELDS = ("median", "p95", "p99", "max")


def latency_overview(facts: MetricsFacts) -> list[dict[str, str]]:
    """The web UI's latency table: ``/jobs/:jobid/metrics`` answers for the p50, p95, p99
    and max of every latency histogram (what its polling fallback asks for)."""
    ids = [
        i for i in latency_metric_values(facts) if i.rsplit("_", 1)[-1] in LATENCY_OVERVIEW_FIELDS
    ]
    return job_metric_values(facts, ids)


def vertex_metric_values(
    facts: MetricsFacts, vertex_id: VertexId, get: Sequence[str] | None
) -> list[dict[str, str]]:
    """``GET /jobs/:jobid/vertices/:vertexid/metrics``: ``<subtask>.<name>`` per subtask,
    and ``<subtask>.<operator>.<name>`` for the metrics user functions registered."""
    values: dict[str, float] = {}
    for key in sorted(facts.subtasks, key=lambda k: k.subtask_index):
        if int(key.vertex_id) != vertex_id:
            continue
        m = facts.subtasks[key]
        for name in SUBTASK_METRICS:
            values[f"{key.subtask_index}.{name}"] = m.value(name)
        for operator, name, value in m.user:  # Flink's ids of user metrics
            values[f"{key.subtask_index}.{operator}.{name}"] = value
    return _answer(values, get)


AGGREGATIONS = ("min", "max", "avg", "sum")  # Flink's MetricsAggregationParameter values


def aggregated_subtask_metrics(
    facts: MetricsFacts,
    vertex_id: VertexId,
    get: Sequence[str] | None,
    agg: Sequence[str] | None = None,
    user_only: bool = False,
) -> list[dict[str, Any]]:
    """``GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics``: ids without the subtask
    (``<name>``, and ``<operator>.<name>`` of user metrics), each aggregated over the subtasks
    that report it (``agg``: some of ``AGGREGATIONS``, default all; numbers, as Flink sends
    them here). ``user_only``: only the metrics user functions registered (the web UI's table).

    >>> from cairn.checkpoint.messages import TaskKey
    >>> from cairn.ids import VertexId
    >>> from cairn.observability.metrics import job_metrics, subtask_metrics
    >>> from cairn.runtime.reports import TaskMetrics
    >>> def sub(i, n):
    ...     m = TaskMetrics(n, 0, user=(("check", "checked", float(n)),))
    ...     return TaskKey(VertexId(1), i), subtask_metrics(m)
    >>> subtasks = dict([sub(0, 5), sub(1, 7)])
    >>> facts = MetricsFacts("j", "n", {}, subtasks, job_metrics(None, 0))
    >>> aggregated_subtask_metrics(facts, 1, None, user_only=True)
    [{'id': 'check.checked'}]
    >>> for m in aggregated_subtask_metrics(facts, 1, ["check.checked", "numRecordsIn"], ["sum"]):
    ...     print(m)
    {'id': 'check.checked', 'sum': 12.0}
    {'id': 'numRecordsIn', 'sum': 12.0}
    >>> aggregated_subtask_metrics(facts, 1, ["check.checked"])
    [{'id': 'check.checked', 'min': 5.0, 'max': 7.0, 'avg': 6.0, 'sum': 12.0}]
    >>> user_metric_aggregates(facts, 1) == aggregated_subtask_metrics(facts, 1, ["check.checked"])
    True
    """
    values = _subtask_values(facts, vertex_id, user_only)
    if get is None:
        return [{"id": name} for name in sorted(values)]
    return _aggregated(values, [n for n in get if n in values], agg)


def user_metric_aggregates(facts: MetricsFacts, vertex_id: VertexId) -> list[dict[str, Any]]:
    """Every user metric of the vertex aggregated over its subtasks, by id (the web UI's
    table, in one pass: ``aggregated_subtask_metrics`` with every user id and aggregation)."""
    values = _subtask_values(facts, vertex_id, user_only=True)
    return _aggregated(values, sorted(values), None)


def _subtask_values(
    facts: MetricsFacts, vertex_id: VertexId, user_only: bool
) -> dict[str, list[float]]:
    """Per metric id (no subtask in it), the values of the vertex's subtasks reporting it."""
    values: dict[str, list[float]] = {}
    for key, m in facts.subtasks.items():
        if int(key.vertex_id) != vertex_id:
            continue
        if not user_only:
            for name in SUBTASK_METRICS:
                values.setdefault(name, []).append(float(m.value(name)))
        for operator, name, value in m.user:
            values.setdefault(f"{operator}.{name}", []).append(float(value))
    return values


def _aggregated(
    values: Mapping[str, list[float]], names: Sequence[str], agg: Sequence[str] | None
) -> list[dict[str, Any]]:
    aggs = [a for a in AGGREGATIONS if agg is None or a in agg]
    answer: list[dict[str, Any]] = []
    for name in names:
        vs = values[name]
        computed = {"min": min(vs), "max": max(vs), "avg": sum(vs) / len(vs), "sum": sum(vs)}
        answer.append({"id": name, **{a: computed[a] for a in aggs}})
    return answer


def vertex_io_metrics(
    facts: MetricsFacts, parallelism: Mapping[VertexId, int]
) -> dict[VertexId, Any]:
    """Flink's ``metrics`` block of each vertex in ``/jobs/:jobid`` (``IOMetricsInfo``): sums
    over its subtasks; ``*-complete`` says whether every subtask (``parallelism``) reported.

    >>> from cairn.checkpoint.messages import TaskKey
    >>> from cairn.ids import VertexId
    >>> from cairn.observability.metrics import job_metrics, subtask_metrics
    >>> from cairn.runtime.reports import TaskMetrics
    >>> m = subtask_metrics(TaskMetrics(7, 5, elapsed_ms=100.0, busy_ms=60.0, bytes_in=700))
    >>> facts = MetricsFacts("j", "n", {}, {TaskKey(VertexId(1), 0): m}, job_metrics(None, 0))
    >>> io = vertex_io_metrics(facts, {VertexId(1): 2})[1]
    >>> io["read-bytes"], io["read-records"], io["write-records"], io["read-bytes-complete"]
    (700, 7, 5, False)
    >>> io["accumulated-busy-time"], io["accumulated-idle-time"]
    (60, 40)
    """
    sums: dict[VertexId, dict[str, float]] = {v: {} for v in parallelism}
    reported: dict[VertexId, int] = dict.fromkeys(parallelism, 0)
    for key, m in facts.subtasks.items():
        vertex = key.vertex_id
        if vertex not in sums:
            continue
        reported[vertex] += 1
        total = sums[vertex]
        for name, value in (
            ("read-bytes", m.numBytesIn),
            ("write-bytes", m.numBytesOut),
            ("read-records", m.numRecordsIn),
            ("write-records", m.numRecordsOut),
            ("accumulated-backpressured-time", m.accumulated_backpressured_ms),
            ("accumulated-idle-time", m.accumulated_idle_ms),
            ("accumulated-busy-time", m.accumulated_busy_ms),
        ):
            total[name] = total.get(name, 0.0) + value
    result: dict[VertexId, Any] = {}
    for vertex, total in sums.items():
        complete = reported[vertex] >= parallelism[vertex]
        block: dict[str, Any] = {}
        for name in ("read-bytes", "write-bytes", "read-records", "write-records"):
            block[name] = int(total.get(name, 0))
            block[name + "-complete"] = complete
        for name in ("backpressured", "idle", "busy"):
            block[f"accumulated-{name}-time"] = round(total.get(f"accumulated-{name}-time", 0.0))
        result[vertex] = block
    return result


def backpressure(facts: MetricsFacts, vertex_id: VertexId, now_ms: int) -> dict[str, Any]:
    """``GET /jobs/:jobid/vertices/:vertexid/backpressure`` (Flink's shape: ratios in [0, 1]
    of the last reporting window; the vertex's level is its worst subtask's)."""
    subtasks = []
    worst = 0.0
    for key in sorted(facts.subtasks, key=lambda k: k.subtask_index):
        if int(key.vertex_id) != vertex_id:
            continue
        m = facts.subtasks[key]
        worst = max(worst, m.backPressuredTimeMsPerSecond)
        subtasks.append(
            {
                "subtask": int(key.subtask_index),
                "backpressureLevel": backpressure_level(m.backPressuredTimeMsPerSecond),
                "ratio": round(m.backPressuredTimeMsPerSecond / 1000.0, 3),
                "idleRatio": round(m.idleTimeMsPerSecond / 1000.0, 3),
                "busyRatio": round(m.busyTimeMsPerSecond / 1000.0, 3),
            }
        )
    return {
        "status": "ok",
        "backpressureLevel": backpressure_level(worst),
        "end-timestamp": now_ms,
        "subtasks": subtasks,
    }
