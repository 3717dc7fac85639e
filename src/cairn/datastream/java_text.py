"""Java's ``toString`` of values of a declared PyFlink type, as PyFlink's Java sinks write them.

Invariant: text only, no I/O. PyFlink hands a value of a declared type (``Types.TUPLE``,
``ROW``, ``BOOLEAN``, ``LIST``, ``MAP``...) to Java sinks as the Java object, so what a
``FileSink`` with ``Encoder.simple_string_encoder()`` writes is that object's ``toString``:
``Tuple2`` as ``(a,1)``, ``Row`` as ``+I[a, 1]``, ``Boolean`` as ``true``, ``List`` as
``[a, b]``, ``Map`` as ``{k=v}``, ``null`` for ``None``. A value without a declared type (pickled)
has no Java text in PyFlink (it is a ``byte[]``); Cairn writes its ``str()``.

>>> from cairn.common.typeinfo import Types
>>> java_text(("a", True), Types.TUPLE([Types.STRING(), Types.BOOLEAN()]))
'(a,true)'
>>> from cairn.common.types import Row
>>> java_text(Row("a", 1), Types.ROW([Types.STRING(), Types.INT()]))
'+I[a, 1]'
>>> JavaStringEncoder("UTF-8", Types.TUPLE([Types.STRING(), Types.INT()])).encode(("to", 2))
b'(to,2)\\n'
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from cairn.common.serialization import SimpleStringEncoder
from cairn.common.typeinfo import (
    BasicArrayTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PickledBytesTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
)
from cairn.common.types import Row

__all__ = ["JavaStringEncoder", "is_declared", "java_text", "with_declared_type"]


def is_declared(type_info: TypeInformation | None) -> bool:
    """Whether values of this type travel as Java objects in PyFlink (not as pickled bytes)."""
    return type_info is not None and not isinstance(type_info, PickledBytesTypeInfo)


def java_text(value: Any, type_info: TypeInformation | None) -> str:
    """``toString()`` of the Java object PyFlink makes of ``value`` with ``type_info``."""
    if value is None:
        return "null"
    if isinstance(value, Row):
        types = type_info.field_types if isinstance(type_info, RowTypeInfo) else ()
        fields = (java_text(v, types[i] if i < len(types) else None) for i, v in enumerate(value))
        return f"{value.get_row_kind()}[{', '.join(fields)}]"
    if isinstance(type_info, TupleTypeInfo) and isinstance(value, tuple | list):
        pairs = zip(value, type_info.field_types, strict=False)
        return "(" + ",".join(java_text(v, t) for v, t in pairs) + ")"
    if isinstance(
        type_info, ListTypeInfo | ObjectArrayTypeInfo | BasicArrayTypeInfo | PrimitiveArrayTypeInfo
    ):
        return "[" + ", ".join(java_text(v, type_info.element_type) for v in value) + "]"
    if isinstance(type_info, MapTypeInfo) and isinstance(value, dict):
        pairs_text = (
            f"{java_text(k, type_info.key_type)}={java_text(v, type_info.value_type)}"
            for k, v in value.items()
        )
        return "{" + ", ".join(pairs_text) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class JavaStringEncoder(SimpleStringEncoder):
    """Flink's ``SimpleStringEncoder`` on the Java objects of a declared type: each record's
    Java text and a newline."""

    def __init__(self, charset_name: str, type_info: TypeInformation) -> None:
        super().__init__(charset_name)
        self.type_info = type_info

    def encode(self, element: Any) -> bytes:
        return (java_text(element, self.type_info) + "\n").encode(self.charset_name)

    def encode_batch(self, elements: Sequence[Any]) -> bytes:
        if not elements:
            return b""
        t = self.type_info
        return ("\n".join(java_text(e, t) for e in elements) + "\n").encode(self.charset_name)


def with_declared_type(sink: Any, type_info: TypeInformation | None) -> Any:
    """``sink`` itself, or, for a sink writing with the plain ``simple_string_encoder`` a stream
    of a declared type, a copy whose encoder writes the Java text of that type (as PyFlink's
    Java ``FileSink`` does). The user's sink object is left unchanged."""
    encoder = getattr(sink, "encoder", None)
    if type(encoder) is not SimpleStringEncoder or not is_declared(type_info):
        return sink
    assert type_info is not None
    typed = copy.copy(sink)
    typed.encoder = JavaStringEncoder(encoder.charset_name, type_info)
    return typed
