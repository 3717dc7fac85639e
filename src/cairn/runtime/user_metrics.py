"""User-defined metrics of a task's operators: PyFlink's ``MetricGroup`` (``counter``,
``gauge``, ``meter``, ``distribution``, ``add_group``) behind
``runtime_context.get_metrics_group()``.

Invariant: every metric of a task lives in the task's one registry under its operator's
name and its own (``<group>...<name>``); asking for one again returns the metric already
there (a different kind fails, naming both); metrics are read only on the task thread, when
the task reports its metrics (about once a second), as cumulative values: a counter's count,
a gauge's value, a meter's count and its rate over its time span, a distribution's count,
sum, min, max and mean. The job master serves them beside Flink's task metrics (REST
``<subtask>.<operator>.<name>``, Prometheus ``cairn_taskmanager_job_task_operator_<name>``).

>>> registry = UserMetricRegistry()
>>> group = UserMetricGroup(registry, "Map").add_group("parser")
>>> errors = group.counter("errors"); errors.inc(); errors.inc(2)
>>> group.gauge("queued", lambda: 7)
>>> sizes = group.distribution("sizes"); sizes.update(10); sizes.update(30)
>>> for operator, name, value in registry.snapshot(now=0.0):
...     print(operator, name, value)
Map parser.errors 3.0
Map parser.queued 7.0
Map parser.sizes.count 2.0
Map parser.sizes.sum 40.0
Map parser.sizes.min 10.0
Map parser.sizes.max 30.0
Map parser.sizes.mean 20.0
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from cairn.api.runtime_context import MetricGroup

__all__ = ["Counter", "Distribution", "Meter", "UserMetricGroup", "UserMetricRegistry"]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[^.\s]+$")


class Counter:
    """A count that goes up and down (``inc``, ``dec``, ``get_count``)."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = 0

    def inc(self, n: int = 1) -> None:
        self._count += n

    def dec(self, n: int = 1) -> None:
        self._count -= n

    def get_count(self) -> int:
        return self._count


class Meter:
    """Events per second over the last ``time_span_in_seconds`` (``mark_event``,
    ``get_count``, ``get_rate``); the rate is updated when the task reports."""

    __slots__ = ("_count", "_rate", "_samples", "_span_s")

    def __init__(self, time_span_in_seconds: int = 60) -> None:
        if time_span_in_seconds < 1:
            raise ValueError(f"a meter's time span must be >= 1 s, got {time_span_in_seconds}")
        self._span_s = float(time_span_in_seconds)
        self._count = 0
        self._rate = 0.0
        self._samples: deque[tuple[float, int]] = deque()

    def mark_event(self, value: int = 1) -> None:
        self._count += value

    def get_count(self) -> int:
        return self._count

    def get_rate(self) -> float:
        return self._rate

    def sample(self, now: float) -> None:
        """Record the count at ``now`` (monotonic seconds) and update the rate over the time
        span; the registry calls it at each snapshot (Cairn extension)."""
        samples = self._samples
        samples.append((now, self._count))
        while len(samples) > 2 and now - samples[1][0] >= self._span_s:
            samples.popleft()
        first_t, first_count = samples[0]
        self._rate = (self._count - first_count) / (now - first_t) if now > first_t else 0.0


class Distribution:
    """Values seen (``update``): their count, sum, min, max and mean."""

    __slots__ = ("count", "max", "min", "sum")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf

    def update(self, value: float) -> None:
        self.count += 1
        self.sum += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value


class _Gauge:
    __slots__ = ("read", "warned")

    def __init__(self, read: Callable[[], Any]) -> None:
        self.read = read
        self.warned = False


_Metric = Counter | Meter | Distribution | _Gauge


UserMetricValue = tuple[str, str, float]  # (operator name, metric name, value)


class UserMetricRegistry:
    """The user metrics of one task (every operator of its chain)."""

    def __init__(self) -> None:
        self._metrics: dict[tuple[str, str], _Metric] = {}

    def __bool__(self) -> bool:
        return bool(self._metrics)

    def register(self, operator: str, name: str, metric: _Metric) -> _Metric:
        existing = self._metrics.get((operator, name))
        if existing is None:
            self._metrics[(operator, name)] = metric
            return metric
        if type(existing) is not type(metric):
            raise ValueError(
                f"metric {name!r} of {operator!r} is a {_kind(existing)} already, "
                f"not a {_kind(metric)}"
            )
        return existing

    def snapshot(self, now: float | None = None) -> tuple[UserMetricValue, ...]:
        """Every metric's current figures (see the module docstring), in registration order."""
        now = time.monotonic() if now is None else now
        out: list[UserMetricValue] = []
        for (op, name), m in self._metrics.items():
            if isinstance(m, Counter):
                out.append((op, name, float(m.get_count())))
            elif isinstance(m, Meter):
                m.sample(now)
                out.append((op, name + ".count", float(m.get_count())))
                out.append((op, name + ".rate", m.get_rate()))
            elif isinstance(m, Distribution):
                if m.count:
                    out += [
                        (op, name + ".count", float(m.count)),
                        (op, name + ".sum", m.sum),
                        (op, name + ".min", float(m.min)),
                        (op, name + ".max", float(m.max)),
                        (op, name + ".mean", m.sum / m.count),
                    ]
            else:
                value = _read_gauge(f"{op}.{name}", m)
                if value is not None:
                    out.append((op, name, value))
        return tuple(out)


def _read_gauge(identifier: str, gauge: _Gauge) -> float | None:
    try:
        value = gauge.read()
        return float(value)
    except Exception as exc:  # a user's callable: report it once, skip the gauge
        if not gauge.warned:
            gauge.warned = True
            log.warning("gauge %s could not be read as a number: %r", identifier, exc)
        return None


def _kind(metric: _Metric) -> str:
    return "gauge" if isinstance(metric, _Gauge) else type(metric).__name__.lower()


class UserMetricGroup(MetricGroup):
    """A scope of ``registry``: an operator, and the groups added under it."""

    def __init__(
        self, registry: UserMetricRegistry, operator: str, groups: tuple[str, ...] = ()
    ) -> None:
        self._registry = registry
        self._operator = operator
        self._groups = groups

    def _name(self, name: str) -> str:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"a metric or group name needs no dots or spaces, got {name!r}")
        return ".".join([*self._groups, name])

    def add_group(self, name: str, extra: str | None = None) -> UserMetricGroup:
        """A subgroup; with ``extra``, PyFlink's key-value group ``name.extra``."""
        parts = (name,) if extra is None else (name, extra)
        for part in parts:
            self._name(part)
        return UserMetricGroup(self._registry, self._operator, (*self._groups, *parts))

    def counter(self, name: str) -> Counter:  # type: ignore[override]
        metric = self._registry.register(self._operator, self._name(name), Counter())
        assert isinstance(metric, Counter)
        return metric

    def gauge(self, name: str, obj: Callable[[], Any]) -> None:
        if not callable(obj):
            raise TypeError(f"gauge {name!r} needs a callable returning a number, got {obj!r}")
        self._registry.register(self._operator, self._name(name), _Gauge(obj))

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:  # type: ignore[override]
        meter = Meter(time_span_in_seconds)
        metric = self._registry.register(self._operator, self._name(name), meter)
        assert isinstance(metric, Meter)
        return metric

    def distribution(self, name: str) -> Distribution:  # type: ignore[override]
        metric = self._registry.register(self._operator, self._name(name), Distribution())
        assert isinstance(metric, Distribution)
        return metric
