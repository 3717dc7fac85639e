"""The Python examples of seed 002 (Flink checkpointing notes) run on Cairn unchanged except for
``pyflink`` -> ``cairn``, the local storage paths, and the names the seed forgets to import.
The seed's ``hdfs://namenode:9000/flink/checkpoints`` stays as written: a job on a simulated
host checkpoints there to a real HDFS whose NameNode runs on a host named ``namenode``
(network namespaces; needs root, so skipped elsewhere, except in CI).

The code blocks are read from the seed file at test time, so the test follows the seed. The
seeds live in ``../shared/seeds`` next to the repository; without them these tests skip, except
in CI (``CI`` set), where a missing seed fails them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from cairn.common import CheckpointingMode
from cairn.datastream import ExternalizedCheckpointRetention, StreamExecutionEnvironment
from cairn.settings import RetentionPolicy

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED = REPO_ROOT.parent / "shared" / "seeds" / "002_1005b3d480e655f1.txt"

# What the seed's snippets use without importing it (they are excerpts of one program).
PRELUDE = """
from cairn.common import Types
from cairn.datastream import ExternalizedCheckpointCleanup, KeyedProcessFunction
from cairn.datastream.state import ValueStateDescriptor
"""


def _seed_text(seed: Path = SEED, environ: Mapping[str, str] = os.environ) -> str:
    """The seed's text; a missing seed skips the test, or fails it in CI."""
    if not seed.exists():
        message = f"seed file {seed} (../shared/seeds next to the repository) is missing"
        if environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return seed.read_text(encoding="utf-8")


def _python_blocks() -> list[str]:
    text = _seed_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    return [block.replace("pyflink", "cairn") for block in blocks]


def test_a_missing_seed_skips_but_fails_in_ci(tmp_path: Path) -> None:
    missing = tmp_path / "seeds" / "002.txt"
    with pytest.raises(pytest.fail.Exception, match=r"002\.txt .* is missing"):
        _seed_text(missing, {"CI": "true"})
    for environ in ({}, {"CI": ""}, {"CI": "false"}):
        with pytest.raises(pytest.skip.Exception, match="is missing"):
            _seed_text(missing, environ)
    assert "```python" in _seed_text()  # found relative to the repository


def _block(*markers: str) -> str:
    """The one Python block of the seed that contains every marker."""
    found = [b for b in _python_blocks() if all(m in b for m in markers)]
    assert len(found) == 1, f"expected one seed block with {markers}, found {len(found)}"
    return found[0]


