"""Compiled plans (``COMPILE PLAN`` / ``EXECUTE PLAN``): a table job's uids pinned in a file.

The key property: a ``GROUP BY`` behind a ``WHERE`` is compiled to a plan file, run and
stopped with a savepoint; its statement is edited in the file (another filter); executing the
edited plan restores the aggregate's counts (``-U``/``+U`` from the restored count), while the
same edited statement run without the plan gets new uids and starts from nothing (``+I``).
Around it: the JSON round trip and its determinism, the SQL statements and their error
positions, a fresh session executing a plan from its stored DDL, and the refusals (another
shape, another state layout, an existing file, a table the plan holds only by name).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.table import (
    EnvironmentSettings,
    PlanReference,
    SqlParserError,
    TableEnvironment,
    TableException,
)
from cairn.table.plan_uids import NodeEntry, pinned_uids
from cairn.table.sql.dialect import CompilePlan, ExecutePlan
from cairn.table.sql.parse import parse_statement

from ._print_changes import changes, first_change_per_key, read_until

EVENTS = (
    "CREATE TABLE events (k INT, v BIGINT) WITH ('connector' = 'datagen', {rows},"
    " 'fields.k.min' = '0', 'fields.k.max' = '2',"
    " 'fields.v.kind' = 'sequence', 'fields.v.start' = '1', 'fields.v.end' = '100000000')"
)
COUNTS = (
    "CREATE TABLE counts (k INT, n BIGINT)"
    " WITH ('connector' = 'print', 'print-identifier' = 'counts')"
)
QUERY = "INSERT INTO counts SELECT k, COUNT(*) AS n FROM events WHERE v > 0 GROUP BY k"


def _t_env(conf: dict[str, str] | None = None, rows: str = "'number-of-rows' = '30'") -> Any:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for key, value in {"cairn.executor": "inprocess", "parallelism.default": "1"}.items():
        t_env.get_config().set(key, value)
    for key, value in (conf or {}).items():
        t_env.get_config().set(key, value)
    if rows:
        t_env.execute_sql(EVENTS.format(rows=rows))
        t_env.execute_sql(COUNTS)
    return t_env


# -- the file --------------------------------------------------------------------------------


def test_a_plan_round_trips_through_json_and_compiles_deterministically(tmp_path: Path) -> None:
    t_env = _t_env()
    text = t_env.compile_plan_sql(QUERY).as_json_string()
    assert _t_env().compile_plan_sql(QUERY).as_json_string() == text  # another session too
    document = json.loads(text)
    assert document["statements"] == [QUERY]
    assert [o["identifier"].split(".")[-1] for o in document["catalogObjects"]] == [
        "`counts`",
        "`events`",
    ]
    assert document["catalogObjects"][1]["definition"].startswith("CREATE TABLE events")
    kinds = [(n["type"], n["uid"] is not None, n["state"] is not None) for n in document["nodes"]]
    assert kinds == [
        ("DataStreamScan", False, False),
        ("Calc", True, False),
        ("GroupAggregate", True, True),
    ]
    assert t_env.load_plan(PlanReference.from_json_string(text)).as_json_string() == text
    path = tmp_path / "plans" / "plan.json"
    t_env.compile_plan_sql(QUERY).write_to_file(path)
    assert path.read_text() == text
    assert t_env.load_plan(PlanReference.from_file(path)).as_json_string() == text


def test_an_existing_plan_file_is_kept_unless_recompiling_is_forced(tmp_path: Path) -> None:
    t_env = _t_env()
    path = tmp_path / "plan.json"
    older = QUERY.replace("v > 0", "v > 5")
    t_env.compile_plan_sql(older).write_to_file(path)
    kept = path.read_text()
    plan = t_env.compile_plan_sql(QUERY)
    with pytest.raises(TableException, match=r"Cannot overwrite the plan file .*force-recompile"):
        plan.write_to_file(path)
    plan.write_to_file(path, ignore_if_exists=True)
    assert path.read_text() == kept
    with pytest.raises(TableException, match="Cannot overwrite the plan file"):
        t_env.execute_sql(f"COMPILE PLAN '{path}' FOR {QUERY}")
    t_env.execute_sql(f"COMPILE PLAN '{path}' IF NOT EXISTS FOR {QUERY}")
    assert path.read_text() == kept
    t_env.get_config().set("table.plan.force-recompile", "true")
    t_env.execute_sql(f"COMPILE PLAN '{path}' FOR {QUERY}")
    assert json.loads(path.read_text())["statements"] == [QUERY]


def test_a_file_that_is_not_a_plan_is_refused_when_loaded(tmp_path: Path) -> None:
    t_env = _t_env()
    for text, detail in (("[", "Expecting value"), ("{}", "no field 'statements'")):
        with pytest.raises(TableException, match=f"not a compiled plan of Cairn: {detail}"):
            t_env.load_plan(PlanReference.from_json_string(text))
    with pytest.raises(TableException, match="Cannot load the plan file"):
        t_env.load_plan(PlanReference.from_file(tmp_path / "missing.json"))
    with pytest.raises(TableException, match="only accepts a single SQL statement of type INSERT"):
        t_env.compile_plan_sql("SELECT * FROM events")


# -- SQL -------------------------------------------------------------------------------------


def test_compile_and_execute_plan_statements_parse() -> None:
    node = parse_statement(f"COMPILE PLAN 'p.json' IF NOT EXISTS FOR {QUERY};")
    assert isinstance(node, CompilePlan) and node.this.this == "p.json"
    assert node.args["exists"] and not node.args.get("execute")
    assert [t.this for t in node.args["texts"]] == [QUERY]
    both = parse_statement(
        "COMPILE AND EXECUTE PLAN 'p.json' FOR STATEMENT SET BEGIN\n"
        f"  {QUERY};\n  INSERT INTO counts SELECT 1, 2;\nEND;"
    )
    assert isinstance(both, CompilePlan) and both.args["execute"]
    assert [t.this for t in both.args["texts"]] == [QUERY, "INSERT INTO counts SELECT 1, 2"]
    executed = parse_statement("EXECUTE PLAN '/tmp/p.json';")
    assert isinstance(executed, ExecutePlan) and executed.this.this == "/tmp/p.json"


@pytest.mark.parametrize(
    ("sql", "line", "column", "message"),
    [
        ("EXECUTE PLAN p.json", 1, 14, "takes the plan file's path"),
        ("EXECUTE PLAN 'p.json' 'q'", 1, 23, "takes only the plan file's path"),
        ("COMPILE PLAN 'p.json' INSERT INTO t SELECT 1", 1, 23, "Expected FOR"),
        ("COMPILE PLAN 'p.json' FOR SELECT 1", 1, 27, "FOR an INSERT or a STATEMENT SET"),
        ("COMPILE PLAN 'p.json' FOR\nINSERT INTO t SELECT FROM u", 2, 22, 'Encountered "FROM"'),
        ("COMPILE AND EXECUTE PLAN 'p' IF NOT EXISTS FOR INSERT INTO t SELECT 1", 1, 30, "IF"),
        ("COMPILE PLAN 'p' FOR STATEMENT SET BEGIN INSERT INTO t SELECT 1;", 1, 65, "END;"),
    ],
)
def test_a_plan_statement_error_names_its_line_and_column(
    sql: str, line: int, column: int, message: str
) -> None:
    with pytest.raises(SqlParserError, match=message) as caught:
        parse_statement(sql)
    assert (caught.value.line, caught.value.column) == (line, column)


def test_compile_plan_checks_its_statement_before_writing(tmp_path: Path) -> None:
    t_env = _t_env()
    path = tmp_path / "plan.json"
    sql = f"COMPILE PLAN '{path}' FOR\nINSERT INTO counts SELECT * FROM nowhere"
    with pytest.raises(TableException, match=r"line 2, column 34 .*Object 'nowhere' not found"):
        t_env.execute_sql(sql)
    assert not path.exists()


# -- executing -------------------------------------------------------------------------------


def test_a_fresh_session_executes_a_plan_from_its_stored_ddl(tmp_path: Path, capfd: Any) -> None:
    path = tmp_path / "plan.json"
    t_env = _t_env()
    t_env.execute_sql("CREATE VIEW odd AS SELECT k, v FROM events WHERE MOD(v, 2) = 1")
    t_env.execute_sql(
        f"COMPILE PLAN '{path}' FOR INSERT INTO counts SELECT k, COUNT(*) FROM odd GROUP BY k"
    )
    capfd.readouterr()
    fresh = _t_env(rows="")  # no tables: the plan's definitions create them
    fresh.execute_sql(f"EXECUTE PLAN '{path}'").wait()
    assert fresh.list_tables() == ["counts", "events", "odd"]
    finals = _final_counts(changes(capfd.readouterr().out, "counts"))
    assert sum(finals.values()) == 15  # the odd ones of v = 1..30


def test_compile_and_execute_plan_runs_the_file_it_finds(tmp_path: Path, capfd: Any) -> None:
    path = tmp_path / "plan.json"
    t_env = _t_env()
    t_env.execute_sql(f"COMPILE AND EXECUTE PLAN '{path}' FOR {QUERY}").wait()
    assert sum(_final_counts(changes(capfd.readouterr().out, "counts")).values()) == 30
    edited = QUERY.replace("v > 0", "v > 20")  # an existing file wins over the statement
    t_env.execute_sql(f"COMPILE AND EXECUTE PLAN '{path}' FOR {edited}").wait()
    assert sum(_final_counts(changes(capfd.readouterr().out, "counts")).values()) == 30
    assert json.loads(path.read_text())["statements"] == [QUERY]


def test_a_table_the_plan_holds_by_name_only_must_be_in_the_session(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    t_env = _t_env({"table.plan.compile.catalog-objects": "IDENTIFIER"})
    t_env.compile_plan_sql(QUERY).write_to_file(path)
    assert "definition" not in json.loads(path.read_text())["catalogObjects"][0]
    with pytest.raises(TableException, match=r"uses the table .*`counts`.* holds only by name"):
        _t_env(rows="").execute_plan(PlanReference.from_file(path))


def test_a_table_whose_columns_changed_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    _t_env({"table.plan.compile.catalog-objects": "SCHEMA"}).compile_plan_sql(QUERY).write_to_file(
        path
    )
    other = _t_env(rows="")
    other.execute_sql(EVENTS.format(rows="'number-of-rows' = '3'").replace("k INT", "k BIGINT"))
    other.execute_sql(COUNTS)
    with pytest.raises(TableException, match=r"columns \(k INT, v BIGINT\).*\(k BIGINT, v BIGINT"):
        other.execute_plan(PlanReference.from_file(path))


def test_a_shape_change_fails_naming_the_first_node_that_differs(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    t_env = _t_env()
    t_env.compile_plan_sql(QUERY).write_to_file(path)
    # no filter, and the aggregate reads both columns: no Calc below it
    _edit(path, "COUNT(*) AS n FROM events WHERE v > 0 ", "COUNT(v) AS n FROM events ")
    with pytest.raises(TableException, match=r"differs in shape .* at node 2 .*has Calc"):
        t_env.execute_plan(PlanReference.from_file(path))


def test_another_state_layout_fails_naming_the_node(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    t_env = _t_env()
    t_env.compile_plan_sql(QUERY).write_to_file(path)
    _edit(path, "COUNT(*) AS n", "SUM(v) AS n")
    with pytest.raises(
        TableException,
        match=r"Node 3 .*GroupAggregate.* another layout.*COUNT_STAR\(\*\) .*SUM\(BIGINT\)",
    ):
        t_env.execute_plan(PlanReference.from_file(path))


def test_pinned_uids_map_node_by_node_and_skip_scans() -> None:
    scan = NodeEntry(1, "DataStreamScan", "DataStreamScan(...)", None, None)
    limit = NodeEntry(1, "Limit", "L", "u2", None)
    old = [scan, NodeEntry(1, "Calc", "Calc(a)", "u1", None), limit]
    new = [
        scan,
        NodeEntry(1, "Calc", "Calc(b)", "v1", None),
        NodeEntry(1, "Limit", "L", "v2", None),
    ]
    assert pinned_uids(old, new) == {"v1": "u1", "v2": "u2"}
    with pytest.raises(TableException, match=r"at node 3 .*only the plan file has L"):
        pinned_uids(old, new[:2])
    moved = [scan, NodeEntry(2, "Calc", "Calc(b)", "v1", None), new[2]]
    with pytest.raises(TableException, match=r"at node 2 \(statement 2\)"):
        pinned_uids(old, moved)


# -- savepoints ------------------------------------------------------------------------------


def test_an_edited_plan_restores_the_aggregate_from_a_savepoint(tmp_path: Path, capfd: Any) -> None:
    path = tmp_path / "plan.json"
    conf = {
        "execution.checkpointing.dir": (tmp_path / "chk").as_uri(),
        "execution.checkpointing.interval": "1 s",
    }
    unbounded = "'rows-per-second' = '300'"
    first = _t_env(conf, unbounded).execute_sql(f"COMPILE AND EXECUTE PLAN '{path}' FOR {QUERY}")
    read_until(capfd, lambda out: _counted_each_key(changes(out, "counts")))
    location = _stop_with_savepoint(first, tmp_path)
    capfd.readouterr()

    _edit(path, "WHERE v > 0", "WHERE v > 10")  # the filter above the aggregate is edited
    restore = {**conf, "execution.savepoint.path": location}  # every state must be claimed
    resumed = _t_env(restore, unbounded).execute_plan(PlanReference.from_file(path))
    out = read_until(capfd, lambda out: len(first_change_per_key(changes(out, "counts"))) == 3)
    _cancel(resumed)
    capfd.readouterr()  # what it printed until it ended
    firsts = first_change_per_key(changes(out, "counts"))
    assert {kind for kind, _ in firsts.values()} == {"-U"}, firsts  # goes on counting
    assert all(n > 1 for _, n in firsts.values()), firsts

    # without the plan, the edited statement's aggregate gets a new uid: its state is lost
    lenient = {**restore, "execution.savepoint.ignore-unclaimed-state": "true"}
    plain = _t_env(lenient, unbounded).execute_sql(QUERY.replace("v > 0", "v > 10"))
    out = read_until(capfd, lambda out: len(first_change_per_key(changes(out, "counts"))) == 3)
    _cancel(plain)
    firsts = first_change_per_key(changes(out, "counts"))
    assert {kind for kind, _ in firsts.values()} == {"+I"}, firsts
    assert all(n == 1 for _, n in firsts.values()), firsts


def _cancel(result: Any) -> None:
    """Cancel the job and wait until it has ended (the next run has the same identity)."""
    client = result.get_job_client()
    client.cancel()
    deadline = time.monotonic() + 60
    while not client.get_job_status().is_globally_terminal_state():
        assert time.monotonic() < deadline, "the job did not end after cancel()"
        time.sleep(0.05)


def _stop_with_savepoint(result: Any, tmp_path: Path) -> str:
    client = result.get_job_client()
    savepoint = client.stop_with_savepoint(savepoint_directory=(tmp_path / "sp").as_uri())
    location: str = savepoint.result(timeout=60)
    return location


def _counted_each_key(lines: list[str]) -> bool:
    """Every key counted a few rows (and a checkpoint interval has passed meanwhile)."""
    counted = {line[3] for line in lines if line.startswith("+U")}
    return counted >= {"0", "1", "2"} and len(lines) > 20


def _final_counts(lines: list[str]) -> dict[str, int]:
    finals: dict[str, int] = {}
    for line in lines:
        key, n = line[3:-1].split(", ")
        if line.startswith(("+I", "+U")):
            finals[key] = int(n)
    return finals


def _edit(path: Path, old: str, new: str) -> None:
    document = json.loads(path.read_text())
    assert old in document["statements"][0]
    document["statements"][0] = document["statements"][0].replace(old, new)
    path.write_text(json.dumps(document, indent=2))


def test_the_plan_lists_the_nodes_as_they_run_with_the_uids_they_get() -> None:
    """Adjacent calcs run merged (``optimize``): the plan file lists the merged calc, and
    the aggregate's uid in the file is the one its operator gets when the job is built."""
    from cairn.table.plan_uids import node_entries
    from cairn.table.translate import to_data_stream

    t_env = _t_env()
    t_env.execute_sql("CREATE VIEW positive AS SELECT k, v FROM events WHERE v > 0")
    table = t_env.sql_query("SELECT k, COUNT(*) AS n FROM positive WHERE v < 50 GROUP BY k")
    entries = node_entries([table.plan])
    assert [e.type for e in entries] == ["DataStreamScan", "Calc", "GroupAggregate"], entries
    stream = to_data_stream(table.plan, t_env.get_stream_execution_environment())
    assert stream.get_transformation().uid == entries[-1].uid
