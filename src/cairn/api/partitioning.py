"""``DataStream.partition_custom``: the user's ``Partitioner`` applied to each record's key.

Invariant: a ``CustomPartitioning`` is what a CUSTOM edge carries as its key selector; the
record writer asks ``channel(record, n)`` for every record (``n``: the downstream parallelism)
and gets an index in ``[0, n)``, or the task fails naming the partitioner and what it returned
(Flink would fail with an index out of bounds). As in Flink, records of one key reach the
subtask the partitioner names, but the downstream operator is not keyed: no keyed state.
``open``/``close`` of a ``Partitioner`` or ``KeySelector`` are not called (Flink's Java
``Partitioner`` has none).

>>> by_parity = CustomPartitioning(lambda key, n: key % n, lambda r: r[0])
>>> [by_parity.channel((k, "x"), 2) for k in (4, 7)]
[0, 1]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.api.functions import KeySelector, Partitioner

__all__ = ["CustomPartitioning"]


class CustomPartitioning:
    """``partitioner(key_selector(record), n)`` with the result checked."""

    __slots__ = ("_key", "_partition", "partitioner")

    def __init__(
        self,
        partitioner: Partitioner | Callable[[Any, int], int],
        key_selector: KeySelector | Callable[[Any], Any],
    ) -> None:
        if not isinstance(partitioner, Partitioner) and not callable(partitioner):
            raise TypeError(
                "Parameter partitioner should be type of Partitioner or a callable function."
            )
        if not isinstance(key_selector, KeySelector) and not callable(key_selector):
            raise TypeError(
                "Parameter key_selector should be type of KeySelector or a callable function."
            )
        self.partitioner = partitioner
        self._partition: Callable[[Any, int], Any] = (
            partitioner.partition if isinstance(partitioner, Partitioner) else partitioner
        )
        self._key: Callable[[Any], Any] = (
            key_selector.get_key if isinstance(key_selector, KeySelector) else key_selector
        )

    def channel(self, record: Any, num_partitions: int) -> int:
        key = self._key(record)
        index = self._partition(key, num_partitions)
        if type(index) is not int or not 0 <= index < num_partitions:
            raise ValueError(
                f"partition_custom: the partitioner {self.partitioner!r} returned {index!r} "
                f"for key {key!r}; it must return an int in [0, {num_partitions}) "
                f"(num_partitions = {num_partitions}, the downstream parallelism)"
            )
        return index

    def __call__(self, record: Any) -> Any:
        """The record's key (what a plan printer or a hash edge would ask)."""
        return self._key(record)

    def __repr__(self) -> str:
        return f"CustomPartitioning({self.partitioner!r})"
