"""JSON rows (pyflink.datastream.formats.json): typed fields, missing fields, parse errors,
nesting, and surviving the pickling that ships them to workers."""

from __future__ import annotations

import pickle

import pytest

from cairn.common import Row, Types
from cairn.datastream.formats.json import (
    JsonRowDeserializationSchema,
    JsonRowSerializationSchema,
)

EVENT = Types.ROW_NAMED(
    ["user", "amount", "ok", "where"],
    [
        Types.STRING(),
        Types.DOUBLE(),
        Types.BOOLEAN(),
        Types.ROW_NAMED(["city"], [Types.STRING()]),
    ],
)


def test_fields_take_their_types_and_names_nested_rows_too() -> None:
    schema = JsonRowDeserializationSchema.builder().type_info(EVENT).build()
    row = pickle.loads(pickle.dumps(schema)).deserialize(
        b'{"user": 7, "amount": 2, "ok": true, "where": {"city": "Oslo"}}'
    )
    assert row.user == "7" and row.amount == 2.0 and type(row.amount) is float
    assert row.ok is True and row.where.city == "Oslo"
    assert schema.deserialize(b'{"user": "a"}').amount is None  # missing: null


def test_missing_fields_and_bad_json_fail_unless_told_otherwise() -> None:
    strict = JsonRowDeserializationSchema.builder().type_info(EVENT).fail_on_missing_field()
    with pytest.raises(ValueError, match="missing field"):
        strict.build().deserialize(b'{"user": "a"}')
    plain = JsonRowDeserializationSchema.builder().type_info(EVENT).build()
    with pytest.raises(ValueError):
        plain.deserialize(b"{not json")
    lenient = JsonRowDeserializationSchema.builder().type_info(EVENT).ignore_parse_errors()
    assert lenient.build().deserialize(b"{not json") is None  # a Kafka source drops it
    with pytest.raises(ValueError, match="exclude"):
        strict.ignore_parse_errors().build()
    with pytest.raises(TypeError, match="RowTypeInfo"):
        JsonRowDeserializationSchema.builder().type_info(Types.STRING())


def test_rows_and_tuples_serialize_to_compact_objects_that_read_back() -> None:
    out = JsonRowSerializationSchema.builder().with_type_info(EVENT).build()
    back = JsonRowDeserializationSchema.builder().type_info(EVENT).build()
    where = Row(city="Oslo")
    data = out.serialize(("ada", 1.5, False, where))
    assert data == b'{"user":"ada","amount":1.5,"ok":false,"where":{"city":"Oslo"}}'
    assert back.deserialize(data) == back.deserialize(out.serialize(back.deserialize(data)))
    with pytest.raises(ValueError, match="fields"):
        out.serialize(("ada",))
