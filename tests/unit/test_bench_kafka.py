"""The Kafka job benchmark's pure helpers (``bench.kafka_topics``, ``bench.kafka_job``):
the record format every system shares, the steady rate from append times, the parsing of
the broker's perf tools, the ratios against the targets. The benchmark itself is not run
here (it needs a broker, Spark and the peers' venvs)."""

from __future__ import annotations

import doctest

import pytest
from bench import kafka_job, kafka_topics


@pytest.mark.parametrize("module", [kafka_topics, kafka_job])
def test_doctests(module: object) -> None:
    failed, tried = doctest.testmod(module)  # type: ignore[arg-type]
    assert tried > 0 and failed == 0


def test_steady_rate_leaves_out_start_up_and_the_tail() -> None:
    # 100 records 10 ms apart after a 5 s start-up stall of the first 5 records.
    times = [0, 1000, 2000, 3000, 4000] + [5000 + 10 * i for i in range(95)]
    assert kafka_topics.steady_rate(times) == pytest.approx(100.0, rel=0.02)
    assert kafka_topics.steady_rate([5] * 50) is None  # no time passed: no rate
    assert kafka_topics.steady_rate([1, 2, 3]) is None  # too few records


def test_keyed_sum_line_keeps_the_produce_time() -> None:
    line = kafka_topics.input_line(10_003, produced_ns=123)
    assert line == "k00003,1,123"
    assert kafka_topics.keyed_sum_line(line, 42) == "k00003,42,123"


def test_ratios_against_the_targets() -> None:
    result = {
        "cairn-exactly-once": {"records_per_s": 90_000},
        "cairn-at-least-once": {"records_per_s": 100_000},
        "pyflink-exactly-once": {"records_per_s": 9_000},
        "spark": {"records_per_s": 30_000},
    }
    assert kafka_job.ratios(result) == {
        "eo_cost_vs_alo_pct": 10.0,
        "eo_vs_pyflink": 10.0,
        "eo_vs_spark": 3.0,
    }
