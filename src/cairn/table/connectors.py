"""Table connectors by name (``'connector' = 'print'``), with Flink's option keys.

Invariant: a sink table checks at planning what it is given — its options (an unknown or
misspelt key fails naming it, with the keys the connector knows, as Flink's factories do),
its schema against the query's columns, and the query's changelog mode against what the
connector consumes — so a job never starts with a sink that would refuse its rows.
Whether a sink consumes updates is the connector's (``print``, ``blackhole``, and
``upsert-kafka``, ``jdbc`` and ``delta`` with a primary key do). This module is the registry and the
two small sinks: ``print`` writes each change as Flink's print connector does
(``+I[a, 1]``, ``N> `` before it when the sink runs in parallel), ``blackhole`` discards.
The others have a module each (``datagen``, ``nexmark``, ``filesystem``, ``kafka`` for
``kafka`` and ``upsert-kafka``, ``jdbc``, ``delta``, ``iceberg``), their formats in ``formats``. The
metadata keys each connector reads and writes are listed here (``metadata`` checks a
table's metadata columns).
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.api.functions import MapFunction, SinkFunction
from cairn.datastream.data_stream import DataStream
from cairn.table.analysis import Columns
from cairn.table.calc_runtime import java_double_text
from cairn.table.changelog import changelog_mode
from cairn.table.datagen import datagen_options, datagen_scan
from cairn.table.delta import check_delta, delta_options, delta_sink
from cairn.table.errors import ValidationError
from cairn.table.filesystem import (
    FILE_READABLE,
    check_filesystem,
    filesystem_options,
    filesystem_scan,
    filesystem_sink,
)
from cairn.table.iceberg import check_iceberg, iceberg_options, iceberg_sink
from cairn.table.jdbc import check_jdbc, jdbc_options, jdbc_sink
from cairn.table.kafka import (
    check_kafka,
    kafka_options,
    kafka_scan,
    kafka_sink,
    upsert_kafka_options,
    upsert_kafka_scan,
    upsert_kafka_sink,
)
from cairn.table.kafka_metadata import KAFKA_READABLE, KAFKA_WRITABLE
from cairn.table.lookup_source import LookupTable, filesystem_lookup, jdbc_lookup
from cairn.table.metadata import check_metadata
from cairn.table.nexmark import nexmark_options, nexmark_scan
from cairn.table.operators import KIND_TEXT
from cairn.table.plan import ChangelogMode, PlanNode
from cairn.table.plan_text import describe
from cairn.table.schema import PARTITION_KEYS_OPTION, Schema, partition_keys

__all__ = [
    "SinkConnector",
    "SinkTable",
    "create_lookup",
    "create_sink",
    "create_source",
    "is_lookup",
    "is_readable",
    "is_source",
    "java_text",
]


def java_text(value: Any) -> str:
    """A value as Java's ``toString`` of its external type prints it (Flink's ``Row``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_text(value)
    if isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%dT%H:%M")
        if value.second or value.microsecond:
            text += f":{value.second:02d}"
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return text
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(java_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_text(k)}={java_text(v)}" for k, v in value.items()) + "}"
    return str(value)


class PrintText(MapFunction):
    """``(kind, row)`` → ``+I[a, 1]``."""

    def map(self, value: tuple[int, tuple[Any, ...]]) -> str:
        return f"{KIND_TEXT[value[0]]}[{', '.join(java_text(v) for v in value[1])}]"


class DiscardingSink(SinkFunction):
    def invoke(self, value: Any, context: Any) -> None:
        pass


@dataclass(frozen=True)
class SinkConnector:
    """What a sink connector knows: its option keys (given the options: a format adds its
    own), a check at planning, whether it consumes updates, and how it writes a stream."""

    option_keys: Callable[[Columns, Mapping[str, str]], set[str]]
    check: Callable[[str, Columns, Mapping[str, str], Schema | None], None]
    takes_updates: Callable[[Schema | None], bool]
    write: Callable[[str, Schema | None, Columns, Mapping[str, str], DataStream], None]


