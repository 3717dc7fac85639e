"""``cairn demo skew``: seed 000's checkpoint-alignment experiment, four ways, side by side.

The job (seed 000, ``TestCheckpointAlignment``): an unbounded source emits ``2`` once per
1,000 records and ``1`` otherwise, as fast as backpressure lets it; ``key_by(lambda v: v % 2
== 0)`` sends everything to one subtask (at parallelism 2 both keys, ``True`` and ``False``,
fall into key groups of subtask 1; the other map subtask idles); there a map spends ~1 ms per
record (a busy loop) and the seed's ``map2`` counts values in operator list state
(``CheckpointedFunction``); parallelism 2, a checkpoint every 2 s. The hot subtask is
backpressured, so its input channels are full and an aligned barrier waits behind seconds of
records. Each variant runs for a fixed time and is cancelled; the checkpoint statistics are
then put side by side:

- ``aligned``: exactly-once, aligned barriers (the default);
- ``unaligned``: ``enable_unaligned_checkpoints()``, barriers overtake in-flight records,
  which are persisted with the checkpoint;
- ``timeout``: unaligned enabled with ``set_aligned_checkpoint_timeout`` (1 s by default,
  well below the 5-10 s an aligned checkpoint takes here): starts aligned, switches to
  unaligned when alignment takes longer;
- ``debloat``: unaligned plus buffer debloating
  (``taskmanager.network.memory.buffer-debloat.enabled``), which shrinks the in-flight data
  to about ``buffer-debloat.target`` (1 s) of processing, so less of it is persisted.

Invariant: the table is computed only from the coordinator's ``CheckpointStats`` of each
variant, collected while the job ran (before it was cancelled) by :func:`table_rows`, a pure
function; durations follow Flink's definitions (end to end = trigger to the last
acknowledgement; alignment = a subtask's first to last barrier, the slowest subtask per
checkpoint; percentiles are nearest-rank over completed checkpoints).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cairn.checkpoint.stats import CheckpointStats, CheckpointStatus, Summary
from cairn.datastream.functions import CheckpointedFunction, MapFunction, SinkFunction
from cairn.datastream.state import ListStateDescriptor

__all__ = [
    "DEFAULT_ALIGNMENT_TIMEOUT_MS",
    "VARIANTS",
    "CheckpointSample",
    "SkewRow",
    "VariantRun",
    "build_skew_job",
    "configure_variant",
    "format_table",
    "parse_variants",
    "run_skew_demo",
    "run_variant",
    "summarize",
    "table_rows",
]

log = logging.getLogger(__name__)

VARIANTS = ("aligned", "unaligned", "timeout", "debloat")
DEFAULT_ALIGNMENT_TIMEOUT_MS = 1_000
DEFAULT_INTERVAL_MS = 2_000
DEFAULT_RECORD_COST_MS = 1.0
SKEW_RATIO = 1_000  # one "2" per 1,000 records, as in the seed


def variant_label(variant: str, alignment_timeout_ms: int = DEFAULT_ALIGNMENT_TIMEOUT_MS) -> str:
    """How a variant is shown in the table.

    >>> variant_label("timeout", 1000)
    'aligned, unaligned after 1 s'
    """
    labels = {
        "aligned": "aligned",
        "unaligned": "unaligned",
        "timeout": f"aligned, unaligned after {alignment_timeout_ms / 1000:g} s",
        "debloat": "unaligned + debloating",
    }
    return labels.get(variant, variant)


def parse_variants(text: str) -> list[str]:
    """``"aligned,unaligned"`` -> ``["aligned", "unaligned"]``; unknown names raise.

    >>> parse_variants("aligned, debloat")
    ['aligned', 'debloat']
    """
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or not names:
        raise ValueError(f"unknown variant(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(VARIANTS)}")
    return list(dict.fromkeys(names))


# ---- statistics -> table (pure) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckpointSample:
    """One checkpoint, engine-neutral (Cairn's ``CheckpointStats`` or Flink's REST history).

    >>> CheckpointSample.from_dict(CheckpointSample(3, "COMPLETED", 120).to_dict()).end_to_end_ms
    120
    """

    checkpoint_id: int
    status: str  # COMPLETED | FAILED | IN_PROGRESS
    end_to_end_ms: int
    alignment_ms: int = 0  # the slowest subtask's first-to-last barrier time
    start_delay_ms: int = 0  # the slowest subtask's trigger-to-first-barrier time
    persisted_bytes: int = 0  # in-flight data persisted with the checkpoint, all subtasks
    unaligned: bool = False
    failure_reason: str | None = None

    @classmethod
    def from_stats(cls, stats: CheckpointStats) -> CheckpointSample:
        metrics = [s.metrics for s in stats.subtasks.values()]
        return cls(
            checkpoint_id=int(stats.checkpoint_id),
            status=stats.status.value,
            end_to_end_ms=stats.end_to_end_duration_ms,
            alignment_ms=max((m.alignment_duration_ms for m in metrics), default=0),
            start_delay_ms=max((m.start_delay_ms for m in metrics), default=0),
            persisted_bytes=stats.persisted_bytes,
            unaligned=stats.unaligned,
            failure_reason=stats.failure_reason,
        )

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointSample:
        return cls(**{name: data[name] for name in cls.__slots__ if name in data})


@dataclass(frozen=True, slots=True)
class SkewRow:
    """One variant's line of the table (percentiles over completed checkpoints)."""

    variant: str
    completed: int
    failed: int
    in_progress: int  # still running when the variant's time was up
    e2e_p50_ms: int | None
    e2e_max_ms: int | None
    alignment_p50_ms: int | None
    alignment_max_ms: int | None
    start_delay_max_ms: int | None
    persisted_max_bytes: int
    persisted_total_bytes: int
    unaligned: int  # completed checkpoints that persisted in-flight data (unaligned)
    records_per_s: float | None = None
    failure_reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        out["failure_reasons"] = list(self.failure_reasons)
        return out


