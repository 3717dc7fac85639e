"""``StatementSet``: several inserts planned together and run as one job (PyFlink's name).

Invariant: an insert is planned and checked when it is added (an unknown table or a sink that
refuses the query fails in ``add_insert*``); ``execute`` translates every insert onto the one
DataStream environment and submits a single job with one sink per insert.
"""

from __future__ import annotations

from cairn.table.errors import TableException, ValidationError
from cairn.table.result import TableResult
from cairn.table.sql.statements import SqlEnvironment, insert_of
from cairn.table.table import Table

__all__ = ["StatementSet"]


class StatementSet:
    """Inserts to run together: ``add_insert_sql(...)``, ``add_insert(path, table)``,
    ``execute()``."""

    def __init__(self, t_env: SqlEnvironment) -> None:
        self._t_env = t_env
        self._inserts: list[tuple[str, Table]] = []

    def add_insert_sql(self, stmt: str) -> StatementSet:
        """Add ``INSERT INTO t SELECT ...``."""
        self._inserts.append(insert_of(self._t_env, stmt))
        return self

    def add_insert(self, target_path: str, table: Table, overwrite: bool = False) -> StatementSet:
        """Add the rows of ``table`` into the registered sink ``target_path``."""
        name = target_path.split(".")[-1].strip("`")
        if not self._t_env.has_table(name):
            raise ValidationError(f"Table `{target_path}` was not found.")
        self._inserts.append((name, table))
        return self

    def explain(self, *extra_details: object) -> str:
        """The plans of the inserts, one after another."""
        return "\n".join(f"-- INSERT INTO {n}\n{t.explain()}" for n, t in self._inserts)

    def execute(self) -> TableResult:
        """Run every insert in one job; ``.wait()`` the result to block until it ends."""
        if not self._inserts:
            raise TableException("No operators defined in the statement set: add an insert first")
        return self._t_env.execute_inserts(list(self._inserts))
