"""The job ``cairn chaos`` runs on a captured Kafka topic (tests/integration/
test_chaos_kafka.py): ``"<key>,<i>"`` records from an unbounded ``KafkaSource`` -> key_by
-> a count per key in keyed state -> ``FileSink`` lines ``key,count``.

Invariant: without ``--bug`` the committed lines are a function of the records alone, in
any order across partitions, whatever fails; ``--bug random-key`` salts each key with
``random()``, which a chaos run must catch.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from typing import Any

from cairn.common import Types, WatermarkStrategy
from cairn.common.serialization import Encoder, SimpleStringSchema
from cairn.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.file_system import FileSink
from cairn.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from cairn.datastream.state import ValueStateDescriptor


class Count(KeyedProcessFunction[str, str, str]):
    """``key,count`` after each record, the count in keyed state."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: str, ctx: Any) -> Iterator[str]:
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        yield f"{ctx.get_current_key()},{count}"


def salted(record: str) -> str:
    """BUG (--bug random-key): a key spread over two at random."""
    return f"{record.split(',')[0]}-{random.randrange(2)}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--bug", choices=["random-key"], default=None)
    args = parser.parse_args()

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(args.servers)
        .set_topics(args.topic)
        .set_group_id(f"chaos-{args.topic}")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    records = env.from_source(source, WatermarkStrategy.for_monotonous_timestamps(), "records")
    key = salted if args.bug == "random-key" else (lambda record: record.split(",")[0])
    counts = records.uid("records").key_by(key).process(Count()).uid("counts")
    sink = FileSink.for_row_format(args.out, Encoder.simple_string_encoder()).build()
    counts.sink_to(sink).uid("counts-file")
    env.execute("chaos-kafka-counts")


if __name__ == "__main__":
    main()
