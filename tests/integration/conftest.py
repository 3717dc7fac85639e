"""Fixtures shared by the integration tests; plain helpers live in ``tests/integration/*.py``
modules without the ``test_`` prefix (``jobs.py`` builds jobs, ``waits.py`` waits on them).

- ``registry_dir``: this test's own job registry. ``TMPDIR`` (inherited by every process the
  test starts) and ``tempfile.tempdir`` point at ``tmp_path``, so the jobs, clients and CLI
  calls of the test see only its jobs; the value is the registry's directory
  (``<TMPDIR>/cairn-jobs-<uid>``). Modules whose every test needs it use
  ``pytestmark = pytest.mark.usefixtures("registry_dir")``.
- ``standalone_cluster``: the session's one Spark standalone cluster on 127.0.0.1 (master and
  two workers of one core each), started by the first test that asks for it and stopped at
  the end of the session; each test gets it idle (no application, no executor, both workers
  ALIVE), as a cluster of its own would be. Starting a cluster costs 15-45 s of both cores,
  which the four test modules that need one paid each. Such tests carry the ``cluster``
  marker.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from cairn.rest.registry import JobRegistry

if TYPE_CHECKING:
    from cairn.testing.spark_cluster import StandaloneCluster


@pytest.fixture
def registry_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The registry every job and client of the test uses (``<TMPDIR>/cairn-jobs-<uid>``)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return JobRegistry().directory


@pytest.fixture(scope="session")
def _session_cluster() -> Iterator[StandaloneCluster]:
    from cairn.testing.spark_cluster import StandaloneCluster

    with StandaloneCluster(workers=2, cores_per_worker=1, memory="1g") as running:
        print(f"[timing] standalone cluster start (2 workers ALIVE): {running.started_in:.1f} s")
        yield running
        processes = [*running.pids, *running.executor_pids()]
    assert not [pid for pid in processes if psutil.pid_exists(pid)], "cluster left processes"


@pytest.fixture
def standalone_cluster(_session_cluster: StandaloneCluster) -> StandaloneCluster:
    """The session's standalone cluster, once the previous test's application is gone."""
    _session_cluster.wait_idle()
    return _session_cluster
