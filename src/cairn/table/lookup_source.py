"""The tables a lookup join reads (Flink's ``LookupTableSource``): ``jdbc`` and ``filesystem``.

Invariant: a lookup returns the table's rows, as they are when it is called, whose key
columns equal the key (NULL equals nothing, as SQL's ``=``); the rows have the table's
physical columns in its order. A lookup function is a picklable value opened in each
subtask: ``jdbc`` asks PostgreSQL one ``SELECT ... WHERE k = %s`` per key (tried again on a
lost connection ``lookup.max-retries`` times, then the job fails naming the table);
``filesystem`` reads every file under its ``path`` into memory and reads them again after
``lookup.join.cache.ttl`` (60 min; the Hive connector's option and behaviour, as Flink's
filesystem connector has no lookup).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from cairn.common.config_values import parse_duration_ms
from cairn.datastream.connectors.jdbc_postgres import where
from cairn.datastream.connectors.jdbc_sql import postgres_conninfo
from cairn.table.analysis import Columns
from cairn.table.errors import ValidationError
from cairn.table.formats import row_deserializer
from cairn.table.lookup_cache import LookupCacheOptions, cache_options

__all__ = [
    "FileSystemLookup",
    "JdbcLookup",
    "LookupFailure",
    "LookupFunction",
    "LookupTable",
    "filesystem_lookup",
    "jdbc_lookup",
]

log = logging.getLogger(__name__)


class LookupFunction(Protocol):
    """Rows of a table by the values of some of its columns."""

    def open(self) -> None: ...

    def lookup(self, key: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LookupTable:
    """A table a lookup join can read: its name, physical columns, cache options, and
    ``function(key_columns)`` building the lookup by those columns' positions."""

    name: str
    connector: str
    columns: Columns
    cache: LookupCacheOptions
    function: Any = field(compare=False)

    def renamed(self, names: list[str]) -> LookupTable:
        """The same table with its columns named ``names`` in a query (the lookup itself
        still reads the table's own columns)."""
        return replace(self, columns=Columns.of(list(zip(names, self.columns.types, strict=True))))


class LookupFailure(RuntimeError):
    """A lookup that failed after its retries."""