def summarize(variant: str, samples: Iterable[CheckpointSample | CheckpointStats],
              records_per_s: float | None = None) -> SkewRow:
    """The row of one variant; a checkpoint seen several times counts once (its latest view:
    a finished status wins over ``IN_PROGRESS``).

    >>> row = summarize("aligned", [CheckpointSample(1, "COMPLETED", 9000, 10),
    ...                             CheckpointSample(2, "COMPLETED", 7000, 30),
    ...                             CheckpointSample(3, "IN_PROGRESS", 5000)])
    >>> row.completed, row.in_progress, row.e2e_p50_ms, row.e2e_max_ms, row.alignment_max_ms
    (2, 1, 7000, 9000, 30)
    """
    latest: dict[int, CheckpointSample] = {}
    for item in samples:
        sample = item if isinstance(item, CheckpointSample) else CheckpointSample.from_stats(item)
        seen = latest.get(sample.checkpoint_id)
        if seen is None or seen.status == CheckpointStatus.IN_PROGRESS.value:
            latest[sample.checkpoint_id] = sample
    done = [s for s in latest.values() if s.status == CheckpointStatus.COMPLETED.value]
    failed = [s for s in latest.values() if s.status == CheckpointStatus.FAILED.value]
    running = [s for s in latest.values() if s.status == CheckpointStatus.IN_PROGRESS.value]
    e2e = Summary.of(s.end_to_end_ms for s in done)
    alignment = Summary.of(s.alignment_ms for s in done)
    return SkewRow(
        variant=variant,
        completed=len(done),
        failed=len(failed),
        in_progress=len(running),
        e2e_p50_ms=e2e.p50 if done else None,
        e2e_max_ms=e2e.max if done else None,
        alignment_p50_ms=alignment.p50 if done else None,
        alignment_max_ms=alignment.max if done else None,
        start_delay_max_ms=max((s.start_delay_ms for s in done), default=None),
        persisted_max_bytes=max((s.persisted_bytes for s in done), default=0),
        persisted_total_bytes=sum(s.persisted_bytes for s in done),
        unaligned=sum(1 for s in done if s.unaligned),
        records_per_s=records_per_s,
        failure_reasons=tuple(sorted({s.failure_reason or "?" for s in failed})),
    )


