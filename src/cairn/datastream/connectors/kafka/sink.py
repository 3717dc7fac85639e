"""The Kafka sink (PyFlink's ``KafkaSink`` and ``KafkaSinkBuilder``): records become Kafka
messages through confluent-kafka (librdkafka), with Flink's three delivery guarantees.

Invariant: a ``KafkaSink`` is a picklable description checked on the driver (servers,
serializer, guarantee, prefix, producer properties) and against the job's settings at
submission (``check_job``: the transaction timeout must exceed the checkpoint interval);
producers exist only in the writers on the workers (``sink_writer``), which receive its
checked options (``sink_config.KafkaSinkConfig``), not the sink.

>>> from cairn.common.serialization import SimpleStringSchema
>>> sink = (KafkaSink.builder()
...     .set_bootstrap_servers("127.0.0.1:9092")
...     .set_record_serializer(KafkaRecordSerializationSchema.builder()
...         .set_topic("totals")
...         .set_value_serialization_schema(SimpleStringSchema())
...         .build())
...     .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
...     .set_transactional_id_prefix("totals-job")
...     .build())
>>> sink.config.transaction_timeout_ms, sink.config.pool_size
(3600000, 4)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cairn.api.connectors import (
    Committer,
    DeliveryGuarantee,
    Sink,
    SinkWriter,
    SinkWriterContext,
)
from cairn.common.exceptions import ConfigurationError, require_module
from cairn.datastream.connectors.kafka.sink_config import KafkaSinkConfig
from cairn.datastream.connectors.kafka.sink_serialization import KafkaRecordSerializationSchema

if TYPE_CHECKING:
    from cairn.settings import JobSettings

__all__ = ["DeliveryGuarantee", "KafkaSink", "KafkaSinkBuilder"]

log = logging.getLogger(__name__)

_MAX_PREFIX = 200  # Kafka's transactional ids are strings; keep group names readable


class KafkaSink(Sink):
    """Writes each record as a Kafka message (see ``DeliveryGuarantee``).

    - ``NONE``: fire and forget; a failed delivery fails the job at the next record, and
      records the producer still buffered are lost on a crash.
    - ``AT_LEAST_ONCE``: at every checkpoint barrier the producer is flushed and every
      delivery report checked; after a restart the records since the last checkpoint are
      written again.
    - ``EXACTLY_ONCE``: each subtask writes the records between two barriers in a Kafka
      transaction, flushed at the barrier (pre-commit) and committed on the writer's commit
      thread when the checkpoint completes; a ``read_committed`` consumer sees every record
      once, also after failures.
      Needs ``set_transactional_id_prefix`` (unique per job and cluster, stable across
      restarts) and a ``transaction.timeout.ms`` longer than the checkpoint interval.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        serializer: KafkaRecordSerializationSchema,
        guarantee: DeliveryGuarantee,
        prefix: str | None,
        properties: Mapping[str, str],
    ) -> None:
        self.config = KafkaSinkConfig.of(
            bootstrap_servers, serializer, guarantee, prefix, properties
        )

    @staticmethod
    def builder() -> KafkaSinkBuilder:
        """A :class:`KafkaSinkBuilder`."""
        return KafkaSinkBuilder()

    def check_job(self, settings: JobSettings) -> None:
        config = self.config
        if config.guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
            return
        interval = settings.checkpoint.interval_ms
        if interval <= 0:
            log.warning(
                "KafkaSink (prefix %r): EXACTLY_ONCE without checkpoints commits once, at the "
                "end of input; a job running longer than transaction.timeout.ms (%d ms) fails",
                config.transactional_id_prefix,
                config.transaction_timeout_ms,
            )
        elif config.transaction_timeout_ms <= interval:
            raise ConfigurationError(
                f"KafkaSink (prefix {config.transactional_id_prefix!r}): transaction.timeout.ms "
                f"= {config.transaction_timeout_ms} ms is not longer than the checkpoint "
                f"interval ({interval} ms): every transaction would be aborted by the broker "
                "before its checkpoint completes. Set transaction.timeout.ms (set_property) "
                "to the checkpoint interval plus the longest outage to ride out, within the "
                "broker's transaction.max.timeout.ms (15 min by default)"
            )

    def create_writer(
        self, context: SinkWriterContext, restored_state: Sequence[Any]
    ) -> SinkWriter:
        if self.config.guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            from cairn.datastream.connectors.kafka.sink_writer import TransactionalWriter

            return TransactionalWriter(self.config, context, restored_state)
        from cairn.datastream.connectors.kafka.sink_output import DeliveringWriter

        return DeliveringWriter(self.config, context)

    def create_committer(self) -> Committer | None:
        if self.config.guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
            return None
        from cairn.datastream.connectors.kafka.sink_writer import KafkaCommitter

        return KafkaCommitter()


