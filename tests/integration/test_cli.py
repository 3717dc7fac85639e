"""The ``cairn`` command line end to end: ``run`` (with ``-p``, ``--executor`` and
``--from-checkpoint``), ``checkpoints`` on retained checkpoints, and ``demo`` on local Spark.

``cairn run`` is called in-process (``cairn.cli.main.main``) on the in-process executor; the
demo runs as a subprocess because it starts its own local Spark.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cairn.cli.main import main
from cairn.testing.sequence_jobs import read_visible_lines
from tests._cli import cli_in_process
from tests.integration.jobs import expected_lines

REPO_ROOT = Path(__file__).resolve().parents[2]
KEYED_SUM = REPO_ROOT / "examples" / "keyed_sum.py"
RECORDS, KEYS = 12_000, 10

# A job script as a user writes it: argv = out dir, checkpoint dir [, cancel after checkpoint].
JOB_SCRIPT = f"""
import sys
import time

from cairn.common import WatermarkStrategy
from cairn.common.serialization import Encoder
from cairn.datastream import ExternalizedCheckpointRetention, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.file_system import FileSink
from cairn.testing.sequence_jobs import SequenceCheck, SequenceGenerator

out, checkpoints = sys.argv[1], sys.argv[2]
cancel_after = int(sys.argv[3]) if len(sys.argv) > 3 else None

env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(150)
config = env.get_checkpoint_config()
config.set_checkpoint_storage("file://" + checkpoints)
config.set_externalized_checkpoint_retention(
    ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
config.set_number_of_retained_checkpoints(3)
source = DataGeneratorSource(SequenceGenerator({KEYS}), {RECORDS},
                             RateLimiterStrategy.per_second(6000))
(
    env.from_source(source, WatermarkStrategy.no_watermarks(), "sequence")
    .uid("sequence-source")
    .key_by(lambda record: record[0])
    .process(SequenceCheck())
    .uid("sequence-check")
    .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder()).build())
    .uid("file-sink")
)
client = env.execute_async("cli-job")
if cancel_after is not None:
    master = client.job_master
    while master.end_ms is None:
        latest = master.coordinator.latest_completed_id() if master.coordinator else None
        if latest is not None and latest >= cancel_after:
            client.cancel()
            break
        time.sleep(0.01)
