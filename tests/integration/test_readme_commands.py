"""Every ``cairn`` command line of README.md and docs/*.md, run as written, as a new user would.

The README and the pages under ``docs/`` are read at test time: every line starting with
``cairn `` inside a ```bash block (its trailing ``# comment`` removed) must be one of
``COMMANDS`` (``_readme.py``), and each of those is run as a real subprocess (the ``cairn``
script next to this interpreter) in a temporary working directory. The line is split with
``shlex`` after substituting only these placeholders:

- ``job.py``: a file ``job.py`` in the working directory holding the README's own job (the
  ```python block under ``## A job``, read at test time), with ``/tmp/cairn-checkpoints`` and
  ``/tmp/sums`` replaced by temporary paths;
- ``/tmp/cairn-checkpoints``: that temporary checkpoint root;
- ``<job-id>``: the name of a real job directory under it;
- ``chk-12`` and ``--id 12``: the id of a real retained checkpoint of that job;
- ``spark://host:7077``: the URL of a standalone Spark cluster started on 127.0.0.1.

What each run must show: the output of the job under the sums directory (committed files
only) has one line per input number, and per key the running sums are the prefix sums of
that key's numbers, in the order they arrived (sorted, consecutive sums differ by exactly
the key's numbers, each once: nothing lost, nothing duplicated). At parallelism 2 a key's
numbers come from two source subtasks whose ranges interleave, so the order they arrived in
is not ascending; at parallelism 1 it always is.

Retained checkpoints (for ``--from-checkpoint`` and ``cairn checkpoints``) come from the
README job interrupted with Ctrl-C (SIGINT). A finished job deletes its checkpoints and the
README job, 1,000,000 numbers, ends ~1 s after its first checkpoint, so that run (and the
run resumed from its checkpoint) counts to 5,000,000 instead: the only change to the job.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cairn.experiments.skew import variant_label
from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import read_visible_lines
from cairn.testing.spark_cluster import StandaloneCluster
from tests.integration._readme import (
    CHECKPOINTS_ID,
    CHECKPOINTS_JOB,
    CHECKPOINTS_JSON,
    CHECKPOINTS_ROOT,
    COMMANDS,
    DEMO,
    DEMO_SKEW_SHORT,
    DOCTOR_DIR,
    RUN_CLUSTER,
    RUN_INPROCESS,
    RUN_LOCAL,
    RUN_RESUME,
    SQL_SCRIPT,
    cairn_argv,
    readme_commands,
    readme_job,
    readme_line,
    subprocess_env,
)
from tests.integration.skew_table import duration_ms, skew_table

README_CHECKPOINTS, README_SUMS = "/tmp/cairn-checkpoints", "/tmp/sums"
README_COUNT, INTERRUPTED_COUNT = 1_000_000, 5_000_000
SUBTASKS = {(0, 0), (0, 1), (1, 0), (1, 1)}  # (vertex, subtask): source -> keyed sum + sink


# --- running a command line --------------------------------------------------------------------


def run(
    line: str,
    cwd: Path,
    timeout: float,
    **placeholders: str,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        cairn_argv(readme_line(line), **placeholders),
        cwd=cwd,
        env=subprocess_env(cwd),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@dataclass(frozen=True)
class JobDir:
    """A working directory with ``job.py``, the README job writing under it."""

    cwd: Path
    checkpoints: Path  # replaces /tmp/cairn-checkpoints
    sums: Path  # replaces /tmp/sums


def job_dir(cwd: Path, count: int = README_COUNT, parallelism: int | None = None) -> JobDir:
    """``job.py`` in ``cwd``: the README job, its paths in ``cwd``, counting to ``count``;
    ``parallelism`` replaces the job's own ``env.set_parallelism(2)``."""
    text = readme_job()
    for original in (
        README_CHECKPOINTS,
        README_SUMS,
        f"{README_COUNT:_}",
        "env.set_parallelism(2)",
    ):
        assert original in text, f"the README job no longer has {original!r}"
    job = JobDir(cwd, cwd / "checkpoints", cwd / "sums")
    text = text.replace(README_CHECKPOINTS, str(job.checkpoints))
    text = text.replace(README_SUMS, str(job.sums)).replace(f"{README_COUNT:_}", f"{count:_}")
    if parallelism is not None:
        text = text.replace("env.set_parallelism(2)", f"env.set_parallelism({parallelism})")
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / "job.py").write_text(text)
    return job


