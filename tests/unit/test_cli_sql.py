"""``cairn sql -f``: a SQL script's statements split as Flink's SQL client splits them, run in
order as table jobs, the first failure named by its file and line and nothing after it run."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.cli.main import main
from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table.sql.script import split_statements

SCRIPT = """-- numbers into the print sink, then queries
CREATE TABLE src (a INT) WITH (
  'connector' = 'datagen', 'number-of-rows' = '3',
  'fields.a.kind' = 'sequence', 'fields.a.start' = '1', 'fields.a.end' = '3'
);
CREATE TABLE out (a INT) WITH ('connector' = 'print', 'print-identifier' = 'out');
BEGIN STATEMENT SET;
INSERT INTO out SELECT a * 10 FROM src;
INSERT INTO out SELECT a + 100 FROM src WHERE a <> 2;
END;
SELECT a, a * 2 AS b FROM src WHERE a <> 2;
SELECT nope FROM src;
INSERT INTO out SELECT a FROM src;
"""


@pytest.fixture(autouse=True)
def _context_defaults_reset() -> object:
    """``cairn sql`` sets the process's job defaults (``-p``, ``-D``...), as ``cairn run``
    does for its script: put them back for the tests that come after."""
    yield
    reset_context_defaults()


def test_statements_split_outside_strings_names_and_comments() -> None:
    text = (
        "CREATE TABLE t (`a;b` INT) WITH ('k' = 'v;w''x');\n"
        "/* one; */ -- two;\n"
        "EXECUTE STATEMENT SET BEGIN INSERT INTO t SELECT 1; INSERT INTO t SELECT 2; END;\n"
        "SELECT \"x;y\" /*+ OPTIONS('a'='b') */ FROM t"
    )
    assert split_statements(text) == [
        (1, "CREATE TABLE t (`a;b` INT) WITH ('k' = 'v;w''x')"),
        (3, "EXECUTE STATEMENT SET BEGIN INSERT INTO t SELECT 1;\nINSERT INTO t SELECT 2;\nEND"),
        (4, "SELECT \"x;y\" /*+ OPTIONS('a'='b') */ FROM t"),
    ]
    sql_client_set = "BEGIN STATEMENT SET;\nINSERT INTO t SELECT 1;\nEND;"
    assert split_statements(sql_client_set) == [
        (1, "EXECUTE STATEMENT SET BEGIN\nINSERT INTO t SELECT 1;\nEND")
    ]
    with pytest.raises(ValueError, match="line 1: the statement set is not closed"):
        split_statements("BEGIN STATEMENT SET;\nINSERT INTO t SELECT 1;")
    with pytest.raises(ValueError, match="line 2: the quote ' opened here is not closed"):
        split_statements("SELECT 1;\nSELECT 'x;")


def test_a_script_runs_in_order_and_stops_at_the_first_failure_naming_its_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "job.sql"
    script.write_text(SCRIPT)
    code = main(["sql", "-f", str(script), "--executor", "inprocess", "-p", "1"])
    out, err = capfd.readouterr()
    assert code == 1
    printed = [line for line in out.splitlines() if line.startswith("out>")]
    assert sorted(printed) == [
        "out> +I[101]",
        "out> +I[103]",
        "out> +I[10]",
        "out> +I[20]",
        "out> +I[30]",
    ]
    assert "| +I |           1 |           2 |" in out and "2 rows in set" in out
    assert f"{script}, the statement at line 12 failed" in err
    assert "Column 'nope' not found" in err
    assert "out> +I[1]" not in out, "nothing after the failing statement runs"


def test_a_missing_script_fails_with_a_short_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sql", "-f", str(tmp_path / "none.sql")]) == 2
    assert "none.sql" in capsys.readouterr().err
