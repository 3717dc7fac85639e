"""The ``iceberg`` table sink on Cairn's ``IcebergSink``.

Invariant: insert-only rows of a query (or, with a ``PRIMARY KEY``, its changelog, upserted
by the key) go to the Iceberg table ``catalog-database``.
``catalog-table`` (default: the declared table's name) through the exactly-once
``IcebergSink``, whose row type is the declared columns' (so the table is created from them,
or checked against them, before the job starts). The options are Flink's Iceberg connector's
keys where they exist (``catalog-name``, ``catalog-type``, ``catalog-database``,
``catalog-table``, ``uri``, ``warehouse``); ``catalog-type`` is pyiceberg's (``sql``); every
``s3.*`` key goes to the catalog as it is, every ``write.*`` key (Iceberg's table properties,
``write.target-file-size-bytes``) to a table the sink creates, as Flink's connector does.

>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("k", DataTypes.STRING()), ("n", DataTypes.BIGINT())])
>>> sorted(iceberg_options(cols, {"s3.endpoint": "http://s3"}))[:3]
['catalog-database', 'catalog-name', 'catalog-table']
>>> catalog_properties({"uri": "sqlite:///c.db", "warehouse": "/wh", "s3.region": "eu"})
{'type': 'sql', 'uri': 'sqlite:///c.db', 'warehouse': '/wh', 's3.region': 'eu'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.api.functions import MapFunction
from cairn.common.typeinfo import Types
from cairn.datastream.data_stream import DataStream
from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.operators import fields_key
from cairn.table.schema import Schema
from cairn.table.types import to_type_info

__all__ = ["catalog_properties", "check_iceberg", "iceberg_options", "iceberg_sink"]

_KEYS = {
    "catalog-name",
    "catalog-type",
    "catalog-database",
    "catalog-table",
    "uri",
    "warehouse",
    "sink.parallelism",
    "sink.rows-per-file",
}


def iceberg_options(columns: Columns, options: Mapping[str, str]) -> set[str]:
    """The option keys of an ``iceberg`` table: its own, and the ``s3.*`` and ``write.*``
    keys given."""
    return _KEYS | {k for k in options if k.startswith(("s3.", "write."))}


def catalog_properties(options: Mapping[str, str]) -> dict[str, str]:
    """pyiceberg's catalog properties of a table's options."""
    properties = {"type": options.get("catalog-type", "sql")}
    for key in ("uri", "warehouse"):
        if key in options:
            properties[key] = options[key]
    properties.update({k: v for k, v in options.items() if k.startswith("s3.")})
    return properties


def check_iceberg(
    connector: str, columns: Columns, options: Mapping[str, str], schema: Schema | None
) -> None:
    """Fail at planning on a missing ``uri``, or a catalog type other than pyiceberg's SQL."""
    missing = [k for k in ("uri",) if not options.get(k)]
    if missing:
        raise ValidationError(
            "One or more required options are missing.\n\nMissing required options are:\n\n"
            + "\n".join(missing)
        )
    kind = options.get("catalog-type", "sql")
    if kind != "sql":
        raise ValidationError(
            f"Cairn's iceberg connector writes through pyiceberg's SQL catalog "
            f"('catalog-type' = 'sql'), got '{kind}'"
        )


class _Row(MapFunction):
    def map(self, value: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
        return value[1]


def iceberg_sink(
    name: str,
    schema: Schema | None,
    columns: Columns,
    options: Mapping[str, str],
    stream: DataStream,
) -> None:
    """Append the insert-only rows of ``stream`` to the Iceberg table, or, with a primary
    key, upsert the query's changelog by it (rows shuffled by the key)."""
    from cairn.datastream.connectors.iceberg import IcebergSink

    row_type = Types.ROW_NAMED(list(columns.names), [to_type_info(t) for t in columns.types])
    keys = list(schema.primary_key) if schema is not None else []
    table = f"{options.get('catalog-database', 'default')}.{options.get('catalog-table', name)}"
    sink = IcebergSink(
        table,
        catalog_properties(options),
        row_type,
        catalog_name=options.get("catalog-name", "cairn"),
        rows_per_file=int(options.get("sink.rows-per-file", "1000000")),
        table_properties={k: v for k, v in options.items() if k.startswith("write.")},
        equality_field_columns=keys,
        upsert=bool(keys),
    )
    if keys:
        index = [columns.index(k) for k in keys]
        rows = stream.key_by(fields_key(index))  # the (kind, row) changes, by key
    else:
        rows = stream.map(_Row(), output_type=row_type).name(f"Sink rows: {name}")
    out = rows.sink_to(sink).name(f"Sink: {name}").uid(f"table-sink-{name}")
    if "sink.parallelism" in options:
        out.set_parallelism(int(options["sink.parallelism"]))
