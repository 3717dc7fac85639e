"""The ``kafka`` and ``upsert-kafka`` table connectors on Cairn's ``KafkaSource``/``KafkaSink``.

Invariant: a table row is a message's value (and, with ``key.format``, its key holds the
``key.fields``) in the table's formats; ``kafka`` reads and writes insert-only rows, and
``upsert-kafka`` writes a changelog as Flink's upsert semantics: ``+I``/``+U`` a record keyed
by the primary key, ``-D`` a tombstone (null value), ``-U`` nothing — so a compacted topic, or
a ``read_committed`` reader keeping the last value per key, holds the query's result. The
exactly-once guarantee is the DataStream sink's (transactions committed on checkpoints).
An ``upsert-kafka`` table reads back as a changelog through ``ChangelogNormalize``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cairn.api.connectors import DeliveryGuarantee
from cairn.api.functions import FlatMapFunction, KeySelector, MapFunction
from cairn.common.config_values import parse_duration_ms
from cairn.common.serialization import DeserializationSchema, SerializationSchema
from cairn.common.watermark_strategy import WatermarkStrategy
from cairn.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    KafkaSourceOptions,
)
from cairn.datastream.data_stream import DataStream
from cairn.datastream.stream_execution_environment import StreamExecutionEnvironment
from cairn.table.analysis import Columns
from cairn.table.changelog_normalize import ChangelogNormalize
from cairn.table.errors import ValidationError
from cairn.table.formats import format_keys, row_deserializer, row_serializer
from cairn.table.kafka_metadata import (
    KAFKA_READABLE,
    MessageRow,
    TimestampOf,
    metadata_keys,
)
from cairn.table.kafka_offsets import bounded_offsets, starting_offsets
from cairn.table.metadata import with_metadata
from cairn.table.operators import fields_key
from cairn.table.plan import StreamScan
from cairn.table.schema import Schema
from cairn.table.source_reuse import reused

__all__ = [
    "DropUpdateBefore",
    "ToKafkaRecord",
    "UpsertMessage",
    "check_kafka",
    "kafka_options",
    "kafka_scan",
    "kafka_sink",
    "upsert_kafka_options",
    "upsert_kafka_scan",
    "upsert_kafka_sink",
]

_GUARANTEES = {
    "at-least-once": DeliveryGuarantee.AT_LEAST_ONCE,
    "exactly-once": DeliveryGuarantee.EXACTLY_ONCE,
    "none": DeliveryGuarantee.NONE,
}
_COMMON = {
    "topic",
    "properties.bootstrap.servers",
    "properties.group.id",
    "key.format",
    "key.fields",
    "value.format",
    "value.fields-include",
    "format",
    "sink.parallelism",
    "sink.delivery-guarantee",
    "sink.transactional-id-prefix",
}
_BOUNDED = {"scan.bounded.mode", "scan.bounded.specific-offsets"}
_KAFKA = {
    *_COMMON,
    "scan.startup.mode",
    "scan.startup.timestamp-millis",
    "scan.startup.specific-offsets",
    *_BOUNDED,
    "scan.topic-partition-discovery.interval",
}


def _formats(options: Mapping[str, str]) -> set[str]:
    keys: set[str] = set()
    if "format" in options:
        keys |= format_keys(options["format"], "")
    if "value.format" in options:
        keys |= format_keys(options["value.format"], "value.")
    if "key.format" in options:
        keys |= format_keys(options["key.format"], "key.")
    return keys


def _properties(options: Mapping[str, str]) -> set[str]:
    """Flink passes every ``properties.*`` key to the Kafka client."""
    return {k for k in options if k.startswith("properties.")}


def kafka_options(columns: Columns, options: Mapping[str, str]) -> set[str]:
    """The option keys of a ``kafka`` table with ``options``."""
    return _KAFKA | _formats(options) | _properties(options)


def upsert_kafka_options(columns: Columns, options: Mapping[str, str]) -> set[str]:
    """The option keys of an ``upsert-kafka`` table with ``options``."""
    keys = (_COMMON - {"format", "key.fields"}) | _BOUNDED
    return keys | _formats(options) | _properties(options)


def _value_format(connector: str, options: Mapping[str, str]) -> str:
    if "value.format" in options and "format" in options:
        raise ValidationError("Option 'format' and 'value.format' shouldn't be set together.")
    fmt = options.get("value.format", options.get("format"))
    if fmt is None:
        raise ValidationError(
            "One or more required options are missing.\n\nMissing required options are:\n\nformat"
        )
    return fmt


def _key_fields(columns: Columns, options: Mapping[str, str], schema: Schema | None) -> list[str]:
    if "key.fields" in options:
        fields = [f.strip() for f in options["key.fields"].split(";") if f.strip()]
    else:
        fields = list(schema.primary_key) if schema is not None else []
    for f in fields:
        if f not in columns.names:
            raise ValidationError(
                f"Could not find the field '{f}' in the table schema for usage in the key"
                f" format. A key field must be a regular, physical column. The following"
                " columns can be selected in the 'key.fields' option:\n"
                f"[{', '.join(columns.names)}]"
            )
    if fields and "key.format" not in options:
        raise ValidationError(
            "The Kafka table needs 'key.format' when 'key.fields' are set (Flink's rule)"
        )
    if "key.format" in options and not fields:
        raise ValidationError(
            "A key format 'key.format' requires the declaration of one or more of key fields"
            " using 'key.fields'."
        )
    return fields


def _value_columns(columns: Columns, keys: list[str], options: Mapping[str, str]) -> Columns:
    include = options.get("value.fields-include", "ALL").upper()
    if include not in ("ALL", "EXCEPT_KEY"):
        raise ValidationError(
            f"Could not parse value '{options['value.fields-include']}' for key"
            " 'value.fields-include'. Expected one of [ALL, EXCEPT_KEY]"
        )
    if include == "ALL":
        return columns
    return Columns.of([(c.name, c.data_type) for c in columns.columns if c.name not in keys])


def _guarantee(options: Mapping[str, str]) -> DeliveryGuarantee:
    text = options.get("sink.delivery-guarantee", "at-least-once")
    if text not in _GUARANTEES:
        raise ValidationError(
            f"Could not parse value '{text}' for key 'sink.delivery-guarantee'. Expected one"
            " of [exactly-once, at-least-once, none]"
        )
    guarantee = _GUARANTEES[text]
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE and not options.get(
        "sink.transactional-id-prefix"
    ):
        raise ValidationError(
            "sink.transactional-id-prefix must be specified when using DeliveryGuarantee for"
            " 'EXACTLY_ONCE'."
        )
    return guarantee


class _Codec:
    """A table's Kafka layout: value (and key) serializers over the table's rows."""

    def __init__(
        self, connector: str, columns: Columns, options: Mapping[str, str], schema: Schema | None
    ) -> None:
        self.columns = columns
        value_format = _value_format(connector, options)
        self.key_fields = _key_fields(columns, options, schema)
        self.key_index = [columns.index(f) for f in self.key_fields]
        self.value_columns = _value_columns(columns, self.key_fields, options)
        self.value_index = [columns.index(n) for n in self.value_columns.names]
        prefix = "value." if "value.format" in options else ""
        self.value_format, self.prefix, self.options = value_format, prefix, dict(options)
        self.key_format = options.get("key.format")

    def value_serializer(self) -> SerializationSchema:
        return row_serializer(self.value_format, self.value_columns, self.options, self.prefix)

    def value_deserializer(self) -> DeserializationSchema:
        return row_deserializer(self.value_format, self.value_columns, self.options, self.prefix)

    def key_columns(self) -> Columns:
        return Columns.of(
            [(c.name, c.data_type) for c in self.columns.columns if c.name in self.key_fields]
        )

    def key_deserializer(self) -> DeserializationSchema:
        assert self.key_format is not None
        return row_deserializer(self.key_format, self.key_columns(), self.options, "key.")

    def key_serializer(self) -> SerializationSchema | None:
        if self.key_format is None:
            return None
        return row_serializer(self.key_format, self.key_columns(), self.options, "key.")


def _required(options: Mapping[str, str], *keys: str) -> None:
    missing = [k for k in keys if not options.get(k)]
    if missing:
        raise ValidationError(
            "One or more required options are missing.\n\nMissing required options are:\n\n"
            + "\n".join(missing)
        )


class ToKafkaRecord(MapFunction):
    """A table row as a Kafka message's parts: ``(key_row | None, value_row | None)``; a
    ``-D`` has no value (a tombstone).

    >>> ToKafkaRecord([0], [0, 1], True).map((3, ("a", 2)))
    (('a',), None)
    """

    def __init__(
        self,
        key_index: list[int],
        value_index: list[int],
        keyed: bool,
        timestamp_index: int | None = None,
    ) -> None:
        self.key_index, self.value_index, self.keyed = key_index, value_index, keyed
        self.timestamp_index = timestamp_index

    def map(self, value: tuple[int, tuple[Any, ...]]) -> Any:
        kind, row = value
        key = tuple(row[i] for i in self.key_index) if self.keyed else None
        body = None if kind == 3 else tuple(row[i] for i in self.value_index)
        if self.timestamp_index is not None:  # the ``timestamp`` metadata column's value
            return key, body, row[self.timestamp_index]
        return key, body


class DropUpdateBefore(FlatMapFunction):
    """Flink's upsert sink: ``-U`` carries nothing the next ``+U`` does not overwrite.

    >>> [list(DropUpdateBefore().flat_map((k, ("a",)))) for k in range(4)]
    [[(0, ('a',))], [], [(2, ('a',))], [(3, ('a',))]]
    """

    def flat_map(self, value: tuple[int, tuple[Any, ...]]) -> Any:
        return () if value[0] == 1 else (value,)


class _Part(SerializationSchema):
    """One part (key 0, value 1) of a ``(key, value)`` message; a null part stays null."""

    def __init__(self, schema: SerializationSchema, part: int) -> None:
        self.schema, self.part = schema, part

    def serialize(self, element: Any) -> Any:
        body = element[self.part]
        return None if body is None else self.schema.serialize(body)


def _sink(
    name: str,
    stream: DataStream,
    codec: _Codec,
    options: Mapping[str, str],
    written: Columns | None = None,
    schema: Schema | None = None,
) -> None:
    """Write ``stream``, whose rows hold the ``written`` columns (default: the physical
    ones; with a ``timestamp`` metadata column, as the sink's persisted columns)."""
    guarantee = _guarantee(options)
    names = (written or codec.columns).names
    position = {n: i for i, n in enumerate(names)}
    stamp = [c.name for c in _persisted_metadata(schema) if c.key == "timestamp"]
    encode = ToKafkaRecord(
        [position[f] for f in codec.key_fields],
        [position[n] for n in codec.value_columns.names],
        codec.key_format is not None,
        position[stamp[0]] if stamp else None,
    )
    records = stream.map(encode).name(f"Sink encode: {name}")
    builder = (
        KafkaRecordSerializationSchema.builder()
        .set_topic(options["topic"])
        .set_value_serialization_schema(_Part(codec.value_serializer(), 1))
    )
    if stamp:
        builder.set_timestamp_selector(TimestampOf())
    key = codec.key_serializer()
    if key is not None:
        builder.set_key_serialization_schema(_Part(key, 0))
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(options["properties.bootstrap.servers"])
        .set_record_serializer(builder.build())
        .set_delivery_guarantee(guarantee)
    )
    if options.get("sink.transactional-id-prefix"):
        sink.set_transactional_id_prefix(options["sink.transactional-id-prefix"])
    for k, v in options.items():
        if k.startswith("properties.") and k != "properties.bootstrap.servers":
            sink.set_property(k[len("properties.") :], v)
    out = records.sink_to(sink.build()).name(f"Sink: {name}").uid(f"table-sink-{name}")
    if "sink.parallelism" in options:
        out.set_parallelism(int(options["sink.parallelism"]))


