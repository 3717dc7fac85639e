"""Keyed state schemas: what snapshots record of each state, and the compatibility rule."""

from __future__ import annotations

import pytest

from cairn.checkpoint.handles import KeyedStateSchema, OperatorSubtaskState
from cairn.checkpoint.metadata import (
    CheckpointMetadata,
    OperatorMetadata,
    decode_metadata,
    encode_metadata,
)
from cairn.common.typeinfo import Types
from cairn.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from cairn.ids import CheckpointId, JobId, OperatorUid
from cairn.state.schema import incompatibility, schema_of


class _Count:
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: object, acc: int) -> int:
        return acc + 1

    def get_result(self, acc: int) -> int:
        return acc


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (ListStateDescriptor("s", Types.INT()), ListStateDescriptor("s", Types.INT()), None),
        (ListStateDescriptor("s", Types.INT()), ListStateDescriptor("s", None), None),
        (
            ListStateDescriptor("s", Types.INT()),
            ListStateDescriptor("s", Types.PICKLED_BYTE_ARRAY()),
            None,
        ),
        (
            ListStateDescriptor("s", Types.INT()),
            ListStateDescriptor("s", Types.LONG()),
            "the element type is Integer in the snapshot but Long in the job",
        ),
        (
            MapStateDescriptor("s", Types.STRING(), Types.INT()),
            MapStateDescriptor("s", Types.INT(), None),
            "the user key type is String in the snapshot but Integer in the job",
        ),
        (
            ReducingStateDescriptor("s", lambda a, b: a, Types.LONG()),
            AggregatingStateDescriptor("s", _Count(), Types.LONG()),
            "it is reducing state of Long in the snapshot but aggregating state of Long in the job",
        ),
        (
            ValueStateDescriptor("s", None),
            ListStateDescriptor("s", None),
            "it is value state in the snapshot but list state in the job",
        ),
    ],
)
def test_compatibility(old: object, new: object, why: str | None) -> None:
    assert incompatibility(schema_of(old), schema_of(new)) == why


def test_metadata_keeps_the_schema_and_reads_metadata_without_one() -> None:
    recorded = {"sum": KeyedStateSchema("map", ("String", None))}
    subtasks = {0: OperatorSubtaskState(keyed_schema=recorded), 1: OperatorSubtaskState()}
    op = OperatorMetadata(OperatorUid("op"), 2, 128, subtasks)
    md = CheckpointMetadata(JobId("j"), CheckpointId(1), 1, 2, 128, {op.uid: op})
    back = decode_metadata(encode_metadata(md))
    assert back == md
    assert back.operators[op.uid].subtasks[1].keyed_schema == {}
