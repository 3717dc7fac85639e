"""The ``cairn`` command lines README.md and docs/*.md show, and running them as written:
``readme_line`` checks a line is still shown, ``cairn_argv`` turns it into a subprocess's argv
(placeholders substituted), ``subprocess_env`` gives that subprocess the cairn under test.

``COMMANDS`` is every line shown; ``test_readme_commands.py`` fails when a page shows a line
not in it or it holds a line no page shows, and runs each line (or names the test that does).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import cairn

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"

RUN_LOCAL = "cairn run -p 2 job.py"
RUN_CLUSTER = "cairn run --master spark://host:7077 job.py"
# tests/integration/test_yarn.py runs `cairn run --master yarn` on Hadoop's MiniYARNCluster.
RUN_YARN = "cairn run --master yarn -p 4 -D spark.executor.memory=2g job.py"
RUN_RESUME = "cairn run --from-checkpoint /tmp/cairn-checkpoints/<job-id>/chk-12 job.py"
RUN_INPROCESS = "cairn run --executor inprocess job.py"
CHECKPOINTS_ROOT = "cairn checkpoints /tmp/cairn-checkpoints"
CHECKPOINTS_JOB = "cairn checkpoints /tmp/cairn-checkpoints/<job-id>"
CHECKPOINTS_ID = "cairn checkpoints /tmp/cairn-checkpoints/<job-id> --id 12"
CHECKPOINTS_JSON = "cairn checkpoints /tmp/cairn-checkpoints --details --json"
CHECKPOINTS_S3 = (
    "cairn checkpoints s3://my-bucket/checkpoints -D s3.endpoint=http://127.0.0.1:8333 "
    "-D s3.path.style.access=true"
)  # run by tests/integration/test_s3_exactly_once.py against SeaweedFS
CHECKPOINTS_GCS = (
    "cairn checkpoints gs://my-bucket/checkpoints -D gs.storage.root.url=http://127.0.0.1:4443 "
    "-D gs.auth.type=UNAUTHENTICATED"
)  # run by tests/integration/test_object_stores.py against fake-gcs-server
CHECKPOINTS_AZURE = (
    "cairn checkpoints abfs://checkpoints@devstoreaccount1.dfs.core.windows.net/jobs "
    "-D fs.azure.blob.endpoint=http://127.0.0.1:10000/devstoreaccount1 "
    "-D fs.azure.account.key.devstoreaccount1.blob.core.windows.net=$ACCOUNT_KEY"
)  # run by tests/integration/test_object_stores.py against Azurite
# Run by tests/integration/test_hdfs_exactly_once.py against Hadoop's MiniDFSCluster.
CHECKPOINTS_HDFS = "cairn checkpoints hdfs://namenode:9000/flink/checkpoints"
# Run by tests/integration/test_savepoints.py against a job of its own.
LIST = "cairn list"
LIST_WEB = "cairn list --web"  # run by tests/integration/test_doctor.py
LIST_ALL = "cairn list --all"  # run by tests/integration/test_job_archive.py
SAVEPOINT = "cairn savepoint <job-id> /tmp/savepoints/before-upgrade"
STOP = "cairn stop --savepoint-path /tmp/savepoints/v1 <job-id>"
STOP_DRAIN = "cairn stop --drain --savepoint-path /tmp/savepoints/final <job-id>"
RUN_SAVEPOINT = "cairn run -p 3 -s /tmp/savepoints/v1 job.py"
CANCEL = "cairn cancel <job-id>"
DISPOSE = "cairn savepoint --dispose /tmp/savepoints/before-upgrade"
DOCTOR_JOB = "cairn doctor <job-id>"  # run by tests/integration/test_doctor.py
DOCTOR_DIR = "cairn doctor /tmp/cairn-checkpoints/<job-id>"
DEMO = "cairn demo"
# Run by tests/integration/test_state_processor_rocksdb.py against a running job.
STATE_LIST = "cairn state /tmp/cairn-checkpoints/<job-id>"
STATE_SQL = (
    "cairn state /tmp/cairn-checkpoints/<job-id> --uid keyed-sum --state sum "
    '--sql "SELECT count(*) AS keys, sum(value) AS total FROM state"'
)
SQL_SCRIPT = "cairn sql -f job.sql -p 2"
# Run by tests/unit/test_lake_compaction.py on tables of its own.
TABLE_OPTIMIZE_DELTA = "cairn table optimize /data/lake/words"
TABLE_OPTIMIZE_ICEBERG = (
    "cairn table optimize shop.orders -D uri=sqlite:////data/catalog.db "
    "-D warehouse=file:///data/wh"
)
DOCTOR_TABLE = "cairn doctor --table /data/lake/words"
DEMO_SKEW_SHORT = "cairn demo skew --seconds 20 --variants aligned,unaligned"
# Run by tests/integration/test_chaos_cli.py (docs/chaos.md's worked example).
CHAOS = "cairn chaos examples/chaos_orders.py --seed=7"
CHAOS_RANDOM_KEY = "cairn chaos examples/chaos_orders.py --seed=7 -- --bug random-key"
CHAOS_PAUSES = "cairn chaos examples/chaos_orders.py --seed=15"
CHAOS_RESCALE = "cairn chaos examples/chaos_orders.py --seed=7 --rescale -- --bug operator-state"
CHAOS_SIDE_EFFECT = (
    "cairn chaos examples/chaos_orders.py --seed=7 --compare /tmp/alerts.log "
    "-- --bug side-effect --alerts /tmp/alerts.log"
)
# Run by tests/integration/test_chaos_cli.py (the first two, on Spark) and by
# tests/unit/test_chaos_upgrade.py (the last two, in-process): docs/chaos.md's upgrades.
CHAOS_UPGRADE = (
    "cairn chaos examples/chaos_orders.py --seed=7 --upgrade examples/chaos_orders_v2.py"
)
# Run by tests/integration/test_chaos_driver_kills.py (in-process workers: a Spark driver's
# cold start per life would take a minute): docs/chaos.md's driver kills.
CHAOS_DRIVER_KILLS = "cairn chaos examples/chaos_orders.py --seed=7 --driver-kills=2"
CHAOS_DRIVER_KILLS_RESCALE = (
    "cairn chaos examples/chaos_orders.py --seed=7 --driver-kills=1 --rescale"
)
CHAOS_UPGRADE_UID = f"{CHAOS_UPGRADE} -- --change uid"
CHAOS_UPGRADE_STATE_NAME = f"{CHAOS_UPGRADE} -- --change state-name"
CHAOS_UPGRADE_STATE_TYPE = f"{CHAOS_UPGRADE} -- --change state-type"
COMMANDS = frozenset(
    {
        CHAOS_PAUSES,
        RUN_LOCAL,
        RUN_CLUSTER,
        RUN_YARN,
        RUN_RESUME,
        RUN_INPROCESS,
        CHECKPOINTS_ROOT,
        CHECKPOINTS_JOB,
        CHECKPOINTS_ID,
        CHECKPOINTS_JSON,
        CHECKPOINTS_S3,
        CHECKPOINTS_GCS,
        CHECKPOINTS_AZURE,
        CHECKPOINTS_HDFS,
        LIST,
        LIST_WEB,
        LIST_ALL,
        SAVEPOINT,
        STOP,
        STOP_DRAIN,
        RUN_SAVEPOINT,
        CANCEL,
        DISPOSE,
        DOCTOR_JOB,
        DOCTOR_DIR,
        DEMO,
        DEMO_SKEW_SHORT,
        CHAOS,
        CHAOS_RANDOM_KEY,
        CHAOS_RESCALE,
        CHAOS_SIDE_EFFECT,
        CHAOS_UPGRADE,
        CHAOS_UPGRADE_UID,
        CHAOS_UPGRADE_STATE_NAME,
        CHAOS_UPGRADE_STATE_TYPE,
        CHAOS_DRIVER_KILLS_RESCALE,
        CHAOS_DRIVER_KILLS,
        SQL_SCRIPT,
        STATE_LIST,
        STATE_SQL,
        TABLE_OPTIMIZE_DELTA,
        TABLE_OPTIMIZE_ICEBERG,
        DOCTOR_TABLE,
    }
)


def documentation() -> list[Path]:
    """The pages a user reads: README.md, then docs/*.md by name."""
    return [README, *sorted(DOCS.glob("*.md"))]


def readme_commands() -> list[str]:
    """``cairn ...`` lines of the ```bash blocks of README.md and docs/*.md, without their
    ``# comment``."""
    blocks = [
        block
        for page in documentation()
        for block in re.findall(r"^```bash\n(.*?)^```", page.read_text(), re.S | re.M)
    ]
    return [
        re.sub(r"\s+#.*$", "", line).strip()
        for block in blocks
        for line in block.splitlines()
        if line.startswith("cairn ")
    ]


def readme_job() -> str:
    """The (first) ```python block of the section ``## A job``."""
    _, heading, rest = README.read_text().partition("\n## A job\n")
    section = re.split(r"^## ", rest, maxsplit=1, flags=re.M)[0]
    match = re.search(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert heading and match, "README.md has no ```python block under '## A job'"
    return match.group(1)


def readme_line(line: str) -> str:
    """``line``, once checked that README.md or a page of docs/ still shows it."""
    assert line in readme_commands(), f"neither README.md nor docs/*.md shows {line!r}"
    return line


def cairn_argv(line: str, **placeholders: str) -> list[str]:
    """The README line with its placeholders substituted, as an argv for a subprocess."""
    for placeholder, value in placeholders.items():
        line = line.replace(placeholder, value)
    argv = shlex.split(line)
    assert argv[0] == "cairn"
    script = Path(sys.executable).with_name("cairn")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "cairn.cli.main"]
    return [*command, *argv[1:]]


def subprocess_env(tmp: Path) -> dict[str, str]:
    """This environment, with the cairn under test first on the path; temp files in ``tmp``."""
    env = dict(os.environ)
    src = str(Path(cairn.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp)  # where `cairn demo` puts its output
    return env
