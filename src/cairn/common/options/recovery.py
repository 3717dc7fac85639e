"""Recovery options: where a job starts from, who owns it, and whether recovery may fall
back past a checkpoint whose completion was announced.

Invariant: every key here is registered on import; by default nothing is restored that could
duplicate committed output or silently drop state.
"""

from __future__ import annotations

from cairn.common.options.define import define, filesystem_url, spellings

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
