"""Running SQL statements against a table environment (``execute_sql`` / ``sql_query``).

Invariant: a statement is parsed and checked whole before anything changes: DDL changes the
catalog only once its table or view is valid, a query or an insert is planned before its job
is submitted, and every refusal is raised from ``execute_sql`` / ``sql_query`` with the SQL
position of what it names. The results are Flink's: ``OK`` for DDL, the rows of ``SHOW`` and
``DESCRIBE`` in Flink's columns, a job's result for ``INSERT`` and ``SELECT``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from sqlglot import exp

from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.functions.registry import all_functions
from cairn.table.result import TableResult
from cairn.table.schema import PARTITION_KEYS_OPTION, Schema
from cairn.table.sql.client_parse import parse_client_statement
from cairn.table.sql.client_statements import run_client_statement
from cairn.table.sql.convert import SqlCatalog, convert_query
from cairn.table.sql.create_like import like_modes, merge_like
from cairn.table.sql.dialect import (
    CompilePlan,
    ExecutePlan,
    FlinkColumn,
    StatementSetBlock,
    WatermarkDef,
)
from cairn.table.sql.errors import SqlErrors, SqlParserError, SqlValidationError, position_of
from cairn.table.sql.expressions import to_expression
from cairn.table.sql.function_calls import call_names
from cairn.table.sql.function_ddl import FunctionDdl, parse_function_ddl, resolve_function
from cairn.table.sql.parse import parse_statement
from cairn.table.sql.relation_names import table_name
from cairn.table.sql.show import ShowCatalog, builtin_function_names, describe_rows
from cairn.table.sql.type_names import parse_type
from cairn.table.table import Table
from cairn.table.time_attributes import materialized
from cairn.table.types import DataTypes

__all__ = ["SqlEnvironment", "execute_statement", "insert_of", "query_of"]

_QUERIES = (exp.Select, exp.SetOperation, exp.Subquery)


class SqlConfig(Protocol):
    """The configuration ``SET`` changes (``TableConfig``)."""

    def set(self, key: str, value: str) -> object: ...

    def reset(self, key: str | None = None) -> None: ...

    def get_configuration(self) -> Any: ...


class SqlEnvironment(SqlCatalog, ShowCatalog, Protocol):
    """What statements ask of their table environment (``TableEnvironment`` implements it)."""

    def get_config(self) -> SqlConfig: ...

    def create_temporary_view(self, view_path: str, table: Table) -> None: ...

    def create_connector_table(
        self, name: str, connector: str, schema: Schema, options: dict[str, str]
    ) -> None:
        """Register a source or sink table (its connector and options checked)."""
        ...

    def has_table(self, name: str) -> bool: ...

    def is_view(self, name: str) -> bool: ...

    def drop_temporary_view(self, view_path: str) -> bool: ...

    def drop_temporary_table(self, table_path: str) -> bool: ...

    def list_tables(self) -> list[str]: ...

    def list_views(self) -> list[str]: ...

    def table_options(self, name: str) -> dict[str, str] | None: ...

    def declared_schema(self, name: str) -> Schema | None:
        """The ``CREATE TABLE`` schema of a connector table, None for a view."""
        ...

    def execute_query(self, table: Table) -> TableResult: ...

    def execute_inserts(self, inserts: Sequence[tuple[str, Table]]) -> TableResult: ...

    def record_definition(self, name: str, statement: str) -> None:
        """Keep the ``CREATE`` statement of a table or view (compiled plans store it)."""
        ...

    def compile_plan_file(
        self, path: str, statements: Sequence[str], if_not_exists: bool, execute: bool
    ) -> TableResult | None:
        """``COMPILE [AND EXECUTE] PLAN``; None when no job runs."""
        ...

    def execute_plan_file(self, path: str) -> TableResult: ...

    def create_temporary_function(self, path: str, function: Any) -> None: ...

    def drop_temporary_function(self, path: str) -> bool: ...


_OK = TableResult(Columns.of([("result", DataTypes.STRING())]), None)


def _rows(columns: Sequence[str], rows: Sequence[tuple[object, ...]]) -> TableResult:
    cols = Columns.of([(c, DataTypes.STRING()) for c in columns])
    return TableResult(cols, iter([(0, r) for r in rows]), streaming=False)


def query_of(env: SqlEnvironment, sql: str) -> Table:
    """``sql_query``: the ``Table`` of a ``SELECT``."""
    node = parse_statement(sql)
    if not isinstance(node, _QUERIES):
        raise _not_a_query(sql, "sql_query() takes only a query (SELECT ...); use execute_sql()")
    return convert_query(node, env, sql)


def insert_of(env: SqlEnvironment, sql: str) -> tuple[str, Table]:
    """``INSERT INTO t SELECT ...`` as the sink's name and the query's ``Table``."""
    node = parse_statement(sql)
    if not isinstance(node, exp.Insert):
        raise _not_a_query(sql, "Only INSERT statements can be added to a statement set")
    return _insert(env, node, sql)


def registry_sql_names() -> list[str]:
    """The SQL names of the registry's built-in scalar functions."""
    return [n for f in all_functions() for n in f.sql_names]


