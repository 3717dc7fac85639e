"""Process-wide interpreter tuning for workers: thread switch interval and ``gc.freeze()``.

Invariant: a worker that owns its process (a Spark barrier task) tunes the process for good;
workers that share the driver's process (the in-process executor) change only what is put
back when the last of them ends — the switch interval, reference-counted across concurrent
in-process workers and jobs — and never call ``gc.freeze()``, which cannot be undone for
the worker's objects alone (``gc.unfreeze()`` would also release what the user froze).
"""

from __future__ import annotations

import enum
import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ProcessOwnership", "freeze_long_lived_objects", "switch_interval"]


class ProcessOwnership(enum.Enum):
    """Whether a worker's process is its own to tune (and to kill on a simulated crash)."""

    OWNED = "owned"  # a Spark barrier task: the Python worker process serves this worker only
    SHARED = "shared"  # a thread of the driver: the user's process, maybe other jobs too


_lock = threading.Lock()
_shared_users = 0
_saved_interval = 0.0


@contextmanager
def switch_interval(ownership: ProcessOwnership, seconds: float) -> Iterator[None]:
    """Run the block with ``sys.setswitchinterval(seconds)``.

    An owned process keeps the value afterwards; in a shared process the value in effect
    before the first of the overlapping blocks is restored when the last one ends.

    >>> before = sys.getswitchinterval()
    >>> with switch_interval(ProcessOwnership.SHARED, 0.001):
    ...     sys.getswitchinterval()
    0.001
    >>> sys.getswitchinterval() == before
    True
    """
    global _shared_users, _saved_interval
    if ownership is ProcessOwnership.OWNED:
        sys.setswitchinterval(seconds)
        yield
        return
    with _lock:
        if _shared_users == 0:
            _saved_interval = sys.getswitchinterval()
        _shared_users += 1
        sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        with _lock:
            _shared_users -= 1
            if _shared_users == 0:
                _put_back(_saved_interval)


def _put_back(read: float) -> None:
    """Set the switch interval ``sys.getswitchinterval()`` returned as ``read``. CPython keeps
    whole microseconds, truncating on set, and reads ``n`` back as ``n * 1e-6``, which may be
    a hair below ``n`` µs (7000 → 0.006999999999999999 → 6999 µs); half a µs more gives
    ``n`` again."""
    sys.setswitchinterval(read + 0.5e-6)


def freeze_long_lived_objects(ownership: ProcessOwnership) -> None:
    """Move everything allocated so far out of the cyclic collector's sight (owned processes
    only): a full collection no longer walks the worker's plan, operators and restored state
    (tens of ms with the task thread stopped, once the heap is large)."""
    if ownership is ProcessOwnership.OWNED:
        gc.freeze()