@dataclass
class SinkTable:
    """A registered sink: its name, connector, declared schema and options."""

    name: str
    connector: str
    schema: Schema | None
    options: dict[str, str] = field(default_factory=dict)

    def check(self, plan: PlanNode, mode: ChangelogMode) -> None:
        """Refuse, at planning, a query this sink cannot take."""
        if self.schema is not None:
            writable = _WRITABLE.get(self.connector, {})
            check_metadata(self.name, self.connector, self.schema, writable, reading=False)
            declared = self.schema.persisted_columns()
            if len(declared) != len(plan.columns):
                virtual = [c.name for c in self.schema.metadata_columns() if c.is_virtual]
                raise ValidationError(
                    f"Column types of query result and sink for"
                    f" 'default_catalog.default_database.{self.name}' do not match.\n"
                    f"Query schema: [{_types(plan.columns)}]\n"
                    f"Sink schema:  [{_types(declared)}]"
                    + (
                        f"\n(virtual metadata columns are not written: {', '.join(virtual)})"
                        if virtual
                        else ""
                    )
                )
            mismatch = incompatible_column(plan.columns, declared)
            if mismatch is not None:
                raise ValidationError(
                    f"Column types of query result and sink for"
                    f" 'default_catalog.default_database.{self.name}' do not match.\n"
                    f"Cause: Incompatible types for sink column '{declared.columns[mismatch].name}'"
                    f" at position {mismatch}.\n"
                    f"Query schema: [{_types(plan.columns)}]\n"
                    f"Sink schema:  [{_types(declared)}]"
                )
        takes_updates = _SINKS[self.connector].takes_updates(self.schema)
        if mode is not ChangelogMode.INSERT_ONLY and not takes_updates:
            raise ValidationError(
                f"Table sink 'default_catalog.default_database.{self.name}' doesn't support"
                f" consuming update changes which is produced by node {describe(_producer(plan))}"
            )

    def add_to(self, stream: DataStream, columns: Columns) -> None:
        declared = self.schema.persisted_columns() if self.schema is not None else columns
        _SINKS[self.connector].write(self.name, self.schema, declared, self.options, stream)


def _producer(plan: PlanNode) -> PlanNode:
    """The node whose updates reach the sink: the lowest updating node on the way down."""
    node = plan
    while True:
        updating = [i for i in node.inputs if changelog_mode(i) is not ChangelogMode.INSERT_ONLY]
        if not updating:
            return node
        node = updating[0]


_FAMILIES = {
    **dict.fromkeys(("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"), "numeric"),
    "DECIMAL": "numeric",
    **dict.fromkeys(("CHAR", "VARCHAR"), "character string"),
    **dict.fromkeys(("BINARY", "VARBINARY"), "binary string"),
    **dict.fromkeys(("TIMESTAMP", "TIMESTAMP_LTZ"), "timestamp"),
    **{root: root for root in ("BOOLEAN", "DATE", "TIME", "INTERVAL")},
}


def incompatible_column(query: Columns, sink: Columns) -> int | None:
    """The position of the first column whose query type cannot go into the sink's type
    (another family: a string into a number, a number into a boolean, ...), or None.
    Nested and NULL types are not compared; within a family, values are converted.

    >>> from cairn.table.analysis import Column
    >>> from cairn.table.types import DataTypes
    >>> cols = lambda *ts: Columns(tuple(Column(f"c{i}", t) for i, t in enumerate(ts)))
    >>> incompatible_column(cols(DataTypes.INT(), DataTypes.STRING()),
    ...                     cols(DataTypes.BIGINT(), DataTypes.INT()))
    1
    >>> incompatible_column(cols(DataTypes.INT()), cols(DataTypes.DOUBLE())) is None
    True
    """
    for position, (q, s) in enumerate(zip(query.columns, sink.columns, strict=False)):
        have, want = _FAMILIES.get(q.data_type.root), _FAMILIES.get(s.data_type.root)
        if have is not None and want is not None and have != want:
            return position
    return None


def _types(columns: Columns) -> str:
    return ", ".join(f"{c.name}: {c.data_type}" for c in columns.columns)


def _write_print(
    name: str,
    schema: Schema | None,
    columns: Columns,
    options: Mapping[str, str],
    stream: DataStream,
) -> None:
    text = stream.map(PrintText()).name(f"Sink text: {name}")
    sink = text.print(options.get("print-identifier"))
    parallelism = options.get("sink.parallelism")
    if parallelism is not None:
        sink.set_parallelism(int(parallelism))


def _write_blackhole(
    name: str,
    schema: Schema | None,
    columns: Columns,
    options: Mapping[str, str],
    stream: DataStream,
) -> None:
    stream.add_sink(DiscardingSink()).name(f"Sink: {name}")


def _keys(*keys: str) -> Callable[[Columns, Mapping[str, str]], set[str]]:
    return lambda columns, options: set(keys)


def _no_check(
    connector: str, columns: Columns, options: Mapping[str, str], s: Schema | None
) -> None:
    pass


def _always(schema: Schema | None) -> bool:
    return True


def _never(schema: Schema | None) -> bool:
    return False


def _with_primary_key(schema: Schema | None) -> bool:
    return schema is not None and bool(schema.primary_key)


#: The sink connectors by name.
_SINKS: dict[str, SinkConnector] = {
    "print": SinkConnector(
        _keys("print-identifier", "standard-error", "sink.parallelism"),
        _no_check,
        _always,
        _write_print,
    ),
    "blackhole": SinkConnector(_keys(), _no_check, _always, _write_blackhole),
    "filesystem": SinkConnector(filesystem_options, check_filesystem, _never, filesystem_sink),
    "kafka": SinkConnector(kafka_options, check_kafka, _never, kafka_sink),
    "upsert-kafka": SinkConnector(
        upsert_kafka_options, check_kafka, _with_primary_key, upsert_kafka_sink
    ),
    "jdbc": SinkConnector(jdbc_options, check_jdbc, _with_primary_key, jdbc_sink),
    "delta": SinkConnector(delta_options, check_delta, _with_primary_key, delta_sink),
    "iceberg": SinkConnector(iceberg_options, check_iceberg, _with_primary_key, iceberg_sink),
}