def _not_a_query(sql: str, message: str) -> SqlParserError:
    return SqlParserError(f"{message}: {sql.strip()[:60]!r}", 1, 1)


def _insert(env: SqlEnvironment, node: exp.Insert, sql: str) -> tuple[str, Table]:
    errors = SqlErrors(sql)
    target = node.this
    clause = node.args.get("with_")
    if clause is not None:
        raise errors.at(clause, "WITH comes after INSERT INTO t: INSERT INTO t WITH ...", "WITH")
    if isinstance(target, exp.Schema):
        raise errors.at(target, "INSERT with a column list is not supported yet")
    if node.args.get("overwrite"):
        raise errors.at(node, "INSERT OVERWRITE is not supported by Cairn's connectors")
    assert isinstance(target, exp.Table)
    name = table_name(target, sql)
    if not env.has_table(name):
        raise errors.at(target, f"Object '{name}' not found")
    return name, convert_query(node.expression, env, sql)


def _planned(env: SqlEnvironment, sql: str) -> list[tuple[Table, str | None]]:
    """What ``EXPLAIN`` explains: a query's table, or each insert's table and sink."""
    node = parse_statement(sql)
    if isinstance(node, _QUERIES):
        return [(convert_query(node, env, sql), None)]
    inserts = [node] if isinstance(node, exp.Insert) else None
    if isinstance(node, StatementSetBlock):
        inserts = list(node.expressions)
    if inserts is None:
        raise _not_a_query(sql, "EXPLAIN takes a query, an INSERT or a STATEMENT SET")
    return [(table, name) for name, table in (_insert(env, i, sql) for i in inserts)]


def _function_ddl(env: SqlEnvironment, ddl: FunctionDdl, sql: str) -> TableResult:
    """``CREATE``/``DROP [TEMPORARY] [SYSTEM] FUNCTION``: a Python function by its path."""
    line, column = position_of(sql, len(sql) - len(sql.lstrip()))
    exists = env.lookup_function(ddl.name) is not None
    if not ddl.create:
        if not exists and not ddl.if_exists:
            raise SqlValidationError(f"Function {ddl.name} does not exist", line, column)
        env.drop_temporary_function(ddl.name)
        return _OK
    if exists:
        if ddl.if_exists:
            return _OK
        raise SqlValidationError(f"Function {ddl.name} already exists", line, column)
    try:
        function = resolve_function(ddl)
    except ValueError as error:
        raise SqlValidationError(str(error), line, column) from None
    env.create_temporary_function(ddl.name, function)
    return _OK


