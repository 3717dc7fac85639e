"""Terminal progress of a running job: status, records in/out, last checkpoint, restarts.

Invariant: the reporter only reads the job master's published fields (never locks it), so a
slow terminal can never slow the job down.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO


def format_count(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n:.0f}"


class ProgressReporter:
    """Prints one status line per interval (rewritten in place on a TTY)."""

    def __init__(self, master: Any, stream: TextIO | None = None, interval_s: float = 1.0) -> None:
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
        metrics = dict(m.metrics)
        sources = {t for t in m.plan.source_tasks}
        records_in = sum(v.records_in for k, v in metrics.items() if k not in sources)
        records_src = sum(v.records_out for k, v in metrics.items() if k in sources)
        now = time.monotonic()
        rate = (records_src - self._last_out) / max(now - self._last_t, 1e-6)
        self._last_out, self._last_t = records_src, now
        cp = "-"
        coordinator = m.coordinator
        if coordinator is not None:
            latest = coordinator.latest_completed_id()
            if latest is not None:
                cp = f"#{latest}"
        backpressured = sum(1 for v in metrics.values() if v.backpressured)
        return (
            f"[cairn] {m.status.name:<12} attempt {max(m.attempt, 0)} | source out "
            f"{format_count(records_src)} ({format_count(max(rate, 0))}/s) | processed in "
            f"{format_count(records_in)} | last checkpoint {cp} | restarts {m.restarts}"
            + (f" | backpressured tasks {backpressured}" if backpressured else "")
        )

    def _run(self) -> None:
        tty = self._stream.isatty()
        while self._master.end_ms is None:
            time.sleep(self._interval)
            text = self.line()
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