# --- the job's output --------------------------------------------------------------------------


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def visible_files(directory: Path) -> Iterator[Path]:
    """Committed files under ``directory``, as ``read_visible_lines`` reads them (hidden and
    ``_``-prefixed names are in-progress or pending), without loading millions of lines."""
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for name in sorted(files):
            if not name.startswith((".", "_")):
                yield Path(root, name)


def count_lines(paths: Iterator[Path] | list[Path]) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += sum(1 for _ in f)
    return total


@dataclass(frozen=True)
class KeyedSums:
    lines: int
    problems: list[str]
    descents: int  # places where a key's numbers arrived in other than ascending order


def check_keyed_sums(directory: Path, count: int) -> KeyedSums:
    """The committed output of the README job over 1..``count``: ``"even,<sum>"`` and
    ``"odd,<sum>"`` lines, per key the running sums of its numbers in arrival order.

    Sorted, a key's sums are the prefix sums in arrival order, so the differences between
    consecutive sums are the numbers as they arrived: each of the key's numbers exactly
    once, with as many lines as numbers, or something was lost or duplicated.
    """
    sums = {"odd": array("q"), "even": array("q")}
    problems: list[str] = []
    lines = 0
    for path in visible_files(directory):
        with open(path, encoding="utf-8") as f:
            for line in f:
                lines += 1
                key, _, value = line.rstrip("\n").partition(",")
                if key not in sums or not value.isdigit():
                    problems.append(f"unexpected line {line!r} in {path.name}")
                    continue
                sums[key].append(int(value))
    descents = 0
    for key, first in (("odd", 1), ("even", 2)):  # odd: 1, 3, ...; even: 2, 4, ...
        expected = len(range(first, count + 1, 2))
        if len(sums[key]) != expected:
            problems.append(f"{key}: {len(sums[key]):,} lines, expected {expected:,}")
        seen = bytearray(count + 1)
        previous_sum = previous_number = 0
        for total in sorted(sums[key]):
            number = total - previous_sum
            if not (0 < number <= count and number % 2 == first % 2 and not seen[number]):
                problems.append(
                    f"{key}: sum {total:,} after {previous_sum:,}: "
                    + ("a duplicate" if number == 0 else f"{number:,} is not a new {key} number")
                )
                break
            seen[number] = 1
            descents += number < previous_number
            previous_sum, previous_number = total, number
    return KeyedSums(lines, problems[:10], descents)


def assert_exactly_once(directory: Path, count: int) -> KeyedSums:
    result = check_keyed_sums(directory, count)
    assert not result.problems, "\n".join(result.problems)
    assert result.lines == count
    return result


def assert_parallel(result: KeyedSums) -> None:
    assert result.descents > 0, (
        "each key's numbers arrived in ascending order, as from one source subtask: "
        "the job did not run at parallelism 2"
    )


# --- coverage ----------------------------------------------------------------------------------


def test_every_cairn_line_of_the_readme_is_run_here() -> None:
    shown = readme_commands()
    uncovered, gone = sorted(set(shown) - COMMANDS), sorted(COMMANDS - set(shown))
    assert not uncovered, (
        f"README.md or docs/*.md show cairn command lines this test does not run: "
        f"{uncovered}; add them to COMMANDS with a test that runs them"
    )
    assert not gone, f"README.md and docs/*.md no longer show {gone}; remove them from this test"


# --- cairn run ---------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_run_on_local_spark_where_p_2_sets_the_parallelism(tmp_path: Path) -> None:
    """The README job sets parallelism 2 itself; with ``env.set_parallelism(1)`` instead,
    only the line's ``-p 2`` can make it run at 2 (cairn run's options win over the script).
    (The README job as written runs on Spark in ``test_run_on_a_spark_cluster``.)"""
    job = job_dir(tmp_path, parallelism=1)
    done = run(RUN_LOCAL, job.cwd, timeout=220)
    assert_parallel(assert_exactly_once(job.sums, README_COUNT))
    # Spark's start-up banner and warnings a local job cannot act on stay off the terminal.
    for noise in ("Using Spark's default log4j profile", "NativeCodeLoader", "Traceback"):
        assert noise not in done.stderr, done.stderr
    assert not list(job.checkpoints.glob("*/chk-*")), "a finished job deletes its checkpoints"