def execute_statement(env: SqlEnvironment, sql: str) -> TableResult:
    """``execute_sql``: run one statement and return Flink's result for it."""
    ddl = parse_function_ddl(sql)
    if ddl is not None:
        return _function_ddl(env, ddl, sql)
    client = parse_client_statement(sql)
    if client is not None:
        functions = builtin_function_names([*registry_sql_names(), *call_names()])
        ran = run_client_statement(env, client, sql, lambda s: _planned(env, s), functions)
        return (
            _OK
            if ran is None
            else TableResult(ran[0], iter([(0, r) for r in ran[1]]), streaming=False)
        )
    node = parse_statement(sql)
    errors = SqlErrors(sql)
    if isinstance(node, _QUERIES):
        return env.execute_query(convert_query(node, env, sql))
    if isinstance(node, exp.Insert):
        return env.execute_inserts([_insert(env, node, sql)])
    if isinstance(node, StatementSetBlock):
        return env.execute_inserts([_insert(env, i, sql) for i in node.expressions])
    if isinstance(node, CompilePlan):
        for insert in node.expressions:  # planned here, so errors point into the statement
            _insert(env, insert, sql)
        texts = [str(t.this) for t in node.args["texts"]]
        exists, execute = bool(node.args.get("exists")), bool(node.args.get("execute"))
        result = env.compile_plan_file(str(node.this.this), texts, exists, execute)
        return _OK if result is None else result
    if isinstance(node, ExecutePlan):
        return env.execute_plan_file(str(node.this.this))
    if isinstance(node, exp.Create):
        target = node.this.this if isinstance(node.this, exp.Schema) else node.this
        name = table_name(target, sql) if isinstance(target, exp.Table) else None
        existed = name is None or env.has_table(name)
        result = _create(env, node, sql, errors)
        if not existed and name is not None:  # kept for compiled plans (not IF NOT EXISTS)
            env.record_definition(name, sql.strip().rstrip(";").strip())
        return result
    if isinstance(node, exp.Drop):
        return _drop(env, node, sql, errors)
    if isinstance(node, exp.Set):
        return _set(env, node, errors)
    if isinstance(node, exp.Describe):
        assert isinstance(node.this, exp.Table)
        return _describe(env, node.this, sql, errors)
    line, col = position_of(sql, len(sql) - len(sql.lstrip()))
    word = sql.split()[0].upper() if sql.split() else "<EOF>"
    if isinstance(node, exp.Column | exp.Alias | exp.Literal | exp.Condition):
        raise SqlParserError(
            f'SQL parse failed. Encountered "{word}" at line {line}, column {col}.'
            " Non-query expression encountered in illegal context",
            line,
            col,
        )
    raise SqlValidationError(f"{word} statements are not supported yet", line, col)


def _create(env: SqlEnvironment, node: exp.Create, sql: str, errors: SqlErrors) -> TableResult:
    kind = str(node.args.get("kind", "")).upper()
    if_not_exists = bool(node.args.get("exists"))
    if kind == "VIEW":
        target = node.this
        assert isinstance(target, exp.Table)
        name = table_name(target, sql)
        query = node.expression
        if not isinstance(query, _QUERIES):
            raise errors.at(node, "CREATE VIEW needs AS SELECT ...")
        table = convert_query(query, env, sql)
        if env.has_table(name):
            if if_not_exists:
                return _OK
            raise errors.at(
                target,
                f"Temporary table '`default_catalog`.`default_database`.`{name}`' already exists",
            )
        env.create_temporary_view(name, table)
        return _OK
    if kind != "TABLE":
        raise errors.at(node, f"CREATE {kind} is not supported")
    schema_node = node.this
    if isinstance(schema_node, exp.Table) and isinstance(node.expression, _QUERIES):
        return _create_as_select(env, node, sql, errors)
    properties = node.args.get("properties")
    like = next(
        (
            p
            for p in (properties.expressions if properties else [])
            if isinstance(p, exp.LikeProperty)
        ),
        None,
    )
    if like is not None:
        return _create_like(env, node, like, sql, errors)
    if not isinstance(schema_node, exp.Schema):
        raise errors.at(node, "CREATE TABLE needs its columns: CREATE TABLE t (a INT, ...)")
    if node.expression is not None:
        raise errors.at(
            node.expression,
            "CREATE TABLE ... AS SELECT takes its columns from the query: leave out the"
            " column list",
        )
    target = schema_node.this
    assert isinstance(target, exp.Table)
    name = table_name(target, sql)
    options = _options(node, errors)
    connector = options.get("connector")
    if connector is None:
        raise errors.at(
            node,
            f"Table options do not contain an option key 'connector' for"
            f" 'default_catalog.default_database.{name}'",
        )
    schema = _schema(schema_node, errors)
    if env.has_table(name):
        if if_not_exists:
            return _OK
        raise errors.at(
            target,
            f"Could not execute CreateTable in path `default_catalog`.`default_database`."
            f"`{name}`: Table already exists",
        )
    try:
        env.create_connector_table(name, connector, schema, options)
    except ValidationError as error:
        if error.__class__ is not ValidationError:
            raise
        raise ValidationError(f"Unable to create a table '{name}': {error}") from None
    return _OK


