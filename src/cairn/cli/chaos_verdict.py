"""``cairn chaos``'s decisions: what differs between the fault-free run's committed output
and the faulted run's, which difference came first, and the likely cause.

Invariant: everything here is a pure function of the records handed in (their text, when
and where they were committed) and of the facts about the runs; no file, process or clock is
touched, so the verdict on the same outputs is always the same.

    >>> ref = {"totals": ["a,1", "b,2"]}
    >>> got = {"totals": [Record("a,1", 1.0, "p-0:1"), Record("b,3", 2.0, "p-1:1")]}
    >>> [d.describe() for d in compare_outputs(ref, got)]
    ["key 'b': expected 'b,2', got 'b,3' (p-1:1)"]
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Cause",
    "Difference",
    "Record",
    "classify",
    "compare_output",
    "compare_outputs",
    "record_key",
]

_SEPARATOR = re.compile(r"\s*[,\t;|]\s*")
_OPENING = re.compile(r"^(?:[+-][IUD])?[\[(]")  # Row text (+I[...]), tuples, lists
_SHOWN = 120


@dataclass(frozen=True)
class Record:
    """One committed record: its text, when its file was committed, where it is."""

    text: str
    committed_at: float
    where: str


@dataclass(frozen=True)
class Difference:
    """One way an output differs: ``missing`` (a reference record the faulted run lacks),
    ``duplicated`` (a reference record written more often), ``changed`` (a key's record
    with another value) or ``extra`` (a record the reference never wrote)."""

    output: str
    kind: str
    expected: str | None
    actual: Record | None
    times: int = 1

    @property
    def key(self) -> str | None:
        return record_key(self.actual.text if self.actual else self.expected or "")

    def describe(self) -> str:
        where = f" ({self.actual.where})" if self.actual else ""
        more = f" x{self.times}" if self.times > 1 else ""
        if self.kind == "changed":
            assert self.actual is not None
            return (
                f"key {self.key!r}: expected {_short(self.expected)}, got "
                f"{_short(self.actual.text)}{where}"
            )
        if self.kind == "missing":
            return f"missing {_short(self.expected)}{more}"
        assert self.actual is not None
        word = "written again" if self.kind == "duplicated" else "not in the reference"
        return f"{_short(self.actual.text)} {word}{more}{where}"


def _short(text: str | None) -> str:
    text = text or ""
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "...")


def record_key(text: str) -> str | None:
    """The record's first field, taken as its key: ``"c3,120"`` -> ``"c3"``; None if the
    record has a single field.

    >>> record_key("c3,120"), record_key("+I[c3, 120]"), record_key("('c3', 120)")
    ('c3', 'c3', 'c3')
    >>> record_key("plain") is None
    True
    """
    body = _OPENING.sub("", text.strip(), count=1)
    parts = _SEPARATOR.split(body, maxsplit=1)
    if len(parts) < 2:
        return None
    return parts[0].strip("'\"")


def compare_output(
    name: str, reference: Sequence[str], actual: Sequence[Record]
) -> list[Difference]:
    """The differences of one output as multisets of records (order across files and
    subtasks is not an output's property), first the faulted run's records in the order
    they were committed, then what is missing.

    >>> ref = ["a,1", "a,2", "b,1"]
    >>> got = [Record("a,1", 1.0, "f0:1"), Record("a,2", 1.0, "f0:2"),
    ...        Record("a,2", 2.0, "f1:1")]
    >>> [(d.kind, d.expected or d.actual.text) for d in compare_output("o", ref, got)]
    [('duplicated', 'a,2'), ('missing', 'b,1')]
    """
    ref = Counter(reference)
    got = Counter(r.text for r in actual)
    missing = ref - got
    unpaired = Counter(missing)
    missing_by_key: dict[str | None, list[str]] = {}
    for text in sorted(missing):
        missing_by_key.setdefault(record_key(text), []).append(text)
    out: list[Difference] = []
    seen = Counter[str]()
    for record in sorted(actual, key=lambda r: r.committed_at):  # stable: file order
        seen[record.text] += 1
        if seen[record.text] <= ref[record.text]:
            continue  # one of the reference's copies
        if record.text in ref:
            out.append(Difference(name, "duplicated", record.text, record))
            continue
        key = record_key(record.text)
        candidates = [t for t in missing_by_key.get(key, []) if unpaired[t]] if key else []
        if candidates:
            unpaired[candidates[0]] -= 1
            out.append(Difference(name, "changed", candidates[0], record))
        else:
            out.append(Difference(name, "extra", None, record))
    for text, n in sorted((+unpaired).items()):
        out.append(Difference(name, "missing", text, None, n))
    return out


def compare_outputs(
    reference: Mapping[str, Sequence[str]], actual: Mapping[str, Sequence[Record]]
) -> list[Difference]:
    """Every output's differences; an output only one run wrote counts as empty in the
    other. Outputs in the order of their first difference's commit time."""
    diffs = []
    for name in sorted(set(reference) | set(actual)):
        diffs.append(compare_output(name, reference.get(name, ()), actual.get(name, ())))
    timed = [d for d in diffs if d]
    timed.sort(key=lambda d: _first_time(d))
    return [d for output in timed for d in output]


def _first_time(diffs: list[Difference]) -> float:
    times = [d.actual.committed_at for d in diffs if d.actual is not None]
    return min(times) if times else float("inf")


@dataclass(frozen=True)
class Cause:
    """The likely cause class of a difference, and what to do about it."""

    name: str
    why: str


NON_DETERMINISTIC = "non-deterministic function or key"
SIDE_EFFECT = "a side effect outside a sink"
NOT_EXACTLY_ONCE = "a sink that is not exactly-once"
LOST_STATE_RESCALE = "lost state after rescale"
NOT_CARRIED = "state not carried across the upgrade"
LOST = "lost records or state"


def classify(
    diffs: Sequence[Difference],
    *,
    outside_sinks: frozenset[str] = frozenset(),
    control_differs: bool | None = None,
    rescale_differs: bool | None = None,
    rescaled: bool = False,
    upgrade_differs: bool | None = None,
) -> Cause | None:
    """The likely cause of ``diffs`` (None: no difference). ``outside_sinks``: the outputs
    the job writes itself rather than through a sink; ``control_differs``: whether a second
    run without faults differed from the reference too (None: not run);
    ``rescale_differs``: whether a run rescaled mid-run without faults differed from it
    (None: not run); ``rescaled``: the faulted run was rescaled; ``upgrade_differs``:
    whether a run upgraded mid-run without faults (the old job's savepoint restored by the
    new one) differed from the new job's run from scratch (None: not run).

    >>> d = [Difference("o", "duplicated", "a,1", Record("a,1", 0.0, "f:1"))]
    >>> classify(d).name, classify(d, outside_sinks=frozenset({"o"})).name
    ('a sink that is not exactly-once', 'a side effect outside a sink')
    >>> classify(d, control_differs=True).name
    'non-deterministic function or key'
    >>> classify(d, control_differs=False, rescale_differs=True).name
    'lost state after rescale'
    >>> classify(d, control_differs=False, upgrade_differs=True).name
    'state not carried across the upgrade'
    """
    if not diffs:
        return None
    if control_differs:
        return Cause(
            NON_DETERMINISTIC,
            "two runs without faults differ too: a key or a function that depends on "
            "random(), the clock, or the order records arrive in",
        )
    if upgrade_differs:
        return Cause(
            NOT_CARRIED,
            "an upgrade without faults differs too, and the new job from scratch does not: "
            "after the switch the new version does not read the old version's state (keys "
            "start again from empty): a keyed state or a uid renamed, a state the old "
            "version did not have, or keys computed another way",
        )
    if rescale_differs:
        return Cause(
            LOST_STATE_RESCALE,
            "a run rescaled mid-run differs without any fault, and one at a fixed "
            "parallelism does not: state that does not follow its keys to the new "
            "subtasks (per-key data in operator state or in attributes, keys computed "
            "from the subtask index or the parallelism)",
        )
    first = diffs[0]
    kinds = {d.kind for d in diffs}
    if first.output in outside_sinks and kinds & {"duplicated", "extra", "changed"}:
        return Cause(
            SIDE_EFFECT,
            "written again when a restore replays records since the last checkpoint; "
            "write it through a sink that commits on checkpoints (FileSink, "
            "JdbcSink.exactly_once_sink, KafkaSink with EXACTLY_ONCE)",
        )
    if kinds <= {"duplicated"}:
        return Cause(
            NOT_EXACTLY_ONCE,
            "records written again after a restore: the sink writes before the checkpoint "
            "completes (AT_LEAST_ONCE, a SinkFunction, no two-phase commit)",
        )
    if kinds & {"changed", "extra"}:
        return Cause(
            NON_DETERMINISTIC,
            "the replay after a restore computed other values than the first run did: a "
            "key or a function depending on random(), the clock or arrival order, or on "
            "state kept outside Flink's state",
        )
    if rescaled:
        return Cause(
            LOST_STATE_RESCALE,
            "records of the restored state are missing at the new parallelism: state "
            "without a uid, or operator state that is not redistributed",
        )
    return Cause(
        LOST,
        "records missing after a restore: state kept outside Flink's state, or a source "
        "that does not restore its position",
    )
