"""``examples/postgres_running_totals.py`` run as a user runs it, against the session's
PostgreSQL, with a worker SIGKILLed mid-run: it recovers and its own check of the table
(one row per record, per-key order, running totals) passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.spark]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "postgres_running_totals.py"


def test_the_example_writes_exactly_once_through_a_killed_worker(postgres: Any) -> None:
    args = ["--url", postgres.jdbc_url(), "--user", postgres.user, "--password", postgres.password]
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), *args, "--records", "200000", "--kill"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "killed a worker after checkpoint" in done.stdout
    assert "restarts: 1" in done.stdout
    assert (
        "rows: 200000, keys: 100, duplicates: 0, gaps: 0, wrong totals: 0 -> EXACTLY ONCE"
        in done.stdout
    )