def _create_like(
    env: SqlEnvironment, node: exp.Create, like: exp.LikeProperty, sql: str, errors: SqlErrors
) -> TableResult:
    """``CREATE TABLE t [(...)] WITH (...) LIKE base [(...)]`` (``sql/create_like.py``)."""
    base_node = like.this.this if isinstance(like.this, exp.Schema) else like.this
    assert isinstance(base_node, exp.Table)
    base_name = table_name(base_node, sql)
    base = env.declared_schema(base_name)
    base_options = env.table_options(base_name)
    if base is None or base_options is None:
        raise errors.at(base_node, f"Source table '{base_name}' of the LIKE clause not found")
    schema_node = node.this
    target = schema_node.this if isinstance(schema_node, exp.Schema) else schema_node
    assert isinstance(target, exp.Table)
    name = table_name(target, sql)
    inherited = [c.name for c in base.columns]
    own = Schema()
    if isinstance(schema_node, exp.Schema):
        # a watermark may be on a column of the base: checked once the schemas are merged
        marks = [i for i in schema_node.expressions if isinstance(i, WatermarkDef)]
        rest = [i for i in schema_node.expressions if not isinstance(i, WatermarkDef)]
        own = _schema(exp.Schema(this=schema_node.this, expressions=rest), errors, inherited)
        for mark in marks:
            to_expression(mark.expression, sql, [*inherited, *(c.name for c in own.columns)])
            own = replace(own, watermark=(mark.name, mark.args["text"].this))
    own_options = _options(node, errors)
    try:
        schema, options = merge_like(base, base_options, own, own_options, like_modes(like))
    except ValidationError as error:
        raise errors.at(like, str(error), "LIKE") from None
    if env.has_table(name):
        if node.args.get("exists"):
            return _OK
        raise errors.at(
            target,
            f"Could not execute CreateTable in path `default_catalog`.`default_database`."
            f"`{name}`: Table already exists",
        )
    try:
        env.create_connector_table(name, options["connector"], schema, options)
    except ValidationError as error:
        if error.__class__ is not ValidationError:
            raise
        raise errors.at(node, f"Unable to create a table '{name}': {error}") from None
    return _OK


def _create_as_select(
    env: SqlEnvironment, node: exp.Create, sql: str, errors: SqlErrors
) -> TableResult:
    """``CREATE TABLE t WITH (...) AS SELECT ...`` (Flink's CTAS): the table's columns are the
    query's (time attributes materialized), the table is created, then the query's rows are
    inserted into it by a job, whose result this is."""
    target = node.this
    assert isinstance(target, exp.Table)
    name = table_name(target, sql)
    options = _options(node, errors)
    connector = options.get("connector")
    if connector is None:
        raise errors.at(
            node,
            f"Table options do not contain an option key 'connector' for"
            f" 'default_catalog.default_database.{name}'",
        )
    if env.has_table(name):
        if node.args.get("exists"):
            return _OK
        raise errors.at(
            target,
            f"Could not execute CreateTable in path `default_catalog`.`default_database`."
            f"`{name}`: Table already exists",
        )
    query = convert_query(node.expression, env, sql)
    builder = Schema.new_builder()
    for column in query.get_schema().columns:
        builder.column(column.name, materialized(column.data_type))
    try:
        env.create_connector_table(name, connector, builder.build(), options)
        return query.execute_insert(name)
    except ValidationError as error:
        if error.__class__ is not ValidationError:
            raise
        raise errors.at(node, f"Unable to create a table '{name}' as select: {error}") from None


def _options(node: exp.Create, errors: SqlErrors) -> dict[str, str]:
    options: dict[str, str] = {}
    properties = node.args.get("properties")
    for p in properties.expressions if properties is not None else []:
        if isinstance(p, exp.PartitionedByProperty):
            keys = p.this.expressions if isinstance(p.this, exp.Schema) else [p.this]
            if not all(isinstance(k, exp.Identifier | exp.Column) for k in keys):
                raise errors.at(p, "PARTITIONED BY takes column names: PARTITIONED BY (a, b)")
            options[PARTITION_KEYS_OPTION] = "\n".join(k.name for k in keys)
            continue
        if isinstance(p, exp.TemporaryProperty | exp.LikeProperty):  # TEMPORARY: all are here
            continue
        if not isinstance(p, exp.Property) or not isinstance(p.this, exp.Literal):
            raise errors.at(p, f"Unsupported table property {p.sql()}: use 'key' = 'value'")
        value = p.args.get("value")
        if not isinstance(value, exp.Literal) or not value.is_string:
            raise errors.at(
                p, f"Option '{p.this.this}' takes a string value: '{p.this.this}' = '...'"
            )
        options[str(p.this.this)] = str(value.this)
    return options


