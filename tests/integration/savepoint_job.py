"""The job of the savepoint tests, as a user's script run with ``cairn run``:
``savepoint_job.py OUT CHECKPOINTS RECORDS KEYS RATE [--upgraded] [--check-uid UID]``.

A rate-limited generator of per-key sequences (``RATE`` 0: unthrottled) -> key_by -> the
keyed sequence check (it emits ``!`` lines when a key's sequence jumps or repeats, so a
restored state that does not fit shows in the output) -> the exactly-once file sink. The
upgraded version adds a stateless operator before ``key_by`` (no uid: it has no state);
``--check-uid`` renames the check's uid (its savepoint state no longer has an owner).
"""

from __future__ import annotations

import argparse

from cairn.common import WatermarkStrategy
from cairn.common.serialization import Encoder
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.file_system import FileSink
from cairn.testing.sequence_jobs import SequenceCheck, SequenceGenerator


def upgrade_tag(record: tuple[str, int]) -> tuple[str, int]:
    return record  # the "new feature" of the upgraded job: changes nothing, keeps no state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("checkpoints")
    parser.add_argument("records", type=int)
    parser.add_argument("keys", type=int)
    parser.add_argument("rate", type=int)
    parser.add_argument("--upgraded", action="store_true")
    parser.add_argument("--check-uid", default="sequence-check")
    args = parser.parse_args()

    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage("file://" + args.checkpoints)
    limiter = RateLimiterStrategy.per_second(args.rate) if args.rate else None
    source = DataGeneratorSource(SequenceGenerator(args.keys), args.records, limiter)
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "sequence").uid(
        "sequence-source"
    )
    if args.upgraded:
        stream = stream.map(upgrade_tag).name("upgrade-tag")
    (
        stream.key_by(lambda r: r[0])
        .process(SequenceCheck())
        .uid(args.check_uid)
        .sink_to(FileSink.for_row_format(args.out, Encoder.simple_string_encoder()).build())
        .uid("file-sink")
    )
    env.execute("savepoint-job")


if __name__ == "__main__":
    main()
