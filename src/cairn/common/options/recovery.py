"""Recovery options: where a job starts from, who owns it, and whether recovery may fall
back past a checkpoint whose completion was announced.

Invariant: every key here is registered on import; by default nothing is restored that could
duplicate committed output or silently drop state.
"""

from __future__ import annotations

from cairn.common.options.define import define, filesystem_url, non_empty, spellings

RESTORE_PATH = define(
    "execution.state-recovery.path",
    "str",
    None,
    "Start from this checkpoint or savepoint.",
    "execution.savepoint.path",
    check=filesystem_url,
)
RESTORE_IGNORE_UNCLAIMED = define(
    "execution.state-recovery.ignore-unclaimed-state",
    "bool",
    False,
    "Allow restoring when state of a removed operator is in the snapshot.",
    "execution.savepoint.ignore-unclaimed-state",
)
RESTORE_MODE = define(
    "execution.state-recovery.claim-mode",
    "enum",
    "NO_CLAIM",
    "Who owns a retained checkpoint the job starts from: CLAIM (the job deletes it once "
    "subsumed) or NO_CLAIM (left to the user). Savepoints are never deleted.",
    "execution.savepoint-restore-mode",
    choices=spellings(("CLAIM",), ("NO_CLAIM",)),
)
ALLOW_FALLBACK_PAST_COMMITTED = define(
    "cairn.recovery.allow-fallback-past-committed",
    "bool",
    False,
    "Let recovery skip an unusable checkpoint whose completion was announced and restore an "
    "older one even though the job has committing sinks (sink_to with a committer, "
    "execute_and_collect): the output committed between the two checkpoints is written again "
    "(duplicates). By default such a recovery fails the job, naming the checkpoint.",
)
CLUSTER_ID = define(
    "high-availability.cluster-id",
    "str",
    None,
    "The job's identity across runs (Flink's key). Unset: the job name (pipeline.name) "
    "together with the checkpoint storage URL. Runs of one identity share the job id and "
    "the job directory <storage>/<job-id>/, so a rerun can resume where the last run stopped.",
    check=non_empty,
)
ON_RERUN = define(
    "cairn.recovery.on-rerun",
    "enum",
    "RESUME",
    "What a run does when the job directory holds completed checkpoints of an earlier run of "
    "the same job (high-availability.cluster-id, else pipeline.name and the storage URL): "
    "RESUME from the latest one unless that run ended FINISHED or CANCELED; FORCE_RESUME from "
    "it however that run ended; FRESH: start from scratch (the earlier checkpoints are kept "
    "but never resumed from); REFUSE: fail instead of resuming, naming the checkpoint. An "
    "explicit restore path (-s, execution.state-recovery.path) always wins.",
    choices=spellings(("RESUME",), ("FORCE_RESUME",), ("FRESH",), ("REFUSE",)),
)
