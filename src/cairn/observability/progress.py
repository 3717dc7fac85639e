"""Terminal progress of a running job: status, records in/out, last checkpoint, restarts,
the time shares and what the job costs (cores, CPU per source record).

Invariant: the reporter only reads the job master's published view and immutable checkpoint
statistics snapshots (never locks the job master), so a slow terminal can never slow the job
down; formatting is done by pure functions.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, TextIO

from cairn.checkpoint.messages import TaskKey
from cairn.checkpoint.stats import CheckpointStatsSnapshot
from cairn.deploy.job_view import StageProgress
from cairn.ids import AttemptNumber
from cairn.observability.cpu import JobCpu, job_cpu
from cairn.observability.metrics import SubtaskMetrics, all_subtask_metrics

if TYPE_CHECKING:
    from cairn.deploy.job_master_ports import ObservedJob


def format_count(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n:.0f}"


def format_bytes(n: int) -> str:
    """Compact binary size: ``format_bytes(1536) == '1.5KiB'``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n}B"


def checkpoint_progress(snapshot: CheckpointStatsSnapshot | None) -> str:
    """The checkpoint part of the progress line.

    Last completed checkpoint: id, end-to-end duration, slowest alignment, persisted
    in-flight bytes and ``U`` when it was unaligned; then completed/failed counts.

    >>> from cairn.checkpoint.messages import SubtaskCheckpointMetrics, TaskKey
    >>> from cairn.checkpoint.stats import CheckpointStatsTracker
    >>> t = CheckpointStatsTracker()
    >>> t.report_pending(7, trigger_ms=1000, num_subtasks=1)
    >>> t.report_ack(7, TaskKey(0, 0), SubtaskCheckpointMetrics(
    ...     alignment_duration_ms=12, persisted_bytes=2048, unaligned=True), ack_ms=1040)
    >>> t.report_completed(7, end_ms=1045)
    >>> checkpoint_progress(t.snapshot())
    'last checkpoint #7 45ms align 12ms persisted 2.0KiB U | checkpoints 1 ok 0 failed'
    >>> checkpoint_progress(None)
    'checkpointing off'
    """
    if snapshot is None:
        return "checkpointing off"
    counts = snapshot.counts
    tail = f"checkpoints {counts.completed} ok {counts.failed} failed"
    last = snapshot.latest_completed
    if last is None:
        return f"last checkpoint - | {tail}"
    text = (
        f"last checkpoint #{last.checkpoint_id} {last.end_to_end_duration_ms}ms "
        f"align {last.max_alignment_duration_ms}ms "
        f"persisted {format_bytes(last.persisted_bytes)}"
    )
    return f"{text}{' U' if last.unaligned else ''} | {tail}"


def stage_progress(stages: StageProgress) -> str:
    """A BATCH job's part of the progress line in place of the checkpoints': its stages
    done and in all.

    >>> stage_progress(StageProgress(frozenset({0}), 3))
    'stages 1/3 done'
    """
    return f"stages {stages.done}/{stages.total} done"


def format_progress_line(
    status: str,
    attempt: AttemptNumber,
    source_out: int,
    rate: float,
    processed_in: int,
    checkpoints: str,
    restarts: int,
    backpressured: int = 0,
    time_shares: str = "",
    cpu: str = "",
) -> str:
    """One progress line from its parts (``checkpoints`` from :func:`checkpoint_progress`,
    ``cpu`` from :func:`cpu_progress`).

    >>> line = format_progress_line("RUNNING", 0, 12_000, 3_000.0, 11_500, "cp", 0, 2,
    ...                             "busy 40% bp 35% idle 25%", "cpu 0.90 cores 300us/rec")
    >>> for part in line.split(" | "): print(part)
    [cairn] RUNNING      attempt 0
    source out 12.0k (3.0k/s)
    processed in 11.5k
    cp
    restarts 0
    backpressured tasks 2
    busy 40% bp 35% idle 25%
    cpu 0.90 cores 300us/rec
    """
    return (
        f"[cairn] {status:<12} attempt {max(attempt, 0)} | source out "
        f"{format_count(source_out)} ({format_count(max(rate, 0))}/s) | processed in "
        f"{format_count(processed_in)} | {checkpoints} | restarts {restarts}"
        + (f" | backpressured tasks {backpressured}" if backpressured else "")
        + (f" | {time_shares}" if time_shares else "")
        + (f" | {cpu}" if cpu else "")
    )


def cpu_progress(cpu: JobCpu | None) -> str:
    """The cost part of the progress line: the cores the workers used over the last
    interval and the CPU time per record the sources read (``-`` while they read none).

    >>> from cairn.deploy.worker_cpu import WorkerCpu
    >>> cpu_progress(job_cpu(({}, {0: WorkerCpu(1.8, 2.0)}), ({}, {}), ()))
    'cpu 0.90 cores -us/rec'
    >>> cpu_progress(None)
    ''
    """
    if cpu is None:
        return ""
    per_record = "-" if cpu.us_per_record is None else f"{cpu.us_per_record:.0f}"
    return f"cpu {cpu.cores:.2f} cores {per_record}us/rec"


