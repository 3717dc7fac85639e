"""The doctor's rules: seed 003's advice on unaligned checkpoints, alignment timeouts, buffer
debloating and savepoints, and seed 002's on interval, timeout and min pause, each applied to
a job's :class:`DoctorFacts`.

Invariant: every rule is a pure function of the facts that returns one :class:`Finding` (the
figures that triggered it and the configuration keys that address it) or ``None``; a rule
whose facts are unknown returns ``None``. :func:`diagnose` runs all of them in a fixed order.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cairn.checkpoint.stats import CheckpointStats, CheckpointStatus
from cairn.observability.doctor.facts import DoctorFacts

__all__ = ["RULES", "Finding", "diagnose"]

UNALIGNED = "execution.checkpointing.unaligned.enabled"
ALIGNED_TIMEOUT = "execution.checkpointing.aligned-checkpoint-timeout"
DEBLOAT = "taskmanager.network.memory.buffer-debloat.enabled"
TIMEOUT = "execution.checkpointing.timeout"
MIN_PAUSE = "execution.checkpointing.min-pause"
INTERVAL = "execution.checkpointing.interval"
BACKEND = "state.backend.type"
INCREMENTAL = "execution.checkpointing.incremental"

ALIGNMENT_SHARE = 0.5  # alignment over half of the end-to-end duration "dominates"
BACKPRESSURED = 0.5  # a subtask backpressured over half of the time
NEAR_TIMEOUT = 0.8
LARGE_IN_FLIGHT = 64 << 20
SMALL_IN_FLIGHT = 4 << 20  # below this, in-flight data is never worth a finding
LARGE_FULL_STATE = 256 << 20
LONG_INTERVAL_MS = 10 * 60_000  # recovery replays up to an interval of input
MIB = 1 << 20
GROWING_CHECKPOINTS = 5  # a vertex's state rising at each of this many completed checkpoints
GROWTH_FACTOR = 1.1  # ... by at least 10 % over them
GROWING_STATE = 1 << 20  # ... and past 1 MiB: smaller state is never worth a finding


@dataclass(frozen=True)
class Finding:
    """One piece of advice: ``rule`` (its id), what was seen, the figures that show it, what
    to do and the configuration keys (or API calls) that do it."""

    rule: str
    title: str
    figures: tuple[tuple[str, str], ...]
    advice: str
    keys: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "title": self.title,
            "figures": dict(self.figures),
            "advice": self.advice,
            "keys": list(self.keys),
        }


def _completed(facts: DoctorFacts, savepoints: bool = False) -> list[CheckpointStats]:
    return [
        c
        for c in facts.checkpoints
        if c.status is CheckpointStatus.COMPLETED and c.is_savepoint == savepoints
    ]


def _p50(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _ms(v: float) -> str:
    return f"{v:,.0f} ms"


def _mib(v: float) -> str:
    return f"{v / MIB:,.1f} MiB"


def _timed_out(facts: DoctorFacts) -> int:
    return sum(
        1
        for c in facts.checkpoints
        if c.status is CheckpointStatus.FAILED and c.failure_reason == "CHECKPOINT_EXPIRED"
    )


def _max_backpressure(facts: DoctorFacts) -> tuple[str, float] | None:
    if not facts.backpressure:
        return None
    return max(facts.backpressure.items(), key=lambda kv: kv[1])


def alignment_dominates(facts: DoctorFacts) -> Finding | None:
    """Aligned checkpoints that spend most of their time aligning under backpressure (or
    that time out): unaligned checkpoints, with an aligned-checkpoint timeout about half the
    observed alignment p50 so short alignments stay aligned (seed 003)."""
    config = facts.config
    if config is not None and config.unaligned:
        return None
    aligned = [c for c in _completed(facts) if not c.unaligned]
    if not aligned:
        return None
    alignment = _p50([c.max_alignment_duration_ms for c in aligned])
    duration = _p50([c.end_to_end_duration_ms for c in aligned])
    worst = _max_backpressure(facts)
    timed_out = _timed_out(facts)
    if duration <= 0 or alignment < ALIGNMENT_SHARE * duration:
        return None
    if worst is not None and worst[1] < BACKPRESSURED and not timed_out:
        return None  # alignment without backpressure: skew or a slow barrier path, not this
    suggested = max(10, int(round(alignment / 2, -1)))
    figures = [
        ("alignment p50", _ms(alignment)),
        ("end-to-end p50", _ms(duration)),
        ("alignment share", f"{alignment / duration:.0%}"),
        ("aligned checkpoints", str(len(aligned))),
    ]
    if worst is not None:
        figures.append(("most backpressured", f"{worst[0]} {worst[1]:.0%}"))
    if timed_out:
        figures.append(("timed out", str(timed_out)))
    return Finding(
        "alignment-dominates",
        "barrier alignment dominates checkpoint duration under backpressure",
        tuple(figures),
        f"enable unaligned checkpoints, with an aligned-checkpoint timeout of about "
        f"{suggested} ms (half the alignment p50): checkpoints that align quickly stay "
        f"aligned, the others switch to unaligned and stop waiting behind full buffers",
        (f"{UNALIGNED}: true", f"{ALIGNED_TIMEOUT}: {suggested} ms"),
    )


def large_in_flight(facts: DoctorFacts) -> Finding | None:
    """Unaligned checkpoints persisting much in-flight data without buffer debloating."""
    config = facts.config
    if config is None or not config.unaligned or config.debloat:
        return None
    unaligned = [c for c in _completed(facts) if c.unaligned]
    if not unaligned:
        return None
    persisted = _p50([c.persisted_bytes for c in unaligned])
    state = _p50([c.state_size for c in unaligned])
    if persisted < SMALL_IN_FLIGHT or (persisted < LARGE_IN_FLIGHT and persisted < state):
        return None
    return Finding(
        "large-in-flight",
        "unaligned checkpoints persist much in-flight data",
        (("persisted in-flight p50", _mib(persisted)), ("state size p50", _mib(state))),
        "enable buffer debloating: fewer records in flight means less to persist and replay "
        "(Flink's advice for unaligned checkpoints)",
        (f"{DEBLOAT}: true",),
    )


def unaligned_without_effect(facts: DoctorFacts) -> Finding | None:
    """Unaligned checkpoints where no subtask has more than one input channel (parallelism 1,
    forward edges only): nothing ever aligns, so they change nothing."""
    config = facts.config
    if config is None or not config.unaligned or not facts.vertices:
        return None
    if any(v.input_channels > 1 for v in facts.vertices):
        return None
    shapes = ", ".join(
        f"{v.name} (p={v.parallelism}, {'+'.join(p for p, _ in v.inputs) or 'source'})"
        for v in facts.vertices
    )
    return Finding(
        "unaligned-without-effect",
        "unaligned checkpoints have no effect in this job",
        (("vertices", shapes), ("max input channels per subtask", "1")),
        "no subtask reads from more than one channel (parallelism 1 or forward edges only), "
        "so barriers never wait for alignment; unaligned checkpoints only add in-flight data "
        "to persist",
        (f"{UNALIGNED}: false",),
    )


def near_timeout(facts: DoctorFacts) -> Finding | None:
    """Checkpoints that take most of the timeout (or expire): raise it or find the slow
    subtask (named: the latest acknowledgement of the slowest checkpoint)."""
    config = facts.config
    if config is None or config.timeout_ms <= 0:
        return None
    completed = _completed(facts)
    slowest = max(completed, key=lambda c: c.end_to_end_duration_ms, default=None)
    longest = slowest.end_to_end_duration_ms if slowest is not None else 0
    timed_out = _timed_out(facts)
    if longest < NEAR_TIMEOUT * config.timeout_ms and not timed_out:
        return None
    figures = [("timeout", _ms(config.timeout_ms)), ("longest end-to-end", _ms(longest))]
    if timed_out:
        figures.append(("timed out", str(timed_out)))
    if slowest is not None and slowest.subtasks:
        late = max(slowest.subtask_details(), key=lambda s: s.ack_ms)
        name = facts.vertex_names.get(int(late.task.vertex_id), str(late.task.vertex_id))
        figures.append(
            (
                "slowest subtask",
                f"{name} ({late.task.subtask_index + 1}) of checkpoint "
                f"{slowest.checkpoint_id}: acknowledged after "
                f"{_ms(late.end_to_end_duration_ms(slowest.trigger_ms))}",
            )
        )
    return Finding(
        "near-timeout",
        "checkpoints come close to their timeout",
        tuple(figures),
        "raise the timeout, or make the slow subtask faster (its alignment, sync and async "
        "durations are in `cairn checkpoints <dir> --id <n>`)",
        (f"{TIMEOUT}: {max(2 * longest, config.timeout_ms * 2)} ms",),
    )


def back_to_back(facts: DoctorFacts) -> Finding | None:
    """A min pause shorter than the checkpoint duration with an interval that does not leave
    room either: checkpoints run back to back and the job does little else (seed 002)."""
    config = facts.config
    if config is None or config.interval_ms <= 0:
        return None
    duration = _p50([c.end_to_end_duration_ms for c in _completed(facts)])
    if duration <= 0 or config.min_pause_ms >= duration or config.interval_ms > duration:
        return None
    return Finding(
        "back-to-back",
        "checkpoints run back to back",
        (
            ("end-to-end p50", _ms(duration)),
            ("interval", _ms(config.interval_ms)),
            ("min pause", _ms(config.min_pause_ms)),
        ),
        "set a min pause of at least the checkpoint duration, so records are processed "
        "between checkpoints (e.g. 60 s interval, 30 s min pause)",
        (f"{MIN_PAUSE}: {int(duration)} ms",),
    )


def interval_off_advice(facts: DoctorFacts) -> Finding | None:
    """An interval much longer than the seeds' advice (recovery replays up to an interval of
    input), or so short that checkpoints take over half of it."""
    config = facts.config
    if config is None or config.interval_ms <= 0:
        return None
    duration = _p50([c.end_to_end_duration_ms for c in _completed(facts)])
    if config.interval_ms > LONG_INTERVAL_MS:
        return Finding(
            "interval-long",
            "the checkpoint interval is long for recovery",
            (("interval", _ms(config.interval_ms)), ("end-to-end p50", _ms(duration))),
            "after a failure the job replays up to an interval of input; an interval of "
            "about a minute suits most jobs, unless the state is too large to checkpoint "
            "that often",
            (f"{INTERVAL}: 60 s",),
        )
    if duration > 0.5 * config.interval_ms and config.min_pause_ms >= duration:
        return Finding(
            "interval-short",
            "checkpoints take over half of the interval",
            (("interval", _ms(config.interval_ms)), ("end-to-end p50", _ms(duration))),
            "lengthen the interval to several times the checkpoint duration",
            (f"{INTERVAL}: {int(4 * duration)} ms",),
        )
    return None


def heap_full_large(facts: DoctorFacts) -> Finding | None:
    """Large full checkpoints: the heap backend (or RocksDB without incremental) writes all
    state every time; RocksDB incremental writes only what changed."""
    config = facts.config
    if config is None or (config.backend == "rocksdb" and config.incremental):
        return None
    completed = _completed(facts)
    if not completed:
        return None
    latest = completed[0]
    if latest.state_size < LARGE_FULL_STATE:
        return None
    return Finding(
        "large-full-checkpoints",
        f"large full checkpoints with the {config.backend} backend",
        (
            ("full state size", _mib(latest.state_size)),
            ("end-to-end", _ms(latest.end_to_end_duration_ms)),
        ),
        "use the RocksDB backend with incremental checkpoints: each checkpoint uploads only "
        "the files the previous one did not have",
        (f"{BACKEND}: rocksdb", f"{INCREMENTAL}: true"),
    )


def stateful_without_uid(facts: DoctorFacts) -> Finding | None:
    """Stateful operators with a generated uid: a savepoint's state maps to uids, and a
    generated one changes when operators are added before it."""
    if not facts.stateful_without_uid:
        return None
    names = ", ".join(facts.stateful_without_uid)
    return Finding(
        "stateful-without-uid",
        "stateful operators without a uid",
        (("operators", names),),
        "give each a stable uid: savepoints map state to operators by uid, and a generated "
        "one changes when the job changes",
        tuple(f".uid(...) on {n}" for n in facts.stateful_without_uid),
    )


def slow_savepoints(facts: DoctorFacts) -> Finding | None:
    """Savepoints slowed by alignment: savepoints are always aligned, so unaligned
    checkpoints will not help them (seed 003); less in-flight data will."""
    savepoints = _completed(facts, savepoints=True)
    if not savepoints:
        return None
    alignment = _p50([s.max_alignment_duration_ms for s in savepoints])
    duration = _p50([s.end_to_end_duration_ms for s in savepoints])
    if duration <= 0 or alignment < ALIGNMENT_SHARE * duration:
        return None
    return Finding(
        "slow-savepoints",
        "savepoints are slow because of barrier alignment",
        (
            ("savepoints", str(len(savepoints))),
            ("alignment p50", _ms(alignment)),
            ("end-to-end p50", _ms(duration)),
        ),
        "savepoints are always aligned: unaligned checkpoints will not make them faster; "
        "buffer debloating (less in flight) or removing the backpressure will",
        (f"{DEBLOAT}: true",),
    )


def _vertex_sizes(checkpoint: CheckpointStats) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for s in checkpoint.subtasks.values():
        sizes[int(s.task.vertex_id)] = sizes.get(int(s.task.vertex_id), 0) + s.metrics.state_size
    return sizes


def state_grows(facts: DoctorFacts) -> Finding | None:
    """Keyed state growing at every checkpoint: over the last ``GROWING_CHECKPOINTS``
    completed ones a vertex's state grew each time, by ``GROWTH_FACTOR`` at least, and past
    ``GROWING_STATE``. A regular join or a group aggregate without a TTL keeps every key it
    ever saw (its ``explain()`` says so); if old keys may be forgotten, a TTL bounds it."""
    completed = list(reversed(_completed(facts)))[-GROWING_CHECKPOINTS:]
    if len(completed) < GROWING_CHECKPOINTS:
        return None
    history = [_vertex_sizes(c) for c in completed]
    growing = []
    for vertex in history[-1]:
        sizes = [h.get(vertex, 0) for h in history]
        rising = all(b > a for a, b in itertools.pairwise(sizes))
        if rising and sizes[-1] >= GROWING_STATE and sizes[-1] >= GROWTH_FACTOR * sizes[0]:
            growing.append((vertex, sizes))
    if not growing:
        return None
    vertex, sizes = max(growing, key=lambda g: g[1][-1])
    name = facts.vertex_names.get(vertex, f"vertex {vertex}")
    return Finding(
        "state-grows",
        f"the state of {name} grew at each of the last {len(sizes)} checkpoints",
        (
            ("operators", ", ".join(facts.vertex_names.get(v, f"vertex {v}") for v, _ in growing)),
            ("state size", f"{_mib(sizes[0])} -> {_mib(sizes[-1])}"),
        ),
        "a regular join, group aggregate, deduplication or Top-N keeps every key it ever saw;"
        " if keys not seen for a while may be forgotten, give the state a time-to-live (SQL"
        " and the Table API: table.exec.state.ttl or a STATE_TTL hint; DataStream state:"
        " StateTtlConfig), or use windowed / interval joins whose state the watermark cleans",
        ("table.exec.state.ttl: 1 h", "/*+ STATE_TTL('t' = '1h') */", "StateTtlConfig"),
    )


Rule = Callable[[DoctorFacts], Finding | None]
RULES: tuple[Rule, ...] = (
    alignment_dominates,
    large_in_flight,
    unaligned_without_effect,
    near_timeout,
    back_to_back,
    interval_off_advice,
    heap_full_large,
    stateful_without_uid,
    slow_savepoints,
    state_grows,
)


def diagnose(facts: DoctorFacts) -> list[Finding]:
    """Every rule's finding, in :data:`RULES` order.

    >>> diagnose(DoctorFacts(()))
    []
    """
    return [f for f in (rule(facts) for rule in RULES) if f is not None]
