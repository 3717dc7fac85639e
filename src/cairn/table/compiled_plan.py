"""Compiled plans: a job's SQL statements and its operator uids in a JSON file (Flink's
``COMPILE PLAN`` / ``EXECUTE PLAN``, PyFlink's ``CompiledPlan`` and ``PlanReference``).

Invariant: a plan file holds the ``INSERT`` statements of one job as written, what the
catalog objects they read and write were (``table.plan.compile.catalog-objects``), and the
job's nodes in ``plan_uids`` order with their uids. Executing a plan creates the catalog
objects the session lacks from their stored DDL, plans the stored statements again, and gives
each node the uid stored at its position — provided the plan's shape and the layout of every
node's state are unchanged (``plan_uids.pinned_uids``), which is checked before any job
exists. So a statement edited in the file (another filter literal, another projection)
restores its aggregates' state from a savepoint taken before the edit. Compiling is
deterministic: the same statements and catalog give the same JSON text.

>>> ref = PlanReference.from_json_string('{"cairnVersion": "0.1.0"}')
>>> ref.json_string
'{"cairnVersion": "0.1.0"}'
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlglot import exp

from cairn.common.config_registry import ConfigOption, register_option
from cairn.table.errors import TableException, ValidationError
from cairn.table.plan_uids import NodeEntry, node_entries, pinned_uids
from cairn.table.result import TableResult
from cairn.table.sql.parse import parse_statement
from cairn.table.sql.relation_names import table_name
from cairn.table.sql.statements import SqlEnvironment, insert_of
from cairn.table.table import Table
from cairn.table.translate import Uids

__all__ = [
    "PLAN_COMPILE_CATALOG_OBJECTS",
    "PLAN_FORCE_RECOMPILE",
    "CompiledPlan",
    "PlanReference",
    "compile_plan",
    "compile_plan_file",
    "compile_plan_sql",
    "load_plan",
]

#: The version of the plan files this module writes (``cairnVersion``).
CAIRN_VERSION = "0.1.0"

PLAN_COMPILE_CATALOG_OBJECTS = register_option(
    ConfigOption(
        "table.plan.compile.catalog-objects",
        "enum",
        "ALL",
        "What a compiled plan keeps of the tables and views its statements use: ALL (their "
        "CREATE statement and columns, so a fresh session can execute the plan), SCHEMA "
        "(their columns, checked when the plan runs) or IDENTIFIER (their names only).",
        choices={"all": "ALL", "schema": "SCHEMA", "identifier": "IDENTIFIER"},
    )
)
PLAN_FORCE_RECOMPILE = register_option(
    ConfigOption(
        "table.plan.force-recompile",
        "bool",
        False,
        "When false COMPILE PLAN fails if the plan file exists (unless IF NOT EXISTS); when "
        "true it overwrites the file. Meant for debugging only.",
    )
)


class PlanEnvironment(SqlEnvironment, Protocol):
    """What compiled plans ask of their table environment (``TableEnvironment``)."""

    def definition_of(self, name: str) -> str | None:
        """The ``CREATE`` statement a table or view was made with, None if it has none."""
        ...

    def execute_sql(self, stmt: str) -> TableResult: ...

    def execute_inserts(
        self, inserts: Sequence[tuple[str, Table]], uids: Uids | None = None
    ) -> TableResult: ...


@dataclass(frozen=True)
class PlanReference:
    """Where a compiled plan is: a file (``from_file``) or JSON text (``from_json_string``)."""

    file_path: str | None = None
    json_string: str | None = None

    @staticmethod
    def from_file(path: str | os.PathLike[str]) -> PlanReference:
        return PlanReference(file_path=os.fspath(path))

    @staticmethod
    def from_json_string(json_string: str) -> PlanReference:
        return PlanReference(json_string=json_string)

    def read(self) -> str:
        if self.json_string is not None:
            return self.json_string
        assert self.file_path is not None
        try:
            with open(self.file_path, encoding="utf-8") as f:
                return f.read()
        except OSError as error:
            raise TableException(f"Cannot load the plan file '{self.file_path}': {error}") from None

    def __str__(self) -> str:
        return f"Plan:\nfile: '{self.file_path}'" if self.file_path else "Plan:\njson: (string)"


class CompiledPlan:
    """A job's statements and their operator uids, to write, edit and execute again."""

    def __init__(self, env: PlanEnvironment, document: dict[str, Any], origin: str) -> None:
        self._env = env
        self._document = document
        self._origin = origin

    def as_json_string(self) -> str:
        return json.dumps(self._document, indent=2) + "\n"

    def write_to_file(self, file: str | os.PathLike[str], ignore_if_exists: bool = False) -> None:
        """Write the JSON to ``file``; an existing file is kept (``ignore_if_exists``) or is an
        error unless ``table.plan.force-recompile`` is true."""
        path = os.fspath(file)
        if os.path.exists(path):
            if ignore_if_exists:
                return
            if not _option(self._env, PLAN_FORCE_RECOMPILE):
                raise TableException(
                    f"Cannot overwrite the plan file '{path}'. Either manually remove the file"
                    " or, if you're debugging your job, set the option"
                    f" '{PLAN_FORCE_RECOMPILE.key}' to true."
                )
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.as_json_string())

    def print(self) -> None:
        print(self.as_json_string(), end="")

    def get_statements(self) -> list[str]:
        """The ``INSERT`` statements the plan runs, as stored."""
        return list(self._document["statements"])

    def explain(self, *extra_details: object) -> str:
        """The plans of the stored statements, one after another, each node with its uid."""
        inserts, uids = self._planned()
        lines = []
        for statement, (name, table) in enumerate(inserts, 1):
            lines.append(f"-- INSERT INTO {name}")
            lines.append(table.explain().rstrip("\n"))
            lines.extend(
                f"-- uid {n.uid}: {n.description}"
                for n in uids
                if n.statement == statement and n.uid is not None
            )
        return "\n".join(lines) + "\n"

    def execute(self) -> TableResult:
        """Run the stored statements as one job, each node under its stored uid."""
        inserts, planned = self._planned()
        stored = [NodeEntry.from_json(n) for n in self._document["nodes"]]
        try:
            pinned = pinned_uids(stored, planned)
        except TableException as error:
            raise TableException(f"{self._origin}: {error}") from None
        return self._env.execute_inserts(inserts, Uids(pinned))

    def _planned(self) -> tuple[list[tuple[str, Table]], list[NodeEntry]]:
        _restore_catalog(self._env, self._document["catalogObjects"], self._origin)
        inserts = []
        for n, text in enumerate(self._document["statements"], 1):
            try:
                inserts.append(insert_of(self._env, text))
            except TableException as error:
                raise _in(error, f"{self._origin}, statement {n}") from None
        return inserts, node_entries([table.plan for _, table in inserts])


