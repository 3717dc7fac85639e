"""Checkpoint metadata codec: round trip, and clear errors for every kind of damage."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle

import pytest

from cairn.checkpoint.errors import CorruptCheckpointError
from cairn.checkpoint.handles import (
    KeyedStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
    StreamRange,
    pickle_inline,
)
from cairn.checkpoint.metadata import (
    CheckpointMetadata,
    CheckpointSummaryStats,
    OperatorMetadata,
    decode_metadata,
    encode_metadata,
)
from cairn.ids import CheckpointId, JobId, OperatorUid


@dataclasses.dataclass(frozen=True)
class SourcePosition:
    split: str
    offset: int


def sample() -> CheckpointMetadata:
    keyed = KeyedStateHandle(
        path="keyed-abc",
        key_group_start=0,
        key_group_end=63,
        sections={3: StreamRange(0, 10, 111), 17: StreamRange(10, 5, 222)},
        size=15,
    )
    op_state = OperatorStateHandle(
        path="op-def",
        section=StreamRange(0, 8, 333),
        states={"buffer": ("split", 4), "seen": ("union", 1)},
        size=8,
    )
    uid = OperatorUid("counter")
    return CheckpointMetadata(
        job_id=JobId("job-1"),
        checkpoint_id=CheckpointId(42),
        trigger_ms=1000,
        completed_ms=1250,
        max_parallelism=128,
        operators={
            uid: OperatorMetadata(
                uid,
                2,
                128,
                {
                    0: OperatorSubtaskState(keyed=(keyed,), operator=(op_state,)),
                    1: OperatorSubtaskState(
                        inline=pickle_inline({"pos": SourcePosition("s-1", 7), "set": {1, 2}})
                    ),
                },
            ),
            OperatorUid("sink"): OperatorMetadata(OperatorUid("sink"), 1, 128),
        },
        stats=CheckpointSummaryStats(state_size=23, num_subtasks=3, max_sync_duration_ms=4),
        properties={"job_name": "wordcount"},
    )


def test_round_trip_preserves_handles_inline_objects_and_stats() -> None:
    md = sample()
    back = decode_metadata(encode_metadata(md))
    assert back == md
    restored = back.operators[OperatorUid("counter")].subtasks[1]
    assert restored.inline_value("pos") == SourcePosition("s-1", 7)
    assert back.referenced_files() == {"keyed-abc": 15, "op-def": 8}
    assert back.duration_ms == 250


def test_truncated_metadata_is_reported_as_truncated() -> None:
    data = encode_metadata(sample())
    with pytest.raises(CorruptCheckpointError, match=r"chk-42/_metadata: truncated metadata"):
        decode_metadata(data[:-20], "/c/chk-42/_metadata")
    with pytest.raises(CorruptCheckpointError, match="header line is incomplete"):
        decode_metadata(data[:30], "/c/chk-42/_metadata")
    with pytest.raises(CorruptCheckpointError, match="empty"):
        decode_metadata(b"", "x")


def test_flipped_byte_is_a_checksum_mismatch() -> None:
    data = bytearray(encode_metadata(sample()))
    i = data.index(b"wordcount")
    data[i] ^= 0x20
    with pytest.raises(CorruptCheckpointError, match="checksum mismatch"):
        decode_metadata(bytes(data), "m")


def test_foreign_files_and_newer_versions_are_rejected_clearly() -> None:
    with pytest.raises(CorruptCheckpointError, match="not a Cairn checkpoint metadata file"):
        decode_metadata(b"\x89PNG\r\n\x1a\n....", "m")
    data = encode_metadata(sample())
    head, _, body = data.partition(b"\n")
    header = json.loads(head)
    header["version"] = 99
    with pytest.raises(CorruptCheckpointError, match="unsupported metadata version 99"):
        decode_metadata(json.dumps(header).encode() + b"\n" + body, "m")


def test_inline_value_that_is_not_base64_names_operator_and_subtask() -> None:
    data = encode_metadata(sample())
    head, _, body = data.partition(b"\n")
    obj = json.loads(body)
    obj["operators"][0]["subtasks"]["1"]["inline"]["pos"] = "not base64!"
    new_body = json.dumps(obj).encode()
    header = json.loads(head)
    header.update(body_length=len(new_body), body_sha256=hashlib.sha256(new_body).hexdigest())
    with pytest.raises(CorruptCheckpointError, match="'pos' of operator 'counter' subtask 1"):
        decode_metadata(json.dumps(header).encode() + b"\n" + new_body, "m")


def test_inline_value_that_is_not_a_pickle_fails_only_when_restored() -> None:
    data = encode_metadata(sample())
    head, _, body = data.partition(b"\n")
    obj = json.loads(body)
    obj["operators"][0]["subtasks"]["1"]["inline"]["pos"] = "bm90IGEgcGlja2xl"  # "not a pickle"
    new_body = json.dumps(obj).encode()
    header = json.loads(head)
    header.update(body_length=len(new_body), body_sha256=hashlib.sha256(new_body).hexdigest())
    md = decode_metadata(json.dumps(header).encode() + b"\n" + new_body, "m")
    state = md.operators[OperatorUid("counter")].subtasks[1]
    assert state.inline["pos"] == b"not a pickle" and state.inline_size > 12
    with pytest.raises(pickle.UnpicklingError):
        state.inline_value("pos")
