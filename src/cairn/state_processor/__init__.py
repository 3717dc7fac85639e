"""The state processor: savepoint and checkpoint state read and written as Spark DataFrames.

Flink's State Processor API is Java-only; Cairn runs on Spark, so its savepoints are read and
written by Spark jobs, in parallel by key group, in the heap backend's canonical format.

Layers, bottom up: ``errors`` → ``columns`` (type infos → Spark types, value conversions) →
``key_group_slices`` (pure: which task reads or writes which key groups) → ``sections``
(what one task does with keyed state sections) → ``reader`` (``SavepointReader``) and ``writer``
(``SavepointWriter``). The package sits beside ``cairn.runtime``: it builds on the
checkpoint and state layers and on nothing that runs jobs.

>>> from cairn.state_processor import SavepointReader, SavepointWriter
"""

from cairn.state_processor.columns import unpickle
from cairn.state_processor.errors import (
    StateProcessorError,
    UnknownOperatorError,
    UnknownStateError,
    ValueTypeError,
)
from cairn.state_processor.reader import ListLayout, SavepointReader
from cairn.state_processor.writer import SavepointWriter

__all__ = [
    "ListLayout",
    "SavepointReader",
    "SavepointWriter",
    "StateProcessorError",
    "UnknownOperatorError",
    "UnknownStateError",
    "ValueTypeError",
    "unpickle",
]