def _schema(node: exp.Schema, errors: SqlErrors, inherited: Sequence[str] = ()) -> Schema:
    key: tuple[str, ...] = ()
    for item in node.expressions:
        if isinstance(item, exp.PrimaryKey):
            key = tuple(i.name for i in item.expressions)
        elif isinstance(item, FlinkColumn) and item.args.get("primary"):
            key = (item.name,)
    builder = Schema.new_builder()
    # computed columns see the physical and metadata columns (Flink's rule)
    physical = [
        *inherited,
        *(i.name for i in node.expressions if isinstance(i, FlinkColumn) and i.args.get("kind")),
    ]
    every = [*inherited, *(i.name for i in node.expressions if isinstance(i, FlinkColumn))]
    for item in node.expressions:
        if isinstance(item, FlinkColumn):
            computed = item.args.get("computed")
            if computed is not None:
                # checked here, so an error points into the statement (planned at the scan)
                to_expression(computed, errors.sql, physical)
                builder.column_by_expression(item.name, item.args["text"].this)
                continue
            try:
                data_type = parse_type(item.args["kind"].this)
            except ValueError as error:
                raise errors.at(item, str(error)) from None
            metadata = item.args.get("metadata")
            if metadata:
                if item.name in key:
                    raise errors.at(
                        item, f"A metadata column '{item.name}' cannot be in the primary key"
                    )
                from_key = metadata.this if isinstance(metadata, exp.Literal) else None
                virtual = bool(item.args.get("virtual"))
                builder.column_by_metadata(item.name, data_type, from_key, virtual)
                continue
            builder.column(item.name, data_type.not_null() if item.name in key else data_type)
        elif isinstance(item, WatermarkDef):
            to_expression(item.expression, errors.sql, every)
            builder.watermark(item.name, item.args["text"].this)
    try:
        return builder.primary_key(*key).build()
    except ValidationError as error:
        raise errors.at(node, str(error)) from None


def _set(env: SqlEnvironment, node: exp.Set, errors: SqlErrors) -> TableResult:
    """``SET 'key' = 'value'`` (checked as ``get_config().set`` checks it); ``SET`` alone lists
    the keys set so far."""
    items = node.expressions
    if not items:
        pairs = sorted(env.get_config().get_configuration().to_dict().items())
        return _rows(["key", "value"], [(k, str(v)) for k, v in pairs])
    for item in items:
        pair = item.this
        if not (
            isinstance(pair, exp.EQ)
            and isinstance(pair.this, exp.Literal)
            and isinstance(pair.expression, exp.Literal)
        ):
            raise errors.at(item, "SET takes 'key' = 'value'")
        try:
            env.get_config().set(str(pair.this.this), str(pair.expression.this))
        except (ValueError, KeyError) as error:
            raise errors.at(item, str(error)) from None
    return _OK


def _drop(env: SqlEnvironment, node: exp.Drop, sql: str, errors: SqlErrors) -> TableResult:
    kind = str(node.args.get("kind", "")).upper()
    if kind not in ("TABLE", "VIEW"):
        raise errors.at(node, f"DROP {kind} is not supported")
    for target in node.args.get("tables") or [node.this]:
        name = table_name(target, sql)
        exists = env.has_table(name) and (env.is_view(name) == (kind == "VIEW"))
        if not exists:
            if node.args.get("exists"):
                continue
            what = "Table" if kind == "TABLE" else "View"
            raise errors.at(
                target,
                f"{what} with identifier 'default_catalog.default_database.{name}' does not exist.",
            )
        if kind == "VIEW":
            env.drop_temporary_view(name)
        else:
            env.drop_temporary_table(name)
    return _OK


def _describe(env: SqlEnvironment, target: exp.Table, sql: str, errors: SqlErrors) -> TableResult:
    name = table_name(target, sql)
    rows = describe_rows(env, name)
    if rows is None:
        raise errors.at(target, f"Tables or views with the identifier '{name}' doesn't exist")
    return _rows(["name", "type", "null", "key", "extras", "watermark"], rows)
