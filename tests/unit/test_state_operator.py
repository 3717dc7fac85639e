"""Operator (non-keyed) list state: semantics, redistribution, snapshot/restore via files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.handles import OperatorStateHandle
from cairn.datastream.state import ListStateDescriptor
from cairn.state import (
    CorruptStateError,
    DefaultOperatorStateBackend,
    StateMigrationError,
    StateRestoreError,
    redistribute_operator_state,
)
from cairn.state.api import OperatorStateBackend
from cairn.testing.simple_state_files import DirectoryStateFiles

OldStates = dict[int, dict[str, tuple[str, list[Any]]]]


def split(*elements: Any) -> tuple[str, list[Any]]:
    return ("split", list(elements))


def union(*elements: Any) -> tuple[str, list[Any]]:
    return ("union", list(elements))


# ------------------------------------------------------------------- pure redistribution


def test_same_parallelism_returns_each_subtask_its_own_split_lists() -> None:
    old: OldStates = {0: {"s": split("a", "b")}, 1: {"s": split("c")}, 2: {}}
    got = [redistribute_operator_state(old, 3, 3, i) for i in range(3)]
    assert got[0] == {"s": split("a", "b")}
    assert got[1] == {"s": split("c")}
    assert got[2] == {"s": split()}


def test_union_state_goes_to_everyone_in_old_subtask_order() -> None:
    old: OldStates = {1: {"u": union("c")}, 0: {"u": union("a", "b")}}
    for p in (1, 2, 5):
        for i in range(p):
            assert redistribute_operator_state(old, 2, p, i) == {"u": union("a", "b", "c")}


def test_rescale_cuts_contiguous_chunks_of_the_concatenation() -> None:
    old: OldStates = {0: {"s": split(0, 1, 2)}, 1: {"s": split(3, 4, 5, 6)}}
    assert [redistribute_operator_state(old, 2, 3, i)["s"][1] for i in range(3)] == [
        [0, 1, 2],
        [3, 4],
        [5, 6],
    ]
    three: OldStates = {0: {"s": split("a")}, 1: {"s": split("b", "c")}, 2: {"s": split("d")}}
    assert redistribute_operator_state(three, 3, 1, 0) == {"s": split("a", "b", "c", "d")}


def test_surplus_elements_rotate_over_states() -> None:
    old: OldStates = {0: {"a": split(1), "b": split(2), "c": split(3)}}
    sizes = [
        {name: len(v) for name, (_, v) in redistribute_operator_state(old, 1, 3, i).items()}
        for i in range(3)
    ]
    # One element per state: states a, b, c land on subtasks 0, 1, 2 respectively.
    assert sizes == [{"a": 1, "b": 0, "c": 0}, {"a": 0, "b": 1, "c": 0}, {"a": 0, "b": 0, "c": 1}]


@pytest.mark.parametrize("old_p", [1, 2, 3, 5])
@pytest.mark.parametrize("new_p", [1, 2, 3, 4, 7])
def test_every_split_element_is_restored_exactly_once(old_p: int, new_p: int) -> None:
    old: OldStates = {
        i: {"x": split(*[(i, j) for j in range(i + 2)]), "y": split(f"y{i}")} for i in range(old_p)
    }
    for name in ("x", "y"):
        everything = [e for i in range(old_p) for e in old[i][name][1]]
        shares = [redistribute_operator_state(old, old_p, new_p, i)[name][1] for i in range(new_p)]
        assert [e for share in shares for e in share] == everything
        if old_p != new_p:  # rescaled: balanced; otherwise each keeps its own list
            assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_inconsistent_inputs_are_rejected() -> None:
    with pytest.raises(StateRestoreError, match="split in one old subtask, union"):
        redistribute_operator_state({0: {"s": split(1)}, 1: {"s": union(2)}}, 2, 2, 0)
    with pytest.raises(StateRestoreError, match="old subtask index 2"):
        redistribute_operator_state({2: {"s": split(1)}}, 2, 2, 0)
    with pytest.raises(ValueError, match="subtask index"):
        redistribute_operator_state({}, 2, 2, 2)


# ------------------------------------------------------------------------------- backend


def test_list_state_semantics_and_mode_conflicts() -> None:
    backend: OperatorStateBackend = DefaultOperatorStateBackend()
    s = backend.get_list_state(ListStateDescriptor("offsets", None))
    assert backend.get_list_state(ListStateDescriptor("offsets", None)) is s
    assert s.get() == []
    s.add(1)
    s.add_all([2, 3])
    got = list(s.get())
    got.append(99)
    assert list(s) == [1, 2, 3]
    s.update([7])
    assert list(s.get()) == [7]
    with pytest.raises(ValueError, match="None"):
        s.add(None)
    s.clear()
    assert list(s.get()) == []
    with pytest.raises(StateMigrationError, match="split"):
        backend.get_union_list_state(ListStateDescriptor("offsets", None))


def checkpoint(
    parallelism: int, contents: Mapping[str, Sequence[Any]], files: DirectoryStateFiles
) -> dict[int, list[OperatorStateHandle]]:
    """Each old subtask i stores ``contents[name]`` tagged with i (names starting 'u' union)."""
    out: dict[int, list[OperatorStateHandle]] = {}
    for i in range(parallelism):
        b = DefaultOperatorStateBackend(file_prefix=f"op-{i}-")
        for name, values in contents.items():
            desc = ListStateDescriptor(name, None)
            s = b.get_union_list_state(desc) if name.startswith("u") else b.get_list_state(desc)
            s.update([(i, v) for v in values])
        handle = b.snapshot(1)(files)
        out[i] = [handle] if handle is not None else []
    return out


def restore(
    old: Mapping[int, Sequence[OperatorStateHandle]],
    old_p: int,
    new_p: int,
    reader: Any,
) -> list[dict[str, list[Any]]]:
    shares = []
    for i in range(new_p):
        b = DefaultOperatorStateBackend()
        b.restore(old, old_p, i, new_p, reader)
        shares.append(
            {
                "split": list(b.get_list_state(ListStateDescriptor("split", None)).get()),
                "union": list(b.get_union_list_state(ListStateDescriptor("union", None)).get()),
            }
        )
    return shares


def test_same_parallelism_round_trip_is_identity(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    old = checkpoint(3, {"split": ["a", "b"], "union": ["u"]}, files)
    shares = restore(old, 3, 3, files)
    for i, share in enumerate(shares):
        assert share["split"] == [(i, "a"), (i, "b")]
        assert share["union"] == [(0, "u"), (1, "u"), (2, "u")]


@pytest.mark.parametrize(("old_p", "new_p"), [(2, 3), (3, 1)])
def test_rescale_round_trip(tmp_path: Path, old_p: int, new_p: int) -> None:
    files = DirectoryStateFiles(tmp_path)
    old = checkpoint(old_p, {"split": ["a", "b"], "union": ["u"]}, files)
    shares = restore(old, old_p, new_p, files)
    all_split = [(i, v) for i in range(old_p) for v in ("a", "b")]
    assert [e for s in shares for e in s["split"]] == all_split
    for share in shares:
        assert share["union"] == [(i, "u") for i in range(old_p)]


class RecordingReader:
    def __init__(self, inner: DirectoryStateFiles) -> None:
        self.inner = inner
        self.paths: list[str] = []

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        self.paths.append(path)
        return self.inner.read_state_range(path, offset, length)


def test_same_parallelism_split_only_reads_just_its_own_file(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    old = checkpoint(3, {"split": ["a"]}, files)
    reader = RecordingReader(files)
    DefaultOperatorStateBackend().restore(old, 3, 1, 3, reader)
    assert reader.paths == [old[1][0].path]


def test_snapshot_isolation_and_empty_snapshot(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    b = DefaultOperatorStateBackend()
    s = b.get_list_state(ListStateDescriptor("split", None))
    assert b.snapshot(1)(files) is None  # nothing to write
    s.add({"pos": 1})
    write = b.snapshot(2)
    next(iter(s.get()))["pos"] = 99  # in place: get() copies the list, not its elements
    s.add({"pos": 2})
    handle = write(files)
    assert handle is not None and handle.states == {"split": ("split", 1)}
    assert restore({0: [handle]}, 1, 1, files)[0]["split"] == [{"pos": 1}]


def test_corrupted_operator_state_is_detected(tmp_path: Path) -> None:
    files = DirectoryStateFiles(tmp_path)
    old = checkpoint(1, {"split": ["a", "b", "c"]}, files)
    handle = old[0][0]
    path = tmp_path / handle.path
    data = bytearray(path.read_bytes())
    data[handle.section.offset + 5] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStateError, match=handle.path):
        DefaultOperatorStateBackend().restore(old, 1, 0, 1, files)
