"""BATCH stages run in process (``cairn.executor: inprocess``): the exchanges are lists of
blocks.

Invariant: a stage's output reaches its consumers' inputs only once every partition of the
stage completed (a blocking exchange), so a failed stage is rerun from its inputs, which
are kept until the stage completed; stages run in plan order, partitions one after another.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import partial
from operator import itemgetter
from typing import Any

from cairn.batch.exchange import COLLECTED, SortedBlock
from cairn.batch.plan import BatchPlan
from cairn.batch.stage import StageTask
from cairn.batch.tasks import guarded_partition
from cairn.ids import VertexId

__all__ = ["run_in_process"]

_SORT_KEY = itemgetter(0)


def run_in_process(
    plan: BatchPlan,
    tasks: dict[VertexId, StageTask],
    run_attempts: Callable[[Callable[[int], None]], None],
    cancelled: Callable[[], bool] = lambda: False,
    partition_counts: Callable[[int, int, int, int, float, bool], None] | None = None,
) -> dict[int, list[Any]]:
    """Run every stage; return the collected records by collect sink transformation id.
    ``run_attempts(attempt)`` runs ``attempt(n)`` under the job's restart strategy: each
    stage is one attempt unit (a retry reruns the failed stage only). ``partition_counts``
    gets (vertex, partition, records in, records out, run time in ms, done) while each
    partition runs and once it completed."""
    inputs: dict[int, dict[int, list[SortedBlock]]] = defaultdict(lambda: defaultdict(list))
    collected: dict[int, list[Any]] = defaultdict(list)
    for stage in plan.stages:
        task = tasks[stage.vertex]
        mine = inputs.pop(stage.vertex, {})

        def attempt(number: int, task: StageTask = task, mine: Any = mine) -> None:
            produced: dict[int, dict[int, list[SortedBlock]]] = defaultdict(
                lambda: defaultdict(list)
            )
            results: dict[int, list[Any]] = defaultdict(list)
            for p in range(task.stage.parallelism):
                if cancelled():
                    raise InterruptedError("the job was cancelled")
                entries = None if task.stage.is_source else sorted(mine.get(p, []), key=_SORT_KEY)
                counts = None
                if partition_counts is not None:
                    counts = partial(partition_counts, int(task.stage.vertex), p)
                outs = guarded_partition(task, p, entries, number, counts)
                for consumer, part, key, payload in outs:
                    if consumer == COLLECTED:
                        results[part].extend(payload)
                    else:
                        produced[consumer][part].append((key, payload))
            for consumer, parts in produced.items():
                for part, entries_out in parts.items():
                    inputs[consumer][part].extend(entries_out)
            for tid, records in results.items():
                collected[tid].extend(records)

        run_attempts(attempt)
    return dict(collected)
