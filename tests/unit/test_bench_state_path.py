"""``bench.state_path`` runs both backends on real state and refuses bad input."""

from __future__ import annotations

import pytest
from bench.state_path import measure


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_run_reports_cpu_per_record_and_the_synchronous_parts(backend: str) -> None:
    result = measure(backend, keys=300, records=2000, snapshot_every=500)
    assert result["backend"] == backend and result["records"] == 2000
    assert result["cpu_us_per_record"] > 0 and result["sync_p50_ms"] is not None


def test_an_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown backend 'memory'"):
        measure("memory", keys=10, records=10)
