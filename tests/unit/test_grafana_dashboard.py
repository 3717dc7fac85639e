"""``docs/grafana-dashboard.json`` queries only metrics the Prometheus collector exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cairn.observability.metrics import JOB_METRICS, SUBTASK_METRICS
from cairn.observability.prometheus import JOB_PREFIX, TASK_PREFIX

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"


def test_every_query_names_an_exported_metric() -> None:
    exported = {TASK_PREFIX + n for n in SUBTASK_METRICS} | {JOB_PREFIX + n for n in JOB_METRICS}
    dashboard = json.loads(DASHBOARD.read_text())
    queried = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            queried |= set(re.findall(r"cairn_\w+", target["expr"]))
    assert queried and queried <= exported, queried - exported
    assert {TASK_PREFIX + "backPressuredTimeMsPerSecond", JOB_PREFIX + "numRestarts"} <= queried
