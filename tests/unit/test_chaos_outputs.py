"""``cairn chaos`` reading what a run committed: finished part files only, and what a run
appended to a path the job writes itself."""

from __future__ import annotations

from pathlib import Path

from cairn.cli.chaos_outputs import appended_records, snapshot
from cairn.cli.chaos_sinks.files import read_committed_files


def test_only_visible_files_are_read_as_committed(tmp_path: Path) -> None:
    (tmp_path / "bucket").mkdir()
    (tmp_path / "part-a-0-0").write_text("a,1\na,2\n")
    (tmp_path / "bucket" / "part-b-1-0").write_text("b,1\n")
    (tmp_path / ".part-c-0-1.inprogress.job.0").write_text("c,1\n")
    (tmp_path / "_SUCCESS").write_text("")
    records = read_committed_files(str(tmp_path))
    assert sorted(r.text for r in records) == ["a,1", "a,2", "b,1"]
    assert {r.where for r in records} == {"part-a-0-0:1", "part-a-0-0:2", "bucket/part-b-1-0:1"}


def test_appended_lines_and_new_files_count_rewritten_files_whole(tmp_path: Path) -> None:
    log, other = tmp_path / "alerts.log", tmp_path / "shrunk.log"
    log.write_text("old\n")
    other.write_text("long old content\n")
    before = snapshot(str(tmp_path))
    with log.open("a") as f:
        f.write("new 1\nnew 2\n")
    other.write_text("short\n")
    (tmp_path / "fresh.log").write_text("fresh\n")
    texts = sorted(r.text for r in appended_records(str(tmp_path), before))
    assert texts == ["fresh", "new 1", "new 2", "short"]
    single = snapshot(str(log))
    with log.open("a") as f:
        f.write("again\n")
    assert [r.text for r in appended_records(str(log), single)] == ["again"]
