"""State backends (``pyflink.datastream.state_backend``): where working state lives.

Invariant: a backend object is only a way to set ``state.backend.type`` (and
``execution.checkpointing.incremental``); the configuration decides, and an unknown backend
name fails at submission with a ``ConfigurationError``.
"""

from __future__ import annotations

from cairn.common.config_values import format_bool

__all__ = ["EmbeddedRocksDBStateBackend", "HashMapStateBackend", "StateBackend"]


class StateBackend:
    """Base of the state backends."""

    backend_type = ""

    def to_configuration(self) -> dict[str, str]:
        return {"state.backend.type": self.backend_type}

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, StateBackend)
            and type(other) is type(self)
            and self.to_configuration() == other.to_configuration()
        )

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.to_configuration().items())))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class HashMapStateBackend(StateBackend):
    """Keeps state as Python objects in the worker's memory; snapshots are written to the
    checkpoint storage asynchronously. The default."""

    backend_type = "hashmap"


class EmbeddedRocksDBStateBackend(StateBackend):
    """Keyed state in an embedded RocksDB per subtask on the worker's local disk
    (``state.backend.rocksdb.localdir``), so state may outgrow memory; snapshots upload a
    RocksDB checkpoint's files; with ``enable_incremental_checkpointing``
    (``execution.checkpointing.incremental``) only the SST files that no completed checkpoint
    uploaded yet.

    >>> EmbeddedRocksDBStateBackend(True).to_configuration()["state.backend.type"]
    'rocksdb'
    """

    backend_type = "rocksdb"

    def __init__(self, enable_incremental_checkpointing: bool | None = None) -> None:
        self._incremental = enable_incremental_checkpointing

    def is_incremental_checkpoints_enabled(self) -> bool:
        return bool(self._incremental)

    def to_configuration(self) -> dict[str, str]:
        conf = super().to_configuration()
        if self._incremental is not None:
            conf["execution.checkpointing.incremental"] = format_bool(self._incremental)
        return conf