class JdbcLookup:
    """``SELECT <columns> FROM <table> WHERE k1 = %s AND ...`` on PostgreSQL."""

    def __init__(
        self,
        conninfo: str,
        table: str,
        columns: Columns,
        keys: tuple[int, ...],
        user: str | None,
        password: str | None,
        max_retries: int,
    ) -> None:
        self.conninfo = conninfo
        self.table = table
        self.keys = keys
        self.user = user
        self.password = password
        self.max_retries = max_retries
        quote = _quote
        names = ", ".join(quote(n) for n in columns.names)
        match = " AND ".join(f"{quote(columns.names[k])} = %s" for k in keys)
        qualified = ".".join(quote(p) for p in table.split("."))
        self.sql = f"SELECT {names} FROM {qualified} WHERE {match}"
        self._conn: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_conn"] = None
        return state

    def open(self) -> None:
        self._conn = None  # connected on the first lookup

    def _connect(self) -> Any:
        import psycopg

        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": 10}
        kwargs["application_name"] = "cairn-lookup-join"
        if self.user is not None:
            kwargs["user"], kwargs["password"] = self.user, self.password
        return psycopg.connect(self.conninfo, **kwargs)

    def lookup(self, key: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        import psycopg

        if any(v is None for v in key):
            return []
        for attempt in range(self.max_retries + 1):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = self._connect()
                with self._conn.cursor() as cur:
                    cur.execute(self.sql, key)
                    return [tuple(r) for r in cur.fetchall()]
            except psycopg.OperationalError as exc:
                self.close()
                if attempt >= self.max_retries:
                    raise LookupFailure(
                        f"JDBC lookup of table '{self.table}' at {where(self.conninfo)} failed"
                        f" after {attempt + 1} attempt(s): {str(exc).strip().splitlines()[0]}"
                    ) from exc
                log.warning("JDBC lookup of '%s' failed (%s), trying again", self.table, exc)
                time.sleep(min(1.0 * (attempt + 1), 5.0))
            except psycopg.Error as exc:
                raise LookupFailure(
                    f"JDBC lookup of table '{self.table}' at {where(self.conninfo)} failed:"
                    f" {str(exc).strip().splitlines()[0]}"
                ) from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # a broken connection
                pass


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class FileSystemLookup:
    """Every row of the files under ``path``, by key, read again every ``reload_ms``."""

    def __init__(
        self,
        path: str,
        columns: Columns,
        options: Mapping[str, str],
        keys: tuple[int, ...],
        reload_ms: int,
    ) -> None:
        self.path = path
        self.columns = columns
        self.options = dict(options)
        self.keys = keys
        self.reload_ms = reload_ms
        self._rows: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        self._loaded_at: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_rows"], state["_loaded_at"] = {}, None
        return state

    def open(self) -> None:
        self._loaded_at = None

    def _load(self) -> None:
        from cairn.common.storage_options import url_to_fresh_fs

        schema = row_deserializer(self.options["format"], self.columns, self.options)
        fs, root = url_to_fresh_fs(self.path)
        files = [root] if fs.isfile(root) else sorted(fs.find(root))
        rows: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for name in files:
            base = name.rstrip("/").rsplit("/", 1)[-1]
            if base.startswith((".", "_")):  # hidden and in-progress files, as Flink skips
                continue
            with fs.open(name, "rb") as f:
                for n, line in enumerate(f.read().splitlines()):
                    if not line.strip():
                        continue
                    try:
                        row = schema.deserialize(line)
                    except (ValueError, TypeError) as e:
                        raise ValueError(
                            f"Failed to deserialize line {n + 1} of {name} (lookup table): {e}"
                        ) from e
                    if row is None:
                        continue
                    values = tuple(row)
                    rows.setdefault(tuple(values[k] for k in self.keys), []).append(values)
        self._rows = rows
        self._loaded_at = time.monotonic()
        log.info("lookup table %s: %d keys read", self.path, len(rows))

    def lookup(self, key: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if self._loaded_at is None or (time.monotonic() - self._loaded_at) * 1000 >= self.reload_ms:
            self._load()
        if any(v is None for v in key):
            return []
        return self._rows.get(key, [])

    def close(self) -> None:
        self._rows = {}


def jdbc_lookup(name: str, columns: Columns, options: Mapping[str, str]) -> LookupTable:
    """A ``jdbc`` table as a lookup table."""
    try:
        conninfo = postgres_conninfo(options["url"], options.get("driver", "org.postgresql.Driver"))
    except ValueError as e:
        raise ValidationError(f"Table '{name}': {e}") from None
    cache = cache_options(options)
    table = options["table-name"]
    user, password = options.get("username"), options.get("password")

    def function(keys: tuple[int, ...]) -> LookupFunction:
        return JdbcLookup(conninfo, table, columns, keys, user, password, cache.max_retries)

    return LookupTable(name, "jdbc", columns, cache, function)


#: The filesystem lookup's reload interval (the Hive connector's ``lookup.join.cache.ttl``).
FILESYSTEM_RELOAD_KEY = "lookup.join.cache.ttl"


def filesystem_lookup(name: str, columns: Columns, options: Mapping[str, str]) -> LookupTable:
    """A ``filesystem`` table as a lookup table (all of it in memory, reloaded)."""
    text = options.get(FILESYSTEM_RELOAD_KEY, "60 min")
    try:
        reload_ms = parse_duration_ms(text)
    except ValueError:
        raise ValidationError(
            f"Could not parse value '{text}' for key '{FILESYSTEM_RELOAD_KEY}'."
        ) from None
    path = options["path"]

    def function(keys: tuple[int, ...]) -> LookupFunction:
        return FileSystemLookup(path, columns, options, keys, reload_ms)

    return LookupTable(name, "filesystem", columns, cache_options({}), function)
