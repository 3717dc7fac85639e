"""Checkpoint storage on a real S3 server (SeaweedFS on 127.0.0.1): round trip, discard,
and the pre-flight check's clear errors for a missing bucket, a wrong key and an
unreachable endpoint. No Spark here; the job on S3 is in test_s3_exactly_once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from cairn.checkpoint.errors import CheckpointStorageUnusableError
from cairn.checkpoint.storage import CheckpointStorage
from cairn.checkpoint.storage_access import check_storage_access
from cairn.common import Configuration, Types, WatermarkStrategy
from cairn.common.storage_options import s3_storage_options
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.checkpoint_config import checkpoint_settings_from
from cairn.datastream.connectors.number_seq import NumberSequenceSource
from cairn.testing.seaweedfs import ADMIN, S3Identity, SeaweedS3
from cairn.testing.spark_cluster import free_port

pytestmark = [pytest.mark.s3, pytest.mark.slow]


def _options(server: SeaweedS3, identity: S3Identity | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = dict(server.flink_config(*(identity,) if identity else ()))
    conf["s3.path.style.access"] = True
    return s3_storage_options(conf)


def test_config_keys_become_storage_options_for_s3_urls_only(seaweed: SeaweedS3) -> None:
    conf = {**seaweed.flink_config(), "execution.checkpointing.dir": seaweed.url("x")}
    from cairn.common.config_options import validate_configuration

    settings = checkpoint_settings_from(validate_configuration(conf))
    assert settings.storage_options["client_kwargs"]["endpoint_url"] == seaweed.endpoint
    assert settings.storage_options["config_kwargs"]["s3"] == {"addressing_style": "path"}
    assert "secret" not in repr(settings)  # credentials stay out of logs
    local = checkpoint_settings_from(
        validate_configuration({**seaweed.flink_config(), "execution.checkpointing.dir": "/tmp/c"})
    )
    assert local.storage_options == {}


def test_checkpoint_files_round_trip_and_discard_on_s3(seaweed: SeaweedS3) -> None:
    storage = CheckpointStorage(seaweed.url("roundtrip"), "job-1", _options(seaweed))
    writer = storage.writer(7)
    rel = writer.write_state_file("keyed/op", b"0123456789")
    reader = storage.reader(writer.directory)
    assert reader.read_state_range(rel, 2, 5) == b"23456"
    fs = seaweed.filesystem()
    assert fs.ls("cairn/roundtrip/job-1/chk-7") == [f"cairn/roundtrip/job-1/chk-7/{rel}"]
    storage.discard(7)
    fs.invalidate_cache()
    assert not fs.exists("cairn/roundtrip/job-1/chk-7")


def test_preflight_accepts_a_usable_bucket_and_leaves_nothing_behind(seaweed: SeaweedS3) -> None:
    check_storage_access(seaweed.url("ok", "jobs"), _options(seaweed))
    fs = seaweed.filesystem()
    fs.invalidate_cache()
    assert [f for f in fs.find("cairn/ok") if ".cairn-probe" in f] == []


def test_preflight_names_a_missing_bucket_and_does_not_create_it(seaweed: SeaweedS3) -> None:
    # The admin identity may create buckets: the check must still refuse, not create one.
    with pytest.raises(CheckpointStorageUnusableError, match="bucket 'no-such-bucket' does not"):
        check_storage_access("s3://no-such-bucket/ckpt", _options(seaweed, ADMIN))
    assert not seaweed.filesystem(ADMIN).exists("no-such-bucket")


def test_preflight_names_wrong_credentials(seaweed: SeaweedS3) -> None:
    wrong = S3Identity(ADMIN.access_key, "not-the-secret")
    with pytest.raises(CheckpointStorageUnusableError, match=r"access denied.*s3\.secret-key"):
        check_storage_access(seaweed.url("ckpt"), _options(seaweed, wrong))


def test_preflight_fails_within_bounded_time_on_an_unreachable_endpoint() -> None:
    options = s3_storage_options(
        {
            "s3.endpoint": f"http://127.0.0.1:{free_port()}",
            "s3.access-key": "k",
            "s3.secret-key": "s",
            "s3.path.style.access": True,
        }
    )
    started = time.monotonic()
    with pytest.raises(CheckpointStorageUnusableError, match=r"cannot connect.*s3\.endpoint"):
        check_storage_access("s3://bucket/ckpt", options)
    assert time.monotonic() - started < 60, "retries must be bounded"


def test_job_with_wrong_s3_key_fails_at_submission(seaweed: SeaweedS3) -> None:
    conf = Configuration()
    for key, value in {
        **seaweed.flink_config(S3Identity(ADMIN.access_key, "wrong")),
        "execution.checkpointing.dir": seaweed.url("refused"),
        "cairn.executor": "inprocess",
    }.items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.enable_checkpointing(500)
    env.from_source(NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), "n").map(
        lambda x: x, Types.LONG()
    ).print()
    with pytest.raises(CheckpointStorageUnusableError, match="access denied"):
        env.execute("refused")


def test_a_second_server_starts_beside_the_sessions_one(seaweed: SeaweedS3) -> None:
    # Two test suites (or a test and a benchmark) on one machine: no fixed port may collide.
    with SeaweedS3(bucket="second") as other:
        assert other.endpoint != seaweed.endpoint
        fs = other.filesystem()
        fs.pipe("second/probe", b"x")
        assert fs.cat("second/probe") == b"x"
    fs = seaweed.filesystem()
    fs.pipe("cairn/still-serving", b"y")
    assert fs.cat("cairn/still-serving") == b"y"


def test_the_driver_sees_files_other_processes_wrote_after_it_last_looked(
    seaweed: SeaweedS3,
) -> None:
    """s3fs answers listings, ``exists`` and ``isdir`` from the first listing of a directory
    for as long as its instance lives: a driver that had listed the shared files once (a
    restore) then found the files its workers uploaded since "missing", declared its newest
    checkpoint unusable and failed the job (the fault campaign of 2026-12-06 05:30)."""
    from cairn.checkpoint.locations import resolve

    options = _options(seaweed)
    storage = CheckpointStorage(seaweed.url("listings"), "job-1", options)
    worker = seaweed.filesystem()  # another process's client: a cache of its own
    job = storage.job_dir.removeprefix("s3://")
    worker.pipe(f"{job}/shared/000010.sst-a", b"1")
    worker.pipe(f"{job}/chk-1/_metadata", b"1")
    assert storage.list_shared_files() == ["../shared/000010.sst-a"]
    here = resolve(storage.job_dir, options)
    assert here.fs.ls(here.path, detail=False)  # listed once: what a cache would keep
    worker.pipe(f"{job}/shared/000011.sst-b", b"2")
    worker.pipe(f"{job}/chk-2/_metadata", b"2")
    assert storage.list_shared_files() == ["../shared/000010.sst-a", "../shared/000011.sst-b"]
    again = resolve(storage.job_dir, options)
    assert again.fs.isdir(f"{again.path}/chk-2")
    assert again.fs.exists(f"{again.path}/chk-2/_metadata")
    assert {n.rsplit("/", 1)[-1] for n in again.fs.ls(again.path, detail=False)} >= {
        "chk-1",
        "chk-2",
        "shared",
    }
