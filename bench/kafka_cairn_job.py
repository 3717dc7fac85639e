"""Cairn's side of the Kafka job benchmark: Kafka -> keyed running sum -> Kafka on embedded
local Spark (``cairn.executor = spark``, as users run it), at one delivery guarantee.

Invariant: the job is the one every system runs (``bench.kafka_topics``): ``KafkaSource``
(``SimpleStringSchema``, bounded at the input's end in throughput runs) -> ``key_by`` the
line's key -> ``KeyedProcessFunction`` with a ``ValueState`` sum -> ``KafkaSink`` keyed by
the line's key; checkpoints every ``interval_ms``. Its figures come from the output topic
(``bench.kafka_topics.read_output``) and the job master's checkpoint statistics.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from bench.jobs import CairnOptions, bench_environment, run_job
from bench.kafka_topics import input_line, keyed_sum_line
from cairn.common import Types, WatermarkStrategy
from cairn.common.serialization import SimpleStringSchema
from cairn.datastream import KeyedProcessFunction
from cairn.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from cairn.datastream.state import ValueStateDescriptor

__all__ = ["GUARANTEES", "LineSum", "run_latency", "run_throughput"]

GUARANTEES = {
    "none": DeliveryGuarantee.NONE,
    "at-least-once": DeliveryGuarantee.AT_LEAST_ONCE,
    "exactly-once": DeliveryGuarantee.EXACTLY_ONCE,
}


class LineSum(KeyedProcessFunction):
    """Running count of a key's lines in a ``ValueState``; emits the line with its sum."""

    def open(self, runtime_context: Any) -> None:
        self.sum_state = runtime_context.get_state(ValueStateDescriptor("sum", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Iterator[str]:
        total = (self.sum_state.value() or 0) + 1
        self.sum_state.update(total)
        yield keyed_sum_line(value, total)


class KeyOfLine:
    def serialize(self, element: Any) -> bytes:
        return str(element).split(",", 1)[0].encode()


def _key(line: str) -> str:
    return line.split(",", 1)[0]


def _job(
    broker: Any, source_topic: str, sink_topic: str, guarantee: str, interval_ms: int, bounded: bool
) -> Any:
    env = bench_environment(
        CairnOptions(), interval_ms, tempfile.mkdtemp(prefix="kafka-job-chk-", dir=_tmp())
    )
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_topics(source_topic)
        .set_group_id(f"cairn-{sink_topic}")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
    )
    if bounded:
        source.set_bounded(KafkaOffsetsInitializer.latest())
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(sink_topic)
            .set_key_serialization_schema(KeyOfLine())
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(GUARANTEES[guarantee])
        .set_property("transaction.timeout.ms", "600000")
        .set_property("log_level", "0")
    )
    if guarantee == "exactly-once":
        sink.set_transactional_id_prefix(sink_topic)
    (
        env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "kafka")
        .uid("kafka-source")
        .key_by(_key, key_type=Types.STRING())
        .process(LineSum(), output_type=Types.STRING())
        .uid("keyed-sum")
        .sink_to(sink.build())
        .uid("kafka-sink")
    )
    return env


def _tmp() -> str:
    path = os.path.join(tempfile.gettempdir(), "cairn-kafka-job")
    os.makedirs(path, exist_ok=True)
    return path


def run_throughput(
    broker: Any, source_topic: str, sink_topic: str, guarantee: str, interval_ms: int
) -> dict[str, Any]:
    """Run the bounded job over the whole input; the job's own figures (wall time from
    submission to end, checkpoints)."""
    env = _job(broker, source_topic, sink_topic, guarantee, interval_ms, bounded=True)
    seen = run_job(env, f"kafka-job-{guarantee}")
    return {
        "elapsed_s": round(seen.ended - seen.submitted, 2),
        "checkpoints_completed": len(seen.checkpoints),
        "checkpoint_p50_ms": seen.p50_ms,
        "restarts": seen.restarts,
    }


def run_latency(
    broker: Any,
    source_topic: str,
    sink_topic: str,
    interval_ms: int,
    rate: int,
    seconds: float,
    warmup_s: float = 5.0,
) -> list[float]:
    """The exactly-once job over an unbounded input written at ``rate`` records/s for
    ``seconds`` once the job reads; returns, per output record produced after
    ``warmup_s``, ms from its input's produce time until a ``read_committed`` consumer
    got it."""
    from confluent_kafka import Consumer, Producer

    env = _job(broker, source_topic, sink_topic, "exactly-once", interval_ms, bounded=False)
    client = env.execute_async(f"kafka-latency-{interval_ms}")
    stop = threading.Event()
    latencies: list[tuple[int, float]] = []  # (produce ns, ms until read committed)
    consumer = Consumer(
        broker.client_config(
            **{
                "group.id": f"latency-{sink_topic}",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
    )
    consumer.subscribe([sink_topic])

    def consume() -> None:
        while not stop.is_set():
            for msg in consumer.consume(10_000, timeout=0.05):
                if msg.error() is None:
                    produced = int(msg.value().rsplit(b",", 1)[1])
                    latencies.append((produced, (time.time_ns() - produced) / 1e6))

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    producer = Producer(broker.client_config(**{"linger.ms": 1, "enable.idempotence": True}))
    started = time.monotonic()
    warm_ns = time.time_ns() + int(warmup_s * 1e9)
    i = 0
    try:
        while time.monotonic() - started < seconds:
            due = int((time.monotonic() - started) * rate)
            while i < due:
                line = input_line(i, produced_ns=time.time_ns())
                try:
                    producer.produce(source_topic, line.encode(), line[:6].encode())
                except BufferError:
                    producer.poll(0.01)
                    continue
                i += 1
            producer.poll(0)
            time.sleep(0.002)
        producer.flush(30)
        time.sleep(max(2.0, 3 * interval_ms / 1000))  # the last checkpoints commit
    finally:
        stop.set()
        reader.join(10)
        consumer.close()
        client.cancel()
        try:
            client.get_job_execution_result(timeout=120)
        except Exception:  # cancelled: the result is the cancellation
            pass
    return [ms for produced, ms in latencies if produced >= warm_ns]