@pytest.mark.timeout(120)
def test_run_inprocess(tmp_path: Path) -> None:
    job = job_dir(tmp_path)
    # No progress line to check: the job may end before the first one (1 s in).
    run(RUN_INPROCESS, job.cwd, timeout=100)
    assert_parallel(assert_exactly_once(job.sums, README_COUNT))


@pytest.mark.spark
@pytest.mark.cluster
@pytest.mark.timeout(300)
def test_run_on_a_spark_cluster(tmp_path: Path, standalone_cluster: StandaloneCluster) -> None:
    job = job_dir(tmp_path)
    cluster = standalone_cluster
    try:
        run(RUN_CLUSTER, job.cwd, timeout=200, **{"spark://host:7077": cluster.master_url})
    except AssertionError as error:
        raise AssertionError(f"{error}\n{cluster.log_tails()}") from None
    assert_parallel(assert_exactly_once(job.sums, README_COUNT))


# --- Ctrl-C, retained checkpoints --------------------------------------------------------------


@dataclass(frozen=True)
class Interrupted:
    job: JobDir
    returncode: int
    stderr: str
    job_id: str
    checkpoint_ids: tuple[int, ...]  # complete ones (with _metadata) left behind, oldest first
    committed: frozenset[Path]  # committed output files when the run ended
    committed_lines: int


def complete_checkpoints(job_path: Path) -> list[int]:
    return sorted(int(p.parent.name[4:]) for p in job_path.glob("chk-*/_metadata"))


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> Interrupted:
    """``cairn run --executor inprocess -p 2 job.py`` (5,000,000 numbers) interrupted with
    SIGINT once a checkpoint is complete and its output committed (so that a resumed run that
    started from scratch would write committed lines again)."""
    job = job_dir(tmp_path_factory.mktemp("interrupted"), count=INTERRUPTED_COUNT)
    argv = cairn_argv("cairn run --executor inprocess -p 2 job.py")
    proc = subprocess.Popen(
        argv,
        cwd=job.cwd,
        env=subprocess_env(job.cwd),
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # Ctrl-C reaches the job even when these tests run as a background job of a
        # non-interactive shell, which starts them with SIGINT ignored (inherited).
        preexec_fn=_default_sigint,
    )
    try:

        def committed_a_checkpoint() -> bool:
            assert proc.poll() is None, (
                f"the job ended (exit {proc.returncode}) before a checkpoint was committed:\n"
                + proc.communicate()[1]
            )
            return bool(
                list(job.checkpoints.glob("*/chk-*/_metadata"))
                and next(visible_files(job.sums), None)
            )

        wait_for(committed_a_checkpoint, 120, 0.02, "a completed checkpoint and committed sums")
        assert proc.poll() is None, (
            f"the job ended (exit {proc.returncode}) before it could be interrupted:\n"
            + proc.communicate()[1]
        )
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    left = list(job.checkpoints.iterdir())
    assert len(left) == 1, (
        f"after the Ctrl-C {job.checkpoints} holds {left} (one job directory expected); "
        f"exit {proc.returncode}, stderr:\n{stderr}"
    )
    (job_path,) = left
    committed = frozenset(visible_files(job.sums))
    return Interrupted(
        job,
        proc.returncode,
        stderr,
        job_path.name,
        tuple(complete_checkpoints(job_path)),
        committed,
        count_lines(sorted(committed)),
    )


def test_ctrl_c_ends_cairn_run_with_one_line_and_keeps_the_checkpoints(
    interrupted: Interrupted,
) -> None:
    assert interrupted.returncode == 130, interrupted.stderr
    assert "Traceback" not in interrupted.stderr, interrupted.stderr
    job_path = interrupted.job.checkpoints / interrupted.job_id
    last = interrupted.stderr.splitlines()[-1]
    match = re.fullmatch(
        rf"cairn run: interrupted; job {interrupted.job_id}: checkpoints "
        rf"under file://{re.escape(str(job_path))}, latest completed chk-(\d+) "
        r"\(the same command resumes from it; --fresh starts from scratch\)",
        last,
    )
    assert match, interrupted.stderr
    # The job dies with the process, as after a crash: the latest completed checkpoint stays
    # (a newer one may have completed between the message and the end of the process).
    assert interrupted.checkpoint_ids, f"no complete checkpoint left in {job_path}"
    assert int(match.group(1)) <= interrupted.checkpoint_ids[-1]
    assert 0 < interrupted.committed_lines < INTERRUPTED_COUNT


