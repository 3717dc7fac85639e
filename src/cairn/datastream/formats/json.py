"""JSON rows at PyFlink's module path (``pyflink.datastream.formats.json``).

Invariant: this module only re-exports ``cairn.common.formats.json``, where the schemas live
(below the connectors that use them).

>>> from cairn.common import Types
>>> row = Types.ROW_NAMED(["user", "clicks"], [Types.STRING(), Types.INT()])
>>> schema = JsonRowDeserializationSchema.builder().type_info(row).build()
>>> schema.deserialize(b'{"user": "ada", "clicks": "3", "extra": 1}')
Row(user='ada', clicks=3)
"""

from __future__ import annotations

from cairn.common.formats.json import (
    JsonRowDeserializationSchema,
    JsonRowDeserializationSchemaBuilder,
    JsonRowSerializationSchema,
    JsonRowSerializationSchemaBuilder,
)

__all__ = [
    "JsonRowDeserializationSchema",
    "JsonRowDeserializationSchemaBuilder",
    "JsonRowSerializationSchema",
    "JsonRowSerializationSchemaBuilder",
]
