"""Channel state of unaligned checkpoints: recording in-flight input, persisting and replaying it.

Invariant: for an unaligned checkpoint n of a task, the recorder holds, per input channel and
in channel order, exactly the record batches (and the watermark events between them) that were
sent before that channel's barrier n and had not been processed when the task took its
snapshot of n; each batch is recorded once, as
pickled bytes taken at recording time (later in-place changes of a record cannot reach it).
Replaying puts the batches back at the front of their channels, so they are processed before
any input that arrived after the restore.
"""

from __future__ import annotations

import pickle
from collections.abc import Container, Iterable, Mapping
from typing import Any

from cairn.checkpoint.handles import (
    InputChannelStateHandle,
    StateFileReader,
    StateFileWriter,
    StreamRange,
)
from cairn.ids import CheckpointId, SubtaskIndex
from cairn.state.snapshot_format import assemble_file, decode_section, read_sections

CHANNEL_STATE_MAGIC = b"CAIRN-CHANNEL-STATE-1\n"

NOT_RECORDED = CheckpointId(-1)  # HeldBatch.recorded_for of records in no channel state


class HeldBatch:
    """A record batch put (back) at the front of a channel queue by the task itself.

    Two sources: the rest of a batch the task processed only partly (so that a priority
    barrier can be handled between two slices), and in-flight data replayed on restore.
    ``recorded_for`` is the unaligned checkpoint that already holds these records in its
    channel state (``NOT_RECORDED``: none), so that they are not recorded twice.
    """

    __slots__ = ("recorded_for", "records", "replayed")

    def __init__(
        self,
        records: list[Any],
        recorded_for: CheckpointId = NOT_RECORDED,
        replayed: bool = False,
    ) -> None:
        self.records = records
        self.recorded_for = recorded_for
        self.replayed = replayed

    def __repr__(self) -> str:
        return f"HeldBatch({len(self.records)} records, recorded_for={self.recorded_for})"


def _encode(entry: Any) -> bytes:
    if type(entry) is bytes:
        return entry  # a remote batch, still as it came off the wire
    records = entry.records if type(entry) is HeldBatch else entry
    try:
        return pickle.dumps(records, protocol=5)
    except (pickle.PicklingError, AttributeError, TypeError):
        import cloudpickle  # records of classes defined in __main__

        data: bytes = cloudpickle.dumps(records, protocol=5)
        return data


class ChannelStateRecorder:
    """The in-flight input of one unaligned checkpoint of one task, while it is recorded.

    The task thread adds batches (``add``); once every barrier arrived the recorder is
    ``complete`` and ``write`` may run on a snapshot thread.

    >>> rec = ChannelStateRecorder(checkpoint_id=4, num_channels=2, channels={1})
    >>> rec.add(1, [("a", 1)])
    >>> rec.add(1, HeldBatch([("b", 2)]))
    >>> rec.num_batches, rec.persisted_bytes > 0
    (2, True)
    """

    __slots__ = (
        "_buffers",
        "channels",
        "checkpoint_id",
        "complete",
        "num_channels",
        "persisted_bytes",
    )

    def __init__(
        self, checkpoint_id: CheckpointId, num_channels: int, channels: Container[int]
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.num_channels = num_channels
        # Live set of channels whose consumed input is recorded (the handler's view).
        self.channels = channels
        self._buffers: dict[int, list[bytes]] = {}
        self.persisted_bytes = 0
        self.complete = False

    def add(self, channel: int, entry: Any) -> None:
        """Record a batch (list, pickled bytes or ``HeldBatch``) of ``channel``; a held batch
        this checkpoint already recorded when it was first taken is skipped."""
        if type(entry) is HeldBatch and entry.recorded_for == self.checkpoint_id:
            return
        data = _encode(entry)
        self._buffers.setdefault(channel, []).append(data)
        self.persisted_bytes += len(data)

    def add_all(self, channel: int, entries: Iterable[Any]) -> None:
        for entry in entries:
            self.add(channel, entry)

    @property
    def num_batches(self) -> int:
        return sum(len(b) for b in self._buffers.values())

    def write(self, writer: StateFileWriter, name: str) -> InputChannelStateHandle | None:
        """Persist the recorded batches as one state file (None if nothing was recorded)."""
        if not self._buffers:
            return None
        sections = [
            ((c, i), data)
            for c, batches in sorted(self._buffers.items())
            for i, data in enumerate(batches)
        ]
        blob, ranges = assemble_file(CHANNEL_STATE_MAGIC, sections)
        path = writer.write_state_file(name, blob)
        buffers: dict[int, list[StreamRange]] = {}
        for (c, _i), r in ranges.items():
            buffers.setdefault(c, []).append(r)
        return InputChannelStateHandle(
            path=path,
            num_channels=self.num_channels,
            buffers={c: tuple(rs) for c, rs in buffers.items()},
            size=self.persisted_bytes,
        )


def read_channel_state(
    reader: StateFileReader, handle: InputChannelStateHandle
) -> dict[int, list[list[Any]]]:
    """The record batches of ``handle``, per channel, oldest first (CRC-checked)."""
    wanted = {(c, i): r for c, rs in handle.buffers.items() for i, r in enumerate(rs)}
    raw = read_sections(reader, handle.path, wanted, "in-flight batch")
    out: dict[int, list[list[Any]]] = {}
    for c, rs in sorted(handle.buffers.items()):
        out[c] = [
            decode_section(raw[(c, i)], handle.path, "in-flight batch", (c, i))
            for i in range(len(rs))
        ]
    return out


def channel_state_for_subtask(
    handles: Mapping[SubtaskIndex, InputChannelStateHandle | None],
    old_parallelism: int,
    new_parallelism: int,
    subtask_index: SubtaskIndex,
    num_channels: int,
    what: str,
) -> InputChannelStateHandle | None:
    """The channel state a restored subtask replays; pure decision, no I/O.

    In-flight data is restored only at the same parallelism and gate width (as in Flink
    before 1.13): otherwise a clear error asks for a savepoint (always aligned) instead.

    >>> channel_state_for_subtask({}, 2, 3, 0, 2, "map") is None
    True
    """
    present = {i: h for i, h in handles.items() if h is not None}
    if not present:
        return None
    if old_parallelism != new_parallelism:
        raise ValueError(
            f"{what}: the checkpoint is unaligned and holds in-flight data of "
            f"{len(present)} subtask(s) written at parallelism {old_parallelism}; it can only be "
            f"restored at that parallelism (asked: {new_parallelism}). Take a savepoint (always "
            "aligned) to change the parallelism."
        )
    handle = present.get(subtask_index)
    if handle is not None and handle.num_channels != num_channels:
        raise ValueError(
            f"{what}: the in-flight data of subtask {subtask_index} was written for "
            f"{handle.num_channels} input channels, the restored task has {num_channels} "
            "(an upstream operator changed its parallelism); restore from a savepoint instead."
        )
    return handle