def _rows(table: str) -> list[list[str]]:
    """Data rows of a ``cairn checkpoints`` table, split on runs of 2+ spaces."""
    lines = table.strip().splitlines()
    assert lines[0].split()[:6] == ["id", "kind", "completed", "duration", "size", "status"]
    return [re.split(r"\s{2,}", line.strip()) for line in lines[2:]]


def _assert_lists_the_checkpoints(table: str, interrupted: Interrupted) -> None:
    job_path = interrupted.job.checkpoints / interrupted.job_id
    rows = _rows(table)
    on_disk = sorted(int(p.name[4:]) for p in job_path.glob("chk-*"))
    assert [int(row[0]) for row in rows] == on_disk, table
    usable = [int(row[0]) for row in rows if row[5] == "ok"]
    assert usable == list(interrupted.checkpoint_ids), table
    for row in rows:
        assert row[1] == "checkpoint" and row[-1] == str(job_path / f"chk-{row[0]}"), row


def test_checkpoints_of_the_root(interrupted: Interrupted) -> None:
    done = run(
        CHECKPOINTS_ROOT,
        interrupted.job.cwd,
        timeout=60,
        **{README_CHECKPOINTS: str(interrupted.job.checkpoints)},
    )
    _assert_lists_the_checkpoints(done.stdout, interrupted)


def test_checkpoints_of_the_job(interrupted: Interrupted) -> None:
    done = run(
        CHECKPOINTS_JOB,
        interrupted.job.cwd,
        timeout=60,
        **{README_CHECKPOINTS: str(interrupted.job.checkpoints), "<job-id>": interrupted.job_id},
    )
    _assert_lists_the_checkpoints(done.stdout, interrupted)


def test_doctor_of_retained_checkpoints(interrupted: Interrupted) -> None:
    done = run(
        DOCTOR_DIR,
        interrupted.job.cwd,
        timeout=60,
        **{README_CHECKPOINTS: str(interrupted.job.checkpoints), "<job-id>": interrupted.job_id},
    )
    first = done.stdout.splitlines()[0]
    assert first.startswith("cairn doctor: ") and str(interrupted.job.checkpoints) in first
    assert f"({len(interrupted.checkpoint_ids)} checkpoints looked at)" in first, done.stdout


def test_checkpoints_of_one_id(interrupted: Interrupted) -> None:
    latest = interrupted.checkpoint_ids[-1]
    done = run(
        CHECKPOINTS_ID,
        interrupted.job.cwd,
        timeout=60,
        **{
            README_CHECKPOINTS: str(interrupted.job.checkpoints),
            "<job-id>": interrupted.job_id,
            "--id 12": f"--id {latest}",
        },
    )
    lines = done.stdout.splitlines()
    path = interrupted.job.checkpoints / interrupted.job_id / f"chk-{latest}"
    assert lines[0] == f"checkpoint {latest} (CHECKPOINT, ok) at {path}", done.stdout
    assert "4/4 subtasks acknowledged" in lines[1], done.stdout
    assert lines[2].split()[:2] == ["vertex", "subtask"], done.stdout
    end = lines.index("summary over subtasks:")
    rows = {(int(line.split()[0]), int(line.split()[1])) for line in lines[4:end]}
    assert rows == SUBTASKS, done.stdout


