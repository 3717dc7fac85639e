"""Per-user sums over one-second event-time windows, from a Kafka topic of JSON events into
another topic, exactly once.

Invariant: a ``read_committed`` consumer of the output topic sees one record per (user,
window) of the input, with the count and the sum of that user's amounts in that window —
even when a worker is killed while the job runs (``--kill``): the input offsets and the open
windows are in each checkpoint, and each checkpoint's output is one Kafka transaction per
subtask, committed when the checkpoint completes; what a failed attempt wrote is aborted
and written again from the restored checkpoint.

The pipeline: ``KafkaSource`` (JSON rows through ``JsonRowDeserializationSchema``) with a
bounded-out-of-orderness ``WatermarkStrategy`` on the event's ``ts`` -> ``key_by(user)`` ->
``TumblingEventTimeWindows`` of 1 s (count and sum) -> ``KafkaSink`` with
``DeliveryGuarantee.EXACTLY_ONCE``. It runs on embedded local Spark, 2 subtasks, a
checkpoint every second.

Against your cluster (two topics ``cairn-events-<id>`` and ``cairn-window-sums-<id>`` are
created, filled, checked and deleted)::

    pip install 'cairn[kafka]'
    python examples/kafka_windowed_counts.py --bootstrap-servers 127.0.0.1:9092 --kill

Without ``--bootstrap-servers`` it starts a throw-away Apache Kafka broker on 127.0.0.1
(``cairn.testing.kafka.KafkaBroker``: Java and the broker's jars from Maven Central,
``python -m cairn.testing.kafka prepare``) and removes it afterwards. It prints the check of
the output topic against the sums computed here from the generated input::

    windows: 2060, duplicates: 0, missing: 0, wrong sums: 0 -> EXACTLY ONCE
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

from cairn.common import Duration, Time, Types, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.serialization import SerializationSchema, SimpleStringSchema
from cairn.common.watermark_strategy import TimestampAssigner
from cairn.datastream import AggregateFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from cairn.datastream.formats.json import JsonRowDeserializationSchema
from cairn.datastream.window import TumblingEventTimeWindows
from cairn.datastream.functions import ProcessWindowFunction

EVENT = Types.ROW_NAMED(["user", "amount", "ts"], [Types.STRING(), Types.LONG(), Types.LONG()])
WINDOW_MS = 1000
DISORDER_MS = 3000  # how far an event's ts may lag behind the newest one in its partition


def events(records: int, users: int, start_ms: int, seed: int = 24) -> Iterator[dict[str, Any]]:
    """Event ``i`` happens ``i`` ms after ``start_ms``, arrives up to DISORDER_MS late.

    ``start_ms`` should be recent: the sink gives each output record its window's time as
    Kafka timestamp, and a broker deletes records older than the topic's ``retention.ms``
    (7 days by default) as soon as its log cleaner runs."""
    rng = random.Random(seed)
    for i in range(records):
        yield {
            "user": f"user-{rng.randrange(users):03d}",
            "amount": rng.randint(1, 100),
            "ts": start_ms + i - rng.randint(0, DISORDER_MS),
        }


def expected_windows(
    records: int, users: int, start_ms: int
) -> dict[tuple[str, int], tuple[int, int]]:
    """(user, window start) -> (count, sum of amounts), computed without Cairn."""
    windows: dict[tuple[str, int], tuple[int, int]] = {}
    for e in events(records, users, start_ms):
        key = (e["user"], e["ts"] - e["ts"] % WINDOW_MS)
        count, total = windows.get(key, (0, 0))
        windows[key] = (count + 1, total + e["amount"])
    return windows


def create_topics(servers: str, topics: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    new = [NewTopic(topic, partitions, 1) for topic in topics]
    for done in admin.create_topics(new, operation_timeout=30).values():
        done.result(timeout=60)


def delete_topics(servers: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers})
    for done in admin.delete_topics(topics, operation_timeout=30).values():
        done.result(timeout=60)


def fill_input(servers: str, topic: str, records: int, users: int, start_ms: int) -> None:
    """The events as JSON, keyed by user (a user's events share a partition, in ts order
    up to DISORDER_MS)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "linger.ms": 20})
    for e in events(records, users, start_ms):
        while True:
            try:
                producer.produce(topic, json.dumps(e).encode(), key=e["user"].encode())
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60) != 0:
        raise RuntimeError(f"could not write the input into {topic!r}")


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value["ts"])