def check_kafka(
    connector: str, columns: Columns, options: Mapping[str, str], schema: Schema | None
) -> None:
    """Fail at planning on what Flink's factories refuse (a missing key, a bad value)."""
    _required(options, "topic", "properties.bootstrap.servers")
    if connector == "upsert-kafka":
        if schema is None or not schema.primary_key:
            raise ValidationError(
                "'upsert-kafka' tables require to define a PRIMARY KEY constraint. The PRIMARY"
                " KEY specifies which columns should be read from or write to the Kafka message"
                " key. The PRIMARY KEY also defines records in the 'upsert-kafka' table should"
                " update or delete on which keys."
            )
        _required(options, "key.format", "value.format")
    codec = _Codec(connector, columns, options, schema)
    codec.value_serializer()
    codec.key_serializer()
    _guarantee(options)


def kafka_sink(
    name: str,
    schema: Schema | None,
    columns: Columns,
    options: Mapping[str, str],
    stream: DataStream,
) -> None:
    """Write insert-only rows of ``stream`` to the table's topic (``columns``: the sink's
    persisted columns, its ``timestamp`` metadata column the messages' timestamps)."""
    physical = schema.physical_columns() if schema is not None else columns
    _sink(name, stream, _Codec("kafka", physical, options, schema), options, columns, schema)