def time_shares(subtasks: Mapping[str, SubtaskMetrics]) -> str:
    """Busy / backpressured / idle shares averaged over the subtasks (Flink's
    ``busy/backPressured/idleTimeMsPerSecond``), and the most backpressured one by name.

    >>> m = lambda busy, bp: SubtaskMetrics(0, 0, 0.0, 0.0, busy, bp, 1000.0 - busy - bp, 0)
    >>> time_shares({"src (1/2)": m(200.0, 800.0), "sum (1/2)": m(1000.0, 0.0)})
    'busy 60% bp 40% idle 0% (max bp src (1/2) 80%)'
    >>> time_shares({})
    ''
    """
    if not subtasks:
        return ""
    n = len(subtasks)
    busy = sum(m.busyTimeMsPerSecond for m in subtasks.values()) / n / 10
    bp = sum(m.backPressuredTimeMsPerSecond for m in subtasks.values()) / n / 10
    idle = sum(m.idleTimeMsPerSecond for m in subtasks.values()) / n / 10
    text = f"busy {busy:.0f}% bp {bp:.0f}% idle {idle:.0f}%"
    name, worst = max(subtasks.items(), key=lambda kv: kv[1].backPressuredTimeMsPerSecond)
    if worst.backPressuredTimeMsPerSecond >= 100.0:
        text += f" (max bp {name} {worst.backPressuredTimeMsPerSecond / 10:.0f}%)"
    return text


class ProgressReporter:
    """Prints one status line per interval (rewritten in place on a TTY)."""

    def __init__(
        self, master: ObservedJob, stream: TextIO | None = None, interval_s: float = 1.0
    ) -> None:
        self._master = master
        self._stream = stream or sys.stderr
        self._interval = interval_s
        self._thread = threading.Thread(target=self._run, name="cairn-progress", daemon=True)
        self._last_out = 0
        self._last_t = time.monotonic()

    def start(self) -> None:
        self._thread.start()

    def line(self) -> str:
        m = self._master
        view = m.view  # one consistent snapshot of the job
        metrics = view.metrics
        sources = {t for t in m.plan.source_tasks}
        records_in = sum(v.records_in for k, v in metrics.items() if k not in sources)
        records_src = sum(v.records_out for k, v in metrics.items() if k in sources)
        now = time.monotonic()
        rate = (records_src - self._last_out) / max(now - self._last_t, 1e-6)
        self._last_out, self._last_t = records_src, now
        stats = view.checkpoint_stats
        snapshot: CheckpointStatsSnapshot | None = None if stats is None else stats.snapshot()
        backpressured = sum(1 for v in metrics.values() if v.backpressured)
        previous, current = view.metric_reports
        names = {int(v.id): (v.name, v.parallelism) for v in m.graph.vertices}
        shares = {
            _subtask_name(names, key): value
            for key, value in all_subtask_metrics(current, previous).items()
        }
        leadership = m.leadership
        standby = leadership is not None and leadership.role == "standby"
        return format_progress_line(
            "STANDBY" if standby else view.status.name,
            view.attempt,
            records_src,
            rate,
            records_in,
            checkpoint_progress(snapshot) if view.stages is None else stage_progress(view.stages),
            view.restarts,
            backpressured,
            time_shares(shares),
            cpu_progress(job_cpu(view.cpu_reports, view.metric_reports, m.plan.source_tasks)),
        )

    def _run(self) -> None:
        tty = self._stream.isatty()
        while not self._master.view.ended:
            time.sleep(self._interval)
            text = self.line()
            with _SILENCE_LOCK:
                if _SILENCED.is_set():
                    return
                try:
                    if tty:
                        self._stream.write("\r\x1b[2K" + text)
                    else:
                        self._stream.write(text + "\n")
                    self._stream.flush()
                except (ValueError, OSError):  # the stream was closed: nobody is watching
                    return
        if tty:
            self._stream.write("\n")
            self._stream.flush()


_SILENCE_LOCK = threading.Lock()
_SILENCED = threading.Event()


def silence_progress() -> None:
    """Stop every progress reporter of this process from printing again (returns once none
    is in the middle of a line): the CLI's last line on Ctrl-C stays the last line."""
    with _SILENCE_LOCK:
        _SILENCED.set()


def _subtask_name(names: Mapping[int, tuple[str, int]], key: TaskKey) -> str:
    name, parallelism = names.get(int(key.vertex_id), (str(key.vertex_id), 0))
    return f"{name} ({key.subtask_index + 1}/{parallelism})"
