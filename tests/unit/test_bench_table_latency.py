"""The Table API benchmark's latency mode, its pure parts: which event closes a window, the
latency samples of each system from their marks, weighted percentiles, the warm-up cut, the
per-second pacing of Cairn's source, and the driver's wiring of the paced runs. No engine runs
here (the runs themselves are checked by hand on small inputs: see bench/README.md)."""

from __future__ import annotations

import importlib
import random
from pathlib import Path

import pytest
from bench import table as driver
from bench.table_jobs import PacedTableEvents, latency_samples

# bench/peers' standard-library modules, on sys.path once bench.table is imported
tl = importlib.import_module("table_latency")
wc = importlib.import_module("window_common")
percentile = importlib.import_module("common").percentile
key_table = importlib.import_module("common").key_table


def _ts(i: int, eps: int) -> int:
    return wc.event(i, ["k"], eps)[1]


def test_the_closing_events_are_each_splits_first_past_the_end_plus_the_bound() -> None:
    for eps, p in ((1000, 2), (3000, 2), (700, 3)):
        records = 6 * eps
        closers = tl.window_closers(records, eps, p)
        assert closers, "an input of 6 s closes windows"
        for window, indices in closers.items():
            threshold = wc.T0_MS + (window + 1) * wc.WINDOW_MS + wc.BOUND_MS
            for j, i in enumerate(indices):
                assert i % p == j
                first = next(k for k in range(j, records, p) if _ts(k, eps) >= threshold)
                assert i == first, (eps, p, window, j)
        # The last windows are closed by the end of input, not by an event.
        last = wc.window_index(_ts(records - 1, eps))
        assert last not in closers
        assert tl.closing_indices(last, records, eps, p) is None


def test_weighted_percentile_is_nearest_rank_and_weights_count_as_repeats() -> None:
    rng = random.Random(7)
    values = [rng.uniform(0, 100) for _ in range(501)]
    for q in (1, 50, 90, 99, 100):
        assert tl.weighted_percentile([(v, 1) for v in values], q) == percentile(values, q)
    repeated = [v for v in values[:50] for _ in range(3)]
    for q in (50, 99):
        assert tl.weighted_percentile([(v, 3) for v in values[:50]], q) == percentile(repeated, q)
    assert tl.weighted_percentile([(5.0, 0), (7.0, 2)], 1) == 7.0  # no weight: not a sample


def test_latency_fields_leave_out_what_was_offered_before_the_warm_up_ended() -> None:
    # First result at 10.0 + 3 s = 13.0 s (a slow start); warm-up 2 s: offers from 15 s on.
    samples = [(10.0, 3000.0, 1), (14.9, 500.0, 5), (15.0, 20.0, 98), (16.0, 80.0, 2)]
    fields = tl.latency_fields(samples, warmup_s=2.0)
    assert fields["latency_samples"] == 100
    assert fields["latency_p50_ms"] == 20.0
    assert fields["latency_p99_ms"] == 80.0 and fields["latency_max_ms"] == 80.0
    assert tl.latency_fields([], 2.0)["latency_p99_ms"] is None


def test_spark_counts_every_event_of_a_batch_from_its_seconds_end() -> None:
    rate, records, start_ms = 100, 450, 50_000
    # Batch 0 read seconds 0-1, batch 1 seconds 2-4 (the input ends in second 4), then none.
    spans = [(52.3, 0, 2), (55.1, 2, 5), (56.0, 5, 6)]
    samples = tl.spark_event_samples(spans, start_ms, rate, records)
    assert sum(w for _, _, w in samples) == records
    assert samples[0] == (51.0, pytest.approx(1300.0), 100) and samples[-1][2] == 50
    for offer, ms, _ in samples:
        assert abs(offer + ms / 1000 - (52.3 if offer <= 52.0 else 55.1)) < 1e-9
    assert tl.spark_offer_ms(rate - 1, start_ms, rate) == start_ms + 1000