def table_rows(collected: Mapping[str, Iterable[CheckpointSample | CheckpointStats]],
               records_per_s: Mapping[str, float | None] | None = None) -> list[SkewRow]:
    """One row per variant, in the order of ``collected``.

    >>> rows = table_rows({"aligned": [], "unaligned": [CheckpointSample(1, "FAILED", 5)]})
    >>> [(r.variant, r.completed, r.failed) for r in rows]
    [('aligned', 0, 0), ('unaligned', 0, 1)]
    """
    rates = records_per_s or {}
    return [summarize(variant, samples, rates.get(variant))
            for variant, samples in collected.items()]


def _ms(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.1f} s" if value >= 10_000 else f"{value:,} ms"


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


HEADERS = ("variant", "completed", "failed", "open", "e2e p50", "e2e max", "align p50",
           "align max", "start delay max", "persisted max", "unaligned", "map rec/s")


def format_table(rows: Sequence[SkewRow], labels: Mapping[str, str] | None = None) -> str:
    """The side-by-side table as text (``labels`` renames variants).

    >>> text = format_table([summarize("aligned", [CheckpointSample(1, "COMPLETED", 12500, 7)])])
    >>> text.splitlines()[0].split()[:3], text.splitlines()[2].split()[:8]
    (['variant', 'completed', 'failed'], ['aligned', '1', '0', '0', '12.5', 's', '12.5', 's'])
    """
    from cairn.observability.tables import render

    names = labels or {}
    body = [
        (
            names.get(r.variant, r.variant),
            r.completed,
            r.failed,
            r.in_progress,
            _ms(r.e2e_p50_ms),
            _ms(r.e2e_max_ms),
            _ms(r.alignment_p50_ms),
            _ms(r.alignment_max_ms),
            _ms(r.start_delay_max_ms),
            _bytes(r.persisted_max_bytes),
            f"{r.unaligned}/{r.completed}",
            "-" if r.records_per_s is None else f"{r.records_per_s:,.0f}",
        )
        for r in rows
    ]
    return render(HEADERS, body)


# ---- the job -----------------------------------------------------------------------------


class BusyMap(MapFunction):
    """Pass-through that spins for ``cost_ms`` per record (the seed's busy loop)."""

    def __init__(self, cost_ms: float = DEFAULT_RECORD_COST_MS) -> None:
        self.cost_s = cost_ms / 1000.0

    def map(self, value: Any) -> Any:
        end = time.perf_counter() + self.cost_s
        while time.perf_counter() < end:
            pass
        return value


class CheckpointMapper(MapFunction, CheckpointedFunction):
    """Seed 000's ``map2``: counts each value in a dict kept in operator list state."""

    def initialize_state(self, context: Any) -> None:
        self.state = context.get_operator_state_store().get_list_state(
            ListStateDescriptor("map-state", None)
        )
        self.counter_map: dict[int, int] = {}
        if context.is_restored():
            for counts in self.state.get():  # several after a rescale: merge them
                for value, n in counts.items():
                    self.counter_map[value] = self.counter_map.get(value, 0) + n

    def snapshot_state(self, context: Any) -> None:
        log.debug("start snapshot checkpoint %d: %s", context.get_checkpoint_id(),
                  self.counter_map)
        self.state.update([dict(self.counter_map)])

    def map(self, value: int) -> int:
        self.counter_map[value] = self.counter_map.get(value, 0) + 1
        return value


class DiscardingSink(SinkFunction):
    def invoke(self, value: Any, context: Any) -> None:
        pass


def build_skew_job(env: Any, record_cost_ms: float = DEFAULT_RECORD_COST_MS) -> None:
    """Seed 000's topology on ``env``: skewed source -> key_by -> busy map -> map2 -> discard."""
    from cairn.common import WatermarkStrategy
    from cairn.datastream.connectors.datagen import DataGeneratorSource

    (
        env.from_source(DataGeneratorSource.skewed(SKEW_RATIO), WatermarkStrategy.no_watermarks(),
                        "skewed source")
        .uid("source")
        .key_by(lambda v: v % 2 == 0)
        .map(BusyMap(record_cost_ms))
        .uid("map1")
        .name("map1 (busy)")
        .map(CheckpointMapper())
        .uid("map2")
        .name("map2")
        .add_sink(DiscardingSink())
        .uid("discard")
    )


