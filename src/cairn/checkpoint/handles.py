"""State handles: where a piece of checkpointed state lives and how to verify it.

Invariant: handles are immutable, JSON-serializable values (see ``checkpoint.metadata``) and
every path in them is relative to the directory of the checkpoint that owns the metadata, so a
checkpoint or savepoint directory can be moved as a whole and stays readable. Inline values
are opaque pickled bytes: reading a handle never unpickles; only the restoring operator does
(``OperatorSubtaskState.inline_value``), after the metadata was verified.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import cloudpickle

from cairn.ids import CheckpointId, OperatorUid


@dataclass(frozen=True, slots=True)
class StreamRange:
    """A checksummed byte range of a state file."""

    offset: int
    length: int
    crc32: int


@dataclass(frozen=True, slots=True)
class KeyedStateHandle:
    """Keyed state of one subtask, one section per non-empty key group.

    ``key_group_start``/``key_group_end`` (inclusive) is the range the writing subtask owned;
    on restore each new subtask reads only the sections of the key groups it now owns.
    """

    path: str
    key_group_start: int
    key_group_end: int
    sections: Mapping[int, StreamRange]
    size: int


@dataclass(frozen=True, slots=True)
class RocksDBStateFile:
    """One file of a RocksDB checkpoint (``name`` in the database directory) as uploaded.

    ``path`` is relative to the checkpoint directory, like every handle path. A ``shared``
    file (an SST file of an incremental checkpoint) lives in the job's shared directory
    (``path`` is ``../shared/<name>``): uploaded once, referenced by later checkpoints of the
    same backend, and deleted by the coordinator's ``SharedStateRegistry`` once no retained
    checkpoint references it. Full snapshots write private files only.
    """

    name: str
    path: str
    size: int
    crc32: int
    shared: bool = False


@dataclass(frozen=True, slots=True)
class RocksDBKeyedStateHandle:
    """Keyed state of one subtask as the files of one RocksDB checkpoint.

    Keys are prefixed by their key group, so a restore at any parallelism opens the files of
    every old subtask whose range overlaps its own and keeps only its key groups. ``size`` is
    the full size; ``persisted_size`` what this checkpoint uploaded (less when incremental).
    ``backend_id`` names the backend instance that wrote it and ``base_checkpoint_id`` the
    completed checkpoint whose shared files it could reuse (``None``: none, a full upload);
    the shared-state registry needs both to know when a file can no longer be referenced.
    """

    key_group_start: int
    key_group_end: int
    files: tuple[RocksDBStateFile, ...]
    size: int
    persisted_size: int = -1  # -1: all of ``size``
    backend_id: str = ""
    base_checkpoint_id: CheckpointId | None = None

    @property
    def checkpointed_size(self) -> int:
        return self.size if self.persisted_size < 0 else self.persisted_size

    def shared_files(self) -> tuple[RocksDBStateFile, ...]:
        return tuple(f for f in self.files if f.shared)

    @property
    def path(self) -> str:
        """A name for messages: the path of the MANIFEST (the file that lists the others)."""
        manifests = [f.path for f in self.files if f.name.startswith("MANIFEST")]
        return manifests[0] if manifests else self.files[0].path if self.files else "<none>"


SHARED_DIR_NAME = "shared"
SHARED_PATH_PREFIX = "../" + SHARED_DIR_NAME + "/"
"""Paths of shared files start with this: the job's ``shared/`` beside its ``chk-<n>/``."""

AnyKeyedStateHandle = KeyedStateHandle | RocksDBKeyedStateHandle
"""What a keyed state backend writes: heap sections or RocksDB files."""


@dataclass(frozen=True, slots=True)
class OperatorStateHandle:
    """Operator (non-keyed) state of one subtask in one section.

    ``states`` maps a state name to its redistribution mode (``"split"`` or ``"union"``) and
    element count; the section holds a pickled ``dict[name, list]``.
    """

    path: str
    section: StreamRange
    states: Mapping[str, tuple[str, int]]
    size: int


@dataclass(frozen=True, slots=True)
class InputChannelStateHandle:
    """In-flight input of one subtask persisted by an unaligned checkpoint (channel state).

    ``buffers`` maps an input channel index (the task's gate order) to the checksummed
    ranges of ``path``, one per record batch (a pickled list), oldest first; on restore the
    batches are replayed into their channel before any new input. ``num_channels`` is the
    width of the gate that wrote it: a restore must have the same gate.
    """

    path: str
    num_channels: int
    buffers: Mapping[int, tuple[StreamRange, ...]]
    size: int


