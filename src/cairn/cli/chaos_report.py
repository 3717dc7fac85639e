"""What ``cairn chaos`` prints: the verdict's report (equal, or the first difference with
the fault just before it and the likely cause), the rescale's and upgrade's lines, and the
command that replays the same faults.

Invariant: text only, from facts the runs gathered (``chaos_run.RunResult``, the verdict's
``Difference`` and ``Cause``, the fired faults); nothing here runs a job or reads a file, so
every profile (local, driver kills, hosts) prints the same report from the same facts.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence

from cairn.cli.chaos_inputs import capture_options
from cairn.cli.chaos_outputs import (
    SinkOutput,
)
from cairn.cli.chaos_run import (
    INTERVAL_MS,
    RunResult,
)
from cairn.cli.chaos_verdict import Cause, Difference
from cairn.testing.fault_plan import (
    FiredFault,
    PlannedFault,
)

__all__ = ["fault_before", "replay_command", "report", "rescale_text"]


def fault_before(diff: Difference, fired: Sequence[FiredFault]) -> FiredFault | None:
    """The last fault that fired before ``diff``'s record was committed (a missing record
    has no commit time: the last fault of the run).

    >>> from cairn.cli.chaos_verdict import Record
    >>> from cairn.testing.fault_plan import PlannedFault
    >>> f = [FiredFault(PlannedFault(i, "upload", i, 0), "x", float(i)) for i in range(3)]
    >>> d = Difference("o", "extra", None, Record("a", 1.5, "p:1"))
    >>> fault_before(d, f).fault.index
    1
    """
    if not fired:
        return None
    if diff.actual is None:
        return fired[-1]
    before = [f for f in fired if f.at <= diff.actual.committed_at]
    return before[-1] if before else None


def _restore_before(
    diff: Difference, restores: Sequence[tuple[float, str]]
) -> tuple[float, str] | None:
    if diff.actual is None:
        return restores[-1] if restores else None
    before = [r for r in restores if r[0] <= diff.actual.committed_at]
    return before[-1] if before else None


def report(
    *,
    command: str,
    seed: int,
    plan: Sequence[PlannedFault],
    fired: Sequence[FiredFault],
    diffs: Sequence[Difference],
    cause: Cause | None,
    sinks: Sequence[SinkOutput],
    compared: int,
    records: int,
    rescale: str | None = None,
    restores: Sequence[tuple[float, str]] = (),
    upgrade: str | None = None,
    held: Sequence[str] = (),
) -> str:
    """What ``cairn chaos`` prints: the verdict, the first difference with the fault just
    before it, the likely cause, the command that replays it; ``rescale``: how the faulted
    run was rescaled (None: it was not), ``restores``: when it was restored at another
    parallelism; ``upgrade``: how the faulted run was upgraded (None: it was not),
    ``held``: what became of the savepoint's states, when the upgrade did not carry them."""
    lines = []
    skipped = [s for s in sinks if s.reason]
    if diffs:
        outputs = sorted({d.output for d in diffs})
        lines.append(
            f"DIFFERENT: {len(outputs)} of {compared} outputs differ from the fault-free run "
            f"({len(diffs)} differences), {len(fired)} of {len(plan)} faults fired"
        )
        first = diffs[0]
        lines.append(f"  first difference, in {first.output}: {first.describe()}")
        before = fault_before(first, fired)
        if before is not None:
            lines.append(f"  fault just before: {before.fault.describe()}: {before.where}")
        step = _restore_before(first, restores)
        if step is not None and (before is None or step[0] > before.at):
            lines.append(f"  {'upgrade' if upgrade else 'rescale'} just before: {step[1]}")
        for other in outputs:
            if other != first.output:
                d = next(d for d in diffs if d.output == other)
                lines.append(f"  also in {other}: {d.describe()}")
        if cause is not None:
            lines.append(f"  likely cause: {cause.name}: {cause.why}")
        lines += [f"  state across the upgrade: {h}" for h in held]
        lines.append(f"  replay: {command}")
    else:
        lines.append(
            f"EQUAL: {compared} outputs ({records} records) committed the same with "
            f"{len(fired)} of {len(plan)} faults as without"
        )
        lines.append(f"  replay: {command}")
        if compared == 0:
            lines.append("  nothing was compared: the job has no sink it reads and no --compare")
    if rescale is not None:
        lines.append(f"  rescaled: {rescale}")
    if upgrade is not None:
        lines.append(f"  upgraded: {upgrade}")
    for f in fired:
        lines.append(f"  fired {f.fault.describe()}: {f.where}")
    for s in skipped:
        lines.append(f"  not compared: {s.name} ({s.kind}): {s.reason}")
    return "\n".join(lines)


def replay_command(args: argparse.Namespace, seed: int) -> str:
    parts = ["cairn", "chaos", args.script, f"--faults={args.faults}", f"--seed={seed}"]
    for path in args.compare:
        parts += ["--compare", path]
    parts += capture_options(args)
    if args.rescale:
        parts.append("--rescale")
    if args.upgrade:
        parts += ["--upgrade", args.upgrade]
    if args.allow_non_restored_state:
        parts.append("--allow-non-restored-state")
    if args.driver_kills:
        parts.append(f"--driver-kills={args.driver_kills}")
    if args.parallelism is not None:
        parts += ["-p", str(args.parallelism)]
    if args.checkpoint_interval != INTERVAL_MS:
        parts += ["--checkpoint-interval", str(args.checkpoint_interval)]
    if args.executor:
        parts += ["--executor", args.executor]
    for item in args.conf or []:
        parts += ["-D", item]
    if args.script_args:
        parts += ["--", *args.script_args]
    return shlex.join(parts)


def rescale_text(run: RunResult) -> str:
    """``p=2 -> 3 -> 2, stopped with a savepoint ...`` or why the run was not rescaled."""
    shown = " -> ".join(str(p) for p in run.segments_run)
    if run.note is not None:
        return f"only p={shown}: {run.note}"
    return f"p={shown}, each step a stop with savepoint mid-run and a restore from it"
