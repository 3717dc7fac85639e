"""``TableEnvironment``: PyFlink's entry point of the Table API, on Cairn's runtime.

Invariant: a table environment owns one ``StreamExecutionEnvironment`` (its own, or the one
given to ``StreamTableEnvironment.create``) and an in-memory catalog
(``default_catalog.default_database``) of views and sink tables; a query is planned
(``cairn.table.plan``) when it is built and translated onto that environment's DataStream
API only when it runs, so a table job has Cairn's checkpoints, state backends, savepoints and
Spark deployment. Configuration keys go to the DataStream environment unchanged
(``parallelism.default``, ``execution.checkpointing.interval``...), as in PyFlink.

>>> t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
>>> t_env.create_temporary_view("words", t_env.from_elements([("a",), ("b",)], ["w"]))
>>> t_env.list_tables()
['words']
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from cairn.common.configuration import Configuration
from cairn.common.job_client import JobClient
from cairn.datastream.data_stream import DataStream
from cairn.datastream.execution_mode import RuntimeExecutionMode
from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
from cairn.table.analysis import Columns
from cairn.table.changelog import changelog_mode
from cairn.table.compiled_plan import (
    CompiledPlan,
    PlanReference,
    compile_plan_file,
    compile_plan_sql,
    load_plan,
)
from cairn.table.configuration import (
    EnvironmentSettings,
    FormatDescriptor,
    TableConfig,
    TableDescriptor,
)
from cairn.table.connectors import (
    SinkTable,
    create_lookup,
    create_sink,
    create_source,
    is_lookup,
    is_readable,
    is_source,
)
from cairn.table.errors import TableException, ValidationError
from cairn.table.expressions import Expression
from cairn.table.lookup_source import LookupTable
from cairn.table.metadata import DATA_STREAM_METADATA, check_metadata, with_metadata
from cairn.table.mini_batch import mini_batch_settings
from cairn.table.operators import DataStreamRecords, ToRowFunction
from cairn.table.plan import (
    ChangelogMode,
    ExplainDetail,
    PlanNode,
    StreamScan,
    Values,
)
from cairn.table.result import TableResult
from cairn.table.schema import Schema
from cairn.table.sql.statements import execute_statement, query_of
from cairn.table.statement_set import StatementSet
from cairn.table.table import Table
from cairn.table.time_planner import declared_table, is_source_watermark
from cairn.table.translate import Uids, to_data_stream
from cairn.table.types import (
    DataType,
    DataTypes,
    RowType,
    from_type_info,
    python_type_of,
    to_type_info,
)

__all__ = [
    "EnvironmentSettings",
    "FormatDescriptor",
    "StreamTableEnvironment",
    "TableConfig",
    "TableDescriptor",
    "TableEnvironment",
]


class TableEnvironment:
    """PyFlink's ``TableEnvironment``: create tables, run queries, register views and sinks."""

    def __init__(self, env: StreamExecutionEnvironment, settings: EnvironmentSettings) -> None:
        self._env = env
        self._settings = settings
        self._batch = not settings.streaming
        if self._batch:
            env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        self._views: dict[str, Table] = {}
        self._sinks: dict[str, SinkTable] = {}
        self._declared: dict[str, Schema] = {}  # the schemas of connector tables
        # two-way connector tables (kafka, filesystem): scanned when first read, so a table
        # only written to never needs its source options (Flink checks them when used)
        self._readable: dict[str, tuple[str, Schema, dict[str, str]]] = {}
        self._lookups: dict[str, tuple[str, Schema, dict[str, str]]] = {}
        self._functions: dict[str, Any] = {}  # user-defined functions for SQL, by lower name
        self._definitions: dict[str, str] = {}  # the CREATE statement of a table or view
        self._options: dict[str, dict[str, str]] = {}  # a connector table's WITH options
        self._jobs: list[tuple[JobClient, str, str]] = []  # client, name, start time
        self._unnamed = itertools.count()
        self._config = TableConfig(env)

    @staticmethod
    def create(
        environment_settings: EnvironmentSettings | Configuration | None = None,
    ) -> TableEnvironment:
        settings = (
            environment_settings
            if isinstance(environment_settings, EnvironmentSettings)
            else EnvironmentSettings.in_streaming_mode()
        )
        env = StreamExecutionEnvironment.get_execution_environment()
        return TableEnvironment(env, settings)

    def get_config(self) -> TableConfig:
        return self._config

    # -- tables from data --------------------------------------------------------------------

    def from_elements(
        self,
        elements: Iterable[Any],
        schema: DataType | Sequence[str] | None = None,
        verify_schema: bool = True,
    ) -> Table:
        """A table of Python rows (tuples, lists or ``Row``s); column types inferred from the
        first row unless a ``DataTypes.ROW`` schema is given."""
        rows = [tuple(e) for e in elements]
        if isinstance(schema, RowType):
            names, types = schema.field_names(), schema.field_types()
        else:
            if not rows:
                raise ValidationError("from_elements needs a schema when there are no elements")
            arity = len(rows[0])
            names = (
                [str(n) for n in schema]
                if isinstance(schema, Sequence)
                else [f"_{i + 1}" for i in range(arity)]
            )
            if len(names) != arity:
                raise ValidationError(
                    f"The schema names {len(names)} columns but the rows have {arity} fields"
                )
            types = [_inferred(rows, i) for i in range(arity)]
        for n, row in enumerate(rows):
            if len(row) != len(names):
                raise ValidationError(
                    f"Element {n} has {len(row)} fields, the schema {len(names)}: {row!r}"
                )
        return Table(Values(tuple(rows), Columns.of(list(zip(names, types, strict=True)))), self)

    def from_pandas(
        self,
        pdf: Any,
        schema: DataType | Sequence[str] | None = None,
        split_num: int = 1,
    ) -> Table:
        """A table of a ``pandas.DataFrame``'s rows (names from the frame or the schema; types
        from a ``ROW`` schema, else inferred), as PyFlink's ``from_pandas``."""
        names = [str(c) for c in pdf.columns]
        rows = [tuple(_python(v) for v in row) for row in pdf.itertuples(index=False, name=None)]
        return self.from_elements(rows, schema if schema is not None else names)

    def from_data_stream(
        self, data_stream: DataStream, *fields_or_schema: Expression | Schema
    ) -> Table:
        """A table of a DataStream's records (``Row``s, tuples or single values)."""
        row_type = from_type_info(data_stream.get_type())
        if isinstance(row_type, RowType):
            names, types = row_type.field_names(), row_type.field_types()
        else:
            names, types = ["f0"], [row_type]
        columns = Columns.of(list(zip(names, types, strict=True)))
        arity = len(names)
        schema = fields_or_schema[0] if fields_or_schema else None
        if isinstance(schema, Schema):
            return Table(self._declared_stream(data_stream, columns, schema), self)

        def build(env: StreamExecutionEnvironment) -> DataStream:
            return data_stream.flat_map(DataStreamRecords(arity))

        scan = StreamScan(columns, f"DataStream-{next(self._unnamed)}", build)
        table = Table(scan, self)
        if fields_or_schema:
            fields = [_proctime_field(f, names) for f in fields_or_schema]
            return table.select(*fields)
        return table

    def _declared_stream(
        self, data_stream: DataStream, columns: Columns, schema: Schema
    ) -> PlanNode:
        """``from_data_stream(ds, schema)``: the stream's fields, its records' timestamps as
        the ``rowtime`` metadata column (Flink's only metadata key there), and either the
        stream's own watermarks (``SOURCE_WATERMARK()``) or the schema's."""
        name = f"DataStream-{next(self._unnamed)}"
        check_metadata(name, "DataStream", schema, DATA_STREAM_METADATA, reading=True)
        arity = len(columns)
        with_rowtime = bool(schema.metadata_columns())
        scanned = with_metadata(columns, schema, DATA_STREAM_METADATA)

        def build(env: StreamExecutionEnvironment) -> DataStream:
            return data_stream.flat_map(DataStreamRecords(arity, with_rowtime))

        scan = StreamScan(scanned, name, build)
        if schema.watermark is not None and is_source_watermark(schema.watermark[1]):
            time_column = schema.watermark[0]
            if time_column in scanned.names:
                scan = StreamScan(scanned, name, build, rowtimes=(scanned.index(time_column),))
            schema = schema.without_watermark()  # the stream's watermarks flow on
        return declared_table(scan, schema)

    def to_data_stream(self, table: Table) -> DataStream:
        """An insert-only table as a DataStream of ``Row``s."""
        if changelog_mode(table.plan) is not ChangelogMode.INSERT_ONLY:
            raise TableException(
                "Table sink 'to_data_stream' doesn't support consuming update changes which is"
                f" produced by node {type(table.plan).__name__}; use to_changelog_stream"
            )
        return self.to_changelog_stream(table)

    def to_changelog_stream(self, table: Table) -> DataStream:
        """A table as a DataStream of ``Row``s, each with its kind (``+I``, ``-U``, ...)."""
        columns = table.plan.columns
        info = to_type_info(
            DataTypes.ROW([DataTypes.FIELD(c.name, c.data_type) for c in columns.columns])
        )
        stream = to_data_stream(
            table.plan,
            self._env,
            state_ttl_ms=self._state_ttl_ms(),
            config=self._config.get_configuration(),
            mini_batch=self.mini_batch(),
        )
        return stream.map(ToRowFunction(columns.names), info)

    # -- catalog -----------------------------------------------------------------------------

    def create_temporary_view(self, view_path: str, table: Table, *fields: Any) -> None:
        if view_path in self._views or view_path in self._sinks:
            raise ValidationError(
                f"Temporary table '`default_catalog`.`default_database`.`{view_path}`' already"
                " exists"
            )
        self._views[view_path] = table

    register_table = create_temporary_view

    def create_temporary_table(self, path: str, descriptor: TableDescriptor) -> None:
        if path in self._views or path in self._sinks:
            raise ValidationError(f"Temporary table '{path}' already exists")
        options = {"connector": descriptor.connector, **dict(descriptor.options)}
        self.create_connector_table(path, descriptor.connector, descriptor.schema, options)

    def create_connector_table(
        self, name: str, connector: str, schema: Schema | None, options: dict[str, str]
    ) -> None:
        """A source table (a scan, then its computed columns) or a sink, by connector."""
        if is_lookup(connector) and schema is not None:
            self._lookups[name] = (connector, schema, dict(options))
        if not is_source(connector):
            self._sinks[name] = create_sink(name, connector, schema, options)
            if is_readable(connector) and schema is not None:
                self._readable[name] = (connector, schema, dict(options))
        else:
            assert schema is not None
            scan = create_source(name, connector, schema, options)
            self._views[name] = Table(declared_table(scan, schema), self)
        if schema is not None:
            self._declared[name] = schema
        self._options[name] = {"connector": connector, **options}

    create_table = create_temporary_table

    def from_path(self, path: str) -> Table:
        name = path.split(".")[-1].strip("`")
        table = self.lookup_table(name)
        if table is not None:
            return table
        raise ValidationError(f"Table `{path}` was not found.")

    def list_tables(self) -> list[str]:
        return sorted({*self._views, *self._sinks})

    def list_views(self) -> list[str]:
        return sorted(n for n in self._views if n not in self._declared)

    def lookup_table(self, name: str) -> Table | None:
        if name not in self._views and name in self._readable:
            connector, schema, options = self._readable[name]
            scan = create_source(name, connector, schema, options)
            self._views[name] = Table(declared_table(scan, schema), self)
        return self._views.get(name)

    def lookup_source(self, name: str) -> LookupTable | None:
        """The lookup table of ``name`` when its connector has one (``jdbc``, ``filesystem``)."""
        if name not in self._lookups:
            return None
        connector, schema, options = self._lookups[name]
        return create_lookup(name, connector, schema, options)

    def has_table(self, name: str) -> bool:
        return name in self._views or name in self._sinks

    def is_view(self, name: str) -> bool:
        return name in self._views and name not in self._declared

    def declared_schema(self, name: str) -> Schema | None:
        return self._declared.get(name)

    def drop_temporary_view(self, view_path: str) -> bool:
        self._definitions.pop(view_path, None)
        return self._views.pop(view_path, None) is not None

    def drop_temporary_table(self, table_path: str) -> bool:
        self._declared.pop(table_path, None)
        self._options.pop(table_path, None)
        self._readable.pop(table_path, None)
        self._lookups.pop(table_path, None)
        dropped_sink = self._sinks.pop(table_path, None) is not None
        return self.drop_temporary_view(table_path) or dropped_sink

    def record_definition(self, name: str, statement: str) -> None:
        """Keep the ``CREATE`` statement ``name`` was made with (compiled plans store it)."""
        self._definitions[name] = statement

    def definition_of(self, name: str) -> str | None:
        return self._definitions.get(name)

    def table_options(self, name: str) -> dict[str, str] | None:
        """The ``WITH`` options of connector table ``name`` (``connector`` first), else None."""
        options = self._options.get(name)
        return dict(options) if options is not None else None

    def list_jobs(self) -> list[tuple[str, str, str, str]]:
        """The jobs this environment started: id, name, status and start time (``SHOW
        JOBS``), oldest first."""
        return [
            (client.get_job_id(), name, client.get_job_status().name, started)
            for client, name, started in self._jobs
        ]

    def _started(self, client: JobClient | None, name: str) -> None:
        if client is not None:
            started = datetime.datetime.now().isoformat(timespec="milliseconds")
            self._jobs.append((client, name, started))

    def create_temporary_function(self, path: str, function: Any) -> None:
        """Register a ``udf``/``udaf`` (or ``udtf``) to be called by name in SQL."""
        name = path.split(".")[-1].strip("`").lower()
        if not hasattr(function, "kind") or not callable(function):
            raise ValidationError(
                f"Function '{path}' must be what udf(), udtf() or udaf() returns,"
                f" got {type(function).__name__}"
            )
        if name in self._functions:
            raise ValidationError(f"Temporary function '{path}' already exists")
        self._functions[name] = function

    create_temporary_system_function = create_temporary_function

    def drop_temporary_function(self, path: str) -> bool:
        return self._functions.pop(path.split(".")[-1].strip("`").lower(), None) is not None

    drop_temporary_system_function = drop_temporary_function

    def list_user_defined_functions(self) -> list[str]:
        return sorted(self._functions)

    def lookup_function(self, name: str) -> Any | None:
        return self._functions.get(name.lower())

    def register_unnamed(self, table: Table) -> str:
        name = f"UnnamedTable${next(self._unnamed)}"
        self._views[name] = table
        return name

    def add_jars(self, *jars: str) -> None:
        """Accepted and ignored: Cairn's connectors are Python, no jar is loaded."""

    # -- running -----------------------------------------------------------------------------

    @property
    def batch_mode(self) -> bool:
        return self._batch

    def _state_ttl_ms(self) -> int:
        """``table.exec.state.ttl``; a batch job keeps no state across time, so none."""
        return 0 if self._batch else self._config.state_ttl_ms()

    def state_ttl_ms(self) -> int:
        """``table.exec.state.ttl`` as the planner applies it (Cairn's; ``Table.explain``
        warns of joins without one)."""
        return self._state_ttl_ms()

    def mini_batch(self) -> tuple[int, int] | None:
        """``(allow-latency ms, size)`` when ``table.exec.mini-batch.enabled`` (streaming
        only, as in Flink), else ``None``; bad values raise ``ConfigurationError``."""
        return None if self._batch else mini_batch_settings(self._config.get_configuration())

    def _job_name(self, default: str) -> str:
        """``pipeline.name`` when set (Flink's rule for table jobs), else ``default``."""
        name = self._config.get("pipeline.name")
        return str(name) if name else default

    def execute_query(self, table: Table) -> TableResult:
        self._config.apply()
        stream = to_data_stream(
            table.plan,
            self._env,
            state_ttl_ms=self._state_ttl_ms(),
            config=self._config.get_configuration(),
            mini_batch=self.mini_batch(),
        )
        name = self._job_name("collect")
        iterator = stream.execute_and_collect(name)
        assert not isinstance(iterator, list)
        client = iterator.job_client
        self._started(client, name)
        return TableResult(table.plan.columns, iterator, client, streaming=not self._batch)

    def execute_insert(self, table: Table, path: str) -> TableResult:
        return self.execute_inserts([(path, table)])

    def execute_inserts(
        self, inserts: Sequence[tuple[str, Table]], uids: Uids | None = None
    ) -> TableResult:
        """One job writing each table into its sink (a statement set has several); ``uids``
        names its operators (a compiled plan's pinned ones)."""
        sinks: list[tuple[SinkTable, Table]] = []
        for path, table in inserts:
            name = path.split(".")[-1].strip("`")
            sink = self._sinks.get(name)
            if sink is None:
                if name in self._declared:
                    raise ValidationError(
                        f"Table 'default_catalog.default_database.{name}' is a source: its"
                        " connector cannot be used as a sink"
                    )
                raise ValidationError(f"Table `{path}` was not found.")
            sink.check(table.plan, changelog_mode(table.plan))
            sinks.append((sink, table))
        self._config.apply()
        uids = uids or Uids()  # one job: a subplan two statements share gets distinct uids
        for sink, table in sinks:
            stream = to_data_stream(
                table.plan,
                self._env,
                uids,
                self._state_ttl_ms(),
                self._config.get_configuration(),
                self.mini_batch(),
            )
            sink.add_to(stream, table.plan.columns)
        paths = [f"default_catalog.default_database.{sink.name}" for sink, _ in sinks]
        name = self._job_name(f"insert-into_{','.join(paths)}")
        client = self._env.execute_async(name)
        self._started(client, name)
        return TableResult(Columns.of([(p, DataTypes.BIGINT()) for p in paths]), None, client)

    # -- SQL ---------------------------------------------------------------------------------

    def execute_sql(self, stmt: str) -> TableResult:
        """Run one SQL statement: DDL, ``SHOW``/``DESCRIBE``, ``INSERT INTO``, ``SELECT``, or
        ``EXECUTE STATEMENT SET BEGIN ...; END``."""
        return execute_statement(self, stmt)

    def sql_query(self, query: str) -> Table:
        """The ``Table`` of a ``SELECT``, to go on with the Table API."""
        return query_of(self, query)

    def explain_sql(self, stmt: str, *extra_details: ExplainDetail) -> str:
        """The plan of a ``SELECT``, as ``sql_query(stmt).explain(...)`` prints it."""
        return query_of(self, stmt).explain(*extra_details)

    def compile_plan_sql(self, stmt: str) -> CompiledPlan:
        """The compiled plan of one ``INSERT INTO ... SELECT ...``: its statement and its
        operators' uids, to write to a file (``write_to_file``), edit and execute again with
        the same uids (``load_plan`` / ``execute_plan``), as Flink's ``compilePlanSql``."""
        return compile_plan_sql(self, stmt)

    def load_plan(self, plan_reference: PlanReference) -> CompiledPlan:
        """The compiled plan of a file (``PlanReference.from_file``) or of JSON text."""
        return load_plan(self, plan_reference)

    def execute_plan(self, plan_reference: PlanReference) -> TableResult:
        """``load_plan(plan_reference).execute()``."""
        return load_plan(self, plan_reference).execute()

    def compile_plan_file(
        self, path: str, statements: Sequence[str], if_not_exists: bool, execute: bool
    ) -> TableResult | None:
        """``COMPILE [AND EXECUTE] PLAN 'path' [IF NOT EXISTS] FOR ...``."""
        return compile_plan_file(self, path, statements, if_not_exists, execute)

    def execute_plan_file(self, path: str) -> TableResult:
        """``EXECUTE PLAN 'path'``."""
        return self.execute_plan(PlanReference.from_file(path))

    def create_statement_set(self) -> StatementSet:
        """Inserts to run together as one job."""
        return StatementSet(self)

    def get_stream_execution_environment(self) -> StreamExecutionEnvironment:
        return self._env


