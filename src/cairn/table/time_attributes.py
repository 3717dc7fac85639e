"""Processing-time attributes: the type of ``PROCTIME()`` and how it prints.

Invariant: a processing-time attribute is a ``TIMESTAMP_LTZ(3) NOT NULL`` whose type says so
(``ProctimeType``, printed ``TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*`` as Flink prints it); its
values are the wall clock (naive UTC ``datetime``) when the row was read. A column keeps the
attribute while it is forwarded as it is (a projection of the column, a window's time); any
computation on it gives a plain ``TIMESTAMP_LTZ`` (Flink materializes it).

>>> str(PROCTIME_TYPE)
'TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*'
>>> is_proctime(PROCTIME_TYPE), is_proctime(materialized(PROCTIME_TYPE))
(True, False)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from cairn.table.timestamps import timestamp_of_millis
from cairn.table.types import DataType

__all__ = ["PROCTIME_TYPE", "ProctimeType", "is_proctime", "materialized", "proctime_now"]


@dataclass(frozen=True, repr=False)
class ProctimeType(DataType):
    """``TIMESTAMP_LTZ(3)`` marked as a processing-time attribute."""

    def __str__(self) -> str:
        return super().__str__() + " *PROCTIME*"


PROCTIME_TYPE = ProctimeType("TIMESTAMP_LTZ", (3,), False)


def is_proctime(data_type: DataType) -> bool:
    """Whether ``data_type`` is a processing-time attribute's."""
    return isinstance(data_type, ProctimeType)


def materialized(data_type: DataType) -> DataType:
    """``data_type`` without the processing-time mark (a plain ``TIMESTAMP_LTZ(3)``)."""
    if not isinstance(data_type, ProctimeType):
        return data_type
    return DataType(data_type.root, data_type.params, data_type.nullable)


def proctime_now() -> object:
    """The value of ``PROCTIME()`` now: the wall clock to the millisecond."""
    return timestamp_of_millis(time.time_ns() // 1_000_000)