def _persisted_metadata(schema: Schema | None) -> list[Any]:
    if schema is None:
        return []
    return [c for c in schema.metadata_columns() if not c.is_virtual]


def upsert_kafka_sink(
    name: str,
    schema: Schema | None,
    columns: Columns,
    options: Mapping[str, str],
    stream: DataStream,
) -> None:
    """Write a changelog: ``+I``/``+U`` keyed records, ``-D`` tombstones, ``-U`` dropped."""
    codec = _Codec("upsert-kafka", columns, options, schema)
    # Keyed by the primary key (Flink's keyed shuffle of upsert sinks): a key's changes go
    # through one sink subtask, in order, whatever the sink's parallelism.
    keyed = stream.key_by(fields_key(codec.key_index))
    upserts = (
        keyed.flat_map(DropUpdateBefore()).name(f"Sink upsert: {name}").uid(f"table-upsert-{name}")
    )
    _sink(name, upserts, codec, options)


class _ToChange(MapFunction):
    """A value row (in value column order) as an insert of the table's row."""

    def __init__(self, order: list[int] | None) -> None:
        self.order = order

    def map(self, value: Any) -> Any:
        row = tuple(value)
        return (0, row if self.order is None else tuple(row[i] for i in self.order))


def _source(
    name: str,
    options: Mapping[str, str],
    starting: KafkaOffsetsInitializer,
    deserializer: DeserializationSchema,
    ignore: bool,
) -> Callable[[StreamExecutionEnvironment], DataStream]:
    """Builds the table's ``KafkaSource`` stream (records as the deserializer makes them)."""
    bounded = bounded_offsets(options)
    path = f"default_catalog.default_database.{name}"
    discovery = None
    if "scan.topic-partition-discovery.interval" in options:
        text = options["scan.topic-partition-discovery.interval"]
        try:
            discovery = str(parse_duration_ms(text))
        except ValueError as e:
            raise ValidationError(
                f"Could not parse value '{text}' for key"
                f" 'scan.topic-partition-discovery.interval': {e}"
            ) from None

    def build(env: StreamExecutionEnvironment) -> DataStream:
        builder = (
            KafkaSource.builder()
            .set_bootstrap_servers(options["properties.bootstrap.servers"])
            .set_topics(*[t.strip() for t in options["topic"].split(";") if t.strip()])
            .set_starting_offsets(starting)
            .set_value_only_deserializer(deserializer)
            .set_property(KafkaSourceOptions.IGNORE_PARSE_ERRORS, str(ignore).lower())
        )
        if options.get("properties.group.id"):
            builder.set_group_id(options["properties.group.id"])
        for k, v in options.items():
            if k.startswith("properties.") and k not in (
                "properties.bootstrap.servers",
                "properties.group.id",
            ):
                builder.set_property(k[len("properties.") :], v)
        if discovery is not None:
            builder.set_property(KafkaSourceOptions.PARTITION_DISCOVERY_INTERVAL_MS, discovery)
        if bounded is not None:
            builder.set_bounded(bounded)
        stream = env.from_source(
            builder.build(), WatermarkStrategy.no_watermarks(), f"Source: {name}"
        )
        scanned: DataStream = stream.uid(f"table-source-{path}")
        return scanned

    return build