def _run(code: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(compile(code, str(SEED), "exec"), namespace)
    return namespace


def _namespace() -> dict[str, Any]:
    # A module name that cannot be imported: the Spark executor must ship the class by value.
    return _run(PRELUDE, {"__name__": "seed_002"})


def _with_storage(code: str, seed_path: str, storage: Path) -> str:
    assert seed_path in code, f"{seed_path} is no longer in the seed block"
    return code.replace(seed_path, storage.as_uri())


def _assert_seed_config(env: StreamExecutionEnvironment, storage: Path | str) -> None:
    config = env.get_checkpoint_config()
    assert config.get_checkpoint_interval() == 60000
    assert config.get_checkpointing_mode() is CheckpointingMode.EXACTLY_ONCE
    assert config.get_min_pause_between_checkpoints() == 30000
    assert config.get_checkpoint_timeout() == 120000
    assert config.get_max_concurrent_checkpoints() == 1
    assert (
        config.get_externalized_checkpoint_retention()
        is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    settings = config.to_settings()  # what the job master will run with
    assert (settings.interval_ms, settings.min_pause_ms, settings.timeout_ms) == (
        60000,
        30000,
        120000,
    )
    assert settings.max_concurrent == 1
    assert settings.retention is RetentionPolicy.RETAIN_ON_CANCELLATION
    assert settings.storage_url is not None
    assert settings.storage_url.rstrip("/").endswith(str(storage))


def test_full_configuration_block_sets_the_intended_checkpoint_config(tmp_path: Path) -> None:
    code = _with_storage(
        _block("config.set_checkpoint_storage", "enable_checkpointing"),
        "file:///tmp/flink_checkpoints",
        tmp_path,
    )
    _assert_seed_config(_run(code, _namespace())["env"], tmp_path)


def test_step_by_step_blocks_build_the_same_config() -> None:
    """Sections 4-1, 4-2 and 4-3 run one after the other, as a reader would paste them."""
    namespace = _namespace()
    _run(_block("env.enable_checkpointing(60000)  #"), namespace)
    _run(_block("hdfs://"), namespace)  # verbatim: configuring touches no storage
    _run(_block("config.set_min_pause_between_checkpoints(30000)  #"), namespace)
    _assert_seed_config(namespace["env"], "hdfs://namenode:9000/flink/checkpoints")


def _magnitude(value: int) -> str:
    """Key of a number and of every running sum of its key (the key ranges never overlap)."""
    return "k0" if value < 1_000 else "k1" if value < 1_000_000 else "k2"


def _prefix_sums_per_key(values: list[int], key: Callable[[int], str]) -> dict[str, list[int]]:
    sums: dict[str, list[int]] = {}
    for value in values:
        previous = sums.setdefault(key(value), [])
        previous.append((previous[-1] if previous else 0) + value)
    return sums


# Section 4-4's Java line, ``env.setStateBackend(new EmbeddedRocksDBStateBackend(true))``,
# in Python: the same job on the RocksDB backend with incremental checkpoints.
ROCKSDB_LINE = (
    "from cairn.datastream import EmbeddedRocksDBStateBackend\n"
    "env.set_state_backend(EmbeddedRocksDBStateBackend(True))\n"
)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_keyed_sum_function_gives_per_key_prefix_sums(
    executor_conf: dict[str, str], tmp_path: Path, backend: str
) -> None:
    namespace = _namespace()
    _run(_block("class KeyedSumFunction"), namespace)
    config_block = _block("config.set_checkpoint_storage", "enable_checkpointing")
    _run(_with_storage(config_block, "file:///tmp/flink_checkpoints", tmp_path), namespace)
    if backend == "rocksdb":
        assert "EmbeddedRocksDBStateBackend(true)" in SEED.read_text(encoding="utf-8")
        _run(ROCKSDB_LINE, namespace)
    env: StreamExecutionEnvironment = namespace["env"]
    env.configure(executor_conf)
    env.set_parallelism(2)
    # 30 numbers per key; k0 sums stay below 1000 and k1 sums below 10**6.
    values = [(i % 9 + 1) * 1000 ** (i % 3) for i in range(90)]

    stream = env.from_collection(values).key_by(_magnitude)
    with stream.process(namespace["KeyedSumFunction"]()).execute_and_collect("seed-002") as out:
        results = list(out)

    expected = _prefix_sums_per_key(values, _magnitude)
    assert expected.keys() == {"k0", "k1", "k2"}
    per_key: dict[str, list[int]] = {}
    for total in results:
        per_key.setdefault(_magnitude(total), []).append(total)
    assert per_key == expected  # per key: exactly the running sums, in input order
    assert env.get_state_backend().to_configuration()["state.backend.type"] == backend
    # A finished job discards its checkpoints even with RETAIN_ON_CANCELLATION (Flink rule).
    assert not list(tmp_path.rglob("_metadata"))


# -- the seed's HDFS line verbatim, on a simulated host named ``namenode`` ------------------

# Run on the driver host: the seed's blocks as a reader pastes them (4-1, 4-2 with its
# hdfs://namenode:9000 line untouched, 4-3), a shorter interval so that a short job
# checkpoints, and the keyed sum job; a JSON file beside the script says what the job saw
# (written, not printed: the log interleaves stdout with Spark's stderr).
SEED_ON_HOSTS_TAIL = """
import json
env.enable_checkpointing(300)  # the seed's 60 s would outlast this short job
env.get_checkpoint_config().set_min_pause_between_checkpoints(0)
env.configure({"cairn.executor": "spark"})
env.set_parallelism(2)

def _magnitude(value):
    return "k0" if value < 1_000 else "k1" if value < 1_000_000 else "k2"

values = [(i % 9 + 1) * 1000 ** (i % 3) for i in range(90)]
sums = env.from_collection(values).key_by(_magnitude).process(KeyedSumFunction())
with sums.execute_and_collect("seed-002-on-hdfs") as out:  # the final checkpoint always runs
    results = list(out)
    stats = out.job_client.get_checkpoint_statistics()
storage = env.get_checkpoint_config().to_settings().storage_url
latest = stats.latest_completed
report = {"storage": storage, "results": results, "values": values,
          "completed": stats.counts.completed, "latest": latest and latest.path}
with open(__file__[: -len(".py")] + ".json", "w") as f:  # not stdout: stderr shares the log
    json.dump(report, f)
"""


def _netns_unavailable(environ: Mapping[str, str] = os.environ) -> None:
    """Skip when simulated hosts cannot be made (not root, no iproute2), fail in CI."""
    from cairn.testing.hosts import netns_unavailable

    reason = netns_unavailable()
    if reason is None:
        return
    if environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.mark.multihost
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.hdfs
@pytest.mark.timeout(300)
def test_the_seeds_hdfs_line_checkpoints_to_a_host_named_namenode() -> None:
    """The NameNode (a MiniDFSCluster, two DataNodes) on host ``namenode``, port 9000; the
    seed's job on host ``driver`` (local Spark) with its storage line unchanged: its checkpoints
    complete on that HDFS (at least the final one, so no timing decides it), and the job's
    output is the per-key running sums."""
    import json
    import sys

    from cairn.testing.hdfs import HdfsCluster
    from cairn.testing.hosts import HostNetwork
    from cairn.testing.netns_cluster import python_env

    _netns_unavailable()
    seed_line = "hdfs://namenode:9000/flink/checkpoints"
    program = "\n".join(
        [
            PRELUDE,
            _block("class KeyedSumFunction"),
            _block("env.enable_checkpointing(60000)  #"),
            _block("hdfs://"),  # verbatim
            _block("config.set_min_pause_between_checkpoints(30000)  #"),
            SEED_ON_HOSTS_TAIL,
        ]
    )
    assert f'set_checkpoint_storage("{seed_line}")' in program
    with HostNetwork() as network:
        namenode, driver = network.add_host("namenode"), network.add_host("driver")
        launcher = ["ip", "netns", "exec", namenode.netns]
        with HdfsCluster(datanodes=2, port=9000, host=namenode.address, launcher=launcher) as hdfs:
            script = driver.dir / "seed_002.py"
            script.write_text(program)
            job = driver.popen(
                [sys.executable, str(script)], name="seed", env=driver.env(python_env())
            )
            assert job.wait(timeout=240) == 0, (driver.dir / "seed.log").read_text()[-4000:]
            written = script.with_suffix(".json").read_text()  # the job's report
            # The job made the seed's directory on this HDFS; a finished job's checkpoints
            # are discarded (Flink), so it is empty now (ls raises if it was never made).
            left = hdfs.filesystem().ls("/flink/checkpoints", detail=False)
    report = json.loads(written)
    assert report["storage"].rstrip("/") == seed_line
    assert report["completed"] >= 1, report  # at least the final checkpoint
    assert report["latest"].startswith(seed_line + "/"), report["latest"]
    assert left == [], left
    per_key: dict[str, list[int]] = {}
    for total in report["results"]:
        per_key.setdefault(_magnitude(total), []).append(total)
    assert per_key == _prefix_sums_per_key(report["values"], _magnitude)
