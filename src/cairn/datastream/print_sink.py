"""``DataStream.print()``: a sink that writes each record to stdout (or stderr).

Invariant: output lines follow Flink's ``PrintSinkOutputWriter``: ``"<id>:<subtask+1>> "``
prefix when parallelism > 1, ``"<id>> "`` with an identifier only, no prefix otherwise; every
line is flushed at once. Values print as in PyFlink: a value of a declared Java-side type
(``Types.ROW``, ``TUPLE``, ``BOOLEAN``, ``LIST``, ``MAP``) as Java's ``toString``
(``java_text``: a row as ``+I[a, 1]``); an undeclared (pickled) one as ``str(value)`` (a row
as ``<Row('a', 1)>``). Not fault tolerant: records
replayed after a restore print again.
"""

from __future__ import annotations

import sys
from typing import Any

from cairn.api.functions import RuntimeContext, SinkFunction
from cairn.common.typeinfo import TypeInformation
from cairn.datastream.java_text import is_declared, java_text

__all__ = ["PrintSinkFunction", "format_print_prefix"]


def format_print_prefix(sink_identifier: str | None, subtask_index: int, parallelism: int) -> str:
    """The prefix of each printed line.

    >>> format_print_prefix("out", 1, 4), format_print_prefix(None, 0, 2)
    ('out:2> ', '1> ')
    >>> format_print_prefix("out", 0, 1), format_print_prefix(None, 0, 1)
    ('out> ', '')
    """
    prefix = sink_identifier or ""
    if parallelism > 1:
        prefix += (":" if prefix else "") + str(subtask_index + 1)
    return prefix + "> " if prefix else ""


def format_record(value: Any, type_info: TypeInformation | None = None) -> str:
    """PyFlink's text of a record: with a declared type, Java's ``toString`` of the value
    (a row as Flink's ``Row.toString``); else ``str(value)``, as PyFlink maps a pickled value.

    >>> from cairn.common.typeinfo import Types
    >>> from cairn.common.types import Row
    >>> format_record(Row("a", 1), Types.ROW([Types.STRING(), Types.INT()]))
    '+I[a, 1]'
    >>> format_record(Row("a", 1)), format_record(("a", 1))
    ("<Row('a', 1)>", "('a', 1)")
    >>> format_record(("a", True), Types.TUPLE([Types.STRING(), Types.BOOLEAN()]))
    '(a,true)'
    >>> format_record({"k": ["x"]}, Types.MAP(Types.STRING(), Types.LIST(Types.STRING())))
    '{k=[x]}'
    """
    if not is_declared(type_info):
        return str(value)  # PyFlink maps pickled values to str() before printing
    return java_text(value, type_info)


class PrintSinkFunction(SinkFunction):
    def __init__(
        self,
        sink_identifier: str | None = None,
        stderr: bool = False,
        type_info: TypeInformation | None = None,
    ) -> None:
        self.sink_identifier = sink_identifier
        self.stderr = stderr
        self.type_info = type_info
        self._prefix = format_print_prefix(sink_identifier, 0, 1)

    def open(self, runtime_context: RuntimeContext) -> None:
        self._prefix = format_print_prefix(
            self.sink_identifier,
            runtime_context.get_index_of_this_subtask(),
            runtime_context.get_number_of_parallel_subtasks(),
        )

    def invoke(self, value: Any, context: SinkFunction.Context | None = None) -> None:
        # Looked up per call (not stored) so redirected streams (pytest capsys) are honoured.
        stream = sys.stderr if self.stderr else sys.stdout
        stream.write(self._prefix + format_record(value, self.type_info) + "\n")
        stream.flush()

    def __repr__(self) -> str:
        return f"PrintSinkFunction({self.sink_identifier!r})"
