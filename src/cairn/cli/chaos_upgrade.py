"""``cairn chaos job.py --upgrade new_job.py``: can the new version of a job take over the
old one's state? The old script runs, is stopped with a savepoint mid-run, and the new one
restores from it (``cairn chaos``'s run in two segments); this module decides, before the
restore, whether the savepoint fits the new job, and names what does not.

Invariant: the decisions (``incompatibilities``, ``migration_incompatibility``,
``carried_lines``) are pure functions of facts: what a savepoint holds per operator uid
(``SavedOperator``) and the operators of the old and the new job's graphs
(``JobOperator``); the shell around them reads a savepoint's metadata (never its state
files, never code from it) and prepares a script without running it (its job is captured
at submission, nothing deployed). Flink's rules:
state of a uid the new job lacks is refused unless non-restored state is allowed; keyed
state restores only at the same max parallelism; a keyed state restores only as the same
kind and type (found when the new job declares it: ``StateMigrationError``).

    >>> saved = [SavedOperator("totals", 2, 128, keyed_states={"total": "value state of Long"})]
    >>> old = {"totals": "KeyedProcess"}
    >>> new = [JobOperator("running-totals", "KeyedProcess", 2, 128)]
    >>> for p in incompatibilities(saved, old, new):
    ...     print(p.describe())  # doctest: +NORMALIZE_WHITESPACE
    operator 'KeyedProcess' (uid 'totals'): the savepoint holds its state (keyed state
    'total'), but the new job has no operator with uid 'totals' (the new job's 'KeyedProcess'
    has uid 'running-totals'). Give it .uid('totals'), or drop the state with
    --allow-non-restored-state
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cairn.cli.chaos_verdict import NOT_CARRIED

__all__ = [
    "NOT_CARRIED",
    "Incompatibility",
    "JobOperator",
    "SavedOperator",
    "UpgradeCheck",
    "add_upgrade_arguments",
    "carried_lines",
    "incompatibilities",
    "job_operators",
    "migration_incompatibility",
    "prepare_upgrade",
    "refusal_text",
    "saved_operators",
]


@dataclass(frozen=True)
class JobOperator:
    """One operator of a job's graph: its uid, name, parallelism and max parallelism."""

    uid: str
    name: str
    parallelism: int
    max_parallelism: int


@dataclass(frozen=True)
class SavedOperator:
    """What a savepoint holds of one operator uid: the parallelism and max parallelism it
    was written at, its keyed states (name -> what they are) and its operator states'
    names; ``other``: state under no name (e.g. a source's position kept inline)."""

    uid: str
    parallelism: int
    max_parallelism: int
    keyed_states: Mapping[str, str] = field(default_factory=dict)
    operator_states: tuple[str, ...] = ()
    keyed: bool = False  # keyed state handles, named or not
    other: bool = False

    @property
    def has_state(self) -> bool:
        return bool(self.keyed_states or self.operator_states or self.keyed or self.other)

    def states_text(self) -> str:
        """``keyed state 'total', operator state 'offsets'`` (or ``its state``)."""
        parts = [f"keyed state {n!r}" for n in sorted(self.keyed_states)]
        parts += [f"operator state {n!r}" for n in self.operator_states]
        return ", ".join(parts) or "its state"


@dataclass(frozen=True)
class Incompatibility:
    """Why the new job cannot restore one operator's state, and what to do about it."""

    uid: str
    operator: str  # its name in the old job ('' when not known)
    state: str | None
    problem: str
    remedy: str

    def describe(self) -> str:
        who = (
            f"operator {self.operator!r} (uid {self.uid!r})"
            if self.operator
            else (f"operator uid {self.uid!r}")
        )
        return f"{who}: {self.problem}. {self.remedy}"


