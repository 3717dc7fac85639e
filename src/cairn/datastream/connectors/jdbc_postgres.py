"""The JDBC sinks' writers and committer on PostgreSQL, through psycopg.

Invariant (exactly-once): a subtask's rows go only into its open transaction, named
``cairn:<prefix>:<job id>:<attempt>:<subtask>:<n>``; at a checkpoint barrier the transaction
is prepared (``PREPARE TRANSACTION``: durable, invisible, detached from the connection) and
its name becomes the checkpoint's committable; ``COMMIT PREPARED`` makes it visible once the
checkpoint completed (again after a restore: a name already committed is no longer known to
the server, and counts as done). After a restore or restart, once the restored names are
committed, every prepared transaction of the sink's prefix that the current attempt did not
open is rolled back: its rows are replayed from the checkpoint.

At-least-once: rows are sent ``batch_size`` at a time, each batch in its own transaction,
and whatever is buffered at a checkpoint barrier is sent before the barrier passes.
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from cairn.api.connectors import Committer, SinkWriter, SinkWriterContext
from cairn.datastream.connectors.jdbc_sql import JdbcWriteConfig, record_parameters
from cairn.ids import CheckpointId

__all__ = [
    "BatchingWriter",
    "JdbcSinkError",
    "JdbcTransaction",
    "PreparedTransactionCommitter",
    "TransactionalWriter",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

_CONNECT_TIMEOUT_S = 10
_RETRY_PAUSE_S = 1.0  # Flink's JDBC sink sleeps 1 s x attempt before retrying a batch


class JdbcSinkError(RuntimeError):
    """A JDBC sink could not write or commit; the message names the database (never the
    password), the statement and the server's own words."""


@dataclass(frozen=True)
class JdbcTransaction:
    """The committable of the exactly-once sink: one prepared transaction's name."""

    gid: str


def where(conninfo: str) -> str:
    """The database of a libpq URI for messages: host, port and name, no credentials.

    >>> where("postgresql://u:secret@db.local:5433/shop?sslmode=require")
    'postgresql://db.local:5433/shop'
    """
    parts = urlsplit(conninfo)
    port = f":{parts.port}" if parts.port else ""
    return f"postgresql://{parts.hostname or ''}{port}{parts.path}"