def test_checkpoints_details_as_json(interrupted: Interrupted) -> None:
    done = run(
        CHECKPOINTS_JSON,
        interrupted.job.cwd,
        timeout=60,
        **{README_CHECKPOINTS: str(interrupted.job.checkpoints)},
    )
    (newest,) = json.loads(done.stdout)
    assert newest["id"] == interrupted.checkpoint_ids[-1], newest
    assert newest["job_id"] == interrupted.job_id and newest["usable"] is True, newest
    assert newest["num_subtasks"] == len(SUBTASKS), newest
    assert {(s["vertex_id"], s["subtask_index"]) for s in newest["subtasks"]} == SUBTASKS


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_run_from_a_retained_checkpoint_continues_exactly_once(
    interrupted: Interrupted,
) -> None:
    latest = interrupted.checkpoint_ids[-1]
    done = run(
        RUN_RESUME,
        interrupted.job.cwd,
        timeout=280,
        **{
            README_CHECKPOINTS: str(interrupted.job.checkpoints),
            "<job-id>": interrupted.job_id,
            "chk-12": f"chk-{latest}",
        },
    )
    # Everything the two runs committed, each number's line once: a run started from
    # scratch would have written the interrupted run's committed lines again.
    assert_exactly_once(interrupted.job.sums, INTERRUPTED_COUNT)
    resumed = count_lines(sorted(set(visible_files(interrupted.job.sums)) - interrupted.committed))
    assert resumed == INTERRUPTED_COUNT - interrupted.committed_lines
    # Checkpoint ids continue from the restored one.
    ids = [int(n) for n in re.findall(r"last checkpoint #(\d+)", done.stderr)]
    assert ids and min(ids) > latest, done.stderr


# --- cairn demo --------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_demo(tmp_path: Path) -> None:
    done = run(DEMO, tmp_path, timeout=220)
    assert re.search(r"killing worker \d .* with SIGKILL", done.stdout), done.stdout
    assert "with 1 restart(s)" in done.stdout, done.stdout
    assert "Output: 600,000 lines (expected 600,000)" in done.stdout, done.stdout
    assert "EXACTLY-ONCE VERIFIED" in done.stdout, done.stdout
    # Not only the demo's word: its committed output, read here, has every line once.
    (output,) = tmp_path.glob("cairn-demo-*")  # TMPDIR is tmp_path
    lines = read_visible_lines(str(output / "data"))
    assert len(lines) == len(set(lines)) == 600_000


def assert_skew_table(stdout: str, variants: list[str]) -> None:
    rows = skew_table(stdout)
    assert list(rows) == [variant_label(v) for v in variants], stdout
    for row in rows.values():
        assert int(row["completed"]) >= 1 and int(row["failed"]) == 0, stdout
    aligned = rows["aligned"]
    assert aligned["unaligned"] == f"0/{aligned['completed']}", stdout
    assert aligned["persisted max"] == "0 B", stdout
    for variant in ("unaligned", "debloat"):
        if variant in variants:
            row = rows[variant_label(variant)]
            assert row["unaligned"] == f"{row['completed']}/{row['completed']}", stdout
            assert row["persisted max"] != "0 B", stdout
            assert duration_ms(row["e2e p50"]) < duration_ms(aligned["e2e p50"]), stdout
    if "timeout" in variants:  # aligned checkpoints take seconds here: all switch after 1 s
        row = rows[variant_label("timeout")]
        assert not row["unaligned"].startswith("0/"), stdout


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_demo_skew_two_variants(tmp_path: Path) -> None:
    done = run(DEMO_SKEW_SHORT, tmp_path, timeout=220)
    assert_skew_table(done.stdout, ["aligned", "unaligned"])


# --- cairn sql ---------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.timeout(180)
def test_sql_script_runs_its_insert_on_local_spark_at_p_2(tmp_path: Path) -> None:
    """The README's ``cairn sql -f job.sql -p 2``: a bounded datagen table into files, the
    INSERT's job run to its end on local Spark at parallelism 2 before the command exits."""
    out = tmp_path / "out"
    (tmp_path / "job.sql").write_text(
        "CREATE TABLE numbers (n BIGINT) WITH ('connector' = 'datagen',"
        " 'number-of-rows' = '100', 'fields.n.kind' = 'sequence',"
        " 'fields.n.start' = '1', 'fields.n.end' = '100');\n"
        f"CREATE TABLE doubled (n BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}',"
        " 'format' = 'csv');\n"
        "INSERT INTO doubled SELECT n * 2 FROM numbers;\n"
    )
    run(SQL_SCRIPT, tmp_path, timeout=170)
    rows = [
        int(line)
        for f in out.rglob("*")
        if f.is_file() and not f.name.startswith(".")
        for line in f.read_text().split()
    ]
    assert sorted(rows) == [2 * n for n in range(1, 101)]
