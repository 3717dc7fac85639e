"""``cairn chaos`` and ``KafkaSink``: the sink writes to a topic of the run's own (the
topic's name plus the run's, with the same number of partitions) under a transactional id
prefix of the run's own; what it committed is that topic read with
``isolation.level=read_committed``.

Invariant: a redirected sink never writes the user's topic nor fences the user's producers
(its transactional ids are the run's); the records read are only those of committed
transactions (and, below EXACTLY_ONCE, every record the broker acknowledged, which is what
its consumers see too); ``cleanup`` deletes the run's topic.
"""

from __future__ import annotations

import copy
import time
import uuid
from dataclasses import replace
from typing import Any

from cairn.api.connectors import Sink
from cairn.cli.chaos_sinks import ChaosSinkError, Place, Redirection
from cairn.cli.chaos_verdict import Record
from cairn.datastream.connectors.kafka.sink import KafkaSink
from cairn.datastream.connectors.kafka.sink_config import KafkaSinkConfig

__all__ = ["client_config", "redirect"]

_TIMEOUT_S = 30.0
_SECURITY = ("security.", "sasl.", "ssl.")


def client_config(config: KafkaSinkConfig) -> dict[str, Any]:
    """An admin's or consumer's configuration for the sink's cluster: its servers and the
    security properties it was given (the rest are a producer's).

    >>> from cairn.common.serialization import SimpleStringSchema
    >>> from cairn.datastream.connectors.kafka.sink_serialization import (
    ...     KafkaRecordSerializationSchema)
    >>> s = (KafkaRecordSerializationSchema.builder().set_topic("t")
    ...     .set_value_serialization_schema(SimpleStringSchema()).build())
    >>> from cairn.api.connectors import DeliveryGuarantee
    >>> c = KafkaSinkConfig.of("h:9092", s, DeliveryGuarantee.NONE, None,
    ...     {"linger.ms": "5", "security.protocol": "SSL"})
    >>> client_config(c)
    {'bootstrap.servers': 'h:9092', 'log_level': 0, 'security.protocol': 'SSL'}
    """
    out: dict[str, Any] = {"bootstrap.servers": config.bootstrap_servers, "log_level": 0}
    out.update({k: v for k, v in config.producer_properties.items() if k.startswith(_SECURITY)})
    return out


def redirect(sink: Sink, place: Place) -> Redirection | None:
    """A copy of a ``KafkaSink`` writing to ``<topic>.<place.name>`` (created with the
    topic's partitions); None for other sinks."""
    if not isinstance(sink, KafkaSink):
        return None
    config = sink.config
    topic = config.serializer.topic
    if topic is None:
        raise ChaosSinkError(
            "a KafkaSink with a topic selector (cairn chaos redirects a fixed topic only)"
        )
    target = f"{topic}.{place.name}"
    serializer = copy.copy(config.serializer)
    serializer.topic = target
    prefix = config.transactional_id_prefix
    moved = copy.copy(sink)
    moved.config = replace(
        config,
        serializer=serializer,
        marker_topic=target if config.marker_topic == topic else config.marker_topic,
        transactional_id_prefix=f"{prefix}-{place.name}" if prefix else None,
    )
    clients = client_config(config)
    _create_like(clients, topic, target)
    return Redirection(
        moved,
        f"topic {target}",
        lambda: read_committed(clients, target),
        lambda: _delete(clients, target),
    )


def _admin(clients: dict[str, Any]) -> Any:
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError as error:
        raise ChaosSinkError("reading a KafkaSink needs pip install 'cairn[kafka]'") from error
    return AdminClient(clients)


def _create_like(clients: dict[str, Any], topic: str, target: str) -> None:
    from confluent_kafka.cimpl import NewTopic

    admin = _admin(clients)
    meta = admin.list_topics(timeout=_TIMEOUT_S).topics
    if target in meta:
        return
    original = meta.get(topic)
    partitions = len(original.partitions) if original is not None and original.partitions else 1
    futures = admin.create_topics([NewTopic(target, partitions)], operation_timeout=_TIMEOUT_S)
    try:
        futures[target].result(timeout=_TIMEOUT_S)
    except Exception as error:  # a KafkaException with the broker's words
        raise ChaosSinkError(f"cannot create the run's topic {target!r}: {error}") from error
    deadline = time.monotonic() + _TIMEOUT_S
    while time.monotonic() < deadline:
        found = admin.list_topics(target, timeout=_TIMEOUT_S).topics.get(target)
        if (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise ChaosSinkError(f"the run's topic {target!r} has no leaders after {_TIMEOUT_S:g} s")


def _delete(clients: dict[str, Any], target: str) -> None:
    admin = _admin(clients)  # referenced until the result is in: its end cancels it
    futures = admin.delete_topics([target], operation_timeout=_TIMEOUT_S)
    futures[target].result(timeout=_TIMEOUT_S)


def read_committed(clients: dict[str, Any], topic: str) -> list[Record]:
    """Every record of ``topic`` a ``read_committed`` consumer sees now, as ``value`` text
    (``key,value`` when the record has a key), stamped with its timestamp."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **clients,
            "group.id": f"cairn-chaos-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=_TIMEOUT_S).topics[topic]
        parts = [TopicPartition(topic, p, 0) for p in sorted(meta.partitions)]
        # The last stable offset of each partition now: after the job ended, every
        # transaction of the run is committed or aborted, so this is the end.
        ends = {
            tp.partition: consumer.get_watermark_offsets(tp, timeout=_TIMEOUT_S)[1] for tp in parts
        }
        consumer.assign(parts)
        records: list[Record] = []
        pending = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + _TIMEOUT_S
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.2):
                if msg.error() is not None or msg.value() is None:
                    continue
                records.append(_record(msg))
            positions = consumer.position([TopicPartition(topic, p) for p in pending])
            pending = {tp.partition for tp in positions if tp.offset < ends[tp.partition]}
        if pending:
            raise ChaosSinkError(
                f"reading topic {topic!r}: partitions {sorted(pending)} not at end"
            )
    finally:
        consumer.close()
    return records


def _record(msg: Any) -> Record:
    value = _text(msg.value())
    key = msg.key()
    text = value if key is None else f"{_text(key)},{value}"
    return Record(
        text, msg.timestamp()[1] / 1000, f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
    )


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")
