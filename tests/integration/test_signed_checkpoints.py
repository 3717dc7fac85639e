"""Jobs with a checkpoint signing key: they sign what they write, restore what they signed
(after a cancellation, and after a worker crash on local Spark) with exactly-once output, and
refuse checkpoints signed with another key or not signed at all, naming the checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.inspection import list_checkpoints
from cairn.checkpoint.metadata import SignatureStatus
from cairn.common import JobExecutionException
from cairn.common.job_status import JobStatus
from cairn.deploy.job_master_client import JobClient
from cairn.settings import SigningKey
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.jobs import exactly_once_problems, expected_lines, sequence_job
from tests.integration.waits import completed_checkpoints

RECORDS, KEYS = 40_000, 8
KEY_OPTION = "cairn.checkpoint.signing-key"
KEY_TEXT = "integration-test-key-0123456789"
KEY = SigningKey.parse(KEY_TEXT)


def _conf(key: str | None, **extra: str) -> dict[str, str]:
    conf = {"cairn.executor": "inprocess", "execution.checkpointing.num-retained": "2", **extra}
    if key is not None:
        conf[KEY_OPTION] = key
    return conf


def _first_run(tmp_path: Path, key: str | None) -> tuple[Path, str]:
    """Run until two checkpoints completed, then cancel (checkpoints retained)."""
    out = str(tmp_path / "out")
    env = sequence_job(
        _conf(key),
        out,
        records=RECORDS,
        keys=KEYS,
        rate=10_000,
        interval_ms=100,
        checkpoint_dir=str(tmp_path / "chk"),
        retain=True,
    )
    client = env.execute_async("signed-first-run")
    completed_checkpoints(client, 2, timeout=30)
    client.cancel()
    client.get_job_execution_result(timeout=60)
    assert client.get_job_status() is JobStatus.CANCELED
    return tmp_path / "chk" / client.get_job_id(), out


def _second_run(tmp_path: Path, job_dir: Path, out: str, key: str | None) -> JobClient:
    conf = _conf(key, **{"execution.state-recovery.path": str(job_dir)})
    env = sequence_job(
        conf,
        out,
        records=RECORDS,
        keys=KEYS,
        rate=None,
        interval_ms=100,
        checkpoint_dir=str(tmp_path / "chk"),
        retain=True,
    )
    client = env.execute_async("signed-second-run")
    client.get_job_execution_result(timeout=120)
    return client


def _signed_headers(job_dir: Path) -> list[bool]:
    return [
        "body_hmac_sha256" in json.loads((chk / "_metadata").read_bytes().split(b"\n", 1)[0])
        for chk in sorted(job_dir.glob("chk-*"))
    ]


def test_signed_checkpoints_restore_exactly_once(tmp_path: Path) -> None:
    job_dir, out = _first_run(tmp_path, KEY_TEXT)
    assert _signed_headers(job_dir) == [True, True]
    rows = list_checkpoints(str(job_dir), key=KEY)
    assert [(r.ok, r.signature) for r in rows] == [(True, SignatureStatus.VERIFIED)] * 2
    client = _second_run(tmp_path, job_dir, out, KEY_TEXT)
    assert client.get_job_status() is JobStatus.FINISHED
    restored = client.get_checkpoint_statistics().snapshot().latest_restored
    assert restored is not None and int(restored.checkpoint_id) == max(
        r.checkpoint_id or 0 for r in rows
    )
    assert exactly_once_problems(read_visible_lines(out), RECORDS, KEYS) == []


@pytest.mark.parametrize(
    ("first_key", "second_key", "problem"),
    [
        (KEY_TEXT, "some-other-key-0123456789", "does not match the signing key"),
        (None, KEY_TEXT, "is not signed, but a signing key is set"),
    ],
    ids=["other-key", "unsigned"],
)
def test_a_checkpoint_the_job_cannot_verify_is_refused(
    tmp_path: Path, first_key: str | None, second_key: str, problem: str
) -> None:
    job_dir, out = _first_run(tmp_path, first_key)
    lines_before = sorted(read_visible_lines(out))
    with pytest.raises(JobExecutionException) as info:
        _second_run(tmp_path, job_dir, out, second_key)
    message = str(info.value)
    assert problem in message and str(job_dir) in message
    assert sorted(read_visible_lines(out)) == lines_before  # nothing ran


@pytest.mark.spark
def test_signed_checkpoint_restores_after_a_worker_crash_on_spark(
    spark: Any, tmp_path: Path
) -> None:
    out = str(tmp_path / "out")
    conf = {
        "cairn.executor": "spark",
        KEY_OPTION: KEY_TEXT,
        "cairn.testing.faults": "point=processing,attempt=0,records=12000,subtask=1",
    }
    env = sequence_job(
        conf,
        out,
        records=RECORDS,
        keys=KEYS,
        rate=20_000,
        interval_ms=200,
        checkpoint_dir=str(tmp_path / "chk"),
    )
    client = env.execute_async("signed-spark")
    client.get_job_execution_result(timeout=240)
    assert client.job_master.restarts == 1
    restored = client.get_checkpoint_statistics().snapshot().latest_restored
    assert restored is not None, "the attempt after the crash must restore a checkpoint"
    # Under a key only a verified checkpoint is restored (master and worker check it).
    assert sorted(read_visible_lines(out)) == expected_lines(RECORDS, KEYS)
