"""``cairn sql [-i init.sql] -f job.sql``: a SQL script run as Cairn table jobs, with
``cairn run``'s options; without ``-f``, the interactive shell (``cli.sql_shell``).

Invariant: the init scripts' statements (Flink's SQL client's ``-i``: tables, views,
functions a script shares with others) and then the script's run in order in one table
environment (streaming mode,
configured from ``-p``/``-s``/``-D``/``--executor``/``--master`` as ``cairn run`` configures a
job); an ``INSERT``, a statement set or an executed plan runs its job to the end before the
next statement starts, a query or ``SHOW``/``DESCRIBE`` prints its rows as Flink's SQL client
does (tableau). The first statement that fails stops the script: the error names the file
and the line the statement starts on, and no later statement runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cairn.cli.options import add_job_options

_MAX_LINES = 4  # of a failed statement's error message

#: Statements whose result is a job to wait for (their ``TableResult`` prints a job id).
_JOBS = ("INSERT", "EXECUTE STATEMENT SET", "EXECUTE PLAN", "COMPILE AND EXECUTE PLAN")


def add_sql_command(sub: Any) -> None:
    """Register ``cairn sql`` on the ``cairn`` parser's subcommands."""
    sql = sub.add_parser(
        "sql",
        help="run a SQL script (DDL, INSERTs, statement sets, queries) as table jobs, or"
        " an interactive SQL shell",
    )
    sql.add_argument(
        "-f", "--file", default=None, help="the .sql script (without it: an interactive shell)"
    )
    sql.add_argument(
        "--history",
        default=None,
        metavar="FILE",
        help="the interactive shell's history file (default ~/.cairn/sql_history)",
    )
    sql.add_argument(
        "-i",
        "--init",
        action="append",
        default=[],
        metavar="FILE",
        help="a .sql file run first (tables and views the script uses); repeatable",
    )
    sql.add_argument(
        "-s",
        "--from-savepoint",
        dest="from_checkpoint",
        default=None,
        metavar="PATH",
        help="restore the script's jobs from a savepoint or retained checkpoint directory",
    )
    add_job_options(sql)
    sql.set_defaults(func=cmd_sql)


def cmd_sql(args: argparse.Namespace) -> int:
    from cairn.cli.options import parse_conf_items
    from cairn.datastream.stream_execution_environment import set_context_defaults
    from cairn.table import EnvironmentSettings, TableEnvironment
    from cairn.table.result import ResultKind
    from cairn.table.sql.script import split_statements

    statements: list[tuple[str, int, str]] = []  # (file, line, statement)
    for path in [*args.init, *([args.file] if args.file else [])]:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            statements += [(path, line, s) for line, s in split_statements(text)]
        except (OSError, ValueError) as error:
            print(f"cairn sql: {path}: {error}", file=sys.stderr)
            return 2
    conf: dict[str, str] = {"cairn.progress": "true"}
    if args.master:
        conf["cairn.spark.master"] = args.master
    if args.executor:
        conf["cairn.executor"] = args.executor
    conf.update(parse_conf_items(args.conf))
    set_context_defaults(
        parallelism=args.parallelism, restore_path=args.from_checkpoint, configuration=conf
    )
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    if args.file is None:
        return _shell(t_env, statements, args.history)
    for path, line, statement in statements:
        try:
            result = t_env.execute_sql(statement)
            if statement.upper().startswith(_JOBS):
                result.wait()
            elif result.get_result_kind() is ResultKind.SUCCESS_WITH_CONTENT:
                result.print()
        except Exception as error:
            print(
                f"cairn sql: {path}, the statement at line {line} failed: {_brief(error)}",
                file=sys.stderr,
            )
            return 1
    return 0


def _brief(error: BaseException) -> str:
    """An error's message cut to its first ``_MAX_LINES`` lines (Flink's validation errors
    put the cause and the schemas on the lines after the first).

    >>> _brief(ValueError("types do not match.\\nCause: column 'b' at position 1.\\n"))
    "types do not match.\\nCause: column 'b' at position 1."
    >>> _brief(KeyError())
    'KeyError'
    """
    lines = str(error).strip().splitlines()
    return "\n".join(lines[:_MAX_LINES]) if lines else type(error).__name__


def _shell(t_env: Any, init: list[tuple[str, int, str]], history: str | None) -> int:
    """The interactive shell, after the init files' statements."""
    from cairn.cli.sql_shell import SqlShell, default_history_file, enable_history

    for path, line, statement in init:
        try:
            t_env.execute_sql(statement)
        except Exception as error:
            print(
                f"cairn sql: {path}, the statement at line {line} failed: {_brief(error)}",
                file=sys.stderr,
            )
            return 1
    if sys.stdin.isatty():
        enable_history(history or default_history_file())
    return SqlShell(t_env).run()
