"""``cairn sql`` without ``-f``: an interactive SQL shell, as Flink's SQL client.

Invariant: a statement runs when a line completes it (its ``;`` outside strings, quoted
names, comments and an open ``BEGIN STATEMENT SET``); until then the shell asks for more with
its continuation prompt. Every statement runs in the one table environment of the session,
so tables, views, functions and ``SET`` options stay for the statements after it. A failing
statement prints ``[ERROR] Could not execute SQL statement. Reason:`` and its error, and the
shell goes on; nothing typed before it is lost. A query prints its rows as Flink's tableau
(the result mode the shell has; ``SET 'sql-client.execution.result-mode'`` takes only
``tableau``); an ``INSERT`` prints its job id and runs on in the background unless
``table.dml-sync`` is true. Ctrl-C stops the query or the line being typed, Ctrl-D or
``QUIT;`` ends the session. Lines are kept in a history file (``~/.cairn/sql_history``,
``--history``) when the terminal has ``readline``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from cairn.table.sql.script import complete_part, split_statements

__all__ = ["SqlShell", "default_history_file"]

PROMPT = "Cairn SQL> "
CONTINUATION = "> "
_RESULT_MODE = "sql-client.execution.result-mode"
_JOBS = ("INSERT", "EXECUTE STATEMENT SET", "EXECUTE PLAN", "COMPILE AND EXECUTE PLAN")

HELP = """The following commands are available:

CLEAR		Clears the current terminal.
HELP		Prints the available commands.
QUIT/EXIT	Quits the SQL shell.
RESET		Resets a session configuration property. Syntax: "RESET '<key>';".
		Use "RESET;" for resetting all session properties.
SET		Sets a session configuration property. Syntax: "SET '<key>'='<value>';".
		Use "SET;" for listing all properties.

Any other statement is run as SQL: CREATE TABLE/VIEW/FUNCTION, DROP, SHOW (TABLES, VIEWS,
FUNCTIONS, COLUMNS, CREATE TABLE, JOBS...), DESCRIBE, EXPLAIN, USE, SELECT (rows printed as a
table; try it on bounded data), WITH ... SELECT, INSERT INTO (a job), EXECUTE STATEMENT SET,
COMPILE/EXECUTE PLAN. Statements end with ';' and may span lines.
"""


def default_history_file() -> str:
    """Where the shell keeps its history unless ``--history`` says otherwise."""
    return os.path.join(os.path.expanduser("~"), ".cairn", "sql_history")


class SqlShell:
    """One interactive session over ``t_env``; ``read(prompt)`` reads a line (``input``),
    raising ``EOFError`` at the end of input."""

    def __init__(
        self,
        t_env: Any,
        read: Callable[[str], str] = input,
        out: TextIO | None = None,
    ) -> None:
        self.t_env = t_env
        self.read = read
        self.out = out if out is not None else sys.stdout
        self.pending = ""

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def run(self) -> int:
        """Read, run and print until ``QUIT;`` or the end of input."""
        self._print("Welcome to Cairn's SQL shell. Type HELP; for the commands, QUIT; to leave.\n")
        while True:
            try:
                line = self.read(CONTINUATION if self.pending.strip() else PROMPT)
            except EOFError:
                self._print("")
                return 0
            except KeyboardInterrupt:  # Ctrl-C drops the statement being typed
                self.pending = ""
                self._print("")
                continue
            self.pending += line + "\n"
            try:
                complete, self.pending = complete_part(self.pending)
                statements = split_statements(complete)
            except ValueError as error:  # an unclosed quote ended by a ; elsewhere cannot be
                self._error(str(error))
                self.pending = ""
                continue
            for _, statement in statements:
                if not self.execute(statement):
                    return 0

    def execute(self, statement: str) -> bool:
        """Run one statement; ``False`` when it ends the session."""
        word = " ".join(statement.split()).upper()
        if word in ("QUIT", "EXIT"):
            self._print("Shutting down the session...\ndone.")
            return False
        if word == "HELP":
            self._print(HELP)
            return True
        if word == "CLEAR":
            self._print("\033[H\033[2J")
            return True
        if word.startswith("SET") and _RESULT_MODE in statement:
            value = statement.split("=", 1)[-1].strip().strip("'\"").lower()
            if value != "tableau":
                self._error(f"Cairn's shell prints results as 'tableau' only, not '{value}'")
            else:
                self._print("[INFO] Execute statement succeeded.")
            return True
        try:
            self._run(statement, word)
        except KeyboardInterrupt:
            self._print("Query terminated (Ctrl-C).")
        except Exception as error:
            self._error(str(error) or type(error).__name__)
        return True

    def _run(self, statement: str, word: str) -> None:
        from cairn.table.result import ResultKind

        result = self.t_env.execute_sql(statement)
        if word.startswith(_JOBS):
            client = result.get_job_client()
            job_id = client.get_job_id() if client is not None else "?"
            if str(self.t_env.get_config().get("table.dml-sync", "false")).lower() == "true":
                result.wait()
                self._print(
                    f"[INFO] Complete execution of the SQL update statement (job {job_id})."
                )
            else:
                self._print(
                    "[INFO] Submitting SQL update statement to the cluster...\n"
                    "[INFO] SQL update statement has been successfully submitted to the"
                    f" cluster:\nJob ID: {job_id}\n"
                )
            return
        if result.get_result_kind() is ResultKind.SUCCESS_WITH_CONTENT:
            with contextlib.redirect_stdout(self.out):
                result.print()
        else:
            self._print("[INFO] Execute statement succeeded.")

    def _error(self, message: str) -> None:
        self._print(f"[ERROR] Could not execute SQL statement. Reason:\n{message}\n")


def enable_history(path: str) -> None:
    """Keep the lines typed in ``path`` (read now, written at exit), with ``readline``."""
    try:
        import atexit
        import readline
    except ImportError:  # a platform without readline: no history
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        readline.read_history_file(path)
    except (FileNotFoundError, OSError):
        pass
    readline.set_history_length(1000)

    def save() -> None:
        try:
            readline.write_history_file(path)
        except OSError:
            pass

    atexit.register(save)
