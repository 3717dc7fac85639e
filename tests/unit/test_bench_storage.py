"""The benchmarks' checkpoint storage choice and the recovery workload's kill rule (pure
functions; the end-to-end run on SeaweedFS is tests/integration/test_bench_s3.py)."""

from __future__ import annotations

import doctest
import importlib

import pytest
from bench.jobs import CairnOptions, bench_environment
from bench.state_workloads import kill_due
from bench.storage import bench_storage, checkpoint_url, fs_options
from bench.workloads import main


@pytest.mark.parametrize("name", ["bench.storage", "bench.state_workloads", "bench.jobs"])
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_s3_checkpoints_of_two_runs_never_share_a_prefix() -> None:
    a = checkpoint_url("s3://bench", "/tmp/cairn-bench-recovery-a/checkpoints")
    b = checkpoint_url("s3://bench/", "/tmp/cairn-bench-recovery-b/checkpoints")
    assert a == "s3://bench/tmp/cairn-bench-recovery-a/checkpoints"
    assert not b.startswith(a) and b.startswith("s3://bench/tmp/")


def test_the_s3_keys_reach_the_filesystem_options_only_for_s3_urls() -> None:
    conf = {
        "s3.endpoint": "http://127.0.0.1:1",
        "s3.access-key": "k",
        "s3.secret-key": "s",
        "s3.path.style.access": "true",
    }
    opts = fs_options("s3://bench/x", conf)
    assert (opts["key"], opts["secret"]) == ("k", "s")
    assert opts["config_kwargs"]["s3"] == {"addressing_style": "path"}
    assert fs_options("file:///tmp/x", conf) == {}


def test_the_environment_points_checkpoints_and_s3_keys_at_the_storage() -> None:
    opts = CairnOptions(
        executor="inprocess",
        storage="s3",
        storage_root="s3://bench",
        storage_config=(("s3.endpoint", "http://127.0.0.1:1"), ("s3.path.style.access", "true")),
    )
    env = bench_environment(opts, 1000, "/tmp/run/checkpoints")
    storage = env.get_checkpoint_config().get_checkpoint_storage()
    assert storage.get_checkpoint_path() == "s3://bench/tmp/run/checkpoints"
    local = bench_environment(CairnOptions(executor="inprocess"), 1000, "/tmp/run/checkpoints")
    assert local.get_checkpoint_config().get_checkpoint_storage().get_checkpoint_path() == (
        "file:///tmp/run/checkpoints"
    )


def test_recovery_kills_only_with_every_key_in_two_checkpoints() -> None:
    # 10M keys, 14M records: 40 % of the input is emitted before the state is full.
    assert not kill_due(5_600_000, 14_000_000, 10_000_000, 0.4, 5)
    assert not kill_due(10_000_000, 14_000_000, 10_000_000, 0.4, 1)
    assert kill_due(10_000_000, 14_000_000, 10_000_000, 0.4, 2)
    # Small state: the input fraction decides.
    assert not kill_due(30_000, 120_000, 1_000, 0.4, 9)
    assert kill_due(48_000, 120_000, 1_000, 0.4, 2)


def test_an_unknown_storage_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown storage 'ftp'"), bench_storage("ftp", "/tmp"):
        pass
    with pytest.raises(SystemExit):
        main(["--workload", "keyed-sum", "--records", "10", "--storage", "ftp"])
