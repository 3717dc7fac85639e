"""The store-costs benchmark's plan and figures (pure functions; the run itself on a real store
is tests/integration/test_bench_store_costs.py)."""

from __future__ import annotations

import doctest

import bench.store_costs
import pytest
from bench.store_costs import (
    CostPlan,
    checkpoint_argv,
    checkpoint_costs,
    main,
    recovery_argv,
    recovery_costs,
)


def test_doctests() -> None:
    result = doctest.testmod(bench.store_costs, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_every_store_gets_the_same_job_but_its_storage() -> None:
    plan = CostPlan()
    for argv_of in (checkpoint_argv, recovery_argv):
        runs = {store: argv_of(plan, store) for store in ("file", "s3", "hdfs", "gcs", "azure")}
        bare = {tuple(a for a in argv if a != store) for store, argv in runs.items()}
        assert len(bare) == 1
        args = runs["s3"]
        assert args[args.index("--storage") + 1] == "s3"
        assert {"--incremental", "rocksdb"} <= set(args)
        assert args[args.index("--hot-fraction") + 1] == "0.01"


def test_the_default_plan_is_the_one_of_the_results() -> None:
    plan = CostPlan()
    checkpoints = checkpoint_argv(plan, "file")
    assert checkpoints[checkpoints.index("--keys") + 1] == "1000000"
    # 1 % of 1M keys each interval: the 100,000 records of a 1 s interval touch all 10,000.
    assert plan.rate * plan.interval_ms / 1000 >= plan.keys * plan.hot_fraction
    recovery = recovery_argv(plan, "file")
    assert recovery[recovery.index("--keys") + 1] == "10000000"
    assert int(recovery[recovery.index("--records") + 1]) > plan.recovery_keys


def test_warm_up_checkpoints_are_left_out_and_the_count_is_capped() -> None:
    series = [[5_000, 100, 90]] + [[10 * i, 100, 2] for i in range(1, 30)]
    c = checkpoint_costs({"hot_series": series, "note": None}, warmup=1, count=20)
    assert c["checkpoints"] == 20 and c["note"] is None
    assert c["e2e_max_ms"] == 200 and c["e2e_p50_ms"] == 100 and c["e2e_p95_ms"] == 190
    assert c["added_bytes_max"] == 2 and c["added_pct_mean"] == 2.0


def test_a_failed_run_gives_no_figures_and_says_why() -> None:
    c = checkpoint_costs({"note": "failed: OSError: refused"}, warmup=2, count=20)
    assert c["checkpoints"] == 0 and "e2e_p50_ms" not in c
    assert c["note"].startswith("failed: OSError: refused; 0 checkpoints after the fill")
    r = recovery_costs({"note": "no worker was killed"})
    assert r["recovery_s"] is None and r["restore_total_ms"] is None
    assert r["note"] == "no worker was killed"


def test_unknown_stores_are_refused() -> None:
    with pytest.raises(SystemExit):
        main(["--stores", "file,ftp"])
