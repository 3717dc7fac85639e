"""Where a failure happened in the user's code: the operator, the user's frames, the record
(``deploy/failure_facts.py``), read from a real exception raised inside Cairn's operators."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from cairn.deploy.failure_facts import RECORD_CHARS, facts_of
from cairn.graph.job_graph import OperatorNode
from cairn.runtime.operators.base import StreamOperator


def parse(line: str) -> tuple[str, int]:
    key, value = line.split(",")
    return key, int(value)


class _Mapper(StreamOperator):
    """A stand-in operator that calls the user's function the way Cairn's map does."""

    def __init__(self, node: Any, fn: Any) -> None:
        super().__init__(node)
        self.fn = fn

    def process_batch(self, records: list[Any]) -> list[Any]:
        return [self.fn(r) for r in records]


def _node(name: str, uid: str) -> Any:
    fields = OperatorNode.__dataclass_fields__
    node = object.__new__(OperatorNode)
    for key in fields:
        object.__setattr__(node, key, None)
    object.__setattr__(node, "name", name)
    object.__setattr__(node, "uid", uid)
    return node


def test_the_operator_the_users_frame_and_the_record_are_named() -> None:
    op = _Mapper(_node("parse", "parse-uid"), parse)
    with pytest.raises(ValueError) as raised:
        op.process_batch(["a,1", "c,x"])
    facts = facts_of(raised.value)
    assert facts.operator == "parse (uid parse-uid)"
    assert facts.record == "'c,x'"
    frame = facts.user_frames[-1]
    assert (frame.function, frame.code) == ("parse", "return key, int(value)")
    assert frame.file == __file__
    # Cairn's own frames are not the user's.
    assert all("src/cairn/" not in f.file for f in facts.user_frames)
    assert pickle.loads(pickle.dumps(facts)) == facts  # it travels in a control message


def test_a_long_record_is_cut_and_an_unprintable_one_left_out() -> None:
    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    def first(value: Any) -> None:
        raise KeyError("missing")

    for record, expected in (("x" * 1000, RECORD_CHARS), (Unprintable(), None)):
        with pytest.raises(KeyError) as raised:
            first(record)
        facts = facts_of(raised.value)
        if expected is None:
            assert facts.record is None
        else:
            assert facts.record is not None and len(facts.record) == expected
            assert facts.record.endswith("...")
