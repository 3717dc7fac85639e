"""The setters of one operator of the logical plan, shared by ``DataStream`` and
``DataStreamSink``: ``name``, ``uid``, ``set_parallelism``, ``disable_chaining``... (PyFlink's
methods of the same names).

Invariant: a setter changes only the transformation the previous API call returned (the one
behind the stream or sink it is called on), in place, and returns the same object; it checks
its value first, with Flink's messages, and refuses a virtual transformation (a partitioning,
a union, a side output: they route records and are no operator).

>>> from cairn.datastream import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> ds = env.from_collection([1, 2]).map(str).name("to text").set_parallelism(2)
>>> ds.get_name(), ds.get_transformation().parallelism
('to text', 2)
>>> env.from_collection([1]).rebalance().uid("spread")
Traceback (most recent call last):
TypeError: uid() is not possible on the result of rebalance(): it changes how records are ...
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cairn.common.arguments import require_int
from cairn.graph.chaining import CHAINING_OPTION
from cairn.graph.transformations import (
    OneInputTransformation,
    PartitionTransformation,
    SideOutputTransformation,
    Transformation,
    UnionTransformation,
)

__all__ = ["MAX_MAX_PARALLELISM", "OperatorSetters"]

MAX_MAX_PARALLELISM = 1 << 15


class OperatorSetters:
    """Setters shared by ``DataStream`` and ``DataStreamSink``: they act on the
    ``_transformation`` of the stream or sink (see the module's invariant)."""

    _transformation: Transformation
    _non_parallel: bool = False

    def _physical(self, what: str) -> Transformation:
        t = self._transformation
        if isinstance(t, PartitionTransformation | UnionTransformation | SideOutputTransformation):
            raise TypeError(
                f"{what} is not possible on the result of {t.name.lower()}(): it changes how "
                "records are routed and is not an operator; call it on the operator before or "
                "after"
            )
        return t

    def _set_option(self, key: str, value: Any) -> None:
        t = self._physical("Setting operator options")
        if isinstance(t, OneInputTransformation) and t.operator is not None:
            options = {**t.operator.options, key: value}
            t.operator = dataclasses.replace(t.operator, options=options)

    def get_name(self) -> str:
        return self._transformation.name

    def name(self, name: str) -> Any:
        """Name shown in logs and used for the generated uid when none is set."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"operator names must be non-empty strings, got {name!r}")
        self._physical("name()").name = name
        return self

    def uid(self, uid: str) -> Any:
        """Stable id of the operator: its state in checkpoints and savepoints is keyed by it,
        so set it on every stateful operator before the first run; unique per job."""
        if not isinstance(uid, str) or not uid.strip():
            raise ValueError(f"uids must be non-empty strings, got {uid!r}")
        self._physical("uid()").uid = uid
        return self

    def set_uid_hash(self, uid_hash: str) -> Any:
        """Flink's user-provided JobVertexID (32 hex characters). Accepted here, refused when
        the job is submitted: Cairn stores and matches operator state by ``uid()``, there is
        no hashed id to override (and no Flink state to match); use ``uid()``."""
        if not isinstance(uid_hash, str) or len(uid_hash) != 32 or not _is_hex(uid_hash):
            raise ValueError(
                "Node hash must be a 32 character String that describes a hex code. Found: "
                f"{uid_hash!r}"
            )
        self._physical("set_uid_hash()").uid_hash = uid_hash
        return self

    def set_parallelism(self, parallelism: int) -> Any:
        """Parallelism of this operator (``-1``: the environment's default)."""
        t = self._physical("set_parallelism()")
        require_int("parallelism", parallelism)
        if parallelism == -1:
            t.parallelism, t.parallelism_fixed = None, self._non_parallel
            return self
        if parallelism < 1:
            raise ValueError("The parallelism of an operator must be at least 1.")
        if self._non_parallel and parallelism != 1:
            raise ValueError("The parallelism of non parallel operator must be 1.")
        t.parallelism, t.parallelism_fixed = parallelism, True
        return self

    def set_max_parallelism(self, max_parallelism: int) -> Any:
        """Upper bound of rescaling and number of key groups of this operator."""
        t = self._physical("set_max_parallelism()")
        require_int("max parallelism", max_parallelism)
        if not 1 <= max_parallelism <= MAX_MAX_PARALLELISM:
            raise ValueError(
                f"The maximum parallelism must be between 1 and {MAX_MAX_PARALLELISM}, "
                f"got {max_parallelism}"
            )
        t.max_parallelism = max_parallelism
        return self

    def disable_chaining(self) -> Any:
        """Run this operator in a task of its own (no-op on sources, which always chain)."""
        self._set_option(CHAINING_OPTION, "never")
        return self

    def start_new_chain(self) -> Any:
        """Start a new task at this operator; later operators may chain onto it."""
        self._set_option(CHAINING_OPTION, "head")
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> Any:
        """Accepted for compatibility and ignored: Cairn runs subtask ``i`` of every operator
        in the same worker (Flink's default slot sharing)."""
        self._physical("slot_sharing_group()")
        return self

    def set_description(self, description: str) -> Any:
        self._set_option("description", str(description))
        return self


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)
