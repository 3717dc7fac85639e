"""One scan per source table and job: the inserts of a statement set share it.

Invariant: ``build`` runs once per execution environment; every later scan of the table in
that environment gets the same DataStream, so a statement set reading one Kafka topic into
two sinks has one source operator (one uid, one consumer, one set of checkpointed offsets),
as Flink reuses a source scan (``table.optimizer.reuse-source-enabled``).

>>> calls = []
>>> scan = reused(lambda env: calls.append(env) or len(calls))
>>> env = object()
>>> scan(env), scan(env), len(calls)
(1, 1, 1)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["reused"]

_S = TypeVar("_S")


def reused(build: Callable[[Any], _S]) -> Callable[[Any], _S]:
    """``build`` memoized per environment (held weakly where the environment allows)."""
    built: dict[int, tuple[Any, _S]] = {}

    def scan(env: Any) -> _S:
        entry = built.get(id(env))
        if entry is None or _target(entry[0]) is not env:
            entry = (_ref(env), build(env))
            built.clear()  # one environment at a time: a new one replaces the old entry
            built[id(env)] = entry
        return entry[1]

    return scan


def _ref(env: Any) -> Any:
    try:
        return weakref.ref(env)
    except TypeError:
        return lambda: env


def _target(ref: Any) -> Any:
    return ref()
