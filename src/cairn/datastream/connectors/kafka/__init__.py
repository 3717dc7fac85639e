"""Kafka connectors (PyFlink's ``pyflink.datastream.connectors.kafka``), on confluent-kafka.

The sink's names live in ``sink`` (``KafkaSink``, ``KafkaSinkBuilder``), its message
serialization in ``sink_serialization`` and its transaction protocol in
``sink_transactions``/``sink_writer``. Re-exported lazily: importing the package imports no
Kafka client.
"""

from __future__ import annotations

import importlib
from typing import Any

_LOCATIONS = {
    "DeliveryGuarantee": "cairn.datastream.connectors.base",
    "KafkaSink": "cairn.datastream.connectors.kafka.sink",
    "KafkaSinkBuilder": "cairn.datastream.connectors.kafka.sink",
    "FixedPartitioner": "cairn.datastream.connectors.kafka.sink_serialization",
    "KafkaPartitioner": "cairn.datastream.connectors.kafka.sink_serialization",
    "KafkaRecordSerializationSchema": "cairn.datastream.connectors.kafka.sink_serialization",
    "KafkaRecordSerializationSchemaBuilder": (
        "cairn.datastream.connectors.kafka.sink_serialization"
    ),
    "KafkaTopicSelector": "cairn.datastream.connectors.kafka.sink_serialization",
}

__all__ = sorted(_LOCATIONS)


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LOCATIONS])
