"""``TableResult`` and Flink's tableau printing of rows with their change kinds.

Invariant: printing reads rows only; it never changes a result. In streaming mode a column's
width comes from its type (``BIGINT`` 20, ``INT`` 11, ``STRING`` 30...) and an ``op`` column
shows each row's kind, as Flink's ``TableResult.print()`` does, so rows print as they arrive;
in batch mode the widths come from the content and there is no ``op`` column. A value wider
than its column ends in ``...``; NULL prints as ``<NULL>``.

>>> from cairn.table.analysis import Columns
>>> from cairn.table.types import DataTypes
>>> cols = Columns.of([("id", DataTypes.BIGINT()), ("name", DataTypes.STRING())])
>>> print(tableau(cols, [(0, (1, "Flink")), (2, (2, None))], streaming=True))
+----+----------------------+--------------------------------+
| op |                   id |                           name |
+----+----------------------+--------------------------------+
| +I |                    1 |                          Flink |
| +U |                    2 |                         <NULL> |
+----+----------------------+--------------------------------+
2 rows in set
"""

from __future__ import annotations

import datetime
import decimal
import enum
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from cairn.common.types import Row
from cairn.table.analysis import Columns
from cairn.table.calc_runtime import java_double_text
from cairn.table.operators import KIND_TEXT, to_row
from cairn.table.schema import schema_text
from cairn.table.types import DataType

__all__ = ["ResultKind", "TableResult", "sql_value_text", "tableau"]

NULL_TEXT = "<NULL>"
MAX_COLUMN_WIDTH = 30


class ResultKind(enum.Enum):
    """What a statement returned (PyFlink's ``ResultKind``)."""

    SUCCESS = 0
    SUCCESS_WITH_CONTENT = 1


def java_float_text(x: float) -> str:
    """Java's ``Float.toString`` of a value held as a Python float: the shortest text that
    reads back as the same 32-bit float."""
    as32 = struct.unpack("f", struct.pack("f", x))[0]
    for digits in range(1, 10):
        text = f"{as32:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == as32:
            return java_double_text(float(text))
    return java_double_text(as32)


def sql_value_text(value: Any, data_type: DataType) -> str:
    """A value as Flink prints it in a result."""
    if value is None:
        return NULL_TEXT
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return java_float_text(value) if data_type.root == "FLOAT" else java_double_text(value)
    if isinstance(value, decimal.Decimal) and data_type.root == "DECIMAL":
        return str(value.quantize(decimal.Decimal(1).scaleb(-data_type.params[1])))
    if isinstance(value, datetime.datetime):
        precision = data_type.params[0] if data_type.params else 6
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        if precision:
            text += "." + f"{value.microsecond:06d}{0:03d}"[:precision]
        return text
    if isinstance(value, list | tuple):
        return "[" + ", ".join("NULL" if v is None else str(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={v}" for k, v in value.items()) + "}"
    return str(value)


def _type_width(t: DataType) -> int:
    root = t.root
    fixed = {"TINYINT": 4, "SMALLINT": 6, "INT": 11, "BIGINT": 20, "BOOLEAN": 5, "DATE": 10}
    if root in fixed:
        return fixed[root]
    if root == "DECIMAL":
        return t.params[0] + 2
    if root == "TIME":
        p = t.params[0] if t.params else 0
        return 8 if p == 0 else p + 9
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        p = t.params[0] if t.params else 6
        return 19 if p == 0 else 23 if p <= 3 else 26 if p <= 6 else 29
    return MAX_COLUMN_WIDTH


def _cell(text: str, width: int) -> str:
    if len(text) <= width:
        return " " * (width - len(text)) + text
    return text[: width - 3] + "..."


def tableau(
    columns: Columns, records: Iterable[tuple[int, tuple[Any, ...]]], streaming: bool
) -> str:
    """The printed form of a result's rows (``records`` are ``(kind, row)`` pairs)."""
    rows = list(records)
    if not rows:
        return "Empty set"
    types = columns.types
    texts = [[sql_value_text(v, t) for v, t in zip(row, types, strict=True)] for _, row in rows]
    names = columns.names
    if streaming:
        widths = [
            max(len(n), _type_width(t), len(NULL_TEXT)) for n, t in zip(names, types, strict=True)
        ]
        widths = [2, *widths]
        header = ["op", *names]
        body = [[KIND_TEXT[k], *cells] for (k, _), cells in zip(rows, texts, strict=True)]
    else:
        widths = [
            min(max([len(n)] + [len(r[i]) for r in texts]), MAX_COLUMN_WIDTH)
            for i, n in enumerate(names)
        ]
        header, body = list(names), texts
    border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells: Sequence[str]) -> str:
        return "|" + "|".join(f" {_cell(c, w)} " for c, w in zip(cells, widths, strict=True)) + "|"

    out = [border, line(header), border, *(line(r) for r in body), border]
    out.append(f"{len(rows)} {'rows' if len(rows) > 1 else 'row'} in set")
    return "\n".join(out)


class TableResult:
    """The result of ``execute()``, ``execute_sql`` or ``execute_insert`` (PyFlink's names)."""

    def __init__(
        self,
        columns: Columns,
        records: Iterator[tuple[int, tuple[Any, ...]]] | None,
        job_client: Any = None,
        streaming: bool = True,
    ) -> None:
        self._columns = columns
        self._records = records
        self._job_client = job_client
        self._streaming = streaming

    def get_job_client(self) -> Any:
        """The running job's client (``None`` for a statement that ran no job)."""
        return self._job_client

    def wait(self, timeout_ms: int | None = None) -> None:
        """Wait until the job ends (``execute_insert(...).wait()``)."""
        if self._job_client is not None:
            timeout = None if timeout_ms is None else timeout_ms / 1000
            self._job_client.get_job_execution_result(timeout)

    def get_table_schema(self) -> Columns:
        return self._columns

    def get_resolved_schema(self) -> Columns:
        return self._columns

    def get_result_kind(self) -> ResultKind:
        if self._records is None:
            return ResultKind.SUCCESS
        return ResultKind.SUCCESS_WITH_CONTENT

    def collect(self) -> Iterator[Row]:
        """The rows, each with its kind (``row.get_row_kind()``)."""
        names = self._columns.names
        records = self._records if self._records is not None else iter(())
        return (to_row(r, names) for r in records)

    def print(self) -> None:
        """Print the rows in Flink's tableau form (waits for a bounded job to end)."""
        if self._records is None:
            print(
                tableau(
                    self._columns,
                    [(0, ("OK",))] if self._columns.names == ["result"] else [],
                    False,
                )
            )
            return
        print(tableau(self._columns, self._records, self._streaming))

    def print_schema(self) -> None:
        print(schema_text(self._columns))