def incompatibilities(
    saved: Sequence[SavedOperator],
    old_names: Mapping[str, str],
    new: Sequence[JobOperator],
    allow_non_restored: bool = False,
) -> list[Incompatibility]:
    """Every reason the new job (``new``) cannot restore the savepoint's state (``saved``);
    ``old_names``: the old job's operator names by uid. Empty: it restores (state of a
    removed uid is then dropped if ``allow_non_restored``).

    >>> saved = [SavedOperator("t", 2, 128, keyed_states={"total": "value state"})]
    >>> p = incompatibilities(saved, {"t": "Sum"}, [JobOperator("t", "Sum", 2, 64)])
    >>> print(p[0].describe())  # doctest: +NORMALIZE_WHITESPACE
    operator 'Sum' (uid 't'): its keyed state was written with max parallelism 128 (its key
    groups), the new job has 64: keys would map to other key groups. Keep max parallelism 128
    (env.set_max_parallelism or pipeline.max-parallelism)
    >>> incompatibilities(saved, {"t": "Sum"}, [JobOperator("t", "Total", 3, 128)])
    []
    >>> incompatibilities(saved, {"t": "Sum"}, [], allow_non_restored=True)
    []
    """
    by_uid = {op.uid: op for op in new}
    out: list[Incompatibility] = []
    for op in sorted(saved, key=lambda s: s.uid):
        name = old_names.get(op.uid, "")
        if not op.has_state:
            continue
        target = by_uid.get(op.uid)
        if target is None:
            if allow_non_restored:
                continue
            same = [o for o in new if name and o.name == name and o.uid not in old_names]
            if same:
                where, owner = f" (the new job's {name!r} has uid {same[0].uid!r})", "it"
            else:
                where = (
                    " (removed, or its uid changed: an operator without .uid() takes one "
                    "from its name and position)"
                )
                owner = "the operator that owns it"
            out.append(
                Incompatibility(
                    op.uid,
                    name,
                    None,
                    f"the savepoint holds its state ({op.states_text()}), but the new job "
                    f"has no operator with uid {op.uid!r}{where}",
                    f"Give {owner} .uid({op.uid!r}), or drop the state with "
                    "--allow-non-restored-state",
                )
            )
            continue
        if (op.keyed or op.keyed_states) and target.max_parallelism != op.max_parallelism:
            out.append(
                Incompatibility(
                    op.uid,
                    name,
                    None,
                    f"its keyed state was written with max parallelism {op.max_parallelism} "
                    f"(its key groups), the new job has {target.max_parallelism}: keys would "
                    "map to other key groups",
                    f"Keep max parallelism {op.max_parallelism} (env.set_max_parallelism or "
                    "pipeline.max-parallelism)",
                )
            )
    return out


_MIGRATION = re.compile(
    r"operator '(?P<uid>[^']*)': keyed state '(?P<state>[^']*)' cannot be restored: "
    r"(?P<why>.*?) \(the snapshot's (?P<old>[^,]*), the job's (?P<new>[^)]*)\)"
)


def migration_incompatibility(error: str, old_names: Mapping[str, str]) -> Incompatibility | None:
    """The incompatibility a failed restore reports (a ``StateMigrationError``: the new job
    declares a keyed state under the same name with another kind or type), or None.

    >>> e = ("StateMigrationError: operator 't': keyed state 'total' cannot be restored: "
    ...      "the value type is Long in the snapshot but String in the job (the snapshot's "
    ...      "value state of Long, the job's value state of String); keep ...")
    >>> print(migration_incompatibility(e, {"t": "Sum"}).describe())
    ... # doctest: +NORMALIZE_WHITESPACE
    operator 'Sum' (uid 't'): keyed state 'total' no longer reads: the value type is Long in
    the snapshot but String in the job. Keep the old descriptor (value state of Long), or give
    the state a new name (the old state is then dropped)
    >>> migration_incompatibility("ValueError: boom", {}) is None
    True
    """
    m = _MIGRATION.search(error)
    if m is None:
        return None
    uid = m["uid"]
    return Incompatibility(
        uid,
        old_names.get(uid, ""),
        m["state"],
        f"keyed state {m['state']!r} no longer reads: {m['why']}",
        f"Keep the old descriptor ({m['old']}), or give the state a new name (the old state "
        "is then dropped)",
    )


