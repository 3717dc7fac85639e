"""A warm standby: while a driver stands by for its job's lease, it keeps Spark ready to
deploy the job at once, so that a takeover costs the lease and the restore, not a cold start.

What a standby holds before it leads: its Spark session (started by ``launch`` as for any
driver), the job graph built and pickled, and -- kept here -- one idle Python worker per
task slot the job needs, forked by Spark's daemon (``spark_daemon``: Cairn's worker code
imported) and with the job's own payload unpickled once (every module its functions need
imported). Spark reuses idle Python workers for later tasks (``spark.python.worker.reuse``,
on by default) and kills those idle for a minute, so a small warm-up job runs again every
``WARM_INTERVAL_S``; the first barrier stage of the new leader then runs on those workers.

Invariant: warming never touches the job's storage, its HA records or its sinks: it only
runs a short, side-effect-free Spark job on this driver's own session; ``stop`` returns only
once no warm-up job runs (the leader's barrier stage needs every slot), and a failed warm-up
is logged and retried, never fatal.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["WARM_INTERVAL_S", "WarmStandby", "warm_standby_for"]

log = logging.getLogger(__name__)

# Spark kills Python workers idle for a minute (PythonWorkerFactory.IDLE_WORKER_TIMEOUT_NS).
WARM_INTERVAL_S = 20.0
STOP_WAIT_S = 10.0


def _warm_partition(payload: bytes) -> Callable[[Iterable[int]], Iterator[int]]:
    """The warm-up task: import the worker's code and unpickle the job (as a worker does
    first) in a reusable Python worker; yields the worker's pid."""

    def run(_iterator: Iterable[int]) -> Iterator[int]:
        import cloudpickle

        import cairn.deploy.worker  # noqa: F401  (preloaded by the daemon; else imported here)

        cloudpickle.loads(payload)  # imports the job's modules; nothing is started
        yield os.getpid()

    return run


class WarmStandby:
    """Runs warm-up jobs on ``spark`` every ``interval_s`` from ``start`` until ``stop``.

    ``worker_pids``: the Python workers the latest warm-up ran on (the ones the leader's
    first barrier stage is expected to reuse); ``warmups``: how many completed.

    Example (not a doctest: it needs a Spark session)::

        warm = WarmStandby(spark, payload, workers=2)
        warm.start()        # while standing by
        ...
        warm.stop()         # leading: deploy the job on the warm workers
    """

    def __init__(self, spark: Any, payload: bytes, workers: int, interval_s: float = 0.0) -> None:
        self._sc = spark.sparkContext
        self._payload = payload
        self._workers = workers
        self._interval_s = interval_s or WARM_INTERVAL_S
        self._group = f"cairn-warm-standby-{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.worker_pids: tuple[int, ...] = ()
        self.warmups = 0

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="cairn-warm-standby", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop warming; returns once no warm-up job runs (or after ``STOP_WAIT_S``)."""
        self._stop.set()
        thread = self._thread
        if thread is None:
            return
        # A warm-up in flight ends in well under a second; cancelling it would kill the very
        # Python workers it warms (Spark destroys the worker of an interrupted task).
        thread.join(STOP_WAIT_S)
        if thread.is_alive():
            try:
                self._sc.cancelJobGroup(self._group)
            except Exception:
                log.debug("could not cancel the warm-up job", exc_info=True)
            thread.join(STOP_WAIT_S)

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                pids = self._warm_once()
            except Exception as exc:  # e.g. cancelled by stop(); the next round retries
                if not self._stop.is_set():
                    log.warning("warming the standby's Spark workers failed: %s", exc)
            else:
                self.worker_pids, self.warmups = pids, self.warmups + 1
                log.log(
                    logging.INFO if self.warmups == 1 else logging.DEBUG,
                    "standby: %d Spark Python workers ready for a takeover (pids %s) in %.1f s",
                    len(pids),
                    ", ".join(map(str, pids)),
                    time.monotonic() - began,
                )
            self._stop.wait(self._interval_s)

    def _warm_once(self) -> tuple[int, ...]:
        sc, n = self._sc, self._workers
        # This thread's own job group (PySpark pins a JVM thread to each Python thread).
        sc.setJobGroup(self._group, "Cairn standby: keeping Python workers warm", False)
        # A barrier stage, as the job's own: all n tasks at once, so n workers are warmed.
        rdd = sc.parallelize(range(n), n).barrier().mapPartitions(_warm_partition(self._payload))
        return tuple(sorted(rdd.collect()))


def warm_standby_for(executor: object, payload: bytes, workers: int) -> WarmStandby | None:
    """A ``WarmStandby`` for a Spark executor (None for others: nothing to warm)."""
    spark = getattr(executor, "spark", None)
    if spark is None:
        return None
    return WarmStandby(spark, payload, workers)
