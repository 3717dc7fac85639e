"""The ``delta`` table sink on Cairn's ``DeltaSink`` (``pip install cairn[delta]``).

Invariant: the sink writes exactly once with checkpointing, one Delta version per
checkpoint; with a primary key it is an upsert sink — rows shuffled by the key, merged into
the table (``+I``/``+U`` insert or replace the key's row, ``-D`` deletes it, ``-U`` is
dropped) — and without one it appends the rows of an insert-only query. The table is
created at submission if missing; an existing one must have the sink's columns.

>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("k", DataTypes.STRING()), ("n", DataTypes.BIGINT())])
>>> delta_row_type(cols)
RowTypeInfo(k: String, n: Long)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.api.functions import MapFunction
from cairn.common import Types
from cairn.common.typeinfo import RowTypeInfo
from cairn.datastream.connectors.delta import DeltaSink
from cairn.datastream.data_stream import DataStream
from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.operators import fields_key
from cairn.table.schema import Schema
from cairn.table.types import to_type_info

__all__ = ["check_delta", "delta_options", "delta_row_type", "delta_sink"]

_KEYS = {"table-path", "sink.parallelism", "sink.app-id"}


def delta_options(columns: Columns, options: Mapping[str, str]) -> set[str]:
    """The option keys of a ``delta`` table: its own and the Delta table properties given
    (``delta.targetFileSize``, ``delta.enableChangeDataFeed``...), set on a table the sink
    creates."""
    return _KEYS | {k for k in options if k.startswith("delta.")}


def check_delta(
    connector: str, columns: Columns, options: Mapping[str, str], schema: Schema | None
) -> None:
    """Fail at planning without a ``table-path``."""
    if not options.get("table-path"):
        raise ValidationError(
            "One or more required options are missing.\n\nMissing required options are:\n\n"
            "table-path"
        )


def delta_row_type(columns: Columns) -> RowTypeInfo:
    """The rows the sink writes: the table's physical columns."""
    return Types.ROW_NAMED(
        list(columns.names), [to_type_info(c.data_type) for c in columns.columns]
    )


class _Row(MapFunction):
    def map(self, value: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
        return value[1]


def delta_sink(
    name: str,
    schema: Schema | None,
    columns: Columns,
    options: Mapping[str, str],
    stream: DataStream,
) -> None:
    """Write ``stream`` into the Delta table at ``table-path``: merged by the primary key if
    the table declares one, else appended."""
    builder = DeltaSink.for_row_data(options["table-path"], delta_row_type(columns))
    if "sink.app-id" in options:
        builder = builder.with_app_id(options["sink.app-id"])
    properties = {k: v for k, v in options.items() if k.startswith("delta.")}
    if properties:
        builder = builder.with_table_properties(properties)
    keys = list(schema.primary_key) if schema is not None else []
    if keys:
        index = [columns.index(k) for k in keys]
        rows = stream.key_by(fields_key(index))  # the (kind, row) changes, by key
        builder = builder.with_upsert_keys(*keys)
    else:
        rows = stream.map(_Row()).name(f"Sink rows: {name}")
    out = rows.sink_to(builder.build()).name(f"Sink: {name}").uid(f"table-sink-{name}")
    if "sink.parallelism" in options:
        out.set_parallelism(int(options["sink.parallelism"]))
