"""The ``jdbc`` table sink (PostgreSQL) on Cairn's ``JdbcSink``.

Invariant: with a primary key the sink is an upsert sink — rows shuffled by the key, ``+I``
and ``+U`` an ``INSERT ... ON CONFLICT (key) DO UPDATE``, ``-D`` a delete of the key, ``-U``
nothing — so writing a change again after a restore leaves the same row (the statements are
idempotent per key and a key's changes stay in order); without one it appends rows of an
insert-only query. Flink's JDBC table sink is at least once; so is this one, and its upserts
make the table's final content the query's result after any failure.

>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("k", DataTypes.STRING()), ("n", DataTypes.BIGINT())])
>>> print(upsert_sql("totals", cols, ["k"]).replace(" INSERT", "\\nINSERT").replace(" ON", "\\nON"))
WITH cairn_delete AS (DELETE FROM "totals" WHERE ? AND "k" = ?)
INSERT INTO "totals" ("k", "n") SELECT ?, ? WHERE NOT ?
ON CONFLICT ("k") DO UPDATE SET "n" = EXCLUDED."n"
>>> UpsertParameters([0], 2).map((3, ("a", 4)))
(True, 'a', 'a', 4, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.api.functions import FlatMapFunction, MapFunction
from cairn.common.config_values import parse_duration_ms
from cairn.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from cairn.datastream.data_stream import DataStream
from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.lookup_cache import CACHE_KEYS
from cairn.table.operators import fields_key
from cairn.table.schema import Schema

__all__ = [
    "UpsertParameters",
    "append_sql",
    "check_jdbc",
    "jdbc_options",
    "jdbc_sink",
    "upsert_sql",
]

_KEYS = {
    "url",
    "table-name",
    "driver",
    "username",
    "password",
    "connection.max-retry-timeout",
    "sink.buffer-flush.max-rows",
    "sink.buffer-flush.interval",
    "sink.max-retries",
    "sink.parallelism",
}


def jdbc_options(columns: Columns, options: Mapping[str, str]) -> set[str]:
    """The option keys of a ``jdbc`` table."""
    return set(_KEYS) | CACHE_KEYS


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(name: str) -> str:
    return ".".join(_quote(part) for part in name.split("."))


def append_sql(table: str, columns: Columns) -> str:
    """The insert of one row."""
    names = ", ".join(_quote(n) for n in columns.names)
    marks = ", ".join("?" for _ in columns.names)
    return f"INSERT INTO {_table(table)} ({names}) VALUES ({marks})"


def upsert_sql(table: str, columns: Columns, keys: list[str]) -> str:
    """One statement for an upsert or a delete (the first and last parameters say which), so
    a key's changes keep their order within the sink's batches."""
    t = _table(table)
    names = ", ".join(_quote(n) for n in columns.names)
    match = " AND ".join(f"{_quote(k)} = ?" for k in keys)
    marks = ", ".join("?" for _ in columns.names)
    rest = [n for n in columns.names if n not in keys]
    action = (
        "DO UPDATE SET " + ", ".join(f"{_quote(n)} = EXCLUDED.{_quote(n)}" for n in rest)
        if rest
        else "DO NOTHING"
    )
    return (
        f"WITH cairn_delete AS (DELETE FROM {t} WHERE ? AND {match})"
        f" INSERT INTO {t} ({names}) SELECT {marks} WHERE NOT ?"
        f" ON CONFLICT ({', '.join(_quote(k) for k in keys)}) {action}"
    )


class UpsertParameters(MapFunction):
    """A change as the parameters of :func:`upsert_sql`: ``(is_delete, key..., row...,
    is_delete)``."""

    def __init__(self, key_index: list[int], arity: int) -> None:
        self.key_index, self.arity = key_index, arity

    def map(self, value: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
        kind, row = value
        delete = kind == 3
        return (delete, *(row[i] for i in self.key_index), *row, delete)


class _Upserts(FlatMapFunction):
    """``-U`` dropped: the ``+U`` after it overwrites the row."""

    def flat_map(self, value: tuple[int, tuple[Any, ...]]) -> Any:
        return () if value[0] == 1 else (value,)


class _Row(MapFunction):
    def map(self, value: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
        return value[1]


def _int(options: Mapping[str, str], key: str, default: int) -> int:
    text = options.get(key)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValidationError(f"Could not parse value '{text}' for key '{key}'.") from None


def _execution(options: Mapping[str, str]) -> JdbcExecutionOptions:
    interval = options.get("sink.buffer-flush.interval", "1 s")
    try:
        interval_ms = parse_duration_ms(interval)
    except ValueError as e:
        raise ValidationError(
            f"Could not parse value '{interval}' for key 'sink.buffer-flush.interval': {e}"
        ) from None
    return (
        JdbcExecutionOptions.builder()
        .with_batch_size(_int(options, "sink.buffer-flush.max-rows", 100))
        .with_batch_interval_ms(interval_ms)
        .with_max_retries(_int(options, "sink.max-retries", 3))
        .build()
    )


def check_jdbc(
    connector: str, columns: Columns, options: Mapping[str, str], schema: Schema | None
) -> None:
    """Fail at planning on a missing ``url``/``table-name``, a non-PostgreSQL URL or a bad
    value."""
    missing = [k for k in ("url", "table-name") if not options.get(k)]
    if missing:
        raise ValidationError(
            "One or more required options are missing.\n\nMissing required options are:\n\n"
            + "\n".join(missing)
        )
    if not options["url"].startswith("jdbc:postgresql:"):
        raise ValidationError(
            f"Cairn's jdbc table connector writes to PostgreSQL (jdbc:postgresql://...),"
            f" got url '{options['url']}'"
        )
    if ("username" in options) != ("password" in options):
        raise ValidationError(
            "Either all or none of the following options should be provided:\nusername\npassword"
        )
    _execution(options)


def jdbc_sink(
    name: str,
    schema: Schema | None,
    columns: Columns,
    options: Mapping[str, str],
    stream: DataStream,
) -> None:
    """Write ``stream`` into the table: upserts and deletes with a primary key, else inserts."""
    connection = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(options["url"])
    if "driver" in options:
        connection.with_driver_name(options["driver"])
    if "username" in options:
        connection.with_user_name(options["username"]).with_password(options["password"])
    keys = list(schema.primary_key) if schema is not None else []
    table = options["table-name"]
    if keys:
        index = [columns.index(k) for k in keys]
        rows = (
            stream.key_by(fields_key(index))
            .flat_map(_Upserts())
            .name(f"Sink upsert: {name}")
            .uid(f"table-upsert-{name}")
            .map(UpsertParameters(index, len(columns.names)))
        )
        sql = upsert_sql(table, columns, keys)
    else:
        rows = stream.map(_Row())
        sql = append_sql(table, columns)
    sink = JdbcSink.sink(sql, None, connection.build(), _execution(options))
    out = rows.sink_to(sink).name(f"Sink: {name}").uid(f"table-sink-{name}")
    if "sink.parallelism" in options:
        out.set_parallelism(int(options["sink.parallelism"]))
