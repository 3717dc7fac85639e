"""BATCH stages as Spark stages: each exchange is a Spark shuffle.

Invariant: a job is one Spark action over an RDD lineage with one ``mapPartitionsWithIndex``
per job vertex (its chain, one ordinary Spark task per partition; never barrier mode) and,
in front of every non-source vertex, one shuffle of all its inputs: blocks of records
(``cairn.batch.exchange``, grouped by key on the producer) keyed by ``(partition, sort
key)``, partitioned by the partition and sorted by the block's sort key within it
(``repartitionAndSortWithinPartitions``, which spills to disk), so its task reads its
records key group by key group, key by key. Spark pickles and sorts blocks, not records.
Spark retries a failed task and recomputes lost shuffle output from the stage's inputs; a
rerun of the action (the restart strategy) skips the shuffle stages that completed. A
vertex read by several consumers is persisted, so it runs once. Each partition's record
counts reach the driver in an accumulator (with its Spark task's result), where the job's
monitor reads them while the action runs.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import cloudpickle
from pyspark.accumulators import Accumulator, AccumulatorParam

from cairn.batch.exchange import COLLECTED, Out, SortedBlock
from cairn.batch.plan import BatchPlan
from cairn.batch.stage import StageTask
from cairn.batch.tasks import guarded_partition
from cairn.deploy.output_forwarding import forwarding_stdout
from cairn.ids import VertexId

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import SparkSession

__all__ = ["SparkBatchJob"]

PRINTED = -2  # an output entry carrying text a terminal stage printed (local mode)
ATTEMPT_PROPERTY = "cairn.batch.attempt"  # Spark local property: the restart attempt
COUNTS_INTERVAL_S = 0.5  # how often the driver looks at the partitions' counts
# (vertex, partition, records in, records out, run time in ms, done: always True) of a
# completed partition
PartitionDone = Callable[[int, int, int, int, float, bool], None]


def _partition_of(key: tuple[int, tuple[Any, ...]]) -> int:
    return key[0]


def _sort_key(key: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    return key[1]


def _encode(payload: Any) -> bytes:
    """A block as bytes, pickled once by the C pickler: PySpark's cloudpickle would call
    back into Python for every tuple and list inside (cloudpickle only for what plain
    pickle refuses, e.g. records of classes defined in ``__main__``)."""
    try:
        return pickle.dumps(payload, protocol=5)
    except (pickle.PicklingError, AttributeError, TypeError):
        data: bytes = cloudpickle.dumps(payload, protocol=5)
        return data


def _blocks(pairs: Iterable[Any]) -> Iterator[SortedBlock]:
    loads = pickle.loads
    for (_part, key), payload in pairs:
        yield key, loads(payload)


def _attempt() -> int:
    """The restart attempt this task belongs to (set by the driver per action)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    value = context.getLocalProperty(ATTEMPT_PROPERTY) if context is not None else None
    return int(value) if value else 0


class LatestCounts(AccumulatorParam[dict[Any, Any]]):
    """An accumulator of each partition's latest counts, ``{(vertex, partition): (records
    in, records out, run time in ms)}``: a partition run again replaces its entry, never
    adds to it."""

    def zero(self, value: dict[Any, Any]) -> dict[Any, Any]:
        return {}

    def addInPlace(self, value1: dict[Any, Any], value2: dict[Any, Any]) -> dict[Any, Any]:
        value1.update(value2)
        return value1


def _stage_function(task: StageTask, forward_stdout: bool, counts: Accumulator[Any]) -> Any:
    source = task.stage.is_source
    vertex = int(task.stage.vertex)

    def run(partition: int, items: Iterable[Any]) -> Iterator[Out]:
        blocks = None if source else _blocks(items)
        attempt = _attempt()

        def on_end(records_in: int, records_out: int, elapsed_ms: float, done: bool) -> None:
            if done:  # a running task's counts cannot reach the driver before its result
                counts.add({(vertex, partition): (records_in, records_out, elapsed_ms)})

        if not forward_stdout:
            yield from guarded_partition(task, partition, blocks, attempt, on_end)
            return
        printed: list[str] = []
        with forwarding_stdout(True, printed.append):
            yield from guarded_partition(task, partition, blocks, attempt, on_end)
        for text in printed:
            yield (PRINTED, partition, (), text)

    return run