client.get_job_execution_result(timeout=120)
print("job", client.get_job_id(), client.get_job_status().name)
"""


@pytest.fixture(scope="module")
def job_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    script = tmp_path_factory.mktemp("script") / "sequence_job.py"
    script.write_text(JOB_SCRIPT)
    return script


def _run_cli(*argv: str) -> None:
    """``cairn ...`` in this process; undoes what ``cairn run`` changes process-wide
    (sys.argv, sys.path, the context defaults)."""
    assert cli_in_process(argv) == 0


@pytest.fixture(scope="module")
def cancelled_run(
    job_script: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path]:
    """(output dir, job checkpoint dir) of a run cancelled after its 4th checkpoint."""
    root = tmp_path_factory.mktemp("cancelled")
    out, checkpoints = root / "out", root / "checkpoints"
    _run_cli(
        "run",
        "--executor",
        "inprocess",
        "-p",
        "2",
        str(job_script),
        str(out),
        str(checkpoints),
        "4",
    )
    (job_dir,) = checkpoints.iterdir()
    return out, job_dir


def _rows(table: str) -> list[list[str]]:
    """Data rows of a ``cairn checkpoints`` table, split on runs of 2+ spaces."""
    lines = table.strip().splitlines()
    assert lines[0].split()[:6] == ["id", "kind", "completed", "duration", "size", "status"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    return [re.split(r"\s{2,}", line.strip()) for line in lines[2:]]


def test_checkpoints_lists_retained_checkpoints_and_flags_a_corrupt_one(
    cancelled_run: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, job_dir = cancelled_run
    copy = tmp_path / "checkpoints" / job_dir.name
    shutil.copytree(job_dir, copy)
    kept = sorted(int(p.name.split("-")[1]) for p in copy.glob("chk-*"))
    assert len(kept) == 3 and kept[-1] >= 4, f"3 retained checkpoints expected: {kept}"
    oldest, middle, newest = kept
    # Three ways to be unusable: a state file lost, garbage metadata, never completed.
    state_files = [p for p in (copy / f"chk-{oldest}").iterdir() if p.name != "_metadata"]
    assert state_files, "a checkpoint of a keyed job has state files"
    state_files[0].unlink()
    (copy / f"chk-{middle}" / "_metadata").write_text("garbage{")
    aborted = newest + 1
    (copy / f"chk-{aborted}").mkdir()

    capsys.readouterr()
    _run_cli("checkpoints", str(tmp_path / "checkpoints"))
    rows = _rows(capsys.readouterr().out)

    assert [int(row[0]) for row in rows] == [*kept, aborted]
    for row in rows:
        assert row[1] == "checkpoint" and row[-1].endswith(f"chk-{row[0]}"), row
    by_id = {int(row[0]): row for row in rows}
    for cid, status in ((oldest, "missing"), (newest, "ok")):
        completed, duration, size, state = by_id[cid][2:6]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", completed), completed
        assert re.fullmatch(r"\d+ ms", duration), duration
        assert re.fullmatch(r"\d+(\.\d)? (B|KiB|MiB)", size), size
        assert status in state and (state == "ok") == (cid == newest), state
    assert by_id[oldest][5].startswith("UNUSABLE")
    for cid, problem in ((middle, "metadata"), (aborted, "incomplete")):
        assert by_id[cid][2:5] == ["-", "-", "-"]
        assert by_id[cid][5].startswith("UNUSABLE") and problem in by_id[cid][5], by_id[cid]


def test_run_prints_the_keyed_sums_of_the_seed_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _run_cli("run", "--executor", "inprocess", "-p", "2", str(KEYED_SUM))
    out = capsys.readouterr().out.splitlines()
    assert out[-3:] == [
        "parallelism: 2",
        "even: 2 6 12 20 30 42 56 72 90 110",
        "odd: 1 4 9 16 25 36 49 64 81 100",
    ]


def test_options_after_the_script_stop_the_run_with_the_corrected_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``-p 2`` after the script once ran the job at parallelism 1 (and ``--from-checkpoint``
    from scratch, duplicating committed output): now nothing runs and cairn says what to type."""
    assert main(["run", "--executor", "inprocess", str(KEYED_SUM), "-p", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", "the job must not run"
    assert f"cairn run --executor inprocess -p 2 {KEYED_SUM}" in captured.err
    assert f"{KEYED_SUM} -- -p 2" in captured.err


def test_arguments_after_a_double_dash_are_the_scripts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _run_cli("run", "--executor", "inprocess", str(KEYED_SUM), "--", "-p", "2")
    out = capsys.readouterr().out
    assert "parallelism: 1" in out and "odd: 1 4 9 16 25 36 49 64 81 100" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["-D", "execution.checkpointing.dir=foo://bucket/x"],
            "unknown filesystem scheme 'foo' in 'foo://bucket/x'",
        ),
        (
            ["-D", "execution.checkpointing.interval=abc"],
            "invalid value 'abc' for configuration option 'execution.checkpointing.interval'",
        ),
        (["-D", "no.such.option=1"], "no.such.option"),
        (
            ["--from-checkpoint", "/nonexistent/chk-3"],
            "/nonexistent/chk-3: no such checkpoint, savepoint or directory",
        ),
    ],
)
def test_expected_errors_print_one_line_without_a_traceback(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = cli_in_process(["run", "--executor", "inprocess", *argv, str(KEYED_SUM)])
    err = capsys.readouterr().err
    assert status == 1
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("cairn run: ")]
    assert len(lines) == 1 and message in lines[0], err


def test_run_from_a_retained_checkpoint_continues_exactly_once(
    cancelled_run: tuple[Path, Path],
    job_script: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, job_dir = cancelled_run
    before = read_visible_lines(str(out))
    assert 0 < len(before) < RECORDS, "the cancelled run must have committed part of the data"
    latest = max(job_dir.glob("chk-*/_metadata"), key=lambda p: int(p.parent.name[4:])).parent

    _run_cli(
        "run",
        "--executor",
        "inprocess",
        "-p",
        "2",
        "--from-checkpoint",
        str(latest),
        str(job_script),
        str(out),
        str(tmp_path / "checkpoints"),
    )

    assert "FINISHED" in capsys.readouterr().out
    combined = read_visible_lines(str(out))
    assert len(combined) - len(before) < RECORDS, "the restored run started from scratch"
    assert sorted(combined) == expected_lines(RECORDS, KEYS)
