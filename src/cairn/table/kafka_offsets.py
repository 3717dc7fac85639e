"""Where a Kafka table starts and stops reading: Flink's ``scan.startup.mode`` and
``scan.bounded.mode`` as Cairn's ``KafkaOffsetsInitializer``s.

Invariant: every mode Flink's Kafka table source takes either maps to the initializer that
reads from (or stops at) the same offsets, or fails at planning with Flink's message naming
the option and the modes it takes; ``specific-offsets`` are parsed as Flink writes them
(``partition:0,offset:42;partition:1,offset:300``).
"""

from __future__ import annotations

from collections.abc import Mapping

from cairn.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
)
from cairn.table.errors import ValidationError

__all__ = ["bounded_offsets", "parse_specific_offsets", "starting_offsets"]

_SPECIFIC = "specific-offsets"
_STARTUP_MODES = ("earliest-offset", "latest-offset", "group-offsets", "timestamp", _SPECIFIC)
_BOUNDED_MODES = ("unbounded", "latest-offset", _SPECIFIC)


def starting_offsets(options: Mapping[str, str]) -> KafkaOffsetsInitializer:
    mode = options.get("scan.startup.mode", "group-offsets")
    if mode not in _STARTUP_MODES:
        raise ValidationError(
            f"Invalid value for option 'scan.startup.mode'. Supported values are"
            f" [{', '.join(_STARTUP_MODES)}], but was: {mode}"
        )
    if mode == "earliest-offset":
        return KafkaOffsetsInitializer.earliest()
    if mode == "latest-offset":
        return KafkaOffsetsInitializer.latest()
    if mode == "group-offsets":
        if not options.get("properties.group.id"):
            raise ValidationError(
                "'properties.group.id' is required when 'scan.startup.mode' is 'group-offsets'"
            )
        reset = options.get("properties.auto.offset.reset", "none").upper()
        strategy = getattr(KafkaOffsetResetStrategy, reset, KafkaOffsetResetStrategy.NONE)
        return KafkaOffsetsInitializer.committed_offsets(strategy)
    if mode == _SPECIFIC:
        return _specific_offsets(options, "startup")
    stamp = options.get("scan.startup.timestamp-millis")
    if stamp is None:
        raise ValidationError(
            "'scan.startup.timestamp-millis' is required in 'timestamp' startup mode but missing."
        )
    return KafkaOffsetsInitializer.timestamp(int(stamp))


def bounded_offsets(options: Mapping[str, str]) -> KafkaOffsetsInitializer | None:
    """The stopping offsets of ``scan.bounded.mode`` (``None``: unbounded)."""
    bounded = options.get("scan.bounded.mode", "unbounded")
    if bounded not in _BOUNDED_MODES:
        raise ValidationError(
            f"Invalid value for option 'scan.bounded.mode'. Supported values are"
            f" [{', '.join(_BOUNDED_MODES)}], but was: {bounded}"
        )
    if bounded == "latest-offset":
        return KafkaOffsetsInitializer.latest()
    if bounded == _SPECIFIC:
        return _specific_offsets(options, "bounded")
    return None


def _specific_offsets(options: Mapping[str, str], mode: str) -> KafkaOffsetsInitializer:
    """``scan.<mode>.specific-offsets`` of the table's single topic; a partition not named
    starts (or stops) at the group's committed offset, else the earliest."""
    key = f"scan.{mode}.specific-offsets"
    if key not in options:
        raise ValidationError(f"'{key}' is required in 'specific-offsets' {mode} mode but missing.")
    topics = [t.strip() for t in options["topic"].split(";") if t.strip()]
    if len(topics) != 1:
        raise ValidationError(
            "Currently Kafka source only supports specific offset for single topic."
        )
    offsets = parse_specific_offsets(options[key], key)
    return KafkaOffsetsInitializer.offsets(
        {KafkaTopicPartition(topics[0], p): o for p, o in offsets.items()}
    )


def parse_specific_offsets(text: str, key: str) -> dict[int, int]:
    """Flink's ``partition:0,offset:42;partition:1,offset:300`` as ``{partition: offset}``.

    >>> parse_specific_offsets("partition:0,offset:42;partition:1,offset:300", "k")
    {0: 42, 1: 300}
    """
    bad = ValidationError(
        f"Invalid properties '{key}' should follow the format"
        f" 'partition:0,offset:42;partition:1,offset:300', but is '{text}'."
    )
    offsets: dict[int, int] = {}
    for pair in text.split(";"):
        parts = pair.split(",")
        if len(parts) != 2 or not (
            parts[0].startswith("partition:") and parts[1].startswith("offset:")
        ):
            raise bad
        try:
            partition, offset = int(parts[0][len("partition:") :]), int(parts[1][len("offset:") :])
        except ValueError:
            raise bad from None
        if partition < 0 or offset < 0:
            raise bad
        offsets[partition] = offset
    return offsets
