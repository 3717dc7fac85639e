"""JDBC sinks (PyFlink ``pyflink.datastream.connectors.jdbc``): rows written by an SQL
statement with ``?`` placeholders, at least once in batches, or exactly once through the
database's two-phase commit.

Invariant: a ``JdbcSink`` is a picklable description checked on the driver (URL, statement,
options, the number of placeholders against the row type); connections exist only in the
writers and committers on the workers, which receive its options as one frozen
``JdbcWriteConfig``, not the sink. ``JdbcSink.sink`` makes rows visible when a batch is
flushed (full, or at each checkpoint: at least once, as Flink's); ``exactly_once_sink``
makes them visible only when the checkpoint that covers them completes (PostgreSQL's
prepared transactions, ``jdbc_postgres``).

>>> from cairn.common import Types
>>> sink = JdbcSink.exactly_once_sink(
...     "INSERT INTO totals (word, n) VALUES (?, ?)",
...     Types.ROW([Types.STRING(), Types.LONG()]),
...     JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
...     .with_url("jdbc:postgresql://127.0.0.1:5432/shop")
...     .with_user_name("cairn").with_password("secret").build(),
...     JdbcExecutionOptions.builder().with_batch_size(1000).build(),
... )
>>> sink.statement.sql, sink.statement.parameters
('INSERT INTO totals (word, n) VALUES (%s, %s)', 2)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cairn.api.connectors import Committer, Sink, SinkWriter, SinkWriterContext
from cairn.common.exceptions import require_module
from cairn.common.typeinfo import RowTypeInfo, TupleTypeInfo, TypeInformation
from cairn.datastream.connectors.jdbc_sql import JdbcWriteConfig, Statement, postgres_conninfo

__all__ = [
    "JdbcConnectionOptions",
    "JdbcExactlyOnceOptions",
    "JdbcExecutionOptions",
    "JdbcSink",
]


@dataclass(frozen=True)
class JdbcConnectionOptions:
    """Where the database is: a ``jdbc:postgresql://host:port/database`` URL (``?key=value``
    connection parameters allowed), the user and the password.

    >>> o = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(
    ...     "jdbc:postgresql://db:5432/shop").with_user_name("u").build()
    >>> o.get_db_url(), o.get_user_name(), o.get_password()
    ('jdbc:postgresql://db:5432/shop', 'u', None)
    """

    url: str
    driver_name: str | None = None
    user_name: str | None = None
    password: str | None = field(default=None, repr=False)

    def get_db_url(self) -> str:
        return self.url

    def get_driver_name(self) -> str | None:
        return self.driver_name

    def get_user_name(self) -> str | None:
        return self.user_name

    def get_password(self) -> str | None:
        return self.password

    class JdbcConnectionOptionsBuilder:
        """Builder for :class:`JdbcConnectionOptions` (PyFlink's names)."""

        def __init__(self) -> None:
            self._url: str | None = None
            self._driver: str | None = None
            self._user: str | None = None
            self._password: str | None = None

        def with_url(self, url: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._url = url
            return self

        def with_driver_name(
            self, driver_name: str
        ) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._driver = driver_name
            return self

        def with_user_name(
            self, user_name: str
        ) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._user = user_name
            return self

        def with_password(
            self, password: str
        ) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._password = password
            return self

        def build(self) -> JdbcConnectionOptions:
            if not self._url:
                raise ValueError("JdbcConnectionOptions need a URL (with_url)")
            return JdbcConnectionOptions(self._url, self._driver, self._user, self._password)


@dataclass(frozen=True)
class JdbcExecutionOptions:
    """Batching: rows are sent ``batch_size`` at a time (and at every checkpoint); a batch
    that fails for a lost connection is retried up to ``max_retries`` times on a new one
    (at-least-once sink only). Flink's defaults: 5000 rows, no interval, 3 retries.

    >>> JdbcExecutionOptions.defaults().get_batch_size()
    5000
    >>> JdbcExecutionOptions.builder().with_batch_size(0).build()
    Traceback (most recent call last):
    ...
    ValueError: JDBC batch size must be positive, got 0
    """

    batch_size: int = 5000
    batch_interval_ms: int = 0
    max_retries: int = 3

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"JDBC batch size must be positive, got {self.batch_size}")
        if self.batch_interval_ms < 0 or self.max_retries < 0:
            raise ValueError("JDBC batch interval and max retries must not be negative")

    def get_batch_interval_ms(self) -> int:
        return self.batch_interval_ms

    def get_batch_size(self) -> int:
        return self.batch_size

    def get_max_retries(self) -> int:
        return self.max_retries

    @staticmethod
    def defaults() -> JdbcExecutionOptions:
        return JdbcExecutionOptions()

    @staticmethod
    def builder() -> JdbcExecutionOptions.Builder:
        return JdbcExecutionOptions.Builder()

    class Builder:
        """Builder for :class:`JdbcExecutionOptions`."""

        def __init__(self) -> None:
            self._size, self._interval, self._retries = 5000, 0, 3

        def with_batch_size(self, size: int) -> JdbcExecutionOptions.Builder:
            self._size = size
            return self

        def with_batch_interval_ms(self, interval_ms: int) -> JdbcExecutionOptions.Builder:
            self._interval = interval_ms
            return self

        def with_max_retries(self, max_retries: int) -> JdbcExecutionOptions.Builder:
            self._retries = max_retries
            return self

        def build(self) -> JdbcExecutionOptions:
            return JdbcExecutionOptions(self._size, self._interval, self._retries)


@dataclass(frozen=True)
class JdbcExactlyOnceOptions:
    """Options of the exactly-once sink (Flink's ``JdbcExactlyOnceOptions``).

    ``recovered_and_rollback`` (default ``True``): after a restore or restart, roll back this
    sink's prepared transactions that no restored checkpoint commits (written after it).
    ``max_commit_attempts`` (3): a commit that fails for a lost connection is retried on a
    new one. ``transaction_id_prefix`` (Cairn's; default: derived from the URL and the
    statement) names the sink's prepared transactions: give two jobs that run the same
    statement against the same database different prefixes, or each rolls back the other's.
    ``allow_out_of_order_commits``, ``transaction_per_connection`` and ``timeout_sec`` are
    accepted for compatibility and change nothing: Cairn commits in checkpoint order,
    PostgreSQL detaches a prepared transaction from its connection anyway, and it has no
    timeout for prepared transactions (an abandoned one waits for ``recovered_and_rollback``
    of the next run, or for an operator's ``ROLLBACK PREPARED``).
    """

    recovered_and_rollback: bool = True
    max_commit_attempts: int = 3
    allow_out_of_order_commits: bool = False
    timeout_sec: int | None = None
    transaction_per_connection: bool = False
    transaction_id_prefix: str | None = None

    def __post_init__(self) -> None:
        if self.max_commit_attempts < 1:
            raise ValueError(f"max_commit_attempts must be >= 1, got {self.max_commit_attempts}")
        if self.timeout_sec is not None and self.timeout_sec < 1:
            raise ValueError(f"timeout_sec must be >= 1 s, got {self.timeout_sec}")
        prefix = self.transaction_id_prefix
        if prefix is not None and (not prefix or len(prefix) > 64 or ":" in prefix):
            raise ValueError(
                f"transaction_id_prefix must be 1-64 characters without ':', got {prefix!r}"
            )

    @staticmethod
    def defaults() -> JdbcExactlyOnceOptions:
        return JdbcExactlyOnceOptions()

    @staticmethod
    def builder() -> JdbcExactlyOnceOptions.Builder:
        return JdbcExactlyOnceOptions.Builder()

    class Builder:
        """Builder for :class:`JdbcExactlyOnceOptions`."""

        def __init__(self) -> None:
            self._kw: dict[str, Any] = {}

        def with_recovered_and_rollback(self, value: bool) -> JdbcExactlyOnceOptions.Builder:
            self._kw["recovered_and_rollback"] = value
            return self

        def with_max_commit_attempts(self, value: int) -> JdbcExactlyOnceOptions.Builder:
            self._kw["max_commit_attempts"] = value
            return self

        def with_allow_out_of_order_commits(self, value: bool) -> JdbcExactlyOnceOptions.Builder:
            self._kw["allow_out_of_order_commits"] = value
            return self

        def with_timeout_sec(self, value: int) -> JdbcExactlyOnceOptions.Builder:
            self._kw["timeout_sec"] = value
            return self

        def with_transaction_per_connection(self, value: bool) -> JdbcExactlyOnceOptions.Builder:
            self._kw["transaction_per_connection"] = value
            return self

        def with_transaction_id_prefix(self, value: str) -> JdbcExactlyOnceOptions.Builder:
            self._kw["transaction_id_prefix"] = value
            return self

        def build(self) -> JdbcExactlyOnceOptions:
            return JdbcExactlyOnceOptions(**self._kw)


def _field_names(type_info: TypeInformation | None) -> list[str] | None:
    return type_info.get_field_names() if isinstance(type_info, RowTypeInfo) else None


def _arity(type_info: TypeInformation | None) -> int | None:
    if isinstance(type_info, RowTypeInfo | TupleTypeInfo):
        return len(type_info.get_field_types())
    return None


class JdbcSink(Sink):
    """Writes each record as the parameters of one execution of ``sql``, at least once.

    Create it with :meth:`sink` or :meth:`exactly_once_sink` and add it with
    ``stream.add_sink(...)`` (as in PyFlink) or ``stream.sink_to(...)``. A record is a
    ``Row``, a tuple or a list of the placeholders' values in order (a dict by the field
    names of a ``Types.ROW_NAMED`` type; any other value fills a single placeholder).
    Supported databases: PostgreSQL (``jdbc:postgresql://``), through psycopg
    (``pip install 'cairn[postgres]'``); ``?`` placeholders as in JDBC (``??`` for a
    literal ``?``).
    """

    def __init__(
        self,
        sql: str,
        type_info: TypeInformation | None,
        connection: JdbcConnectionOptions,
        execution: JdbcExecutionOptions | None = None,
    ) -> None:
        if not isinstance(connection, JdbcConnectionOptions):
            raise TypeError(
                "jdbc_connection_options must be JdbcConnectionOptions, got "
                f"{type(connection).__name__}"
            )
        self.connection = connection
        self.conninfo = postgres_conninfo(connection.url, connection.driver_name)
        self.statement = Statement.parse(sql)
        self.execution = execution or JdbcExecutionOptions.defaults()
        self.field_names = _field_names(type_info)
        arity = _arity(type_info)
        if arity is not None and arity != self.statement.parameters:
            raise ValueError(
                f"the JDBC statement has {self.statement.parameters} placeholders but its row "
                f"type {type_info!r} has {arity} fields: {sql!r}"
            )
        _require_psycopg()

    @staticmethod
    def sink(
        sql: str,
        type_info: TypeInformation | None,
        jdbc_connection_options: JdbcConnectionOptions,
        jdbc_execution_options: JdbcExecutionOptions | None = None,
    ) -> JdbcSink:
        """At-least-once: rows become visible batch by batch; after a failure the rows since
        the last checkpoint are written again (use an idempotent statement, e.g. an upsert,
        for exactly-once results)."""
        return JdbcSink(sql, type_info, jdbc_connection_options, jdbc_execution_options)

    @staticmethod
    def exactly_once_sink(
        sql: str,
        type_info: TypeInformation | None,
        jdbc_connection_options: JdbcConnectionOptions,
        jdbc_execution_options: JdbcExecutionOptions | None = None,
        jdbc_exactly_once_options: JdbcExactlyOnceOptions | None = None,
    ) -> ExactlyOnceJdbcSink:
        """Exactly-once: each subtask writes into one transaction per checkpoint, prepares
        it at the barrier (``PREPARE TRANSACTION``) and commits it when the checkpoint
        completes (``COMMIT PREPARED``). Needs the server's ``max_prepared_transactions``
        >= the sink's parallelism x (max concurrent checkpoints + 1)."""
        return ExactlyOnceJdbcSink(
            sql,
            type_info,
            jdbc_connection_options,
            jdbc_execution_options,
            jdbc_exactly_once_options or JdbcExactlyOnceOptions.defaults(),
        )

    def create_writer(
        self, context: SinkWriterContext, restored_state: Sequence[Any]
    ) -> SinkWriter:
        from cairn.datastream.connectors.jdbc_postgres import BatchingWriter

        return BatchingWriter(self.write_config(), context)

    def write_config(self) -> JdbcWriteConfig:
        """What the writers and committer receive (never the sink itself)."""
        return JdbcWriteConfig(
            conninfo=self.conninfo,
            user_name=self.connection.user_name,
            password=self.connection.password,
            statement=self.statement,
            field_names=self.field_names,
            batch_size=self.execution.batch_size,
            batch_interval_ms=self.execution.batch_interval_ms,
            max_retries=self.execution.max_retries,
        )


class ExactlyOnceJdbcSink(JdbcSink):
    """The two-phase sink of :meth:`JdbcSink.exactly_once_sink`."""

    def __init__(
        self,
        sql: str,
        type_info: TypeInformation | None,
        connection: JdbcConnectionOptions,
        execution: JdbcExecutionOptions | None,
        exactly_once: JdbcExactlyOnceOptions,
    ) -> None:
        super().__init__(sql, type_info, connection, execution)
        self.exactly_once = exactly_once
        self.transaction_prefix = exactly_once.transaction_id_prefix or default_prefix(
            connection.url, sql
        )

    def create_writer(
        self, context: SinkWriterContext, restored_state: Sequence[Any]
    ) -> SinkWriter:
        from cairn.datastream.connectors.jdbc_postgres import TransactionalWriter

        return TransactionalWriter(self.write_config(), context)

    def create_committer(self) -> Committer:
        from cairn.datastream.connectors.jdbc_postgres import PreparedTransactionCommitter

        return PreparedTransactionCommitter(self.write_config())

    def write_config(self) -> JdbcWriteConfig:
        return replace(
            super().write_config(),
            transaction_prefix=self.transaction_prefix,
            recovered_and_rollback=self.exactly_once.recovered_and_rollback,
            max_commit_attempts=self.exactly_once.max_commit_attempts,
        )


def default_prefix(url: str, sql: str) -> str:
    """The default name of a sink's prepared transactions: stable across runs of the same
    job (a restored run rolls back what the failed one left), distinct per URL and statement.

    >>> default_prefix("jdbc:postgresql://h/db", "INSERT ...")
    'j05652387afa0'
    """
    return "j" + hashlib.sha256(f"{url}\n{sql}".encode()).hexdigest()[:12]


def _require_psycopg() -> None:
    require_module("psycopg", "the JDBC sink (PostgreSQL, through psycopg)", "postgres")