class StreamTableEnvironment(TableEnvironment):
    """A table environment over a given ``StreamExecutionEnvironment``."""

    @staticmethod
    def create(  # type: ignore[override]
        stream_execution_environment: StreamExecutionEnvironment | None = None,
        environment_settings: EnvironmentSettings | None = None,
    ) -> StreamTableEnvironment:
        env = stream_execution_environment or StreamExecutionEnvironment.get_execution_environment()
        return StreamTableEnvironment(env, environment_settings or EnvironmentSettings())


def _inferred(rows: Sequence[tuple[Any, ...]], i: int) -> DataType:
    for row in rows:
        if row[i] is not None:
            return python_type_of(row[i])
    return DataTypes.NULL()


def _python(value: Any) -> Any:
    """A pandas/numpy scalar as the Python value PyFlink hands to the table."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _proctime_field(field: Any, names: Sequence[str]) -> Any:
    """``col('pt').proctime`` among ``from_data_stream``'s fields: a new processing-time
    attribute ``pt`` (Flink's field expression), not a column of the stream."""
    is_proctime = isinstance(field, Expression) and field.kind == "call"
    if not is_proctime or field.name != "window_proctime" or field.args[0].kind != "field":
        return field
    name = field.args[0].name
    if name in names:
        raise ValidationError(f"The proctime attribute '{name}' must not replace an existing field")
    return Expression("call", "proctime").alias(name)
