"""Helpers of the Table/SQL fault tests: a topic of JSON events produced at a paced rate while
a job reads it, the SQL declaring it (bounded at the offsets the whole input will end at, so
a job can only finish once the last event is produced), and the expected results computed in
pure Python from the same events.

Event ``i`` goes to partition ``i % partitions`` (one partition per source subtask, so each
subtask's watermark follows one partition's event times); its event time rises by
``STEP_MS`` per event with a jitter below ``JITTER_MS`` (out of order, never later than the
watermark's delay), so no event is late and every tumbling window's count and sum are a pure
function of the events.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections import Counter
from typing import Any

BASE = datetime.datetime(2026, 1, 1)
STEP_MS, JITTER_MS = 5, 200


def event(i: int, keys: int) -> tuple[str, int, datetime.datetime]:
    """The ``i``-th event: key, value, event time (``JITTER_MS`` < the watermark delay)."""
    ms = i * STEP_MS + (i * 37) % JITTER_MS
    return f"k{(i * 7) % keys:02d}", i % 97, BASE + datetime.timedelta(milliseconds=ms)


def expected_windows(events: int, keys: int) -> Counter[tuple[str, str, str, int, int]]:
    """``(key, window_start, window_end, count, sum)`` of each 1 s tumbling window."""
    acc: dict[tuple[str, datetime.datetime], list[int]] = {}
    for i in range(events):
        k, v, ts = event(i, keys)
        start = ts.replace(microsecond=0)
        n_sum = acc.setdefault((k, start), [0, 0])
        n_sum[0] += 1
        n_sum[1] += v
    return Counter(
        (k, str(s), str(s + datetime.timedelta(seconds=1)), n, total)
        for (k, s), (n, total) in acc.items()
    )


def expected_totals(events: int, keys: int) -> dict[str, tuple[int, int]]:
    """``key -> (count, sum)`` over all events: the batch ``GROUP BY``."""
    out: dict[str, tuple[int, int]] = {}
    for i in range(events):
        k, v, _ = event(i, keys)
        n, total = out.get(k, (0, 0))
        out[k] = (n + 1, total + v)
    return out


class PacedProducer:
    """Produces events ``[start, stop)`` in a thread, ``per_second`` of them a second, in
    chunks; ``produced`` counts the ones acknowledged by the broker."""

    def __init__(
        self, broker: Any, topic: str, partitions: int, keys: int, start: int, stop: int
    ) -> None:
        self._args = (broker, topic, partitions, keys)
        self._range = (start, stop)
        self.produced = 0
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, per_second: float | None) -> PacedProducer:
        self._thread = threading.Thread(target=self._run, args=(per_second,), daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float = 120) -> None:
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the producer did not finish"
        if self.error is not None:
            raise self.error

    @property
    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    def _run(self, per_second: float | None) -> None:
        try:
            self._produce(per_second)
        except BaseException as e:  # reported by join()
            self.error = e

    def _produce(self, per_second: float | None) -> None:
        from confluent_kafka import Producer

        broker, topic, partitions, keys = self._args
        producer = Producer(broker.client_config(**{"linger.ms": 5, "enable.idempotence": True}))
        start, stop = self._range
        chunk = 100
        began = time.monotonic()
        for first in range(start, stop, chunk):
            if per_second is not None:  # on schedule: chunk n leaves at n * chunk / rate
                delay = began + (first - start) / per_second - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            for i in range(first, min(first + chunk, stop)):
                k, v, ts = event(i, keys)
                message = json.dumps({"k": k, "v": v, "ts": str(ts)[:23]})
                producer.produce(topic, message, partition=i % partitions)
            assert producer.flush(60) == 0
            self.produced = min(first + chunk, stop) - start


def events_ddl(broker: Any, topic: str, partitions: int, events: int, group: str) -> str:
    """The ``events`` table: the topic from its start, bounded at the offsets it will hold
    once all ``events`` are produced (``scan.bounded.mode = specific-offsets``)."""
    ends = ";".join(
        f"partition:{p},offset:{len(range(p, events, partitions))}" for p in range(partitions)
    )
    return (
        "CREATE TABLE events (k STRING, v BIGINT, ts TIMESTAMP(3),"
        " WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka',"
        f" 'topic' = '{topic}', 'properties.bootstrap.servers' = '{broker.bootstrap_servers}',"
        f" 'properties.group.id' = '{group}', 'scan.startup.mode' = 'earliest-offset',"
        f" 'scan.bounded.mode' = 'specific-offsets', 'scan.bounded.specific-offsets' = '{ends}',"
        " 'format' = 'json')"
    )
