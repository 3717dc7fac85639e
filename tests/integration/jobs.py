"""Job builders shared by the integration tests."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cairn.common import Configuration, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.serialization import Encoder
from cairn.datastream import (
    CheckpointingMode,
    DataStream,
    ExternalizedCheckpointRetention,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.connectors.datagen import (
    DataGeneratorSource,
    RateLimiter,
    RateLimiterStrategy,
)
from cairn.datastream.connectors.file_system import FileSink
from cairn.testing.sequence_jobs import SequenceCheck, SequenceGenerator, SlowSequenceCheck


def environment(conf: dict[str, str], parallelism: int = 2) -> StreamExecutionEnvironment:
    """A job's environment configured with ``conf`` (as a script's ``Configuration``)."""
    configuration = Configuration()
    for k, v in conf.items():
        configuration.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(parallelism)
    return env


def checkpointed_env(
    conf: dict[str, str],
    *,
    parallelism: int = 2,
    interval_ms: int = 300,
    mode: Any = None,
    unaligned: bool = False,
    checkpoint_dir: str | None = None,
    retain: bool = False,
    restarts: int = 10,
) -> StreamExecutionEnvironment:
    """:func:`environment` with checkpoints every ``interval_ms`` (exactly-once unless
    ``mode``; ``unaligned`` ones), stored under ``checkpoint_dir`` if given (kept when the job
    is cancelled or fails, with ``retain``), and ``restarts`` restarts 100 ms apart."""
    env = environment(conf, parallelism)
    env.enable_checkpointing(interval_ms, mode or CheckpointingMode.EXACTLY_ONCE)
    cp = env.get_checkpoint_config()
    if unaligned:
        cp.enable_unaligned_checkpoints()
    if checkpoint_dir:
        cp.set_checkpoint_storage("file://" + checkpoint_dir)
    if retain:
        cp.set_externalized_checkpoint_retention(
            ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
        )
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, 100))
    return env


def generated(
    env: StreamExecutionEnvironment,
    generator: Any,
    count: int | None,
    name: str,
    *,
    rate: float | RateLimiterStrategy | None = None,
    watermarks: WatermarkStrategy | None = None,
    uid: str | None = None,
) -> DataStream:
    """``count`` records of ``generator`` (``None``: unbounded) at ``rate`` records/s
    (``None``: as fast as they are read; or a strategy) as the stream ``name``, with the uid
    ``uid`` (default: ``name``); no watermarks unless ``watermarks``."""
    if isinstance(rate, RateLimiterStrategy):
        limiter: RateLimiterStrategy | None = rate
    else:
        limiter = RateLimiterStrategy.per_second(rate) if rate else None
    source = DataGeneratorSource(generator, count, limiter)
    strategy = WatermarkStrategy.no_watermarks() if watermarks is None else watermarks
    return env.from_source(source, strategy, name).uid(uid or name)


@dataclass(frozen=True)
class UntilFlag(RateLimiterStrategy):
    """``records_per_second`` until the file ``flag`` exists, then as fast as read: a test
    that needs the input to last until its faults are done lets the rest run at full speed.

    >>> limiter = UntilFlag(1000.0, "/nonexistent").create_rate_limiter(2, clock=lambda: 0.0)
    >>> limiter.acquire(1024), limiter.seconds_until_ready(1) > 0
    (0, True)
    """

    flag: str = ""

    def create_rate_limiter(self, parallelism: int, clock: Any = time.monotonic) -> Any:
        return _UntilFlagLimiter(super().create_rate_limiter(parallelism, clock), self.flag)


class _UntilFlagLimiter:
    def __init__(self, limited: RateLimiter, flag: str) -> None:
        self._limited, self._flag = limited, flag
        self._full_speed, self._checked = False, 0.0

    def _unlimited(self) -> bool:
        now = time.monotonic()
        if not self._full_speed and now - self._checked >= 0.2:
            self._checked, self._full_speed = now, os.path.exists(self._flag)
        return self._full_speed

    def acquire(self, wanted: int) -> int:
        return wanted if self._unlimited() else self._limited.acquire(wanted)

    def seconds_until_ready(self, wanted: int) -> float:
        return 0.0 if self._unlimited() else self._limited.seconds_until_ready(wanted)


def file_sink(path: str) -> FileSink:
    """Exactly-once row-format files under ``path``, a line per record."""
    return FileSink.for_row_format(path, Encoder.simple_string_encoder()).build()


def sequence_source(
    env: StreamExecutionEnvironment,
    keys: int,
    records: int | None,
    rate: float | RateLimiterStrategy | None = None,
) -> DataStream:
    """The per-key sequences of ``SequenceGenerator`` (stream ``sequence``, uid
    ``sequence-source``), the input of every job checked with :func:`expected_lines`."""
    return generated(
        env, SequenceGenerator(keys), records, "sequence", rate=rate, uid="sequence-source"
    )


def check_to_files(stream: DataStream, check: KeyedProcessFunction, uid: str, out_dir: str) -> None:
    """``stream`` -> key_by(first field) -> ``check`` (uid ``uid``) -> exactly-once file sink
    (uid ``file-sink``) under ``out_dir``."""
    (
        stream.key_by(lambda r: r[0])
        .process(check)
        .uid(uid)
        .sink_to(file_sink(out_dir))
        .uid("file-sink")
    )


def sequence_job(
    conf: dict[str, str],
    out_dir: str,
    *,
    records: int,
    keys: int,
    parallelism: int = 2,
    rate: int | RateLimiterStrategy | None = 40_000,
    interval_ms: int = 300,
    mode: Any = None,
    checkpoint_dir: str | None = None,
    restarts: int = 10,
    retain: bool = False,
) -> StreamExecutionEnvironment:
    """Generator of per-key sequences -> keyed sequence check -> exactly-once file sink."""
    env = checkpointed_env(
        conf,
        parallelism=parallelism,
        interval_ms=interval_ms,
        mode=mode,
        checkpoint_dir=checkpoint_dir,
        retain=retain,
        restarts=restarts,
    )
    check_to_files(
        sequence_source(env, keys, records, rate), SequenceCheck(), "sequence-check", out_dir
    )
    return env


def backpressured_job(
    conf: dict[str, str],
    out_dir: str,
    *,
    records: int,
    keys: int,
    cost_us: int,
    checkpointing: str,
    interval_ms: int = 300,
    aligned_timeout_ms: int | None = None,
    restarts: int = 10,
) -> StreamExecutionEnvironment:
    """An unthrottled sequence source -> key_by -> a slow keyed check (``cost_us`` per record)
    -> exactly-once file sink: the source runs into backpressure and channels fill up.

    ``checkpointing``: ``"aligned"`` or ``"unaligned"`` (with ``aligned_timeout_ms``, if given).
    """
    unaligned = checkpointing == "unaligned"
    env = checkpointed_env(conf, interval_ms=interval_ms, unaligned=unaligned, restarts=restarts)
    cp = env.get_checkpoint_config()
    cp.set_tolerable_checkpoint_failure_number(100)
    if unaligned and aligned_timeout_ms is not None:
        cp.set_aligned_checkpoint_timeout(aligned_timeout_ms)
    source = sequence_source(env, keys, records)
    check_to_files(source, SlowSequenceCheck(cost_us), "slow-check", out_dir)
    return env


def expected_lines(records: int, keys: int) -> list[str]:
    """The golden output of ``sequence_job``, sorted: compare it with ``sorted(lines)`` (never
    with a set of lines, which hides duplicates), or use :func:`exactly_once_problems`."""
    lines = []
    for i in range(records):
        seq = i // keys + 1
        lines.append(f"k{i % keys:05d},{seq},{seq * (seq + 1) // 2}")
    return sorted(lines)


def exactly_once_problems(lines: Iterable[str], records: int, keys: int) -> list[str]:
    """Why ``lines`` is not the golden output, counted per record: records written more
    than once, missing and unexpected ones (a few examples each); empty if it is.

    >>> for problem in exactly_once_problems(["k00000,1,1", "k00000,1,1"], records=2, keys=1):
    ...     print(problem)
    1 duplicated records (1 extra lines), e.g. k00000,1,1 x2
    1 missing records, e.g. k00000,2,3
    """
    got, want = Counter(lines), Counter(expected_lines(records, keys))
    duplicated = {line: n for line, n in got.items() if line in want and n > want[line]}
    missing = want - got
    unexpected = Counter({line: n for line, n in got.items() if line not in want})
    problems = []
    if duplicated:
        extra = sum(n - want[line] for line, n in duplicated.items())
        examples = ", ".join(f"{line} x{n}" for line, n in sorted(duplicated.items())[:3])
        problems.append(
            f"{len(duplicated)} duplicated records ({extra} extra lines), e.g. {examples}"
        )
    if missing:
        problems.append(f"{len(missing)} missing records, e.g. {', '.join(sorted(missing)[:3])}")
    if unexpected:
        examples = ", ".join(sorted(unexpected)[:3])
        problems.append(f"{sum(unexpected.values())} unexpected lines, e.g. {examples}")
    return problems


def visible_files(directory: str) -> list[str]:
    return sorted(
        os.path.join(root, f)
        for root, _dirs, files in os.walk(directory)
        for f in files
        if not f.startswith((".", "_"))
    )


# Worker SIGKILLs (``cairn.testing.faults``) at every moment of the checkpoint protocol, several
# per run, on different subtasks: three restarts each, for ``sequence_job``'s exactly-once tests.
KILL_SCHEDULES = {
    "processing-and-upload": (
        "point=processing,attempt=0,records=20000,subtask=1;"
        "point=during-upload,attempt=1,subtask=0;"
        "point=processing,attempt=2,records=15000,subtask=0"
    ),
    "barrier-to-ack-and-commit": (
        "point=after-barrier,attempt=0,subtask=1;"
        "point=before-commit,attempt=1,subtask=0;"
        "point=after-commit,attempt=2,subtask=1"
    ),
}
# A sink with a global committer (Delta, Iceberg): its committer is one subtask of its own
# vertex ("...: Committer"), killed just before and just after its table commit. Apart from
# KILL_SCHEDULES, whose every schedule the sequence and JDBC jobs run (they have no
# committer vertex, so these kills would never land there).
GLOBAL_COMMIT_KILLS = (
    "point=after-barrier,attempt=0,subtask=1;"
    "point=before-commit,attempt=1,vertex=Committer;"
    "point=after-commit,attempt=2,vertex=Committer"
)
