"""``examples/kafka_windowed_counts.py`` run as a user runs it, against the session's Kafka
broker, with a worker SIGKILLed mid-run: the job restarts, and its own check of the output
topic (read_committed: one record per user and window, the right count and sum) passes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kafka_windowed_counts.py"


def test_the_example_sums_windows_exactly_once_through_a_killed_worker(
    kafka_broker: Any,
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--bootstrap-servers",
            kafka_broker.bootstrap_servers,
            "--kill",
        ],
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
    verdict = re.search(
        r"windows: (\d+), duplicates: 0, missing: 0, wrong sums: 0 -> EXACTLY ONCE", done.stdout
    )
    assert verdict is not None, done.stdout[-2000:]
    assert int(verdict.group(1)) > 1000  # 100k events, 20 users, 1 s windows over 100 s