def configure_variant(env: Any, variant: str,
                      alignment_timeout_ms: int = DEFAULT_ALIGNMENT_TIMEOUT_MS) -> None:
    """Apply a variant's checkpoint settings to ``env`` (checkpointing already enabled).

    >>> from cairn.datastream import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> configure_variant(env, "timeout", 1000)
    >>> config = env.get_checkpoint_config()
    >>> config.is_unaligned_checkpoints_enabled()
    True
    >>> config.get_aligned_checkpoint_timeout().to_milliseconds()
    1000
    """
    from cairn.common.time import Duration

    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    config = env.get_checkpoint_config()
    if variant != "aligned":
        config.enable_unaligned_checkpoints()
    if variant == "timeout":
        config.set_aligned_checkpoint_timeout(Duration.of_millis(alignment_timeout_ms))
    if variant == "debloat":
        env.configure({"taskmanager.network.memory.buffer-debloat.enabled": "true",
                       "taskmanager.network.memory.buffer-debloat.target": "1 s"})


@dataclass
class VariantRun:
    """What the driver saw of one variant: checkpoints (before cancelling) and throughput."""

    variant: str
    samples: list[CheckpointSample] = field(default_factory=list)
    seconds: float = 0.0
    records: int = 0  # records that entered the map subtasks
    error: str | None = None

    @property
    def records_per_s(self) -> float | None:
        return self.records / self.seconds if self.seconds > 0 else None


def run_variant(variant: str, seconds: float, parallelism: int = 2, master: str | None = None,
                alignment_timeout_ms: int = DEFAULT_ALIGNMENT_TIMEOUT_MS,
                interval_ms: int = DEFAULT_INTERVAL_MS,
                record_cost_ms: float = DEFAULT_RECORD_COST_MS,
                checkpoint_dir: str | None = None, executor: str | None = None) -> VariantRun:
    """Run one variant for ``seconds`` after it is running, collect its checkpoints, cancel.

    >>> run_variant("aligned", 10).samples  # doctest: +SKIP
    [CheckpointSample(checkpoint_id=1, status='COMPLETED', end_to_end_ms=5263, ...), ...]
    """
    from cairn.common import Configuration
    from cairn.common.job_status import JobStatus
    from cairn.datastream import StreamExecutionEnvironment

    conf = Configuration()
    if master:
        conf.set_string("cairn.spark.master", master)
    if executor:
        conf.set_string("cairn.executor", executor)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(interval_ms)
    config = env.get_checkpoint_config()
    # Aligned checkpoints take many seconds here: never let a slow one fail the job.
    config.set_checkpoint_timeout(60_000)
    config.set_tolerable_checkpoint_failure_number(1_000)
    directory = checkpoint_dir or tempfile.mkdtemp(prefix=f"cairn-skew-{variant}-")
    config.set_checkpoint_storage("file://" + os.path.abspath(directory))
    configure_variant(env, variant, alignment_timeout_ms)
    build_skew_job(env, record_cost_ms)

    run = VariantRun(variant)
    client = env.execute_async(f"cairn-demo-skew-{variant}")
    master_ = client.job_master
    seen: dict[int, CheckpointSample] = {}

    def collect() -> None:
        snapshot = client.get_checkpoint_statistics()
        if snapshot is None:
            return
        for checkpoint in snapshot.history:  # the newest 10: poll often enough
            seen[int(checkpoint.checkpoint_id)] = CheckpointSample.from_stats(checkpoint)

    try:
        deadline = time.monotonic() + 180
        while master_.status is not JobStatus.RUNNING and master_.end_ms is None:
            if time.monotonic() > deadline:
                run.error = "the job did not start within 180 s"
                return run
            time.sleep(0.05)
        started = time.monotonic()
        while time.monotonic() - started < seconds and master_.end_ms is None:
            collect()
            time.sleep(0.1)
        collect()
        run.seconds = time.monotonic() - started
        sources = set(master_.plan.source_tasks)
        run.records = sum(m.records_in for t, m in dict(master_.metrics).items()
                          if t not in sources)
        if master_.end_ms is not None:
            run.error = f"the job ended early ({master_.status.name}): {master_.error}"
    finally:
        run.samples = [seen[k] for k in sorted(seen)]
        # Cancelling aborts the checkpoint in progress, as intended: keep that warning quiet.
        coordinator_log = logging.getLogger("cairn.checkpoint.coordinator")
        level = coordinator_log.level
        coordinator_log.setLevel(logging.ERROR)
        try:
            client.cancel()
            client.get_job_execution_result(timeout=60)
        except Exception as exc:  # the run's figures stand; say why the job did not cancel
            log.warning("variant %s did not end cleanly: %s", variant, exc)
        finally:
            coordinator_log.setLevel(level)
            if checkpoint_dir is None:
                shutil.rmtree(directory, ignore_errors=True)
    return run