def refusal_text(problems: Sequence[Incompatibility], new_script: str, savepoint: str) -> str:
    """What ``cairn chaos --upgrade`` prints when the new job cannot restore the state.

    >>> p = Incompatibility("t", "Sum", None, "gone", "Give it .uid('t')")
    >>> print(refusal_text([p], "v2.py", "/w/savepoint-0"))
    INCOMPATIBLE: v2.py cannot restore the old job's savepoint (1 problem)
      operator 'Sum' (uid 't'): gone. Give it .uid('t')
      savepoint: /w/savepoint-0
    """
    n = len(problems)
    lines = [
        f"INCOMPATIBLE: {os.path.basename(new_script)} cannot restore the old job's savepoint "
        f"({n} problem{'s' if n != 1 else ''})"
    ]
    lines += [f"  {p.describe()}" for p in problems]
    lines.append(f"  savepoint: {savepoint}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the shell


def saved_operators(savepoint: str) -> list[SavedOperator]:
    """What the savepoint at ``savepoint`` holds per operator uid (its metadata only)."""
    from cairn.checkpoint.loading import load_checkpoint
    from cairn.state.schema import describe

    metadata = load_checkpoint(savepoint).metadata
    out = []
    for uid, op in metadata.operators.items():
        subtasks = list(op.subtasks.values())
        keyed = {n: describe(sc) for s in subtasks for n, sc in s.keyed_schema.items()}
        operator = sorted({n for s in subtasks for h in s.operator for n in h.states})
        out.append(
            SavedOperator(
                str(uid),
                op.parallelism,
                op.max_parallelism,
                keyed,
                tuple(operator),
                keyed=any(s.keyed for s in subtasks),
                other=any(s.inline or s.input_channels for s in subtasks),
            )
        )
    return out


class _Captured(Exception):
    """Raised by the submission hook once the job is captured: nothing is deployed."""

    def __init__(self, operators: list[JobOperator]) -> None:
        super().__init__("captured")
        self.operators = operators


def job_operators(
    script: str, script_args: Sequence[str], parallelism: int | None, conf: Mapping[str, str]
) -> list[JobOperator]:
    """The operators of the first job ``script`` submits, with ``script_args``, the
    parallelism and configuration of a chaos run; the script runs up to its ``execute``,
    which is stopped before anything is deployed. Empty: it submitted no job."""
    from cairn.datastream.job_builder import PreparedJob
    from cairn.datastream.stream_execution_environment import (
        reset_context_defaults,
        set_context_defaults,
        set_submission_hook,
    )
    from cairn.graph.job_graph import build_job_graph

    def capture(prepared: PreparedJob) -> PreparedJob:
        s = prepared.settings
        graph = build_job_graph(
            s.job_name, prepared.sinks, s.parallelism, s.max_parallelism, s.operator_chaining
        )
        raise _Captured(
            [
                JobOperator(str(o.uid), o.name, o.parallelism, o.max_parallelism)
                for v in graph.vertices
                for o in v.operators
            ]
        )

    path = os.path.abspath(script)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, *script_args]
    sys.path.insert(0, os.path.dirname(path))
    set_context_defaults(parallelism=parallelism, configuration=dict(conf))
    set_submission_hook(capture)
    try:
        runpy.run_path(path, run_name="__main__")
    except _Captured as captured:
        return captured.operators
    finally:
        set_submission_hook(None)
        reset_context_defaults()
        sys.argv, sys.path[:] = saved_argv, list(saved_path)
    return []


def add_upgrade_arguments(chaos: argparse.ArgumentParser) -> None:
    """``--upgrade`` and ``--allow-non-restored-state`` on ``cairn chaos``'s subparser."""
    chaos.add_argument(
        "--upgrade",
        metavar="NEW_JOB.py",
        default=None,
        help="check a new version of the job against the old one's state: the faulted run "
        "starts with the job, is stopped with a savepoint mid-run and restored with "
        "NEW_JOB.py (same arguments); the reference is NEW_JOB.py without faults. Exit 1 if "
        "NEW_JOB.py cannot restore the state (each operator and state named) or its output "
        "differs",
    )
    chaos.add_argument(
        "-n",
        "--allow-non-restored-state",
        action="store_true",
        help="with --upgrade: let the new job drop state of operators it no longer has",
    )


@dataclass
class UpgradeCheck:
    """The facts ``cairn chaos --upgrade`` decides on, gathered before any run: the old
    job's operator names by uid and the new job's operators; ``savepoint``: the one the new
    job restored (or refused) last."""

    old_script: str
    new_script: str
    old_names: dict[str, str]
    new_operators: list[JobOperator]
    allow_non_restored: bool = False
    savepoint: str | None = None
    held: list[SavedOperator] = field(default_factory=list)  # the old job's savepoint
    later: list[SavedOperator] = field(default_factory=list)  # one of the new job's

    def before_restore(self, segment: int, savepoint: str) -> str | None:
        """What to print instead of restoring from ``savepoint``, which segment ``segment``
        of a run took (None: go on). The first is the old job's: it is checked; a later one
        is the new job's, kept to tell which states the new version has."""
        if segment > 0:
            self.later = saved_operators(savepoint)
            return None
        self.savepoint = savepoint
        self.held = saved_operators(savepoint)
        new = self.new_operators
        if not new:  # the new script was not prepared: the restore's own check decides
            return None
        problems = incompatibilities(self.held, self.old_names, new, self.allow_non_restored)
        return refusal_text(problems, self.new_script, savepoint) if problems else None

    def after_failure(self, error: str) -> str | None:
        """What to print when the upgraded run failed because a state no longer reads."""
        problem = migration_incompatibility(error, self.old_names)
        if problem is None:
            return None
        return refusal_text([problem], self.new_script, self.savepoint or "?")

    def text(self) -> str:
        """``chaos_orders.py -> chaos_orders_v2.py, a stop with savepoint ...``."""
        old, new = os.path.basename(self.old_script), os.path.basename(self.new_script)
        return f"{old} -> {new}, a stop with savepoint mid-run and a restore from it"

    def carried_text(self) -> list[str]:
        """What became of the savepoint's states across the upgrade, for the report."""
        new = [op.uid for op in self.new_operators]
        return carried_lines(self.held, self.later, self.old_names, new)


