"""The options of an async wait operator: what ``AsyncDataStream`` checked and the runtime's
``async_wait`` operator runs with.

Invariant: one frozen ``AsyncWaitConfig`` per operator, under the ``ASYNC_CONFIG`` key of its
``OperatorSpec`` options; validated by the builder before the job runs, read as is by the
operator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn.api.async_retry import AsyncRetryStrategy

__all__ = ["ASYNC_CONFIG", "AsyncWaitConfig"]

ASYNC_CONFIG = "async_wait"  # the OperatorSpec option holding the AsyncWaitConfig


@dataclass(frozen=True)
class AsyncWaitConfig:
    """How an async wait operator runs: ``ordered`` output, ``timeout_ms`` per input (0: no
    timeout), at most ``capacity`` inputs in flight, ``retry`` strategy."""

    ordered: bool
    timeout_ms: int
    capacity: int
    retry: AsyncRetryStrategy[Any]
