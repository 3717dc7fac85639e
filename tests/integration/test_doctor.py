"""``cairn doctor`` on a real job (in-process executor, no Spark): README's line against the
skew demo's aligned job (seed 000) while it runs gets the unaligned/timeout advice through
the job's endpoint (``GET /jobs/:jobid/doctor``); a target that is neither a job nor a
checkpoint directory is one line; ``cairn list --web`` prints the job's web UI link."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cairn.common import Configuration
from cairn.common.job_status import JobStatus
from cairn.datastream import StreamExecutionEnvironment
from cairn.experiments.skew.experiment import build_skew_job, configure_variant
from cairn.rest.registry import JobRegistry
from cairn.testing.processes import wait_for
from tests.integration._readme import cairn_argv, readme_line, subprocess_env

pytestmark = pytest.mark.usefixtures("registry_dir")

DOCTOR_JOB = "cairn doctor <job-id>"
LIST_WEB = "cairn list --web"


def doctor(tmp_path: Path, job_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = cairn_argv(readme_line(DOCTOR_JOB), **{"<job-id>": job_id}) + list(extra)
    return subprocess.run(
        argv, env=subprocess_env(tmp_path), capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_the_skew_demos_aligned_job_is_told_to_go_unaligned(tmp_path: Path) -> None:
    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(2_000)
    config = env.get_checkpoint_config()
    config.set_checkpoint_timeout(60_000)
    config.set_tolerable_checkpoint_failure_number(1_000)
    config.set_checkpoint_storage("file://" + str(tmp_path / "chk"))
    configure_variant(env, "aligned", 1_000)
    build_skew_job(env)
    client = env.execute_async("doctor-test")
    try:
        assert client.wait_for_status(JobStatus.RUNNING, 60)
        jid = client.get_job_id()
        bodies: list[Any] = []

        def alignment_dominates() -> dict[str, Any] | None:
            done = doctor(tmp_path, jid, "--json")
            assert done.returncode == 0, done.stderr
            bodies.append(json.loads(done.stdout))
            rules = {f["rule"]: f for f in bodies[-1]["findings"]}
            return rules if "alignment-dominates" in rules else None

        rules = wait_for(
            alignment_dominates,
            150,
            1.0,
            lambda: f"the alignment-dominates finding; the doctor said last {bodies[-1]}",
        )
        finding = rules["alignment-dominates"]
        assert finding["keys"][0] == "execution.checkpointing.unaligned.enabled: true"
        assert finding["keys"][1].startswith("execution.checkpointing.aligned-checkpoint-timeout")
        assert finding["figures"]["most backpressured"].startswith("skewed source")
        text = doctor(tmp_path, jid).stdout
        assert f"for job {jid}" in text and "[alignment-dominates]" in text, text
        listing = subprocess.run(
            cairn_argv(readme_line(LIST_WEB)),
            env=subprocess_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        entry = JobRegistry().find(jid)
        assert entry is not None
        link = f"    web UI: {entry.endpoint}/web/index.html#token={entry.token}"
        assert link in listing.splitlines(), listing
    finally:
        client.cancel()
        client.get_job_execution_result(60)


def test_neither_a_job_nor_a_directory_is_one_line(tmp_path: Path) -> None:
    done = doctor(tmp_path, "no-such-job")
    assert done.returncode != 0
    assert "neither a running job of this machine" in done.stderr
    assert "Traceback" not in done.stderr