class CountAndSum(AggregateFunction[Any, tuple[int, int], tuple[int, int]]):
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: Any, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + 1, accumulator[1] + value["amount"])

    def get_result(self, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


class ToJson(ProcessWindowFunction[tuple[int, int], str, str, Any]):
    def process(self, key: str, context: Any, elements: Any) -> Iterator[str]:
        ((count, total),) = elements
        window = context.window()
        yield json.dumps(
            {"user": key, "start": window.start, "end": window.end, "count": count, "sum": total}
        )


class UserOfWindow(SerializationSchema):
    """The output record's key: its user, so one user's windows share a partition."""

    def serialize(self, element: str) -> bytes:
        user: str = json.loads(element)["user"]
        return user.encode()


def build(env: StreamExecutionEnvironment, servers: str, source: str, sink: str) -> None:
    env.enable_checkpointing(1000)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 500))
    kafka_source = (
        KafkaSource.builder()
        .set_bootstrap_servers(servers)
        .set_topics(source)
        .set_group_id(f"{source}-windows")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())  # ends at what the topic held at start
        .set_value_only_deserializer(
            JsonRowDeserializationSchema.builder().type_info(EVENT).build()
        )
        .build()
    )
    kafka_sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(sink)
            .set_key_serialization_schema(UserOfWindow())
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(sink)  # unique per job and cluster, kept on restarts
        # Checkpoint interval plus the longest outage to ride out; within the broker's
        # transaction.max.timeout.ms (15 min by default).
        .set_property("transaction.timeout.ms", "60000")
        .build()
    )
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(DISORDER_MS + 2000)
    ).with_timestamp_assigner(EventTime())
    (
        env.from_source(kafka_source, watermarks, "events")
        .uid("events")
        .key_by(lambda e: e["user"], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS)))
        .aggregate(CountAndSum(), ToJson(), output_type=Types.STRING())
        .uid("window-sums")
        .sink_to(kafka_sink)
        .uid("kafka-window-sums")
    )


def read_committed(servers: str, topic: str, expect: int, timeout_s: float = 60.0) -> list[str]:
    """Every committed value of ``topic``, reading each partition up to its stable end;
    again (for up to ``timeout_s``) while fewer than ``expect``: a commit returns before the
    broker wrote its markers into every partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    deadline = time.monotonic() + timeout_s
    while True:
        consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": f"cairn-check-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        try:
            parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in parts
            }
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
            values: list[str] = []
            pending = {p for p, end in ends.items() if end > 0}
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(1000, timeout=0.2):
                    value = msg.value()
                    if msg.error() is None and value is not None:
                        values.append(value.decode())
                positions = consumer.position([TopicPartition(topic, p) for p in pending])
                pending = {tp.partition for tp in positions if tp.offset < ends[tp.partition]}
        finally:
            consumer.close()
        if len(values) >= expect or time.monotonic() > deadline:
            return values
        time.sleep(0.5)


def check(values: list[str], expected: dict[tuple[str, int], tuple[int, int]]) -> bool:
    """Compare the output topic with the expected windows, and print the verdict."""
    seen: Counter[tuple[str, int]] = Counter()
    wrong = 0
    for value in values:
        window = json.loads(value)
        key = (window["user"], window["start"])
        seen[key] += 1
        if seen[key] == 1 and expected.get(key) != (window["count"], window["sum"]):
            wrong += 1
    duplicates = sum(n - 1 for n in seen.values())
    missing = sum(1 for key in expected if key not in seen)
    ok = duplicates == 0 and missing == 0 and wrong == 0 and len(values) == len(expected)
    print(
        f"windows: {len(values)}, duplicates: {duplicates}, missing: {missing}, "
        f"wrong sums: {wrong} -> {'EXACTLY ONCE' if ok else 'VIOLATED'}"
    )
    return ok


def kill_a_worker_mid_run(client: Any) -> None:
    """SIGKILL one Spark worker once a checkpoint completed (the job then recovers)."""
    master = client.job_master
    while not (view := master.view).ended:  # one consistent snapshot of the job
        latest, pids = view.latest_checkpoint_id, view.worker_pids
        if latest is not None and latest >= 1 and pids:
            os.kill(pids[max(pids)], signal.SIGKILL)
            print(f"killed a worker after checkpoint {latest}", flush=True)
            return
        time.sleep(0.1)


def stop_spark() -> None:
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="host:port,... (default: a throw-away broker)")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--kill", action="store_true", help="SIGKILL a worker mid-run (Spark)")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.bootstrap_servers is None:
            from cairn.testing.kafka import KafkaBroker

            args.bootstrap_servers = stack.enter_context(KafkaBroker()).bootstrap_servers
            # Spark's Python workers (and the sink's producers in them) end before the broker
            # does, so no client is left logging that it cannot reach it.
            stack.callback(stop_spark)
        run = uuid.uuid4().hex[:8]
        source, sink = f"cairn-events-{run}", f"cairn-window-sums-{run}"
        create_topics(args.bootstrap_servers, [source, sink], args.partitions)
        stack.callback(delete_topics, args.bootstrap_servers, [source, sink])
        start_ms = int(time.time()) * 1000  # a whole second: the windows are the same each run
        fill_input(args.bootstrap_servers, source, args.records, args.users, start_ms)
        print(f"wrote {args.records} events into {source} ({args.partitions} partitions)")
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        build(env, args.bootstrap_servers, source, sink)
        client = env.execute_async("kafka-windowed-counts")
        if args.kill:
            kill_a_worker_mid_run(client)
        client.get_job_execution_result()
        print(f"restarts: {client.job_master.restarts}")
        expected = expected_windows(args.records, args.users, start_ms)
        values = read_committed(args.bootstrap_servers, sink, expect=len(expected))
        return 0 if check(values, expected) else 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
