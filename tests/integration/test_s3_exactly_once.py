"""A job on real local Spark with its checkpoints on a real S3 server (SeaweedFS): workers
SIGKILLed while processing and during the asynchronous upload to S3, and the committed output
compared with the failure-free output; the retained checkpoints listed from S3 by the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from cairn.testing.processes import wait_for
from cairn.testing.seaweedfs import SeaweedS3
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from tests.integration._readme import (
    CHECKPOINTS_S3,
    cairn_argv,
    readme_line,
    subprocess_env,
)
from tests.integration.jobs import expected_lines, sequence_job

RECORDS, KEYS = 60_000, 10

pytestmark = [pytest.mark.s3, pytest.mark.slow]


@pytest.mark.spark
@pytest.mark.parametrize("unaligned", [False, True], ids=["aligned", "unaligned"])
def test_sigkill_with_checkpoints_on_s3_keeps_exactly_once(
    spark: Any, seaweed: SeaweedS3, tmp_path: Any, unaligned: bool
) -> None:
    out = str(tmp_path / "out")
    storage = seaweed.url("eo", "unaligned" if unaligned else "aligned")
    conf = {
        "cairn.executor": "spark",
        "execution.checkpointing.dir": storage,
        "execution.checkpointing.unaligned.enabled": str(unaligned).lower(),
        **seaweed.flink_config(),
        "cairn.testing.faults": (
            "point=processing,attempt=0,records=15000,subtask=1;"
            "point=during-upload,attempt=1,subtask=0"
        ),
    }
    env = sequence_job(conf, out, records=RECORDS, keys=KEYS, retain=True)
    client = env.execute_async("exactly-once-on-s3")
    client.get_job_execution_result(timeout=240)
    master = client.job_master
    assert master.restarts == 2, "both scheduled kills must have happened"
    lines = read_visible_lines(out)
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
    assert sorted(lines) == expected_lines(RECORDS, KEYS)

    # The checkpoints were really on S3 (and restored from there: two restarts).
    stats = client.get_checkpoint_statistics()
    assert stats is not None and stats.counts.completed >= 1
    assert stats.latest_completed is not None
    assert stats.latest_completed.path.startswith(storage + "/" + master.job_id + "/chk-")


def test_cli_lists_retained_checkpoints_on_s3(seaweed: SeaweedS3, tmp_path: Any) -> None:
    """A cancelled job keeps its checkpoints (RETAIN_ON_CANCELLATION); the CLI lists them
    from S3 with the storage keys given as -D options."""
    storage = seaweed.url("retained")
    conf = {
        "cairn.executor": "inprocess",
        "execution.checkpointing.dir": storage,
        **seaweed.flink_config(),
    }
    env = sequence_job(
        conf, str(tmp_path / "out"), records=10_000_000, keys=KEYS, rate=20_000, retain=True
    )
    client = env.execute_async("retained-on-s3")
    master = client.job_master
    wait_for(
        lambda: (master.coordinator.latest_completed_id() or 0) >= 2,
        120,
        0.05,
        "two completed checkpoints",
    )
    client.cancel()
    with contextlib.suppress(Exception):
        client.get_job_execution_result(timeout=60)
    job_dir = f"{storage}/{master.job_id}"
    on_s3 = [
        p for p in seaweed.filesystem().find(job_dir[len("s3://") :]) if p.endswith("/_metadata")
    ]
    assert on_s3, f"no retained checkpoint under {job_dir}"
    # The README's line, as written, with this server's endpoint and bucket; credentials
    # from the AWS_* variables as the README says.
    user = seaweed.flink_config()
    cli = subprocess.run(
        [
            *cairn_argv(
                readme_line(CHECKPOINTS_S3),
                **{
                    "s3://my-bucket/checkpoints": storage,
                    "http://127.0.0.1:8333": seaweed.endpoint,
                },
            ),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **subprocess_env(tmp_path),
            "AWS_ACCESS_KEY_ID": user["s3.access-key"],
            "AWS_SECRET_ACCESS_KEY": user["s3.secret-key"],
        },
    )
    assert cli.returncode == 0, cli.stderr
    listed = [c for c in json.loads(cli.stdout) if c["job_id"] == master.job_id]
    ids_on_s3 = {int(p.split("/chk-")[1].split("/")[0]) for p in on_s3}
    assert {c["id"] for c in listed if c["usable"]} == ids_on_s3
    without_keys = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "checkpoints", job_dir],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
    )
    assert without_keys.returncode != 0
    assert len(without_keys.stderr.strip().splitlines()) == 1, without_keys.stderr
