"""Where a ``cairn chaos --driver-kills`` run in segments (``--rescale``, ``--upgrade``) stands
between two driver lives: which segment the next life takes up, and from what.

Invariant: the answer is a pure function (``segment_start``) of what the run directory holds
after the last life died (``SegmentFacts``, read by ``segment_facts``), never of what a
life said it would do: segment ``k`` is over once a savepoint of its stop with savepoint
holds its ``_metadata`` (written last, atomically), whether or not the life that took it
lived to see the job end; the next life then starts segment ``k + 1`` from that savepoint,
unless segment ``k + 1``'s job already started from it (a run record of the checkpoint
directory says it restored from it): then, as for segment ``k`` before its savepoint
completed, the life resumes the segment's own job from its latest completed checkpoint
(``cairn.recovery.on-rerun: RESUME``; the segment's savepoint when it completed none).
Each stop with savepoint writes into a directory of its own (``savepoint_name``): a stop cut
short by a kill leaves a partial one, which the retry never reuses.

    >>> done = SegmentFacts(3, ("file:///r/savepoint-0", None), (1, 0))
    >>> segment_start(done)
    SegmentStart(segment=1, savepoint='file:///r/savepoint-0', restore='file:///r/savepoint-0')
    >>> segment_start(SegmentFacts(3, ("file:///r/savepoint-0", None), (1, 0),
    ...                            restored_from=("file:///r/savepoint-0/",))).restore is None
    True
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = [
    "Landing",
    "SegmentFacts",
    "SegmentStart",
    "kill_landing",
    "landing_text",
    "next_driver_text",
    "resumed_at",
    "savepoint_name",
    "savepoint_segment",
    "segment_facts",
    "segment_name",
    "segment_start",
]

_SAVEPOINT = re.compile(r"^savepoint-(\d+)(?:\.(\d+))?$")
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
_RESUMED_AT = re.compile(r"resumes from checkpoint (\d+) at (\S+)")


def savepoint_name(segment: int, taken: Collection[str]) -> str:
    """The directory (under the run's) of segment ``segment``'s stop with savepoint:
    ``savepoint-<segment>``, or ``savepoint-<segment>.<n>`` when an earlier stop of the
    segment, cut short by a driver kill, left its directory (``taken``: the names there).

    >>> savepoint_name(0, []), savepoint_name(0, ["savepoint-0", "savepoint-0.1", "x"])
    ('savepoint-0', 'savepoint-0.2')
    """
    if f"savepoint-{segment}" not in taken:
        return f"savepoint-{segment}"
    n = 1
    while f"savepoint-{segment}.{n}" in taken:
        n += 1
    return f"savepoint-{segment}.{n}"


def savepoint_segment(path: str) -> int | None:
    """The segment whose stop wrote the savepoint at ``path`` (None: not one of them).

    >>> savepoint_segment("file:///w/faults/savepoint-1.2/"), savepoint_segment("/c/chk-4")
    (1, None)
    """
    found = _SAVEPOINT.match(os.path.basename(path.rstrip("/")))
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class SegmentFacts:
    """What the run directory holds: ``segments``, the run's count; ``savepoints``: per
    stop with savepoint (of segments 0..``segments - 2``) the completed savepoint, or None;
    ``stops``: per stop, how many directories its attempts began (a partial one: a stop cut
    short); ``restored_from``: what the checkpoint directory's run records say their runs
    restored from explicitly (a segment's savepoint once its job started from it)."""

    segments: int
    savepoints: tuple[str | None, ...] = ()
    stops: tuple[int, ...] = ()
    restored_from: tuple[str, ...] = ()


@dataclass(frozen=True)
class SegmentStart:
    """Where the next driver life takes the run up: ``segment`` (0-based), ``savepoint``:
    the one the segment starts from (None: the first segment, from scratch); ``restore``:
    what the life restores explicitly (None: the segment's own job resumes from its latest
    completed checkpoint, or the first segment starts fresh, as ``on-rerun: RESUME``
    decides)."""

    segment: int
    savepoint: str | None = None
    restore: str | None = None


def _same(a: str, b: str) -> bool:
    def bare(p: str) -> str:
        return p.removeprefix("file://").rstrip("/")

    return bare(a) == bare(b)


def segment_start(facts: SegmentFacts) -> SegmentStart:
    """The segment the next life runs first: the first whose stop with savepoint did not
    complete (the last segment once every stop did); from the savepoint before it,
    explicitly unless a run record shows the segment's job started from it already.

    >>> segment_start(SegmentFacts(1))
    SegmentStart(segment=0, savepoint=None, restore=None)
    >>> segment_start(SegmentFacts(2, ("/r/savepoint-0.1",), (2,), ("/r/savepoint-0.1",)))
    SegmentStart(segment=1, savepoint='/r/savepoint-0.1', restore=None)
    """
    stops = facts.segments - 1
    segment = next((k for k in range(stops) if facts.savepoints[k] is None), stops)
    if segment == 0:
        return SegmentStart(0)
    savepoint = facts.savepoints[segment - 1]
    assert savepoint is not None
    started = any(_same(r, savepoint) for r in facts.restored_from)
    return SegmentStart(segment, savepoint, None if started else savepoint)


@dataclass(frozen=True)
class Landing:
    """Where a driver kill landed: in ``segment``; ``stop``: during that segment's stop
    with savepoint, ``"completed"`` (the savepoint was written; the kill came before the
    job ended) or ``"cut short"`` (it was not), None: not during a stop that began."""

    segment: int
    stop: str | None = None


def kill_landing(before: SegmentFacts, after: SegmentFacts) -> Landing:
    """Where a driver life that was killed was, from the run directory before it started
    (``before``) and after it died (``after``).

    >>> start = SegmentFacts(3, (None, None), (0, 0))
    >>> kill_landing(start, SegmentFacts(3, (None, None), (1, 0)))
    Landing(segment=0, stop='cut short')
    >>> kill_landing(start, SegmentFacts(3, ("/r/savepoint-0", None), (1, 0)))
    Landing(segment=0, stop='completed')
    >>> kill_landing(start, SegmentFacts(3, ("/r/savepoint-0", None), (1, 0), ("/r/savepoint-0",)))
    Landing(segment=1, stop=None)
    """
    first, nxt = segment_start(before), segment_start(after)
    if nxt.restore is not None and nxt.segment > first.segment:
        return Landing(nxt.segment - 1, "completed")
    k = nxt.segment
    began = k < after.segments - 1 and _count(after.stops, k) > _count(before.stops, k)
    return Landing(k, "cut short" if began else None)


def _count(stops: Sequence[int], k: int) -> int:
    return stops[k] if k < len(stops) else 0


def segment_name(segment: int, segments: Sequence[int | None], scripts: Sequence[str]) -> str:
    """``the second of 3 segments (p=3)`` or, with each segment's script, ``the second of 2
    segments (chaos_orders_v2.py)``: in words, as the fault lines count segments from 0 and
    savepoints from 1.

    >>> segment_name(1, [2, 3, 2], []), segment_name(1, [None, None], ["a/v1.py", "a/v2.py"])
    ('the second of 3 segments (p=3)', 'the second of 2 segments (v2.py)')
    """
    what = os.path.basename(scripts[segment]) if scripts else f"p={segments[segment]}"
    nth = _ORDINALS[segment] if segment < len(_ORDINALS) else f"#{segment + 1}"
    return f"the {nth} of {len(segments)} segments ({what})"


def landing_text(landing: Landing, segments: Sequence[int | None], scripts: Sequence[str]) -> str:
    """Where the kill landed, for the report.

    >>> landing_text(Landing(0, "completed"), [2, 3, 2], [])
    'in the first of 3 segments (p=2), during its stop with savepoint 1, which completed'
    """
    where = f"in {segment_name(landing.segment, segments, scripts)}"
    if landing.stop == "completed":
        return f"{where}, during its stop with savepoint {landing.segment + 1}, which completed"
    if landing.stop is not None:
        return f"{where}, during its stop with savepoint {landing.segment + 1}, cut short"
    return where


def resumed_at(log: str) -> tuple[int, str] | None:
    """The checkpoint (its id, its directory) a driver's log says the job resumed from.

    >>> resumed_at("Job 1f resumes from checkpoint 9 at file:///w/faults/savepoint-0.")
    (9, 'file:///w/faults/savepoint-0')
    """
    found = _RESUMED_AT.findall(log)
    if not found:
        return None
    cid, where = found[-1]
    return int(cid), where.rstrip(".")


def next_driver_text(
    start: SegmentStart,
    resumed: tuple[int, str] | None,
    segments: Sequence[int | None],
    scripts: Sequence[str],
) -> str:
    """What the driver after a kill did (``start``: where it took the run up;
    ``resumed``: what its log says it resumed from).

    >>> s = SegmentStart(1, "/r/savepoint-0", "/r/savepoint-0")
    >>> next_driver_text(s, None, [2, 3, 2], [])
    'the next driver restored the second of 3 segments (p=3) from savepoint 1'
    >>> s = SegmentStart(1, "/r/savepoint-0")
    >>> next_driver_text(s, (7, "file:///r/chk-7"), [2, 3, 2], [])
    'the next driver resumed the second of 3 segments (p=3) from checkpoint 7'
    >>> print(next_driver_text(s, (5, "file:///r/savepoint-0"), [2, 3, 2], []))
    the next driver resumed the second of 3 segments (p=3) from savepoint 1 (no checkpoint
    of its own)
    """
    name = segment_name(start.segment, segments, scripts)
    if start.restore is not None:
        return f"the next driver restored {name} from savepoint {start.segment}"
    if resumed is None:
        return f"the next driver started {name} fresh (no completed checkpoint)"
    cid, where = resumed
    of = savepoint_segment(where)
    if of is not None:
        return f"the next driver resumed {name} from savepoint {of + 1} (no checkpoint of its own)"
    return f"the next driver resumed {name} from checkpoint {cid}"


def segment_facts(run_dir: str, segments: int) -> SegmentFacts:
    """Read ``SegmentFacts`` from the run directory ``run_dir`` (``<work>/faults``)."""
    from cairn.checkpoint.run_status import read_job_dir

    names = os.listdir(run_dir) if os.path.isdir(run_dir) else []
    savepoints: list[str | None] = []
    stops: list[int] = []
    for k in range(segments - 1):
        mine = sorted(
            (n for n in names if savepoint_segment(n) == k),
            key=lambda n: (len(n), n),  # savepoint-0, savepoint-0.1, ..., savepoint-0.10
        )
        done = [n for n in mine if os.path.exists(os.path.join(run_dir, n, "_metadata"))]
        savepoints.append("file://" + os.path.join(run_dir, done[-1]) if done else None)
        stops.append(len(mine))
    restored = []
    for job_dir in sorted(glob.glob(os.path.join(run_dir, "checkpoints", "*"))):
        record = read_job_dir(job_dir).record if os.path.isdir(job_dir) else None
        if record is not None and record.restored_from is not None:
            restored.append(record.restored_from)
    return SegmentFacts(segments, tuple(savepoints), tuple(stops), tuple(restored))
