"""The ``kafka-sink`` measurement: records per second into Kafka through the Kafka sink's
writers, without the engine, against confluent-kafka alone on the same broker, and the size
of what an exactly-once checkpoint stores for the sink.

One run starts a throw-away broker (``cairn.testing.kafka``), then, into a fresh topic of
``partitions`` partitions each, writes ``records`` records (``key,seq,sum`` lines, keyed by
``key``): ``confluent-kafka`` (``Producer.produce`` per record and one flush at the end: the
floor), ``none``, ``at-least-once`` (flushed every ``checkpoint_every`` records, as at a
barrier) and ``exactly-once`` (a transaction pre-committed every ``checkpoint_every``
records and committed right after, as when the checkpoint completes). Reported per variant:
records/s of wall time, CPU µs per record of this process (the broker's CPU is not in it),
and the records a ``read_committed`` consumer counts afterwards (each must equal
``records``); for exactly-once, the pickled bytes of one checkpoint's committables and of
the writer state (which carries the checkpoint's records, so that a transaction aborted by a
crash can be sent again), in all and per record.

Invariant: prints one JSON object as its last stdout line, like every other measurement of
``bench``; the broker and its data are gone when it returns.

    python -m bench.kafka_sink --records 300000 --checkpoint-every 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import time
from collections.abc import Callable
from typing import Any

from cairn.common.serialization import SimpleStringSchema
from cairn.datastream.connectors.base import DeliveryGuarantee, SinkWriterContext
from cairn.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from cairn.testing.kafka import KafkaBroker

__all__ = ["measure"]

VARIANTS = ("confluent-kafka", "none", "at-least-once", "exactly-once")
_GUARANTEES = {
    "none": DeliveryGuarantee.NONE,
    "at-least-once": DeliveryGuarantee.AT_LEAST_ONCE,
    "exactly-once": DeliveryGuarantee.EXACTLY_ONCE,
}


class _Key:
    def serialize(self, element: Any) -> bytes:
        return str(element).split(",", 1)[0].encode()


def _lines(n: int) -> list[str]:
    return [f"k{i % 10_000:05d},{i // 10_000 + 1},{i}" for i in range(n)]


def _raw(broker: Any, topic: str, lines: list[str], every: int, sizes: dict[str, Any]) -> None:
    from confluent_kafka import Producer

    producer = Producer(broker.client_config())
    produce = producer.produce
    for line in lines:
        while True:
            try:
                produce(topic, line.encode(), line.split(",", 1)[0].encode())
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


def _sink_writer(variant: str) -> Callable[[Any, str, list[str], int, dict[str, Any]], None]:
    def run(broker: Any, topic: str, lines: list[str], every: int, sizes: dict[str, Any]) -> None:
        builder = (
            KafkaSink.builder()
            .set_bootstrap_servers(broker.bootstrap_servers)
            .set_record_serializer(
                KafkaRecordSerializationSchema.builder()
                .set_topic(topic)
                .set_key_serialization_schema(_Key())
                .set_value_serialization_schema(SimpleStringSchema())
                .build()
            )
            .set_delivery_guarantee(_GUARANTEES[variant])
            .set_property("transaction.timeout.ms", "60000")
            .set_property("log_level", "0")
        )
        if variant == "exactly-once":
            builder.set_transactional_id_prefix(topic)
        sink = builder.build()
        writer = sink.create_writer(SinkWriterContext(0, 1, 0, "bench"), [])
        committer = sink.create_committer()
        checkpoint = since = 0
        for i in range(0, len(lines), 1024):  # the engine hands the sink batches of 1024
            chunk = lines[i : i + 1024]
            writer.write_batch(chunk)
            since += len(chunk)
            if since >= every or i + 1024 >= len(lines):  # a barrier, then its completion
                checkpoint, covered, since = checkpoint + 1, since, 0
                writer.flush(i + 1024 >= len(lines))
                if committer is not None:
                    committables = writer.prepare_commit(checkpoint)
                    state = writer.snapshot_state(checkpoint)
                    if "state_bytes" not in sizes:  # the first, full checkpoint
                        sizes["committable_bytes"] = len(pickle.dumps(committables))
                        sizes["state_bytes"] = len(pickle.dumps(state))
                        sizes["checkpoint_records"] = covered
                    committer.commit(committables)
        writer.close()

    return run


def _count(broker: Any, topic: str) -> int:
    return len(broker.read_topic(topic, timeout_s=120))


def measure(
    records: int, checkpoint_every: int = 100_000, repeat: int = 3, partitions: int = 2
) -> dict[str, Any]:
    """Write ``records`` records with each variant ``repeat`` times, alternating (see the
    module docstring)."""
    if records < 1 or checkpoint_every < 1 or repeat < 1 or partitions < 1:
        raise ValueError("records, checkpoint_every, repeat and partitions must be positive")
    data = _lines(records)
    runs: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    checked = True
    sizes: dict[str, Any] = {}
    variants: dict[str, Callable[[Any, str, list[str], int, dict[str, Any]], None]] = {
        "confluent-kafka": _raw,
        **{v: _sink_writer(v) for v in _GUARANTEES},
    }
    with KafkaBroker() as broker:
        for r in range(repeat):
            for name, run in variants.items():
                topic = f"bench-{name}-{r}"
                broker.create_topic(topic, partitions=partitions)
                wall, cpu = time.perf_counter(), time.process_time()
                run(broker, topic, data, checkpoint_every, sizes)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                runs[name].append((wall, cpu))
                checked = checked and _count(broker, topic) == records
    result: dict[str, Any] = {
        "records": records,
        "checkpoint_every": checkpoint_every,
        "repeat": repeat,
        "partitions": partitions,
        "records_checked": checked,
        **sizes,
    }
    if sizes.get("checkpoint_records"):
        result["state_bytes_per_record"] = round(
            sizes["state_bytes"] / sizes["checkpoint_records"], 1
        )
    for name, measured in runs.items():
        key = name.replace("-", "_")
        result[f"{key}_records_per_s"] = round(statistics.median(records / w for w, _ in measured))
        result[f"{key}_cpu_us_per_record"] = round(
            statistics.median(c / records * 1e6 for _, c in measured), 2
        )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_sink", description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--checkpoint-every", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.records, args.checkpoint_every, args.repeat, args.partitions)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
