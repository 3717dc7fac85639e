"""``cairn checkpoints PATH [--id N] [--details] [--json]`` on checkpoint directories written by
the real coordinator and storage, and the checkpoint part of the terminal progress line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
from cairn.checkpoint.stats import CheckpointStatsTracker
from cairn.cli.main import main
from cairn.ids import CheckpointId
from cairn.observability.progress import checkpoint_progress, format_bytes
from cairn.observability.tables import NO_SUBTASK_STATS, checkpoints_report
from tests.unit._checkpoint_dirs import ALIGNED, UNALIGNED, job, old_format_checkpoint

LIST_HEADERS = [
    "id",
    "kind",
    "completed",
    "duration",
    "size",
    "status",
    "added",
    "signature",
    "alignment",
    "sync",
    "async",
    "persisted",
    "unaligned",
    "path",
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """job-a: checkpoint 1 (aligned) and 2 (unaligned); job-old: checkpoint 7, old metadata."""
    j = job(tmp_path)
    assert (j.checkpoint(ALIGNED), j.checkpoint(UNALIGNED)) == (1, 2)
    old_format_checkpoint(tmp_path)
    return tmp_path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["checkpoints", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def table(text: str) -> tuple[list[str], list[list[str]]]:
    """Header cells and rows of a rendered table, split on runs of 2+ spaces."""
    lines = text.strip().splitlines()
    assert set(lines[1].replace(" ", "")) == {"-"}
    return (
        re.split(r"\s{2,}", lines[0].strip()),
        [re.split(r"\s{2,}", line.strip()) for line in lines[2:]],
    )


def test_listing_shows_statistics_of_every_retained_checkpoint(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, str(root))
    assert code == 0
    headers, rows = table(out)
    assert headers == LIST_HEADERS
    by_id = {int(r[0]): dict(zip(headers, r, strict=True)) for r in rows}
    assert sorted(by_id) == [1, 2, 7]
    one, two, old = by_id[1], by_id[2], by_id[7]
    assert (one["duration"], one["size"], one["status"]) == ("35 ms", "96 B", "ok")
    assert one["added"] == "96 B"  # a full snapshot adds all of its size
    assert (one["alignment"], one["sync"], one["async"]) == ("12 ms", "3 ms", "9 ms")
    assert (one["persisted"], one["unaligned"]) == ("0 B", "no")
    assert (two["duration"], two["alignment"], two["sync"], two["async"]) == (
        "8 ms",
        "1 ms",
        "4 ms",
        "6 ms",
    )
    assert (two["persisted"], two["unaligned"]) == ("2.0 KiB", "yes")
    assert two["path"].endswith("job-a/chk-2")
    # Old metadata has the totals (no per-subtask rows) and lists the same way.
    assert (old["duration"], old["alignment"], old["sync"], old["async"]) == (
        "90 ms",
        "6 ms",
        "2 ms",
        "3 ms",
    )


def test_id_prints_the_per_subtask_table_of_one_checkpoint(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, str(root / "job-a"), "--id", "1")
    assert code == 0
    head, totals, *rest = out.strip().split("\n")
    assert head.startswith("checkpoint 1 (CHECKPOINT, ok) at ") and head.endswith("chk-1")
    assert "end-to-end 35 ms" in totals and "processed 500 B" in totals
    assert "3/3 subtasks acknowledged" in totals
    subtasks_text = "\n".join(rest[: rest.index("summary over subtasks:")])
    headers, rows = table(subtasks_text)
    assert headers[:2] == ["vertex", "subtask"] and headers[-1] == "unaligned"
    got = [dict(zip(headers, r, strict=True)) for r in rows]
    assert [(g["vertex"], g["subtask"], g["end-to-end"]) for g in got] == [
        ("0", "0", "10 ms"),
        ("0", "1", "20 ms"),
        ("1", "0", "35 ms"),
    ]
    agg = got[2]
    assert (agg["start delay"], agg["alignment"], agg["sync"], agg["async"]) == (
        "4 ms",
        "12 ms",
        "3 ms",
        "9 ms",
    )
    assert (agg["state"], agg["processed"], agg["persisted"], agg["unaligned"]) == (
        "64 B",
        "500 B",
        "0 B",
        "no",
    )
    summary_text = "\n".join(rest[rest.index("summary over subtasks:") + 1 :])
    s_headers, s_rows = table(summary_text)
    assert s_headers == ["figure", "count", "min", "avg", "p50", "p90", "p99", "max"]
    e2e = next(r for r in s_rows if r[0] == "end to end duration")
    assert e2e[1:] == ["3", "10 ms", "21.7 ms", "20 ms", "35 ms", "35 ms", "35 ms"]


def test_details_without_id_shows_the_newest_checkpoint(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, str(root / "job-a"), "--details")
    assert code == 0
    assert out.startswith("checkpoint 2 (UNALIGNED_CHECKPOINT, ok)")
    assert "persisted 2.0 KiB" in out


def test_old_metadata_says_it_has_no_subtask_rows(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, str(root), "--id", "7")
    assert code == 0
    assert out.strip().endswith(NO_SUBTASK_STATS)
    assert "end-to-end 90 ms" in out and "state 40 B" in out


def test_json_listing_and_details(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, str(root), "--json")
    assert code == 0
    rows = {r["id"]: r for r in json.loads(out)}
    assert rows[2]["checkpoint_type"] == "UNALIGNED_CHECKPOINT" and rows[2]["usable"]
    assert (rows[2]["persisted_data"], rows[2]["unaligned"], rows[2]["start_delay"]) == (
        2048,
        True,
        2,
    )
    assert (
        rows[1]["end_to_end_duration"],
        rows[1]["alignment_duration"],
        rows[1]["processed_data"],
        rows[1]["state_size"],
    ) == (35, 12, 500, 96)
    assert rows[7]["start_delay"] is None  # unknown in old metadata, not 0
    assert "subtasks" not in rows[1]

    code, out, _ = cli(capsys, str(root), "--id", "1", "--json")
    (one,) = json.loads(out)
    assert [s["end_to_end_duration"] for s in one["subtasks"]] == [10, 20, 35]
    assert one["subtasks"][2]["alignment_duration"] == 12
    assert one["subtask_summary"]["async_duration"]["max"] == 9
    code, out, _ = cli(capsys, str(root), "--id", "7", "--json")
    assert json.loads(out)[0]["subtasks"] is None


def test_unusable_checkpoint_is_listed_without_statistics(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (root / "job-a" / "chk-1" / "_metadata").write_text("garbage{")
    _, out, _ = cli(capsys, str(root / "job-a"))
    headers, rows = table(out)
    bad = dict(zip(headers, rows[0], strict=True))
    assert bad["status"].startswith("UNUSABLE") and "metadata" in bad["status"]
    assert [bad[h] for h in ("alignment", "sync", "async", "persisted", "unaligned")] == (["-"] * 5)


def test_unknown_id_and_missing_path_fail_with_a_message(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, str(root), "--id", "99")
    assert code == 1 and out == ""
    assert "no checkpoint 99" in err and "found: 1, 2, 7" in err
    code, _, err = cli(capsys, str(root / "nope"))
    assert code == 1 and "nope" in err
    with pytest.raises(LookupError):
        checkpoints_report(str(root), checkpoint_id=99)


# --- progress line ------------------------------------------------------------------------------


Acks = list[tuple[TaskKey, int, SubtaskCheckpointMetrics]]


def _tracker(*checkpoints: Acks, failed: int = 0) -> CheckpointStatsTracker:
    """Completed checkpoints 1, 2, ... (done 1 ms after their last ack), then failed ones."""
    t = CheckpointStatsTracker()
    cid = CheckpointId(0)
    for acks in checkpoints:
        cid = CheckpointId(cid + 1)
        t.report_pending(cid, 1000 * cid, len(acks))
        for task, at, metrics in acks:
            t.report_ack(cid, task, metrics, 1000 * cid + at)
        t.report_completed(cid, 1000 * cid + max(at for _, at, _ in acks) + 1)
    for _ in range(failed):
        cid = CheckpointId(cid + 1)
        t.report_pending(cid, 1000 * cid, 3)
        t.report_failed(cid, 1000 * cid + 5, "CHECKPOINT_EXPIRED")
    return t


def test_progress_shows_the_last_completed_checkpoint_and_counts() -> None:
    assert checkpoint_progress(_tracker(ALIGNED, failed=2).snapshot()) == (
        "last checkpoint #1 36ms align 12ms persisted 0B | checkpoints 1 ok 2 failed"
    )
    line = checkpoint_progress(_tracker(ALIGNED, UNALIGNED).snapshot())
    assert line == "last checkpoint #2 9ms align 1ms persisted 2.0KiB U | checkpoints 2 ok 0 failed"


def test_progress_before_any_checkpoint_and_without_checkpointing() -> None:
    assert checkpoint_progress(_tracker(failed=1).snapshot()) == (
        "last checkpoint - | checkpoints 0 ok 1 failed"
    )
    assert checkpoint_progress(None) == "checkpointing off"
    assert [format_bytes(n) for n in (0, 1023, 1024, 5 << 20, 3 << 30)] == [
        "0B",
        "1023B",
        "1.0KiB",
        "5.0MiB",
        "3.0GiB",
    ]