def kafka_scan(
    name: str, columns: Columns, options: Mapping[str, str], schema: Schema | None = None
) -> StreamScan:
    """The scan of a ``kafka`` table: each message's value as a ``+I`` row."""
    check_kafka("kafka", columns, options, schema)
    codec = _Codec("kafka", columns, options, schema)
    if codec.value_columns.names != columns.names:
        raise ValidationError(
            "Cairn's kafka table source reads rows from message values only:"
            " 'value.fields-include' = 'EXCEPT_KEY' is not supported for reading"
        )
    deserializer: DeserializationSchema = codec.value_deserializer()
    ignore = bool(getattr(deserializer, "ignore_parse_errors", False))
    keys = metadata_keys(schema)
    if keys:  # metadata columns: the source hands over whole messages
        deserializer = MessageRow(deserializer, keys)
    source = _source(name, options, starting_offsets(options), deserializer, ignore)
    path = f"default_catalog.default_database.{name}"

    def build(env: StreamExecutionEnvironment) -> DataStream:
        rows: DataStream = source(env).map(_ToChange(None)).name(f"Source rows: {name}")
        return rows

    return StreamScan(with_metadata(columns, schema, KAFKA_READABLE), path, reused(build))


class UpsertMessage(DeserializationSchema):
    """A message of an upsert topic as ``(key, row | None)``: the key from the message key,
    the row from the value (with the key's columns put back under ``EXCEPT_KEY``); a
    tombstone (null value) is ``(key, None)``."""

    reads_message_key = True

    def __init__(
        self,
        key: DeserializationSchema,
        value: DeserializationSchema,
        key_index: list[int],
        value_index: list[int],
        arity: int,
    ) -> None:
        self.key, self.value = key, value
        self.key_index, self.value_index, self.arity = key_index, value_index, arity

    def deserialize(self, message: Any) -> Any:
        key_bytes, value_bytes = message
        if key_bytes is None:
            raise ValueError("an upsert-kafka message without a key")
        key_row = self.key.deserialize(key_bytes)
        if key_row is None:
            return None  # a key the format skipped (ignore-parse-errors)
        key = tuple(key_row)
        if value_bytes is None:
            return key, None
        value_row = self.value.deserialize(value_bytes)
        if value_row is None:
            return None
        row: list[Any] = [None] * self.arity
        for i, v in zip(self.value_index, tuple(value_row), strict=True):
            row[i] = v
        for i, v in zip(self.key_index, key, strict=True):
            row[i] = v
        return key, tuple(row)


