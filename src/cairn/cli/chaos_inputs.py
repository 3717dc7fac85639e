"""What every run of ``cairn chaos`` reads: an unbounded ``KafkaSource`` is replaced by the
replay of a prefix of its input captured once, before the first run submits its job.

Invariant: each run of one chaos command reads the same records: the Kafka sources of a
job (by the job's number within the script and the source's place among the job's Kafka
sources) are captured once (``chaos_capture``), at the reference run's submission, and every
run (reference, faulted, control) deploys a ``KafkaReplaySource`` over those files in their
place, with the same transformation (uid, name, parallelism, watermark strategy). The user's
job objects are never changed: the rewrite copies the transformations it changes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace

from cairn.cli.chaos_capture import CaptureError, capture_kafka
from cairn.datastream.connectors.kafka.replay import CapturedPartition, KafkaReplaySource
from cairn.datastream.connectors.kafka.source import KafkaSource
from cairn.datastream.job_builder import PreparedJob
from cairn.graph.transformations import (
    SinkTransformation,
    SourceTransformation,
    Transformation,
    reachable,
)

__all__ = [
    "CapturedSource",
    "InputCapture",
    "add_capture_arguments",
    "capture_options",
    "describe_source",
    "with_sources",
]

RECORDS = 10_000
SECONDS = 10.0
RATE = 2_000.0


@dataclass(frozen=True)
class CapturedSource:
    """One Kafka source's captured input: the source's name (as the report shows it), its
    topics and what was captured per partition."""

    name: str
    topics: tuple[str, ...]
    partitions: tuple[CapturedPartition, ...]


def describe_source(source: CapturedSource) -> str:
    """A report line: the source, and per partition its records and their offsets.

    >>> p = [CapturedPartition("t", 0, "f", 0, 1500, 1500), CapturedPartition("t", 1, "g", 4, 4, 0)]
    >>> describe_source(CapturedSource("source 'orders'", ("t",), tuple(p)))
    "source 'orders': 1500 records of topic t: t-0 1500 (offsets 0-1499), t-1 none (from 4)"
    """
    total = sum(p.records for p in source.partitions)
    parts = []
    for p in source.partitions:
        if p.records:
            parts.append(f"{p.split_id} {p.records} (offsets {p.start_offset}-{p.last_offset})")
        else:
            parts.append(f"{p.split_id} none (from {p.start_offset})")
    topics = ", ".join(source.topics) or "(none)"
    return f"{source.name}: {total} records of topic {topics}: {', '.join(parts)}"


def with_sources(prepared: PreparedJob, sources: Mapping[int, object]) -> PreparedJob:
    """``prepared`` with the source of each ``SourceTransformation`` whose id is in
    ``sources`` replaced by its value; the transformations on the way to the sinks are
    copies (same ids, uids, names), the others the job's own.

    >>> from cairn.graph.transformations import OneInputTransformation
    >>> src = SourceTransformation("in", [], source="live", bounded=False)
    >>> mid = OneInputTransformation("map", [src])
    >>> out = SinkTransformation("out", [mid])
    >>> job = PreparedJob(None, (out,), (src, mid, out))
    >>> moved = with_sources(job, {src.id: "replay"})
    >>> moved.sinks[0].inputs[0].inputs[0].source, src.source, moved.sinks[0].id == out.id
    ('replay', 'live', True)
    """
    if not sources:
        return prepared
    copies: dict[int, Transformation] = {}

    def copy(t: Transformation) -> Transformation:
        if t.id in copies:
            return copies[t.id]
        inputs = [copy(i) for i in t.inputs]
        if isinstance(t, SourceTransformation) and t.id in sources:
            moved: Transformation = replace(t, source=sources[t.id], bounded=True)
        elif any(a is not b for a, b in zip(inputs, t.inputs, strict=True)):
            moved = replace(t, inputs=inputs)
        else:
            moved = t
        copies[t.id] = moved
        return moved

    sinks = tuple(copy(s) for s in prepared.sinks)
    assert all(isinstance(s, SinkTransformation) for s in sinks)
    transformations = tuple(copies[t.id] for t in prepared.transformations if t.id in copies)
    return replace(prepared, sinks=sinks, transformations=transformations)  # type: ignore[arg-type]


def _say(message: str) -> None:
    print(f"cairn chaos: {message}", file=sys.stderr, flush=True)


def _name(t: SourceTransformation) -> str:
    return f"source '{t.uid or t.name}'"


class InputCapture:
    """The captured inputs of one ``cairn chaos`` command, under ``directory``."""

    def __init__(self, directory: str, records: int, seconds: float, rate: float | None) -> None:
        self.directory = directory
        self.records, self.seconds, self.rate = records, seconds, rate
        self.sources: dict[tuple[int, int], CapturedSource] = {}

    @staticmethod
    def from_args(args: argparse.Namespace, work: str) -> InputCapture:
        if args.capture_records < 1 or args.capture_seconds <= 0 or args.replay_rate < 0:
            raise CaptureError(
                "--capture-records must be >= 1, --capture-seconds > 0, --replay-rate >= 0"
            )
        rate = args.replay_rate or None
        return InputCapture(
            os.path.join(work, "input"), args.capture_records, args.capture_seconds, rate
        )

    def replay(self, prepared: PreparedJob, job: int) -> PreparedJob:
        """``prepared`` (the ``job``-th of the script) with each unbounded ``KafkaSource``
        replaced by the replay of its capture, captured now if this is its first run."""
        kafka = [
            t
            for t in reachable(prepared.sinks)
            if isinstance(t, SourceTransformation)
            and isinstance(t.source, KafkaSource)
            and not t.source.is_bounded()
        ]
        replays: dict[int, object] = {}
        for position, t in enumerate(kafka, 1):
            source = t.source
            assert isinstance(source, KafkaSource)
            captured = self.sources.get((job, position))
            if captured is None:
                _say(
                    f"capturing the input of {_name(t)}: the first {self.records} records "
                    f"per partition or what comes within {self.seconds:g} s"
                )
                directory = os.path.join(self.directory, f"job-{job}", f"source-{position}")
                parts = capture_kafka(source.config(), directory, self.records, self.seconds)
                topics = tuple(sorted({p.topic for p in parts}))
                captured = CapturedSource(_name(t), topics, tuple(parts))
                self.sources[(job, position)] = captured
                _say(f"captured {describe_source(captured)}")
            replays[t.id] = KafkaReplaySource(
                source.config(), captured.partitions, self.rate, _name(t)
            )
        return with_sources(prepared, replays)

    def report_lines(self) -> list[str]:
        """What the report says of the captured inputs (nothing without any)."""
        if not self.sources:
            return []
        pace = f"{self.rate:g} records/s" if self.rate else "unpaced"
        lines = [f"  input captured and replayed by every run ({pace}):"]
        lines += [f"    {describe_source(s)}" for _, s in sorted(self.sources.items())]
        return lines


def add_capture_arguments(chaos: argparse.ArgumentParser) -> None:
    """``cairn chaos``'s options for unbounded sources."""
    chaos.add_argument(
        "--capture-records",
        type=int,
        default=RECORDS,
        metavar="N",
        help="an unbounded Kafka source is replayed from a capture of its first N records "
        "per partition (default: %(default)s) ...",
    )
    chaos.add_argument(
        "--capture-seconds",
        type=float,
        default=SECONDS,
        metavar="S",
        help="... or of what arrives within S seconds (default: %(default)s)",
    )
    chaos.add_argument(
        "--replay-rate",
        type=float,
        default=RATE,
        metavar="R",
        help="records per second a captured source replays at (default: %(default)s; "
        "0: as fast as the job reads)",
    )


def capture_options(args: argparse.Namespace) -> list[str]:
    """The capture options of a replay command: those not at their defaults.

    >>> capture_options(argparse.Namespace(capture_records=3000, capture_seconds=10.0,
    ...                                    replay_rate=2000.0))
    ['--capture-records=3000']
    """
    parts = []
    if args.capture_records != RECORDS:
        parts.append(f"--capture-records={args.capture_records}")
    if args.capture_seconds != SECONDS:
        parts.append(f"--capture-seconds={args.capture_seconds:g}")
    if args.replay_rate != RATE:
        parts.append(f"--replay-rate={args.replay_rate:g}")
    return parts