def compile_plan(env: PlanEnvironment, statements: Sequence[str]) -> CompiledPlan:
    """The compiled plan of one job's ``INSERT`` statements (planned and checked here)."""
    inserts = [insert_of(env, s) for s in statements]
    mode = _option(env, PLAN_COMPILE_CATALOG_OBJECTS)
    document = {
        "cairnVersion": CAIRN_VERSION,
        "statements": list(statements),
        "catalogObjects": [_catalog_object(env, n, mode) for n in _used_objects(env, statements)],
        "nodes": [
            node.to_json(i) for i, node in enumerate(node_entries([t.plan for _, t in inserts]), 1)
        ],
    }
    return CompiledPlan(env, document, "The compiled plan")


def compile_plan_sql(env: PlanEnvironment, stmt: str) -> CompiledPlan:
    """``TableEnvironment.compile_plan_sql``: the plan of one ``INSERT``."""
    if not isinstance(parse_statement(stmt), exp.Insert):
        raise TableException(
            "Unsupported SQL query! compile_plan_sql() only accepts a single SQL statement of"
            " type INSERT"
        )
    return compile_plan(env, [stmt])


def compile_plan_file(
    env: PlanEnvironment, path: str, statements: Sequence[str], if_not_exists: bool, execute: bool
) -> TableResult | None:
    """``COMPILE [AND EXECUTE] PLAN 'path' [IF NOT EXISTS] FOR ...``: with IF NOT EXISTS or
    AND EXECUTE an existing file is kept (and executed), as in Flink; None: no job."""
    if (if_not_exists or execute) and os.path.exists(path):
        plan = load_plan(env, PlanReference.from_file(path))
    else:
        plan = compile_plan(env, statements)
        plan.write_to_file(path)
    return plan.execute() if execute else None


