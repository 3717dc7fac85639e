"""A job run to its end in another Python process (the in-process executor, no Spark), which
then exits: what the job archive and the web UI show of a job whose driver is gone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration._readme import subprocess_env

__all__ = ["RECORDS", "run_elsewhere"]

RECORDS = 3_000

# argv: output directory, records, the record that fails the job (-1: none).
JOB_SCRIPT = """
import sys

from cairn.common import Configuration
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.serialization import Encoder
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.file_system import FileSink

out, records, fail_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def check(x):
    if x == fail_at:
        raise ValueError(f"record {x} is bad")
    return x


conf = Configuration()
conf.set_string("cairn.executor", "inprocess")
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.set_parallelism(2)
env.enable_checkpointing(100)
env.set_restart_strategy(RestartStrategies.no_restart())
(
    env.from_collection(list(range(records))).uid("numbers")
    .key_by(lambda x: x % 10)
    .map(check).uid("check")
    .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder()).build()).uid("sink")
)
client = env.execute_async("elsewhere-" + ("failing" if fail_at >= 0 else "job"))
try:
    client.get_job_execution_result(60)
except Exception:
    pass
print("job", client.get_job_id(), client.get_job_status().name, flush=True)
"""


def run_elsewhere(tmp_path: Path, fail_at: int) -> tuple[str, str]:
    """Run the job in another process to its end (files under ``tmp_path/elsewhere``); its
    id and final state."""
    work = tmp_path / "elsewhere"
    work.mkdir(exist_ok=True)
    (work / "job.py").write_text(JOB_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(work / "job.py"), str(work / "out"), str(RECORDS), str(fail_at)],
        env=subprocess_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    match = re.search(r"^job ([0-9a-f]{32}) (\w+)$", done.stdout, re.M)
    assert match, done.stdout + done.stderr
    return match.group(1), match.group(2)
