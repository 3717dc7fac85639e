"""FileSource: listing, line decoding, mid-file resume, rescale (union) and monitoring."""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fsspec
import pytest

from cairn.clock import ManualClock
from cairn.common.time import Duration
from cairn.datastream.connectors.file_source import FileSourceReader, FileSplitState
from cairn.datastream.connectors.file_system import FileSource, StreamFormat
from tests.unit._sources import ctx, drain


def text_source(*paths: str, monitor: float | None = None) -> FileSource:
    builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), *paths)
    if monitor is not None:
        builder = builder.monitor_continuously(Duration.of_millis(int(monitor * 1000)))
    return builder.build()


def start(source: FileSource, parallelism: int, clock: Any = None) -> list[FileSourceReader]:
    splits = source.create_splits(parallelism)  # distributed round-robin
    kw = {"clock": clock} if clock else {}
    return [
        source.create_reader(splits[j::parallelism], ctx(j, parallelism), **kw)
        for j in range(parallelism)
    ]


def restore(
    source: FileSource, states: Sequence[Any], parallelism: int, clock: Any = None
) -> list[FileSourceReader]:
    assert source.split_redistribution == "union"
    states = pickle.loads(pickle.dumps(list(states)))
    kw = {"clock": clock} if clock else {}
    return [source.create_reader(states, ctx(j, parallelism), **kw) for j in range(parallelism)]


def write_files(root: Path, files: int, lines: int) -> list[str]:
    expected = []
    for f in range(files):
        content = [f"f{f}-line{n}-é" for n in range(lines)]
        (root / f"file{f:02d}.txt").write_text("\n".join(content) + "\n", encoding="utf-8")
        expected += content
    return sorted(expected)


def test_reads_directories_skipping_hidden_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_bytes(b"one\r\ntwo\n\nthree")  # CRLF, empty line, no final NL
    (tmp_path / "sub" / "b.txt").write_bytes(b"x" * 200_000 + b"\nlast\n")  # > read chunk
    (tmp_path / ".hidden").write_text("no\n")
    (tmp_path / "_SUCCESS").write_text("no\n")
    (tmp_path / ".part-1.inprogress.0").write_text("no\n")
    source = text_source(str(tmp_path))
    assert source.is_bounded()
    out = drain(start(source, 1), 3)
    assert out == ["one", "two", "", "three", "x" * 200_000, "last"]


def test_parallel_read_assigns_each_file_to_one_subtask(tmp_path: Path) -> None:
    expected = write_files(tmp_path, files=9, lines=20)
    readers = start(text_source(str(tmp_path)), 3)
    outputs = [drain([r], 7) for r in readers]
    assert sorted(line for out in outputs for line in out) == expected
    owners = [{line.split("-")[0] for line in out} for out in outputs]
    assert sum(len(o) for o in owners) == 9  # no file split between subtasks


def test_resumes_mid_file_exactly_after_last_returned_line(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    source = text_source(str(tmp_path / "data.txt"))
    [reader] = start(source, 1)
    assert reader.poll_batch(3) == ["line 0", "line 1", "line 2"]
    [state] = reader.snapshot_state(1)
    assert (state.offset, state.line, state.finished) == (21, 3, False)
    assert state.path.endswith("data.txt")
    reader.poll_batch(3)  # after the checkpoint: replayed after the restore
    assert drain(restore(source, [state], 1), 3) == [f"line {i}" for i in range(3, 10)]


@pytest.mark.parametrize(("old", "new"), [(3, 2), (2, 4), (4, 1)])
def test_rescale_with_union_state_loses_nothing_and_reads_nothing_twice(
    tmp_path: Path, old: int, new: int
) -> None:
    expected = write_files(tmp_path, files=8, lines=15)
    source = text_source(str(tmp_path))
    first = start(source, old)
    before: list[str] = []
    for _ in range(6):
        for reader in first:
            before.extend(reader.poll_batch(4) or [])
    states = [s for r in first for s in r.snapshot_state(1)]
    assert 0 < len(before) < len(expected)
    assert any(s.finished for s in states) and any(s.offset > 0 for s in states if not s.finished)
    after = drain(restore(source, states, new), 3)
    assert sorted(before + after) == expected


def test_monitoring_picks_up_new_files_after_the_interval(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a1\na2\n")
    clock = ManualClock()
    source = text_source(str(tmp_path), monitor=10.0)
    assert not source.is_bounded()
    [reader] = start(source, 1, clock)
    assert reader.poll_batch(10) == ["a1", "a2"]
    assert reader.poll_batch(10) == []  # unbounded: nothing now, but not finished
    # files must appear atomically: write hidden, then rename into place
    (tmp_path / ".b.tmp").write_text("b1\n")
    os.rename(tmp_path / ".b.tmp", tmp_path / "b.txt")
    clock.advance_to(5_000)
    assert reader.poll_batch(10) == []  # not yet time to list again
    clock.advance_to(10_000)
    assert reader.poll_batch(10) == ["b1"]
    assert reader.poll_batch(10) == []


def test_monitoring_restore_reads_only_new_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a1\n")
    (tmp_path / "c.txt").write_text("c1\nc2\nc3\n")
    clock = ManualClock()
    source = text_source(str(tmp_path), monitor=1.0)
    first = start(source, 2, clock)
    seen = drain_available(first)
    assert sorted(seen) == ["a1", "c1", "c2", "c3"]
    states = [s for r in first for s in r.snapshot_state(3)]
    assert all(s.finished for s in states)
    (tmp_path / "d.txt").write_text("d1\n")
    second = restore(source, states, 3, clock)
    assert sorted(drain_available(second)) == ["d1"]


def drain_available(readers: Sequence[FileSourceReader]) -> list[str]:
    out: list[str] = []
    for reader in readers:
        while batch := reader.poll_batch(2):
            out.extend(batch)
    return out


def test_reads_through_fsspec_memory_filesystem() -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/fsrc/in/x.txt", b"1\n2\n")
    fs.pipe("/fsrc/in/y.txt", b"3\n")
    try:
        source = text_source("memory://fsrc/in")
        states: list[FileSplitState] = []
        readers = start(source, 2)
        assert sorted(drain(readers, 3)) == ["1", "2", "3"]
        states = [s for r in readers for s in r.snapshot_state(1)]
        assert sorted(s.path for s in states) == [
            "memory:///fsrc/in/x.txt",
            "memory:///fsrc/in/y.txt",
        ]
    finally:
        fs.rm("/fsrc", recursive=True)


def test_rejects_missing_paths_and_non_ascii_charsets(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        text_source(str(tmp_path / "missing")).create_splits(1)
    assert text_source(str(tmp_path / "missing"), monitor=1.0).create_splits(2)[0].paths == ()
    with pytest.raises(ValueError):
        StreamFormat.text_line_format("UTF-16")
