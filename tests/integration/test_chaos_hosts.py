"""``cairn chaos --profile hosts`` on docs/chaos.md's worked example: the reference run
local, the faulted run on simulated hosts of its own (a Spark master, two worker hosts, a
storage host with S3, a driver host) under host faults and worker kills, and what the
FileSink committed equal to the reference.

One command, in this process (the reference on the session's local Spark); the example at
a bounded 1,500 orders paced at 50/s, so that the faulted run lasts long enough for its
host faults to land. The seed draws a storage outage and a worker of the job paused on its
host (and a worker kill and a pause at Cairn's fault points); the report must say that both
host faults landed and the pause resumed.

Needs root and iproute2 (``ip netns``); skipped with the reason elsewhere. The cluster is
the test's own (a free /24, its own namespaces), deleted when the command returns.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests._cli import cli_in_process
from tests.integration._chaos_hosts import EXAMPLE, HOSTS_MARKS

pytestmark = HOSTS_MARKS


def test_a_correct_job_commits_the_same_under_host_faults(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    argv = ["chaos", str(EXAMPLE), "--profile", "hosts", "--faults", "4", "--seed", "19"]
    argv += ["--work-dir", str(tmp_path), "--"]
    argv += ["--orders", "1500", "--rate", "50", "--out", str(tmp_path / "totals")]
    status = cli_in_process(argv)
    out = capsys.readouterr().out
    print(out)  # the report, in the test's log
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (1500 records) committed the same"), out
    assert "replay: cairn chaos" in out and "--seed=19 --profile=hosts" in out, out
    landed = re.findall(r"host fault (#h\d [^:]+).*: landed at \+[\d.]+ s, healed at", out)
    assert len(landed) >= 2, out
    # What the driver's log showed while each lasted (read from the cluster's driver host).
    assert len(re.findall(r"healed at \+[\d.]+ s; meanwhile .*checkpoint", out)) == len(landed)
    assert {
        "#h0 storage outage (the S3 server down) for 4.5 s",
        "#h1 a worker of the job paused (SIGSTOP, then SIGCONT)",
    } <= set(landed), out
    assert re.search(r"fired #1 pause subtask .*; resumed after [\d.]+ s", out), out
    assert not (tmp_path / "totals").exists(), "the user's path was written"
