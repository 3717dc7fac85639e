"""One scan per source table and job: the inserts of a statement set share it.

Invariant: ``build`` runs once per execution environment (and further arguments, such as a
stateful scan's state TTL); every later scan of the table in that environment gets the same
DataStream, so a statement set reading one Kafka topic into
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


def reused(build: Callable[..., _S]) -> Callable[..., _S]:
    """``build`` memoized per environment and further arguments (the environment held
    weakly where it allows)."""
    built: dict[tuple[Any, ...], tuple[Any, _S]] = {}

    def scan(env: Any, *args: Any) -> _S:
        key = (id(env), *args)
        entry = built.get(key)
        if entry is None or _target(entry[0]) is not env:
            if any(_target(ref) is not env for ref, _ in built.values()):
                built.clear()  # one environment at a time: a new one replaces the old ones
            entry = (_ref(env), build(env, *args))
            built[key] = entry
        return entry[1]

    return scan


def _ref(env: Any) -> Any:
    try:
        return weakref.ref(env)
    except TypeError:
        return lambda: env


def _target(ref: Any) -> Any:
    return ref()
