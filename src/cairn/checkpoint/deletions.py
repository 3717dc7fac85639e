"""Checkpoint files deleted off the coordinator's thread, in the order they were given up.

Deleting a subsumed or aborted checkpoint is I/O the coordinator must not wait for: on an
object store it is a request per file, and while the store is unreachable each request is
retried for seconds (SeaweedFS killed under a job: 12-13 s per deletion, during which the
job master noticed no failed worker). Flink runs these on its I/O executor for the same
reason (``CheckpointsCleaner``).

Invariant: deletions run one at a time, first given first run, on one daemon thread that
lives only while there is something to delete (it never keeps the process alive, and a
process running many jobs does not collect idle threads); a deletion that fails is logged
and dropped, never raised (cleanup is best effort: the checkpoint's outcome was decided
before its files go);
:meth:`BackgroundDeletions.wait` returns once everything given before it ran, so whoever
lists or removes the job directory next sees what the deletions left.

>>> done = []
>>> deletions = BackgroundDeletions("job-1")
>>> deletions.submit("chk-1", lambda: done.append(1))
>>> deletions.submit("chk-2", lambda: done.append(2))
>>> deletions.wait(5.0), done
(True, [1, 2])
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

__all__ = ["BackgroundDeletions"]

# Logged as the coordinator, whose work this is (one logger to configure).
log = logging.getLogger("cairn.checkpoint.coordinator")


class BackgroundDeletions:
    """A FIFO of deletions run by one daemon thread, started by :meth:`submit` when none
    runs and ended when the FIFO is empty."""

    def __init__(self, job_id: str) -> None:
        self._job_id = job_id
        self._queue: deque[tuple[str, Callable[[], None]]] = deque()
        self._cond = threading.Condition()
        self._running = 0  # 1 while the thread runs a deletion it took from the queue
        self._thread: threading.Thread | None = None

    def submit(self, what: str, delete: Callable[[], None]) -> None:
        """Run ``delete`` (which deletes ``what``) after everything submitted before."""
        with self._cond:
            self._queue.append((what, delete))
            if self._thread is None:  # (a thread that saw the FIFO empty cleared this)
                self._thread = threading.Thread(
                    target=self._loop, name=f"cairn-cleanup-{self._job_id[:8]}", daemon=True
                )
                self._thread.start()

    def pending(self) -> int:
        """Deletions submitted and not finished yet."""
        with self._cond:
            return len(self._queue) + self._running

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every deletion submitted so far ran; False if ``timeout`` passed."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._running, timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._queue:  # idle: end; the next submit starts another thread
                    self._thread = None
                    return
                what, delete = self._queue.popleft()
                self._running = 1
            try:
                delete()
            except Exception:  # best effort: the files stay for the user to remove
                log.warning("Could not delete %s of job %s", what, self._job_id, exc_info=True)
            finally:
                with self._cond:
                    self._running = 0
                    self._cond.notify_all()