def run_skew_demo(seconds: int, variants: Sequence[str], master: str | None,
                  parallelism: int = 2,
                  alignment_timeout_ms: int = DEFAULT_ALIGNMENT_TIMEOUT_MS,
                  interval_ms: int = DEFAULT_INTERVAL_MS,
                  record_cost_ms: float = DEFAULT_RECORD_COST_MS,
                  say: Callable[[str], None] | None = None) -> int:
    """Run each variant for ``seconds``, then print the table; 0 if every variant completed
    at least one checkpoint, else 1.

    >>> run_skew_demo(20, ["aligned", "unaligned"], None)  # doctest: +SKIP
    0
    """
    out = say or (lambda text: print(text, flush=True))
    for variant in variants:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    labels = {v: variant_label(v, alignment_timeout_ms) for v in variants}
    out(f"Cairn skew demo (seed 000): skewed source (a 2 once per {SKEW_RATIO:,} records, "
        f"else 1) -> key_by(v % 2 == 0) -> map1 ({record_cost_ms:g} ms busy loop per "
        f"record) -> map2 (operator-state counter); parallelism {parallelism}, a checkpoint "
        f"every {interval_ms / 1000:g} s, {seconds} s per variant: {', '.join(variants)}")
    from cairn.deploy.spark_session import get_or_create_spark

    out("Starting local Spark ..." if not master else f"Connecting to Spark at {master} ...")
    get_or_create_spark(master, parallelism, {}).sparkContext.setLogLevel("FATAL")
    runs: dict[str, VariantRun] = {}
    for variant in variants:
        out(f"- {labels[variant]}: running {seconds} s ...")
        run = run_variant(variant, seconds, parallelism, master, alignment_timeout_ms,
                          interval_ms, record_cost_ms)
        runs[variant] = run
        row = summarize(variant, run.samples)
        out(f"  {row.completed} completed, {row.failed} failed, {row.in_progress} in progress"
            + (f"; {run.error}" if run.error else ""))
    rows = table_rows({v: r.samples for v, r in runs.items()},
                      {v: r.records_per_s for v, r in runs.items()})
    out("")
    out(format_table(rows, labels))
    out("")
    out("e2e: trigger -> last acknowledgement; align: first -> last barrier at the slowest "
        "subtask; start delay: trigger -> first barrier; persisted: in-flight data written "
        "with one checkpoint; open: still in progress when the time was up; percentiles "
        "over completed checkpoints; map rec/s: records through the map subtasks.")
    for row in rows:
        if row.variant != "aligned" and row.completed and not row.unaligned:
            out(f"note: no checkpoint of '{labels[row.variant]}' was taken unaligned (this "
                "runtime aligned every barrier)")
    ok = all(r.completed > 0 for r in rows) and not any(r.error for r in runs.values())
    if not ok:
        out("some variant completed no checkpoint or failed: " + "; ".join(
            f"{v}: {r.error or 'no completed checkpoint'}" for v, r in runs.items()
            if r.error or not summarize(v, r.samples).completed))
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover - use ``cairn demo skew``
    sys.exit(run_skew_demo(20, list(VARIANTS), None))
