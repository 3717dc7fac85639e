"""Errors for batches a task cannot ship over a network edge, naming who sent what where.

Invariant: these are built only on the slow path, after pickling a batch failed or produced a
frame over the cap; the per-batch path pickles once and compares one length. The error names
the producing operator (name and uid), the edge (target vertex and partitioner) and, for a
pickling failure, the type of the first record that does not pickle, with the pickling error
chained as ``__cause__``.

>>> edge = EdgeLabel("parse", "parse-uid", "Sink: out", PartitionKind.REBALANCE)
>>> import threading
>>> err = unpicklable_batch_error([1, threading.Lock()], edge, TypeError("no"))
>>> print(err)  # doctest: +ELLIPSIS
A record of type _thread.lock emitted by operator 'parse' (uid 'parse-uid') on the rebalance \
edge to 'Sink: out' cannot be pickled: TypeError: cannot pickle '_thread.lock' object. ...
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cairn.graph.transformations import PartitionKind
from cairn.ids import OperatorUid
from cairn.settings import MAX_FRAME_SIZE_KEY

PICKLE_PROTOCOL = 5


@dataclass(frozen=True)
class EdgeLabel:
    """The producing operator (the last of its chain) and the edge it sends on."""

    operator_name: str
    operator_uid: OperatorUid
    target: str  # the consuming vertex's name
    partition: PartitionKind

    def describe(self) -> str:
        """``operator 'a' (uid 'u') on the hash edge to 'b'``, for error messages."""
        return (
            f"operator {self.operator_name!r} (uid {self.operator_uid!r}) on the "
            f"{self.partition.value} edge to {self.target!r}"
        )


class RecordSerializationError(Exception):
    """A record emitted onto a network edge cannot be pickled."""


class BatchTooLarge(Exception):
    """A batch of records pickles to a frame over ``cairn.network.max-frame-size``."""


def unpicklable_batch_error(
    batch: Sequence[Any], edge: EdgeLabel | None, cause: BaseException
) -> RecordSerializationError:
    """The error for a batch whose pickling raised ``cause``; finds the culprit record by
    pickling the records one by one (slow path only). Raise it ``from cause``."""
    culprit: Any = None
    error: BaseException = cause
    for record in batch:
        try:
            pickle.dumps(record, protocol=PICKLE_PROTOCOL)
        except Exception as exc:
            culprit, error = record, exc
            break
    if culprit is None:
        what = f"A batch of {len(batch)} records"  # no single record fails (e.g. recursion)
    else:
        what = f"A record of type {_type_name(culprit)}"
    return RecordSerializationError(
        f"{what} emitted by {_who(edge)} cannot be pickled: {type(error).__name__}: {error}. "
        "Records crossing a network edge (key_by, rebalance, ... between workers) are "
        "pickled: emit plain data, not locks, connections, open files or generators."
    )


def batch_too_large_error(
    size: int, records: int, cap: int, edge: EdgeLabel | None
) -> BatchTooLarge:
    """The error for a batch of ``records`` records that pickled to ``size`` bytes."""
    return BatchTooLarge(
        f"A batch of {records} records emitted by {_who(edge)} pickles to {size:,} bytes, "
        f"over the frame size cap of {cap:,} bytes ({MAX_FRAME_SIZE_KEY}): raise the cap or "
        "lower cairn.network.batch-size for large records."
    )


def _who(edge: EdgeLabel | None) -> str:
    return edge.describe() if edge is not None else "a task (edge unknown)"


def _type_name(record: Any) -> str:
    cls = type(record)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
