"""PyFlink 2.3 (thread mode) peer of the Kafka job benchmark (``python -m bench.kafka_job``).

Invariant: the job is Flink's ``KafkaSource`` (bounded at the input's end,
``SimpleStringSchema``) -> ``key_by`` the line's key -> ``KeyedProcessFunction`` with a
``ValueState`` count -> the line with its sum (``bench.kafka_topics`` format) -> Flink's
``KafkaSink`` (``--delivery-guarantee``, keyed by the line's key), checkpoints every
``--checkpoint-interval-ms``, parallelism 2; the connector is Flink's own jar
(``flink-sql-connector-kafka``, ``--jar``). The figures come from the output topic, read by
the driver; this prints one JSON result (wall time, job status) as its last stdout line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import common

SYSTEM = "pyflink"


def run_job(args: argparse.Namespace) -> dict[str, Any]:
    from pyflink.common import Configuration, Types
    from pyflink.common.serialization import SimpleStringSchema
    from pyflink.common.watermark_strategy import WatermarkStrategy
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.base import DeliveryGuarantee
    from pyflink.datastream.connectors.kafka import (
        KafkaOffsetsInitializer,
        KafkaRecordSerializationSchema,
        KafkaSink,
        KafkaSource,
    )
    from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    work = Path(args.work_dir)
    conf = Configuration()
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("python.executable", sys.executable)
    conf.set_string("parallelism.default", str(args.parallelism))
    conf.set_string("rest.address", "127.0.0.1")
    conf.set_string("rest.bind-address", "127.0.0.1")
    conf.set_string("taskmanager.numberOfTaskSlots", str(args.parallelism))
    conf.set_string("pipeline.jars", Path(args.jar).resolve().as_uri())
    conf.set_string("execution.checkpointing.interval", f"{args.checkpoint_interval_ms} ms")
    conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
    conf.set_string("execution.checkpointing.dir", (work / "checkpoints").as_uri())
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)

    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(args.bootstrap_servers)
        .set_topics(args.source_topic)
        .set_group_id(f"pyflink-{args.sink_topic}")
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_value_only_deserializer(SimpleStringSchema())
        .build()
    )
    guarantee = {
        "none": DeliveryGuarantee.NONE,
        "at-least-once": DeliveryGuarantee.AT_LEAST_ONCE,
        "exactly-once": DeliveryGuarantee.EXACTLY_ONCE,
    }[args.delivery_guarantee]
    sink_builder = (
        KafkaSink.builder()
        .set_bootstrap_servers(args.bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(args.sink_topic)
            .set_key_serialization_schema(SimpleStringSchema())
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
        .set_property("transaction.timeout.ms", "600000")
    )
    if args.delivery_guarantee == "exactly-once":
        sink_builder.set_transactional_id_prefix(args.sink_topic)

    class LineSum(KeyedProcessFunction):
        def open(self, runtime_context: RuntimeContext) -> None:
            self.total = runtime_context.get_state(ValueStateDescriptor("sum", Types.LONG()))

        def process_element(self, value: Any, ctx: Any) -> Any:
            total = (self.total.value() or 0) + 1
            self.total.update(total)
            key, _, rest = value.split(",", 2)
            yield f"{key},{total},{rest}"

    # Flink's record serializer hands the whole element to the key schema (a Java
    # SimpleStringSchema here): the message key is the output line, so a key's lines may
    # land in either output partition. The sums per key are unaffected (the driver reads
    # every partition); Cairn and Spark key them by the line's key.
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka")
        .key_by(lambda line: line.split(",", 1)[0], key_type=Types.STRING())
        .process(LineSum(), output_type=Types.STRING())
        .sink_to(sink_builder.build())
    )
    started = time.time()
    env.execute("pyflink-kafka-job")
    result = common.result_template(args, SYSTEM)
    result["workload"] = "kafka-job"
    result["elapsed_s"] = round(time.time() - common.SCRIPT_START, 3)
    result["job_s"] = round(time.time() - started, 3)
    import pyflink

    result["versions"]["pyflink"] = getattr(pyflink, "__version__", "2.3.0")
    result["connector_jar"] = Path(args.jar).name
    return result


def main() -> None:
    parser = common.kafka_job_parser(__doc__, "jar")
    parser.add_argument("--delivery-guarantee", default="exactly-once")
    common.run_main(parser, "peer-pyflink-kafka-", run_job)


if __name__ == "__main__":
    main()
