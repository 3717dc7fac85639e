"""A user's exception in ``cairn run`` prints a short report (the operator, the record, the
user's own frame, what Cairn did, where the whole traceback is), not the chained tracebacks;
``-v`` keeps the full traceback. Runs the job in process (no Spark)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from cairn.cli.failure_report import MAX_LINES
from cairn.cli.main import main

JOB = textwrap.dedent(
    """\
    from cairn.datastream import StreamExecutionEnvironment

    def parse(line):
        key, value = line.split(",")
        return key, int(value)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection(["a,1", "b,2", "c,x"]).map(parse).name("parse").uid("parse").print()
    env.execute("err-demo")
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(JOB)
    return path


def test_a_user_exception_is_a_short_report(
    script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # cairn run replaces it
    code = main(["run", "--executor", "inprocess", str(script)])
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    start = next(i for i, line in enumerate(err) if line.startswith("Job "))
    report = err[start:]
    assert len(report) <= MAX_LINES, report
    assert "failed: ValueError: invalid literal for int() with base 10: 'x'" in report[0]
    assert "  in operator parse (uid parse), subtask 0" in report
    assert "  record: 'c,x'" in report
    assert f"  {script}:5 in parse" in report
    assert "      return key, int(value)" in report
    assert report[-2] == "Not restarted: restart strategy 'none' (no restarts)."
    assert not any("/cairn/" in line and "Full traceback" not in line for line in report)
    log = Path(report[-1].removeprefix("Full traceback: ").removesuffix(" (or run with -v)"))
    full = log.read_text()
    assert "--- remote traceback ---" in full and "line 5, in parse" in full
    assert "Traceback (most recent call last)" not in "\n".join(err)


def test_verbose_keeps_the_whole_traceback(
    script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairn.common.exceptions import JobExecutionException

    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(JobExecutionException) as raised:
        main(["-v", "run", "--executor", "inprocess", str(script)])
    assert "invalid literal" in str(raised.value)