def carried_lines(
    held: Sequence[SavedOperator],
    later: Sequence[SavedOperator],
    old_names: Mapping[str, str],
    new_uids: Sequence[str],
) -> list[str]:
    """One line per operator with state of the job's own (not Cairn's ``_cairn_...``) in
    the old job's savepoint (``held``): dropped (its uid is not in the new job), or with
    keyed states the new version has and the savepoint does not (seen in ``later``, a
    savepoint of the new version: a new or renamed state starts empty), or what it held.

    >>> held = [SavedOperator("t", 2, 128, {"total": "value state of Long"})]
    >>> later = [SavedOperator("t", 2, 128, {"total": "value state of Long",
    ...                                      "sum": "value state of Long"})]
    >>> print(carried_lines(held, later, {"t": "Sum"}, ["t"])[0])
    ... # doctest: +NORMALIZE_WHITESPACE
    'Sum' (uid 't'): the new version has keyed state 'sum', which the savepoint does not
    hold (it holds 'total'): it starts empty at the upgrade; if it is 'total' renamed, keep
    the name 'total'
    >>> carried_lines(held, [], {"t": "Sum"}, [])
    ["'Sum' (uid 't'): keyed state 'total' dropped: the new job has no uid 't'"]
    >>> carried_lines(held, [], {"t": "Sum"}, ["t"])
    ["'Sum' (uid 't') held keyed state 'total' (value state of Long)"]
    """
    after = {op.uid: op for op in later}
    lines = []
    for op in sorted(held, key=lambda s: s.uid):
        keyed = {n: d for n, d in op.keyed_states.items() if not n.startswith("_cairn")}
        operator = [n for n in op.operator_states if not n.startswith("_cairn")]
        if not keyed and not operator:
            continue
        name = old_names.get(op.uid, "")
        who = f"{name!r} (uid {op.uid!r})" if name else f"uid {op.uid!r}"
        names = [f"keyed state {n!r}" for n in sorted(keyed)]
        names += [f"operator state {n!r}" for n in operator]
        if op.uid not in new_uids:
            lines.append(f"{who}: {', '.join(names)} dropped: the new job has no uid {op.uid!r}")
            continue
        added = (
            sorted(set(after[op.uid].keyed_states) - set(op.keyed_states))
            if (op.uid in after)
            else []
        )
        if added:
            old = ", ".join(repr(n) for n in sorted(keyed))
            lines.append(
                f"{who}: the new version has keyed state {', '.join(map(repr, added))}, "
                f"which the savepoint does not hold (it holds {old}): it starts empty at the "
                f"upgrade; if it is {old} renamed, keep the name {old}"
            )
            continue
        described = [f"keyed state {n!r} ({d})" for n, d in sorted(keyed.items())]
        described += [f"operator state {n!r}" for n in operator]
        lines.append(f"{who} held {', '.join(described)}")
    return lines


def prepare_upgrade(args: argparse.Namespace, conf: Mapping[str, str]) -> UpgradeCheck:
    """The old and the new job's operators (each script prepared, not run)."""
    old = _operators_or_none(args.script, args, conf)
    new = _operators_or_none(args.upgrade, args, conf)
    names = {op.uid: op.name for op in old}
    allow = bool(args.allow_non_restored_state)
    return UpgradeCheck(args.script, args.upgrade, names, new, allow)


def _operators_or_none(
    script: str, args: argparse.Namespace, conf: Mapping[str, str]
) -> list[JobOperator]:
    try:
        return job_operators(script, args.script_args, args.parallelism, conf)
    except Exception:  # the script fails before its execute: the runs will say how
        return []