def test_per_second_bursts_release_a_seconds_share_at_once_and_never_skip() -> None:
    now = [0.0]
    bursts = tl.PerSecondBursts(250, lambda: now[0])
    granted = [bursts.acquire(100) for _ in range(4)]
    assert granted == [100, 100, 50, 0]
    assert bursts.seconds_until_ready(1) == 1.0
    now[0] = 2.5  # fell behind: seconds 1 and 2 are both due now
    assert bursts.acquire(10_000) == 500 and bursts.seconds_until_ready(1) == 0.5


def test_cairns_paced_generator_stamps_events_and_keeps_the_closers_stamps(
    tmp_path: Path,
) -> None:
    gen = PacedTableEvents(50, 1000, str(tmp_path), records=4000, closers=[516, 1511, 7])
    batch = gen.generate_batch(range(500, 600, 2))
    assert [e[:3] for e in batch] == [wc.event(i, key_table(50), 1000) for i in range(500, 600, 2)]
    assert len({e[3] for e in batch}) == 1  # one stamp per batch: emitted as a whole
    gen.generate_batch(range(1501, 1600, 2))
    lines = "".join(p.read_text() for p in tmp_path.glob("closers-*.txt")).split("\n")
    got = {int(line.split()[0]): int(line.split()[1]) for line in lines if line}
    assert set(got) == {516, 1511} and got[516] == batch[0][3]


def test_cairns_samples_use_the_later_closing_stamp_and_skip_unclosed_windows() -> None:
    rows = [(3, 2_000_000), (4, 2_500_000), (5, 9)]
    stamps = {10: 1_000_000, 11: 1_200_000, 20: 1_900_000}
    closers = {3: (10, 11), 4: (20, 21)}  # 21's stamp is missing, window 5 has no closer
    assert latency_samples("table-window", rows, stamps, closers) == [(1.2, 800.0, 1)]


def test_the_driver_adds_paced_runs_and_reports_their_latency() -> None:
    cmd = driver.command("spark", "table-wordcount", False, 2000, 10, 1000, False, "spark",
                         900.0, 50_000, 1000, 5.0)  # fmt: skip
    assert cmd[cmd.index("--rate") + 1] == "1000" and "--batch-rows" not in cmd
    assert cmd[cmd.index("--latency-warmup-s") + 1] == "5.0"
    assert "--rate" not in driver.command("cairn", "table-window", False, 10, 3, 1000, True)
    rows = driver.summarize(
        [
            {"system": "cairn", "workload": "w", "udf": False, "steady_records_per_s": 900,
             "elapsed_s": 1},
            {"system": "cairn", "workload": "w", "udf": False, "mode": "latency",
             "steady_records_per_s": 5, "elapsed_s": 1, "latency_p50_ms": 3.0,
             "latency_p99_ms": 9.0, "latency_max_ms": 12.0},
            {"system": "spark", "workload": "w", "udf": False, "steady_records_per_s": 300,
             "elapsed_s": 1},
            {"system": "spark", "workload": "w", "udf": False, "mode": "latency",
             "error": "boom"},
        ]
    )  # fmt: skip
    by = {r["system"]: r for r in rows}
    assert by["cairn"]["events_per_s"] == 900 and by["cairn"]["runs"] == 1
    assert (by["cairn"]["latency_p50_ms"], by["cairn"]["latency_p99_ms"]) == (3.0, 9.0)
    assert by["spark"]["errors"] == [] and by["spark"]["latency_failed"]
    table = driver.text_table(rows)
    assert "p50 ms" in table and "failed" in table
    results = [{"system": "cairn", "workload": "w", "udf": False, "mode": "latency",
                "result_events": 1}]  # fmt: skip
    driver.verify_all(results, {"w": {"events": 2}})
    assert "verified" not in results[0]  # a sampled run has no figures to check
    meta = {"command": "x", "date": "d", "repeat": 1, "events": 10, "keys": 2,
            "events_per_second": 1000, "latency_rate": 500, "latency_seconds": 30,
            "latency_warmup_s": 10}  # fmt: skip
    section = "\n".join(driver.table_section(meta, rows))
    assert "source paced at 500 events/s for 30 s" in section and "| 3.0 | 9.0 |" in section


def test_doctests() -> None:
    import doctest

    from bench import table_jobs

    for module in (tl, table_jobs):
        failed, tried = doctest.testmod(module)  # type: ignore[arg-type]
        assert tried and not failed, module.__name__
