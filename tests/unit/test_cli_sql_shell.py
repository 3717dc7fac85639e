"""``cairn sql`` without ``-f``: the interactive shell reads statements across lines, runs
each in one session, prints results as tableau and errors as Flink's SQL client does, keeps
going after an error or a Ctrl-C, and ends on ``QUIT;`` or the end of input."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.cli.sql_shell import CONTINUATION, PROMPT, SqlShell
from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table import EnvironmentSettings, TableEnvironment
from cairn.table.sql.script import complete_part

SOURCE = (
    "CREATE TABLE src (a INT) WITH ('connector' = 'datagen', 'number-of-rows' = '3',",
    " 'fields.a.kind' = 'sequence', 'fields.a.start' = '1', 'fields.a.end' = '3');",
)


@pytest.fixture(autouse=True)
def _context_defaults_reset() -> Iterator[None]:
    yield
    reset_context_defaults()


def _session(lines: list[str | BaseException]) -> tuple[str, list[str]]:
    """Run a shell over ``lines`` (an exception is raised by that read); its output and the
    prompts it showed."""
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "1")
    feed = iter(lines)
    prompts: list[str] = []

    def read(prompt: str) -> str:
        prompts.append(prompt)
        item = next(feed, None)
        if item is None:
            raise EOFError
        if isinstance(item, BaseException):
            raise item
        return item

    out = io.StringIO()
    assert SqlShell(t_env, read, out).run() == 0
    return out.getvalue(), prompts


def test_complete_part_waits_for_the_end_of_a_statement_set() -> None:
    text = "BEGIN STATEMENT SET;\nINSERT INTO t SELECT 1;\n"
    assert complete_part(text) == ("", text)
    assert complete_part(text + "END;\nSELECT 'a") == (text + "END;", "\nSELECT 'a")


def test_statements_across_lines_errors_and_ctrl_c_leave_the_session_going() -> None:
    output, prompts = _session(
        [
            *SOURCE,
            "SELECT a, 'x;y' AS s",  # the ; in a string does not end it
            "FROM src WHERE a <> 2;",
            "SELECT nope FROM src;",  # an error: the session goes on
            "SELECT a FROM",
            KeyboardInterrupt(),  # Ctrl-C drops the half-typed statement
            "SELECT a * 10 AS t FROM src WHERE a = 3; QUIT;",
            "SELECT 'never run';",
        ]
    )
    assert prompts[:3] == [PROMPT, CONTINUATION, PROMPT]
    assert "| +I |           1 |                            x;y |" in output
    assert "x;y |\n| +I |           2" not in output and "2 rows in set" in output
    assert (
        "[ERROR] Could not execute SQL statement. Reason:\nSQL validation failed. From line 1,"
        " column 8 to line 1, column 11: Column 'nope' not found in any table" in output
    )
    assert "|          30 |" in output and "1 row in set" in output
    assert "Shutting down the session" in output and "never run" not in output


def test_an_insert_prints_its_job_or_waits_with_dml_sync(tmp_path: Path) -> None:
    sink = (
        "CREATE TABLE out_t (a INT) WITH ('connector' = 'filesystem',"
        f" 'path' = '{tmp_path}', 'format' = 'csv');"
    )
    output, _ = _session(
        [
            *SOURCE,
            sink,
            "SET 'table.dml-sync' = 'true';",
            "INSERT INTO out_t SELECT a FROM src;",
            "SET 'sql-client.execution.result-mode' = 'changelog';",
        ]
    )
    assert "[INFO] Complete execution of the SQL update statement" in output
    written = sorted(
        line
        for f in tmp_path.rglob("*")
        if f.is_file() and not f.name.startswith(".")
        for line in f.read_text().split()
    )
    assert written == ["1", "2", "3"], "with dml-sync the job ended before the next statement"
    assert "'tableau' only, not 'changelog'" in output
    asynchronous, _ = _session(
        [*SOURCE, sink.replace("out_t", "o2"), "INSERT INTO o2 SELECT a FROM src;"]
    )
    assert "SQL update statement has been successfully submitted" in asynchronous
    assert "Job ID: " in asynchronous


def test_the_cli_shell_reads_its_standard_input(tmp_path: Path) -> None:
    script = "\n".join([*SOURCE, "SELECT SUM(a) AS total FROM src;", "QUIT;"]) + "\n"
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "sql", "--executor", "inprocess", "-p", "1"],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| +I |           6 |" in done.stdout or "|           6 |" in done.stdout


def test_help_lists_reset_and_reset_undoes_a_set() -> None:
    out, _ = _session(
        [
            "HELP;",
            "SET 'pipeline.name' = 'mine';",
            "RESET 'pipeline.name';",
            "SET;",
            "SHOW CURRENT CATALOG;",
            "QUIT;",
        ]
    )
    assert "RESET\t\tResets a session configuration property. Syntax: \"RESET '<key>';\"." in out
    # SET; after the RESET lists the keys still set: not pipeline.name
    assert "parallelism.default" in out and "pipeline.name" not in out and "mine" not in out
    assert "| current catalog name |" in out and "default_catalog" in out