def _server_words(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    detail = getattr(diag, "message_detail", None) if diag is not None else None
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{text} ({detail})" if detail else text


def connect(sink: JdbcWriteConfig, autocommit: bool) -> Any:
    """A new connection of ``sink``'s options; a clear ``JdbcSinkError`` if there is none."""
    import psycopg

    kwargs: dict[str, Any] = {
        "autocommit": autocommit,
        "connect_timeout": _CONNECT_TIMEOUT_S,
        "application_name": "cairn-jdbc-sink",
    }
    if sink.user_name is not None:
        kwargs["user"] = sink.user_name
    if sink.password is not None:
        kwargs["password"] = sink.password
    try:
        return psycopg.connect(sink.conninfo, **kwargs)
    except psycopg.Error as exc:
        raise JdbcSinkError(
            f"JDBC sink: cannot connect to {where(sink.conninfo)}: {_server_words(exc)}"
        ) from exc


class _AutocommitLink:
    """An autocommit connection of a sink, opened when first needed and again after it was
    lost: ``run`` retries an action on a new connection when the old one fails
    (``OperationalError``), pausing 1 s x attempt in between, ``attempts`` times in all."""

    def __init__(self, sink: JdbcWriteConfig) -> None:
        self._sink = sink
        self._conn: Any = None

    def run(self, action: Callable[[Any], T], attempts: int, what: str) -> T:
        import psycopg

        for attempt in range(1, attempts + 1):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = connect(self._sink, autocommit=True)
                return action(self._conn)
            except psycopg.OperationalError as exc:
                self.close()
                if attempt == attempts:
                    raise
                log.warning("JDBC sink: %s failed (%s), trying again", what, exc)
                time.sleep(_RETRY_PAUSE_S * attempt)
        raise AssertionError("unreachable")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a broken connection
                pass


def execute(cur: Any, sink: JdbcWriteConfig, rows: list[tuple[Any, ...]]) -> None:
    """Send ``rows``: through ``COPY`` when the statement is a plain ``INSERT`` of
    placeholders (the same rows; ~0.3 us of client CPU per row instead of ~7), else as
    ``executemany`` of the statement."""
    copy = sink.statement.copy
    if copy is None:
        cur.executemany(sink.statement.sql, rows)
        return
    with cur.copy(copy) as stream:
        write_row = stream.write_row
        for row in rows:
            write_row(row)


class _Rows:
    """The rows of one subtask not yet sent, converted from records on arrival."""

    def __init__(self, sink: JdbcWriteConfig) -> None:
        self.sink = sink
        self.rows: list[tuple[Any, ...]] = []
        self._parameters = sink.statement.parameters
        self._names = sink.field_names
        self._interval_ms = sink.batch_interval_ms
        self.due_ms: int | None = None  # the batch interval after the oldest buffered row

    def add(self, records: Sequence[Any]) -> bool:
        """Buffer ``records``; whether a batch is due (full, or older than the interval)."""
        rows, n, names = self.rows, self._parameters, self._names
        if not rows and self._interval_ms > 0:
            self.due_ms = int(time.time() * 1000) + self._interval_ms
        for record in records:
            rows.append(record_parameters(record, n, names))
        if len(rows) >= self.sink.batch_size:
            return True
        return self.due_ms is not None and time.time() * 1000 >= self.due_ms

    def next_flush_ms(self) -> int | None:
        return self.due_ms if self.rows else None

    def failure(self, exc: BaseException, what: str) -> JdbcSinkError:
        return JdbcSinkError(
            f"JDBC sink: {what} of {len(self.rows)} rows to {where(self.sink.conninfo)} "
            f"failed: {_server_words(exc)}; statement: {self.sink.statement.sql!r}"
        )


class _BufferedWriter(SinkWriter):
    """Records are converted to rows on arrival and sent when a batch is due, and at every
    barrier (``flush``); ``_send`` says how."""

    _buffer: _Rows

    def write(self, record: Any) -> None:
        if self._buffer.add((record,)):
            self._send()

    def write_batch(self, records: Sequence[Any]) -> None:
        if self._buffer.add(records):
            self._send()

    def flush(self, end_of_input: bool) -> None:
        self._send()

    def next_flush_ms(self) -> int | None:
        return self._buffer.next_flush_ms()

    @abstractmethod
    def _send(self) -> None: ...


class BatchingWriter(_BufferedWriter):
    """``JdbcSink.sink``: each batch in a transaction of its own, retried on a new
    connection when the connection was lost (``max_retries``)."""

    def __init__(self, sink: JdbcWriteConfig, context: SinkWriterContext) -> None:
        self._sink = sink
        self._buffer = _Rows(sink)
        self._link = _AutocommitLink(sink)
        self._link.run(lambda conn: None, 1, "connecting")  # fail at start, not at a batch

    def _send(self) -> None:
        import psycopg

        buffer = self._buffer
        if not buffer.rows:
            return

        def send(conn: Any) -> None:
            with conn.transaction(), conn.cursor() as cur:
                execute(cur, self._sink, buffer.rows)

        retries = self._sink.max_retries
        try:
            self._link.run(send, retries + 1, "a batch")
        except psycopg.OperationalError as exc:
            raise buffer.failure(exc, f"a batch (after {retries} retries)") from exc
        except psycopg.Error as exc:
            raise buffer.failure(exc, "a batch") from exc
        buffer.rows.clear()

    def close(self) -> None:
        self._link.close()


class TransactionalWriter(_BufferedWriter):
    """``JdbcSink.exactly_once_sink``: one transaction per checkpoint, prepared at the
    barrier. Failures are not retried here: the job restarts from the checkpoint."""

    def __init__(self, sink: JdbcWriteConfig, context: SinkWriterContext) -> None:
        self._sink = sink
        self._buffer = _Rows(sink)
        self._name = (
            f"cairn:{sink.transaction_prefix}:{context.job_id}:{context.attempt_number}:"
            f"{context.subtask_index}:"
        )
        self._count = 0
        self._open: str | None = None
        self._conn: Any = connect(sink, autocommit=False)
        self._check_server()

    def _check_server(self) -> None:
        row = self._conn.execute("SHOW max_prepared_transactions").fetchone()
        self._conn.rollback()
        if row is None or int(row[0]) < 1:
            self._conn.close()
            raise JdbcSinkError(
                f"JDBC sink: {where(self._sink.conninfo)} has max_prepared_transactions = 0, "
                "and the exactly-once sink prepares a transaction per subtask and checkpoint: "
                "set max_prepared_transactions (at least the sink's parallelism x (max "
                "concurrent checkpoints + 1)) in postgresql.conf and restart the server, or "
                "use JdbcSink.sink (at least once)"
            )

    def _send(self) -> None:
        import psycopg

        buffer = self._buffer
        if not buffer.rows:
            return
        try:
            if self._open is None:
                gid = f"{self._name}{self._count}"
                self._count += 1
                try:
                    self._begin(gid)
                except psycopg.OperationalError:  # lost between transactions: nothing in it
                    self._conn.close()
                    self._conn = connect(self._sink, autocommit=False)
                    self._begin(gid)
                self._open = gid
            with self._conn.cursor() as cur:
                execute(cur, self._sink, buffer.rows)
        except psycopg.Error as exc:
            raise buffer.failure(exc, f"transaction {self._open!r}: a batch") from exc
        buffer.rows.clear()

    def _begin(self, gid: str) -> None:
        self._conn.tpc_begin(gid)
        self._conn.execute("SELECT 1")  # the BEGIN goes out now, on a connection that works

    def prepare_commit(self, checkpoint_id: CheckpointId) -> list[JdbcTransaction]:
        import psycopg

        self._send()
        gid = self._open
        if gid is None:
            return []  # nothing written since the last checkpoint: no empty transaction
        try:
            self._conn.tpc_prepare()
        except psycopg.Error as exc:
            raise JdbcSinkError(
                f"JDBC sink: PREPARE TRANSACTION {gid!r} on {where(self._sink.conninfo)} "
                f"failed: {_server_words(exc)}"
            ) from exc
        self._open = None
        return [JdbcTransaction(gid)]

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if self._open is not None and not conn.closed:
                conn.tpc_rollback()  # not prepared: belongs to no checkpoint
        except Exception:  # the server rolls it back with the session
            pass
        finally:
            conn.close()


class PreparedTransactionCommitter(Committer):
    """Commits prepared transactions by name; rolls back the sink's leftovers."""

    def __init__(self, sink: JdbcWriteConfig) -> None:
        self._sink = sink
        self._link = _AutocommitLink(sink)

    def _run(self, verb: str, gid: str) -> bool:
        """``COMMIT PREPARED`` / ``ROLLBACK PREPARED`` ``gid``; ``False`` if the server no
        longer knows it. Retried on a new connection when the connection is lost."""
        import psycopg
        from psycopg import sql

        statement = sql.SQL(verb + " {}").format(sql.Literal(gid))
        attempts = self._sink.max_commit_attempts
        try:
            self._link.run(lambda conn: conn.execute(statement), attempts, f"{verb} {gid!r}")
            return True
        except psycopg.errors.UndefinedObject:
            return False
        except psycopg.Error as exc:
            times = f" {attempts} times" if isinstance(exc, psycopg.OperationalError) else ""
            raise JdbcSinkError(
                f"JDBC sink: {verb} {gid!r} on {where(self._sink.conninfo)} failed{times}: "
                f"{_server_words(exc)}"
            ) from exc

    def commit(self, committables: Sequence[JdbcTransaction]) -> None:
        for t in committables:
            if not self._run("COMMIT PREPARED", t.gid):
                # Replayed after a restore: committed before the failure.
                log.debug("JDBC sink: %s was committed already", t.gid)

    def abort_leftovers(self, context: SinkWriterContext) -> None:
        if not self._sink.recovered_and_rollback:
            return
        prefix = f"cairn:{self._sink.transaction_prefix}:"
        current = f"{prefix}{context.job_id}:{context.attempt_number}:"
        rows = self._link.run(
            lambda conn: conn.execute(
                "SELECT gid FROM pg_prepared_xacts"
                " WHERE database = current_database() AND starts_with(gid, %s)",
                [prefix],
            ).fetchall(),
            self._sink.max_commit_attempts,
            "listing prepared transactions",
        )
        leftovers = sorted(gid for (gid,) in rows if not gid.startswith(current))
        for gid in leftovers:
            self._run("ROLLBACK PREPARED", gid)
        if leftovers:
            log.info(
                "JDBC sink: rolled back %d prepared transactions of earlier attempts (%s...)",
                len(leftovers),
                leftovers[0],
            )

    def close(self) -> None:
        self._link.close()
