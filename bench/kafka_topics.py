"""Topics, records and read-back measures of the Kafka job benchmark (``bench.kafka_job``),
shared by Cairn's side and the peers' (``bench/peers/*_kafka_job.py`` read the same lines).

Invariant: an input record's value is ``"<key>,1,<produce ns>"`` (the produce time 0 in
throughput runs), keyed by ``<key>``; every system's job emits, per input record, one
output record ``"<key>,<running sum>,<produce ns>"`` keyed by ``<key>``. Output topics
stamp records with the broker's append time (``LogAppendTime``), so throughput is measured
the same way for every system: from the records' append times as a ``read_committed``
consumer reads them back, never from a system's own reports.

>>> line = input_line(7)
>>> line, keyed_sum_line(line, 5)
('k00007,1,0', 'k00007,5,0')
>>> steady_rate([0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000])
1.0
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KEYS",
    "Output",
    "fill_input",
    "input_line",
    "keyed_sum_line",
    "new_topic",
    "read_output",
    "steady_rate",
]

KEYS = 10_000
OUTPUT_CONFIG = {"message.timestamp.type": "LogAppendTime"}


def input_line(i: int, keys: int = KEYS, produced_ns: int = 0) -> str:
    return f"k{i % keys:05d},1,{produced_ns}"


def keyed_sum_line(line: str, total: int) -> str:
    """The output line of ``line`` once its key's sum is ``total`` (every system's job
    computes exactly this; the peers inline it)."""
    key, _, rest = line.split(",", 2)
    return f"{key},{total},{rest}"


def new_topic(broker: Any, prefix: str, partitions: int, output: bool = False) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions, config=OUTPUT_CONFIG if output else None)
    return topic


def fill_input(broker: Any, topic: str, records: int, keys: int = KEYS) -> float:
    """Write the throughput run's input (keyed, idempotent, batched); returns records/s."""
    from confluent_kafka import Producer

    producer = Producer(
        broker.client_config(**{"linger.ms": 20, "enable.idempotence": True, "batch.size": 1 << 20})
    )
    started = time.perf_counter()
    produce = producer.produce
    for i in range(records):
        line = input_line(i, keys)
        while True:
            try:
                produce(topic, line.encode(), line[:6].encode())
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError(f"could not fill {topic!r}")
    return records / (time.perf_counter() - started)


@dataclass(frozen=True)
class Output:
    """What a ``read_committed`` consumer reads back from one system's output topic."""

    records: int
    append_ms: list[int]  # sorted
    sums_ok: bool  # every key's last sum is its count of input records (exact for EO)
    duplicates: int  # output records beyond one per input record

    @property
    def records_per_s(self) -> float | None:
        return steady_rate(self.append_ms)


def read_output(broker: Any, topic: str, expected: int, keys: int = KEYS) -> Output:
    """Read ``topic`` to its end (``read_committed``) and check the sums: each of the
    ``expected`` input records adds 1 to its key ``i % keys``."""
    records = broker.read_topic(topic, timeout_s=300)
    append = sorted(r.timestamp for r in records)
    last: dict[str, int] = {}
    for r in records:  # partition, then offset order: a key's lines in the order written
        key, total, _ = (r.value or b"").decode().split(",", 2)
        last[key] = max(last.get(key, 0), int(total))
    want = Counter(f"k{i % keys:05d}" for i in range(min(expected, keys)))
    per_key = expected // keys
    ok = len(last) == len(want) and all(
        last.get(k) == per_key + (1 if int(k[1:]) < expected % keys else 0) for k in want
    )
    return Output(len(records), append, ok, max(0, len(records) - expected))


def steady_rate(append_ms: Sequence[int], low: float = 0.1, high: float = 0.9) -> float | None:
    """Records per second between the ``low`` and ``high`` quantiles of the append times:
    the steady state, without a system's start-up and its last partial batch."""
    n = len(append_ms)
    if n < 10:
        return None
    a, b = int(n * low), int(n * high)
    span_ms = append_ms[b] - append_ms[a]
    if span_ms <= 0:
        return None
    return (b - a) / (span_ms / 1000.0)
