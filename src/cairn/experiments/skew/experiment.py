"""Seed 000's checkpoint-alignment experiment: the skewed job, its variants, one timed run.

The job (seed 000, ``TestCheckpointAlignment``): an unbounded source emits ``2`` once per
1,000 records and ``1`` otherwise, as fast as backpressure lets it; ``key_by(lambda v: v % 2
== 0)`` sends everything to one subtask (at parallelism 2 both keys, ``True`` and ``False``,
fall into key groups of subtask 1; the other map subtask idles); there a map spends ~1 ms per
record (a busy loop) and the seed's ``map2`` counts values in operator list state
(``CheckpointedFunction``); parallelism 2, a checkpoint every 2 s. The hot subtask is
backpressured, so its input channels are full and an aligned barrier waits behind seconds of
records. The variants:

- ``aligned``: exactly-once, aligned barriers (the default);
- ``unaligned``: ``enable_unaligned_checkpoints()``, barriers overtake in-flight records,
  which are persisted with the checkpoint;
- ``timeout``: unaligned enabled with ``set_aligned_checkpoint_timeout`` (1 s by default,
  well below the 5-10 s an aligned checkpoint takes here): starts aligned, switches to
  unaligned when alignment takes longer;
- ``debloat``: unaligned plus buffer debloating
  (``taskmanager.network.memory.buffer-debloat.enabled``), which shrinks the in-flight data
  to about ``buffer-debloat.target`` (1 s) of processing, so less of it is persisted.

Invariant: :func:`run_variant` reports only what the coordinator's ``CheckpointStats`` said
while the job ran (collected before it is cancelled) and the records that entered the map
subtasks; it always cancels the job and removes the checkpoints it created.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from cairn.api.functions import CheckpointedFunction, MapFunction, SinkFunction
from cairn.api.state import ListStateDescriptor
from cairn.experiments.skew.samples import CheckpointSample
from cairn.ids import CheckpointId

__all__ = [
    "DEFAULT_ALIGNMENT_TIMEOUT_MS",
    "DEFAULT_INTERVAL_MS",
    "DEFAULT_RECORD_COST_MS",
    "SKEW_RATIO",
    "VARIANTS",
    "BusyMap",
    "CheckpointMapper",
    "DiscardingSink",
    "VariantRun",
    "build_skew_job",
    "configure_variant",
    "run_variant",
    "variant_label",
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
        log.debug("start snapshot checkpoint %d: %s", context.get_checkpoint_id(), self.counter_map)
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
        env.from_source(
            DataGeneratorSource.skewed(SKEW_RATIO),
            WatermarkStrategy.no_watermarks(),
            "skewed source",
        )
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


def configure_variant(
    env: Any, variant: str, alignment_timeout_ms: int = DEFAULT_ALIGNMENT_TIMEOUT_MS
) -> None:
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
        env.configure(
            {
                "taskmanager.network.memory.buffer-debloat.enabled": "true",
                "taskmanager.network.memory.buffer-debloat.target": "1 s",
            }
        )


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


def run_variant(
    variant: str,
    seconds: float,
    parallelism: int = 2,
    master: str | None = None,
    alignment_timeout_ms: int = DEFAULT_ALIGNMENT_TIMEOUT_MS,
    interval_ms: int = DEFAULT_INTERVAL_MS,
    record_cost_ms: float = DEFAULT_RECORD_COST_MS,
    checkpoint_dir: str | None = None,
    executor: str | None = None,
) -> VariantRun:
    """Run one variant for ``seconds`` after it is running, collect its checkpoints, cancel.

    Example (not a doctest: it needs a running system)::

        run_variant("aligned", 10).samples
        # [CheckpointSample(checkpoint_id=1, status='COMPLETED', end_to_end_ms=5263, ...), ...]
    """
    from cairn.common import Configuration
    from cairn.common.job_status import JobStatus
    from cairn.datastream import StreamExecutionEnvironment
    from cairn.deploy.job_master_client import job_master_of

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
    master_ = job_master_of(client)
    seen: dict[CheckpointId, CheckpointSample] = {}

    def collect() -> None:
        snapshot = client.get_checkpoint_statistics()
        if snapshot is None:
            return
        for checkpoint in snapshot.history:  # the newest 10: poll often enough
            seen[checkpoint.checkpoint_id] = CheckpointSample.from_stats(checkpoint)

    try:
        deadline = time.monotonic() + 180
        while master_.view.status is not JobStatus.RUNNING and not master_.view.ended:
            if time.monotonic() > deadline:
                run.error = "the job did not start within 180 s"
                return run
            time.sleep(0.05)
        started = time.monotonic()
        while time.monotonic() - started < seconds and not master_.view.ended:
            collect()
            time.sleep(0.1)
        collect()
        run.seconds = time.monotonic() - started
        sources = set(master_.plan.source_tasks)
        view = master_.view
        run.records = sum(m.records_in for t, m in view.metrics.items() if t not in sources)
        if view.ended:
            run.error = f"the job ended early ({view.status.name}): {view.error}"
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
