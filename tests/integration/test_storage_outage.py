"""The checkpoint storage goes away while a job restarts and comes back: the job rides it out.

A worker of an exactly-once job with its checkpoints on real S3 (SeaweedFS) crashes (an
injected fault); while the job master waits out the restart delay, the S3 server is
SIGKILLed, so the job master cannot read the latest checkpoint to restore. That try is a
failed attempt for the restart strategy (it waits and tries again), not the end of the job;
once the server is back on the same data and port the job restores its latest completed
checkpoint and finishes with the failure-free output. (Found by the fault campaign,
``bench/RESULTS.md``: a storage outage between attempts failed a job for good.)"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cairn.common.job_status import JobStatus
from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream.checkpoint_storage import FileSystemCheckpointStorage
from cairn.testing.processes import wait_for
from cairn.testing.seaweedfs import SeaweedS3
from cairn.testing.sequence_jobs import check_sequence_lines, read_visible_lines
from tests.integration.jobs import expected_lines, sequence_job

pytestmark = [pytest.mark.s3, pytest.mark.slow]

RECORDS, KEYS = 30_000, 10
UNREADABLE = "could not choose the checkpoint to restore"


def test_an_outage_of_the_checkpoint_storage_between_attempts_is_ridden_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cairn.deploy.job_master")
    out = str(tmp_path / "out")
    with SeaweedS3(bucket="outage", root=str(tmp_path / "s3")) as s3:
        conf = {
            "cairn.executor": "inprocess",
            "cairn.testing.faults": "point=processing,attempt=0,records=6000,subtask=0",
            **s3.flink_config(),
        }
        env = sequence_job(conf, out, records=RECORDS, keys=KEYS, rate=6_000)
        # Few retries (botocore's): each read of the dead server fails in about a
        # second instead of backing off for 15-25 s; what happens then is the same.
        fast_fail = {"config_kwargs": {"retries": {"max_attempts": 2}}}
        storage = FileSystemCheckpointStorage(s3.url("chk"), storage_options=fast_fail)
        env.get_checkpoint_config().set_checkpoint_storage(storage)
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(20, 2_000))
        client = env.execute_async("storage-outage")
        master = client.job_master
        wait_for(
            lambda: master.status is JobStatus.RESTARTING,
            timeout=60,
            message="the injected crash and the restart delay",
        )
        s3.kill()  # within the 2 s delay; the files stay for restart(), on the same port
        wait_for(
            lambda: any(UNREADABLE in r.getMessage() for r in caplog.records),
            timeout=90,
            message="the job master failing to read the storage while choosing a restore point",
        )
        assert master.status is JobStatus.RESTARTING  # not FAILED: it waits to try again
        s3.restart()
        client.get_job_execution_result(timeout=180)
        stats = client.get_checkpoint_statistics()

    assert master.status is JobStatus.FINISHED, master.error
    lines = read_visible_lines(out)
    report = check_sequence_lines(lines)
    assert report.violations == [] and report.bad_sums == []
    assert sorted(lines) == expected_lines(RECORDS, KEYS)
    assert stats is not None and stats.counts.restored >= 1  # restored once S3 was back