def _pairs_for(vertex: int) -> Any:
    """A partition function: the outputs bound for ``vertex``, keyed for the shuffle."""

    def pairs(outs: Iterable[Out]) -> Iterator[Any]:
        return (((o[1], o[2]), _encode(o[3])) for o in outs if o[0] == vertex)

    return pairs


def _is_result(out: Out) -> bool:
    return out[0] == COLLECTED or out[0] == PRINTED


def _result(out: Out) -> tuple[int, int, Any]:
    return out[0], out[1], out[3]


class SparkBatchJob:
    """The job's RDD lineage, built once: a rerun (``run(attempt)``) reuses the shuffle
    output of every stage that completed before."""

    def __init__(
        self,
        spark: SparkSession,
        plan: BatchPlan,
        tasks: dict[VertexId, StageTask],
        job_group: str,
    ) -> None:
        from pyspark import StorageLevel

        self._sc = sc = spark.sparkContext
        self._group = job_group
        self._name = plan.job_name
        local = (sc.master or "").startswith("local")
        self._counts = sc.accumulator({}, LatestCounts())
        outputs: dict[VertexId, RDD[Any]] = {}
        for stage in plan.stages:
            run = _stage_function(tasks[stage.vertex], local and stage.terminal, self._counts)
            n = stage.parallelism
            if stage.is_source:
                rdd = sc.parallelize(range(n), n).mapPartitionsWithIndex(run)
            else:
                producers = sorted({i.edge.source_vertex for i in stage.inputs})
                pairs = _pairs_for(stage.vertex)
                incoming = [outputs[p].mapPartitions(pairs) for p in producers]
                merged = incoming[0] if len(incoming) == 1 else sc.union(incoming)
                shuffled = merged.repartitionAndSortWithinPartitions(
                    n, partitionFunc=_partition_of, keyfunc=_sort_key
                )
                rdd = shuffled.mapPartitionsWithIndex(run)
            rdd.setName(f"v{stage.vertex} {stage.name}")
            if len(plan.consumers_of(stage.vertex)) > 1:
                rdd = rdd.persist(StorageLevel.MEMORY_AND_DISK)
            outputs[stage.vertex] = rdd
        self._outputs = outputs
        terminals = [outputs[s.vertex] for s in plan.stages if s.terminal]
        final = terminals[0] if len(terminals) == 1 else sc.union(terminals)
        self._final = final.filter(_is_result).map(_result)

    def run(
        self, attempt: int, partition_done: PartitionDone | None = None
    ) -> tuple[dict[int, list[Any]], list[str]]:
        """Run the action; the collected records by collect sink transformation id, and
        the text terminal stages printed (forwarded in local mode). ``partition_done`` gets
        (vertex, partition, records in, records out) of each partition Spark completed,
        while the action runs (each Spark task's counts arrive with its result)."""
        sc = self._sc
        sc.setJobGroup(self._group, f"Cairn BATCH job {self._name!r}", interruptOnCancel=True)
        sc.setLocalProperty(ATTEMPT_PROPERTY, str(attempt))
        collected: dict[int, list[Any]] = {}
        printed: list[str] = []
        done = threading.Event()
        watcher = None
        if partition_done is not None:
            watcher = threading.Thread(
                target=self._watch, args=(partition_done, done), name="cairn-batch-counts"
            )
            watcher.daemon = True
            watcher.start()
        try:
            results = self._final.collect()
        finally:
            done.set()
            if watcher is not None:
                watcher.join()
        for kind, where, value in results:
            if kind == COLLECTED:
                collected.setdefault(where, []).extend(value)
            else:
                printed.append(value)
        return collected, printed

    def _watch(self, partition_done: PartitionDone, done: threading.Event) -> None:
        """Report counts that changed, every ``COUNTS_INTERVAL_S`` and once at the end."""
        seen: dict[Any, Any] = {}
        while True:
            finished = done.wait(COUNTS_INTERVAL_S)
            for (vertex, partition), counts in dict(self._counts.value).items():
                if seen.get((vertex, partition)) != counts:
                    seen[(vertex, partition)] = counts
                    records_in, records_out, elapsed_ms = counts
                    partition_done(vertex, partition, records_in, records_out, elapsed_ms, True)
            if finished:
                return

    def cancel(self) -> None:
        self._sc.cancelJobGroup(self._group)

    def release(self) -> None:
        """Drop what the lineage persisted."""
        for rdd in self._outputs.values():
            if rdd.is_cached:
                rdd.unpersist()