class _Key(KeySelector):
    def get_key(self, value: Any) -> Any:
        return value[0]


def upsert_kafka_scan(
    name: str, columns: Columns, options: Mapping[str, str], schema: Schema | None = None
) -> StreamScan:
    """The scan of an ``upsert-kafka`` table: the topic read from its earliest offset as
    upserts, normalized into a changelog keyed by the primary key (Flink's
    ``ChangelogNormalize``)."""
    check_kafka("upsert-kafka", columns, options, schema)
    codec = _Codec("upsert-kafka", columns, options, schema)
    value = codec.value_deserializer()
    ignore = bool(getattr(value, "ignore_parse_errors", False))
    message = UpsertMessage(
        codec.key_deserializer(), value, codec.key_index, codec.value_index, len(columns.names)
    )
    source = _source(name, options, KafkaOffsetsInitializer.earliest(), message, ignore)
    path = f"default_catalog.default_database.{name}"

    def build(env: StreamExecutionEnvironment, state_ttl_ms: int | None) -> DataStream:
        changes: DataStream = (
            source(env)
            .key_by(_Key())
            .process(ChangelogNormalize(state_ttl_ms))
            .name(f"ChangelogNormalize: {name}")
            .uid(f"table-normalize-{path}")
        )
        return changes

    return StreamScan(columns, path, reused(build), insert_only=False, stateful=True)
