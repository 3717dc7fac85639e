"""The fixed-delay restart strategy's delay is honoured, counted from the failure (the
attempt's teardown overlaps it, as Flink's backoff overlaps the cancellation of tasks)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream.functions import MapFunction
from tests.integration.jobs import environment


class FailOnce(MapFunction):
    """Raises in the first attempt (leaving the time in ``marker``); later attempts pass."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def open(self, runtime_context: Any) -> None:
        if os.path.exists(self.marker) and not os.path.exists(self.marker + ".restarted"):
            with open(self.marker + ".restarted", "w") as f:
                f.write(repr(time.time()))

    def map(self, value: int) -> int:
        if not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(repr(time.time()))
            raise RuntimeError("planned failure")
        return value


def test_a_restart_waits_the_fixed_delay_after_the_failure(
    inprocess_conf: dict[str, str], tmp_path: Path
) -> None:
    env = environment(inprocess_conf, parallelism=1)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 1500))
    marker = str(tmp_path / "failed")
    out = list(env.from_collection([1, 2, 3]).map(FailOnce(marker)).execute_and_collect())
    assert sorted(out) == [1, 2, 3]
    failed = float(Path(marker).read_text())
    restarted = float(Path(marker + ".restarted").read_text())
    assert 1.5 <= restarted - failed < 10.0, restarted - failed
