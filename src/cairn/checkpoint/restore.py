"""Finding the checkpoint to restore from: read and verify candidates, then let the pure
``choose_restore`` decide.

Invariant: a checkpoint is handed out for restore only after its metadata decoded cleanly
(and, with a signing key, its signature verified) and every state file it references exists
with at least the size it needs; its content is checked against its digests or CRC-32s here
too, unless the caller names it as one whose contents the workers may check alone (a
checkpoint the job completed itself: the workers check every byte they restore, and one that
fails is marked unusable, which falls back like a check here); reading a candidate never runs
code from it; each skipped candidate is logged with the exact file and problem; a fallback
that would commit output a second time is refused unless the job allows it
(``FallbackRule``). A restore into a different job never drops state silently
(``check_restore_compatible``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.checkpoint.errors import (
    CheckpointError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    FallbackRefusedError,
    NoUsableCheckpointError,
)
from cairn.checkpoint.inspection import verify
from cairn.checkpoint.loading import checkpoint_id_of
from cairn.checkpoint.metadata import CompletedCheckpoint
from cairn.checkpoint.protocol import (
    FallbackRefused,
    FallbackRule,
    FallbackToPrevious,
    NothingUsable,
    RestoreCandidate,
    choose_restore,
)
from cairn.checkpoint.storage import load_checkpoint
from cairn.ids import OperatorUid
from cairn.settings import SigningKey

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RestoreChoice:
    """The checkpoint to restore and the newer candidates that were skipped (with reasons)."""

    checkpoint: CompletedCheckpoint
    skipped: tuple[RestoreCandidate, ...] = ()


def examine(
    directory: str,
    storage_options: Mapping[str, Any] | None = None,
    committed: bool = False,
    key: SigningKey | None = None,
    check_contents: bool = True,
) -> tuple[RestoreCandidate, CompletedCheckpoint | None]:
    """Read and verify one candidate (its signature with ``key``, every state file's size
    and, with ``check_contents``, its digest or CRC-32s: every byte read); the checkpoint is
    None iff the candidate is unusable. ``committed`` is carried into the candidate."""
    cp: CompletedCheckpoint | None = None
    try:
        cp = load_checkpoint(directory, storage_options, key)
        verify(
            cp.metadata,
            cp.directory,
            storage_options,
            check_crc=check_contents,
            require_digests=key is not None,
        )
    except (CorruptCheckpointError, CheckpointNotFoundError) as e:
        # Name the file when the problem is inside the directory, not the directory itself.
        problem = e.problem if e.path.rstrip("/") == directory.rstrip("/") else str(e)
        cid = cp.checkpoint_id if cp is not None else checkpoint_id_of(directory)
        return RestoreCandidate(directory, cid, problem, committed), None
    return RestoreCandidate(directory, cp.checkpoint_id, None, committed), cp


def candidate_at(directory: str, committed: bool = False) -> RestoreCandidate:
    """A candidate not examined yet (its id from a ``chk-<n>`` name, if it has one)."""
    return RestoreCandidate(directory, checkpoint_id_of(directory), None, committed)


def find_restore_point(
    candidates_newest_first: Sequence[RestoreCandidate],
    storage_options: Mapping[str, Any] | None = None,
    what: str = "the job",
    rule: FallbackRule = FallbackRule(),
    key: SigningKey | None = None,
    sizes_only: Collection[str] = (),
) -> RestoreChoice:
    """The newest usable checkpoint among the candidates, if ``rule`` lets the restore skip
    the newer unusable ones. With ``key`` (the job's signing key) a candidate is usable only
    if its metadata is signed with it. A candidate whose location is in ``sizes_only`` is
    verified without reading its state files (their contents are left to the workers).

    A candidate with a ``problem`` is known to be unusable (e.g. its state failed to decode
    in a worker) and is not read again; the others are examined, newest first, until one is
    usable. ``committed`` says whether sinks may have committed a candidate's output.

    Raises:
        FallbackRefusedError: only an older checkpoint is usable, and restoring it would
            commit output a second time; the message names the skipped checkpoint.
        NoUsableCheckpointError: none is usable; the message names every path and problem.
    """
    # Verifying may read every byte (CRCs): stop at the first candidate that is usable.
    examined: list[tuple[RestoreCandidate, CompletedCheckpoint | None]] = []
    for candidate in candidates_newest_first:
        if candidate.usable:
            where, committed = candidate.location, candidate.committed
            contents = where not in sizes_only
            examined.append(examine(where, storage_options, committed, key, contents))
        else:
            examined.append((candidate, None))
        if examined[-1][1] is not None:
            break
    decision = choose_restore([c for c, _ in examined], rule)
    if isinstance(decision, NothingUsable):
        raise NoUsableCheckpointError(
            f"cannot restore {what}: {decision.describe()}",
            [(c.location, c.problem or "") for c in decision.skipped],
        )
    if isinstance(decision, FallbackRefused):
        raise FallbackRefusedError(
            f"cannot restore {what}: {decision.describe()}",
            [(c.location, c.problem or "") for c in decision.skipped],
        )
    skipped: tuple[RestoreCandidate, ...] = ()
    if isinstance(decision, FallbackToPrevious):
        skipped = decision.skipped
        for c in skipped:
            log.warning(
                "Checkpoint %s is unusable (%s); falling back to an older one.",
                c.location,
                c.problem,
            )
        if decision.past_committed and rule.committing_sinks:
            log.warning(
                "Restoring checkpoint %s past checkpoint %s, whose output may have been "
                "committed (cairn.recovery.allow-fallback-past-committed): sinks %s will "
                "commit the output in between a second time.",
                decision.candidate.checkpoint_id,
                decision.past_committed[0].checkpoint_id,
                ", ".join(rule.committing_sinks),
            )
    chosen = next(cp for c, cp in examined if c == decision.candidate and cp is not None)
    return RestoreChoice(chosen, skipped)


class IncompatibleCheckpointError(CheckpointError):
    """The job cannot take over the state of the checkpoint it is told to restore from."""


def check_restore_compatible(
    checkpoint: CompletedCheckpoint,
    operators: Mapping[OperatorUid, tuple[int, int]],
    allow_unclaimed_state: bool = False,
) -> None:
    """Fail rather than lose state when restoring ``checkpoint`` into a job whose operators
    (``uid -> (parallelism, max_parallelism)``) differ from the checkpointed ones (Flink's
    rules): state of a uid the job lacks needs ``allow_unclaimed_state``, and keyed state
    needs the same max parallelism (its key groups would map keys to the wrong subtasks);
    in-flight data of an unaligned checkpoint needs the same parallelism.

    Raises:
        IncompatibleCheckpointError: names the operator, the checkpoint and the remedy.
    """
    where = checkpoint.directory
    for uid, op in sorted(checkpoint.metadata.operators.items()):
        states = op.subtasks.values()
        if uid not in operators:
            if not allow_unclaimed_state and any(not s.is_empty for s in states):
                raise IncompatibleCheckpointError(
                    f"cannot restore {where}: it holds state of operator uid {uid!r}, which "
                    "is not in the job (removed, or its uid changed). Give the operator that "
                    f"owns this state .uid({uid!r}), or allow dropping it: `cairn run "
                    "--allow-non-restored-state` (-n), or execution.state-recovery."
                    "ignore-unclaimed-state: true."
                )
            continue
        max_parallelism = operators[uid][1]
        if op.max_parallelism != max_parallelism and any(s.keyed for s in states):
            raise IncompatibleCheckpointError(
                f"cannot restore {where}: operator uid {uid!r} has keyed state written with "
                f"max parallelism {op.max_parallelism}, but the job uses {max_parallelism}; "
                f"keep it at {op.max_parallelism} (env.set_max_parallelism or "
                "pipeline.max-parallelism) to restore this state."
            )
        parallelism = operators[uid][0]
        if op.parallelism != parallelism and any(s.input_channels for s in states):
            raise IncompatibleCheckpointError(
                f"cannot restore {where}: it is an unaligned checkpoint with in-flight data of "
                f"operator uid {uid!r} at parallelism {op.parallelism}, but the job runs it at "
                f"{parallelism}; in-flight data restores only at the same parallelism. Restore "
                "from a savepoint (always aligned) to change the parallelism."
            )