class KafkaSinkBuilder:
    """Builder of :class:`KafkaSink` (PyFlink's names); the default guarantee is ``NONE``.

    >>> KafkaSink.builder().set_bootstrap_servers("h:9092").build()
    Traceback (most recent call last):
    ...
    ValueError: KafkaSink needs a record serializer (set_record_serializer)
    """

    def __init__(self) -> None:
        self._servers: str | None = None
        self._serializer: KafkaRecordSerializationSchema | None = None
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix: str | None = None
        self._properties: dict[str, str] = {}

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSinkBuilder:
        """Comma-separated ``host:port`` list of brokers to bootstrap from."""
        self._servers = bootstrap_servers
        return self

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee) -> KafkaSinkBuilder:
        """``DeliveryGuarantee.NONE`` (default), ``AT_LEAST_ONCE`` or ``EXACTLY_ONCE``."""
        if not isinstance(delivery_guarantee, DeliveryGuarantee):
            raise TypeError(
                f"delivery_guarantee must be a DeliveryGuarantee, got {delivery_guarantee!r}"
            )
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> KafkaSinkBuilder:
        """The prefix of the sink's transactional ids and marker groups (EXACTLY_ONCE):
        unique among jobs on the cluster, stable across restarts (else transactions a
        failed run left open are not aborted and block ``read_committed`` readers until
        ``transaction.timeout.ms``)."""
        prefix = transactional_id_prefix
        if not isinstance(prefix, str) or not prefix or len(prefix) > _MAX_PREFIX:
            raise ValueError(
                f"the transactional id prefix must be 1-{_MAX_PREFIX} characters, got {prefix!r}"
            )
        self._prefix = prefix
        return self

    def set_record_serializer(
        self, record_serializer: KafkaRecordSerializationSchema
    ) -> KafkaSinkBuilder:
        """How records become messages (``KafkaRecordSerializationSchema.builder()``)."""
        if not isinstance(record_serializer, KafkaRecordSerializationSchema):
            raise TypeError(
                "record_serializer must be a KafkaRecordSerializationSchema, got "
                f"{type(record_serializer).__name__}"
            )
        self._serializer = record_serializer
        return self

    def set_property(self, key: str, value: str) -> KafkaSinkBuilder:
        """A librdkafka producer property (e.g. ``transaction.timeout.ms``, ``linger.ms``),
        or one of Cairn's ``cairn.*`` sink options."""
        if key in ("bootstrap.servers", "transactional.id"):
            raise ValueError(
                f"{key} is set by the KafkaSink itself (set_bootstrap_servers, "
                "set_transactional_id_prefix)"
            )
        self._properties[key] = str(value)
        return self

    def build(self) -> KafkaSink:
        require_module("confluent_kafka", "KafkaSink", "kafka")
        if not self._servers:
            raise ValueError("KafkaSink needs bootstrap servers (set_bootstrap_servers)")
        if self._serializer is None:
            raise ValueError("KafkaSink needs a record serializer (set_record_serializer)")
        return KafkaSink(
            self._servers, self._serializer, self._guarantee, self._prefix, self._properties
        )