def pickle_inline(values: Mapping[str, Any]) -> dict[str, bytes]:
    """Small values to keep inline in the metadata, pickled (cloudpickle: classes defined in
    ``__main__`` too); the taking subtask calls this, see ``OperatorSnapshot``.

    >>> OperatorSubtaskState(inline=pickle_inline({"pos": 7})).inline_value("pos")
    7
    """
    return {str(name): cloudpickle.dumps(value) for name, value in values.items()}


@dataclass(frozen=True, slots=True)
class KeyedStateSchema:
    """What a snapshot records of one keyed state, to check a restoring job's descriptor
    against (``cairn.state.schema``): its kind (``"value"``, ``"list"``, ``"map"``,
    ``"reducing"``, ``"aggregating"``) and its declared types as ``repr`` of the type
    information (a map's user key and value; the value's, or a list's element's, else),
    ``None`` where the descriptor declared none.

    >>> KeyedStateSchema("map", ("String", "Long"))
    KeyedStateSchema(kind='map', types=('String', 'Long'))
    """

    kind: str
    types: tuple[str | None, ...] = ()


@dataclass(frozen=True, slots=True)
class OperatorSubtaskState:
    """Everything one subtask of one operator contributed to a checkpoint.

    >>> OperatorSubtaskState(inline={"pos": "7"})
    Traceback (most recent call last):
    ...
    TypeError: inline value 'pos' must be pickled bytes (see pickle_inline), got str
    """

    keyed: tuple[AnyKeyedStateHandle, ...] = ()
    operator: tuple[OperatorStateHandle, ...] = ()
    # Small extra payload kept in the metadata itself, pickled by ``pickle_inline`` (e.g.
    # positions in tests); opaque until ``inline_value`` unpickles it in a restoring worker.
    inline: Mapping[str, bytes] = field(default_factory=dict)
    # In-flight input of the task this operator heads (unaligned checkpoints only).
    input_channels: InputChannelStateHandle | None = None
    # The keyed states' kinds and declared types, by state name (absent before Cairn kept them).
    keyed_schema: Mapping[str, KeyedStateSchema] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in self.inline.items():
            if not isinstance(value, bytes):
                raise TypeError(
                    f"inline value {name!r} must be pickled bytes (see pickle_inline), "
                    f"got {type(value).__name__}"
                )

    def inline_value(self, name: str) -> Any:
        """Unpickle inline value ``name``: this runs code the pickle names, so call it only in
        the worker restoring this state, from metadata read with the job's signing key.

        Raises:
            KeyError: no inline value ``name``.
        """
        return pickle.loads(self.inline[name])

    @property
    def inline_size(self) -> int:
        """Bytes of the pickled inline values (what listings show instead of the values)."""
        return sum(len(v) for v in self.inline.values())

    @property
    def state_size(self) -> int:
        """Bytes of operator and keyed state (in-flight data is counted separately)."""
        return sum(h.size for h in self.keyed) + sum(h.size for h in self.operator)

    @property
    def checkpointed_size(self) -> int:
        """Bytes this checkpoint wrote (an incremental one reuses files of earlier ones)."""
        keyed = sum(
            h.checkpointed_size if isinstance(h, RocksDBKeyedStateHandle) else h.size
            for h in self.keyed
        )
        return keyed + sum(h.size for h in self.operator)

    @property
    def persisted_in_flight_bytes(self) -> int:
        return 0 if self.input_channels is None else self.input_channels.size

    @property
    def is_empty(self) -> bool:
        return (
            not self.keyed and not self.operator and not self.inline and self.input_channels is None
        )


class StateFileWriter(Protocol):
    """What a state backend needs to persist the asynchronous part of a snapshot."""

    @property
    def checkpoint_id(self) -> CheckpointId: ...

    def write_state_file(self, name: str, data: bytes) -> str:
        """Write ``data`` as a new file in the checkpoint directory; return its relative path."""
        ...


class SharedStateFileWriter(StateFileWriter, Protocol):
    """A writer that can also put files into the job's shared directory (incremental
    checkpoints); the RocksDB backend uploads everything privately to other writers."""

    def write_shared_file(self, name: str, data: bytes) -> str:
        """Write ``data`` as a new shared file; return its path (``../shared/<name>``)."""
        ...


class StateFileReader(Protocol):
    """What a state backend needs to restore from a checkpoint directory."""

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        """Read ``length`` bytes at ``offset`` of ``path`` (relative to the checkpoint dir)."""
        ...


__all__ = [
    "SHARED_DIR_NAME",
    "SHARED_PATH_PREFIX",
    "AnyKeyedStateHandle",
    "InputChannelStateHandle",
    "KeyedStateHandle",
    "OperatorStateHandle",
    "OperatorSubtaskState",
    "OperatorUid",
    "RocksDBKeyedStateHandle",
    "RocksDBStateFile",
    "SharedStateFileWriter",
    "StateFileReader",
    "StateFileWriter",
    "StreamRange",
    "pickle_inline",
]