def load_plan(env: PlanEnvironment, reference: PlanReference) -> CompiledPlan:
    """The compiled plan ``reference`` holds; a file that is not one fails here."""
    origin = f"Plan file '{reference.file_path}'" if reference.file_path else "The plan"
    text = reference.read()
    try:
        document = json.loads(text)
        for key in ("statements", "catalogObjects", "nodes"):
            if not isinstance(document[key], list):
                raise TypeError(f"'{key}' is not a list")
        for node in document["nodes"]:
            NodeEntry.from_json(node)
        if not document["statements"] or not all(
            isinstance(s, str) for s in document["statements"]
        ):
            raise TypeError("'statements' must list the INSERT statements as strings")
    except (ValueError, KeyError, TypeError) as error:
        detail = f"no field {error}" if isinstance(error, KeyError) else str(error)
        raise TableException(f"{origin} is not a compiled plan of Cairn: {detail}") from None
    return CompiledPlan(env, document, origin)


def _in(error: TableException, where: str) -> TableException:
    """``error`` prefixed with where in the plan it happened (its kind kept)."""
    kind = ValidationError if isinstance(error, ValidationError) else TableException
    return kind(f"{where}: {error}")


def _option(env: PlanEnvironment, option: ConfigOption) -> Any:
    raw = env.get_config().get_configuration().get_string(option.key, None)
    return option.default if raw is None else option.parse(raw)


def _used_objects(env: PlanEnvironment, statements: Sequence[str]) -> list[str]:
    """The tables and views the statements name, each after the ones its definition names."""
    ordered: list[str] = []

    def visit(sql: str, own: str | None) -> None:
        for name in _names(sql):
            if name == own or name in ordered or not env.has_table(name):
                continue
            definition = env.definition_of(name)
            if definition is not None:
                visit(definition, name)
            ordered.append(name)

    for statement in statements:
        visit(statement, None)
    return ordered


def _names(sql: str) -> list[str]:
    tree = parse_statement(sql)
    ctes = {c.alias for c in tree.find_all(exp.CTE)}
    names = []
    for table in tree.find_all(exp.Table):
        name = table_name(table, sql)
        if name not in ctes and name not in names:
            names.append(name)
    return names


def _identifier(name: str) -> str:
    return f"`default_catalog`.`default_database`.`{name}`"


def _columns(env: PlanEnvironment, name: str) -> list[str]:
    """A connector table's physical columns, or a view's columns."""
    schema = env.declared_schema(name)
    table = env.lookup_table(name) if schema is None else None
    columns = schema.physical_columns() if schema is not None else table.get_schema()  # type: ignore[union-attr]
    return [f"{c.name} {c.data_type}" for c in columns.columns]


def _catalog_object(env: PlanEnvironment, name: str, mode: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"identifier": _identifier(name)}
    if mode in ("ALL", "SCHEMA"):
        entry["columns"] = _columns(env, name)
    if mode == "ALL":
        entry["definition"] = env.definition_of(name)
    return entry


def _restore_catalog(env: PlanEnvironment, objects: Sequence[Any], origin: str) -> None:
    """Create what the session lacks from its stored definition; check the columns of what
    it has against the stored ones."""
    for entry in objects:
        identifier = str(entry["identifier"])
        name = identifier.split(".")[-1].strip("`")
        if not env.has_table(name):
            definition = entry.get("definition")
            if definition is None:
                raise TableException(
                    f"{origin} uses the table {identifier}, which this session lacks and the"
                    " plan holds only by name: create it before executing the plan"
                )
            try:
                env.execute_sql(definition)
            except TableException as error:
                raise _in(error, f"{origin}, definition of {identifier}") from None
        stored = entry.get("columns")
        if stored is not None and _columns(env, name) != list(stored):
            raise TableException(
                f"{origin} was compiled with {identifier} of columns ({', '.join(stored)}); the"
                f" session's has ({', '.join(_columns(env, name))})"
            )