_Scan = Callable[[str, Columns, Mapping[str, str], Schema], PlanNode]


def _datagen(name: str, columns: Columns, options: Mapping[str, str], schema: Schema) -> PlanNode:
    return datagen_scan(name, columns, options)


def _nexmark(name: str, columns: Columns, options: Mapping[str, str], schema: Schema) -> PlanNode:
    return nexmark_scan(name, columns, options)


#: The source connectors: each one's option keys for a table's columns, and its scan.
_SOURCES: dict[str, tuple[Callable[[Columns, Mapping[str, str]], set[str]], _Scan]] = {
    "datagen": (lambda columns, options: datagen_options(columns), _datagen),
    "filesystem": (filesystem_options, filesystem_scan),
    "kafka": (kafka_options, kafka_scan),
    "nexmark": (nexmark_options, _nexmark),
    "upsert-kafka": (upsert_kafka_options, upsert_kafka_scan),
}


#: The metadata keys each connector reads (as a source) and writes (as a sink).
_READABLE = {"filesystem": FILE_READABLE, "kafka": KAFKA_READABLE}
_WRITABLE = {"kafka": KAFKA_WRITABLE}


def is_source(connector: str) -> bool:
    """Whether ``connector`` names a source only (a sink-only or two-way connector is
    registered as a sink when declared; a two-way one is also readable)."""
    return connector in _SOURCES and connector not in _SINKS


def is_readable(connector: str) -> bool:
    """Whether a table of ``connector`` can be scanned."""
    return connector in _SOURCES


def _check_options(connector: str, known: set[str], options: Mapping[str, str]) -> None:
    if partition_keys(options) and connector != "filesystem":
        raise ValidationError(
            f"Connector '{connector}' does not take a partitioned table (PARTITIONED BY):"
            " the 'filesystem' connector does"
        )
    unknown = sorted(set(options) - known - {"connector", PARTITION_KEYS_OPTION})
    if unknown:
        raise ValidationError(
            f"Unsupported options found for '{connector}'.\n\nUnsupported options:\n\n"
            + "\n".join(unknown)
            + "\n\nSupported options:\n\n"
            + "\n".join(sorted(known | {"connector"}))
        )


def _no_factory(connector: str) -> ValidationError:
    return ValidationError(
        f"Could not find any factory for identifier '{connector}' that implements"
        " 'org.apache.flink.table.factories.DynamicTableFactory' in the classpath.\n\n"
        f"Available factory identifiers are:\n\n{chr(10).join(sorted({*_SINKS, *_SOURCES}))}"
    )


def create_source(
    name: str, connector: str, schema: Schema | None, options: Mapping[str, str]
) -> PlanNode:
    """The scan of a source table of ``'connector' = connector``, its options checked."""
    if connector not in _SOURCES:
        raise _no_factory(connector)
    if schema is None:
        raise ValidationError(f"Table '{name}' of connector '{connector}' needs a schema")
    columns = schema.physical_columns()
    option_keys, scan = _SOURCES[connector]
    _check_options(connector, option_keys(columns, options), options)
    check_metadata(name, connector, schema, _READABLE.get(connector, {}), reading=True)
    return scan(name, columns, options, schema)


#: Connectors whose tables a lookup join can read (Flink's ``LookupTableSource``).
_LOOKUPS: dict[str, Callable[[str, Columns, Mapping[str, str]], LookupTable]] = {
    "filesystem": filesystem_lookup,
    "jdbc": jdbc_lookup,
}


def is_lookup(connector: str) -> bool:
    """Whether a table of ``connector`` can be joined ``FOR SYSTEM_TIME AS OF`` a
    processing-time attribute (a lookup join)."""
    return connector in _LOOKUPS


def create_lookup(
    name: str, connector: str, schema: Schema, options: Mapping[str, str]
) -> LookupTable:
    """The lookup table of a declared table whose connector has one (``is_lookup``)."""
    return _LOOKUPS[connector](name, schema.physical_columns(), options)


def create_sink(
    name: str, connector: str, schema: Schema | None, options: Mapping[str, str]
) -> SinkTable:
    """The sink of ``'connector' = connector``, its options checked."""
    sink = _SINKS.get(connector)
    if sink is None:
        raise _no_factory(connector)
    columns = schema.physical_columns() if schema is not None else Columns.of([])
    _check_options(connector, sink.option_keys(columns, options), options)
    sink.check(connector, columns, options, schema)
    return SinkTable(name, connector, schema, dict(options))
