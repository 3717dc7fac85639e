"""A job script for ``cairn chaos``'s sink tests: running totals per customer (as in
``examples/chaos_orders.py``) into the sink ``--sink`` names: ``jdbc`` (exactly once, or at
least once with ``--at-least-once``), ``kafka`` (exactly once) or ``own`` (``LineFileSink``,
a two-phase sink of a user's own that says where a test run of it commits).

Invariant: without faults the committed records are each order's ``customer,total``, the
same in every run; ``LineFileSink`` makes a checkpoint's lines visible only when the
checkpoint completes (staged file renamed by its committer), so it is exactly-once.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Sequence
from typing import Any

from cairn.common import Types, WatermarkStrategy
from cairn.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.connectors.base import Committer, Sink, SinkWriter, SinkWriterContext
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.state import ValueStateDescriptor


def order(i: int) -> tuple[str, int]:
    # An even number of customers: each one's orders come from one source subtask, in order.
    return f"c{i % 4}", i % 13 + 1


class RunningTotal(KeyedProcessFunction[str, tuple[str, int], tuple[str, int]]):
    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[tuple[str, int]]:
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


class _StagingWriter(SinkWriter):
    def __init__(self, directory: str, context: SinkWriterContext) -> None:
        self.directory, self.lines = directory, list[str]()
        self.name = f"{context.subtask_index}-{context.attempt_number}"

    def write(self, record: Any) -> None:
        self.lines.append(f"{record[0]},{record[1]}")

    def prepare_commit(self, checkpoint_id: int) -> list[Any]:
        staged = os.path.join(self.directory, f".staged-{self.name}-{checkpoint_id}")
        with open(staged, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in self.lines))
        self.lines = []
        return [staged]


class _RenamingCommitter(Committer):
    def commit(self, committables: Sequence[Any]) -> None:
        for staged in committables:
            final = staged.replace(".staged-", "part-")
            if os.path.exists(staged):
                os.replace(staged, final)


class LineFileSink(Sink):
    """A user's two-phase sink: lines staged at each barrier, renamed when it completes."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def create_writer(self, context: SinkWriterContext, restored_state: Sequence[Any]) -> Any:
        os.makedirs(self.directory, exist_ok=True)
        return _StagingWriter(self.directory, context)

    def create_committer(self) -> Committer:
        return _RenamingCommitter()

    def redirected(self, name: str, directory: str) -> Sink:
        return LineFileSink(directory)

    def committed_records(self) -> list[str]:
        lines = []
        for file in sorted(os.listdir(self.directory)):
            if file.startswith("part-"):
                with open(os.path.join(self.directory, file), encoding="utf-8") as f:
                    lines.extend(f.read().splitlines())
        return lines


def _sink(args: argparse.Namespace) -> Sink:
    if args.sink == "own":
        return LineFileSink(args.target)
    if args.sink == "kafka":
        from cairn.common.serialization import SimpleStringSchema
        from cairn.datastream.connectors.kafka import (
            DeliveryGuarantee,
            KafkaRecordSerializationSchema,
            KafkaSink,
        )

        class Line(SimpleStringSchema):
            def serialize(self, element: Any) -> bytes:
                return f"{element[0]},{element[1]}".encode()

        return (
            KafkaSink.builder()
            .set_bootstrap_servers(args.servers)
            .set_record_serializer(
                KafkaRecordSerializationSchema.builder()
                .set_topic(args.target)
                .set_value_serialization_schema(Line())
                .build()
            )
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix("chaos-test")
            .set_property("transaction.timeout.ms", "60000")
            .build()
        )
    from cairn.datastream.connectors.jdbc import JdbcConnectionOptions, JdbcSink

    connection = (
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .with_url(args.url)
        .with_user_name(args.user)
        .with_password(args.password)
        .build()
    )
    sql = f"INSERT INTO {args.target} (customer, total) VALUES (?, ?)"
    row = Types.TUPLE([Types.STRING(), Types.LONG()])
    if args.at_least_once:
        return JdbcSink.sink(sql, row, connection)
    return JdbcSink.exactly_once_sink(sql, row, connection)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sink", choices=["jdbc", "kafka", "own"], required=True)
    parser.add_argument("--target", required=True, help="table, topic or directory")
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--url")
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--servers")
    parser.add_argument("--at-least-once", action="store_true")
    args = parser.parse_args()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    source = DataGeneratorSource(order, args.orders, RateLimiterStrategy.per_second(2000))
    orders = env.from_source(source, WatermarkStrategy.no_watermarks(), "orders").uid("orders")
    totals = orders.key_by(lambda value: value[0]).process(RunningTotal()).uid("totals")
    totals.sink_to(_sink(args)).uid("out")
    env.execute("chaos-sinks")


if __name__ == "__main__":
    main()
