"""The inventory of the CLI's documented failures (docs/operations.md, "When a command
fails"): each row is a command line (and the script or files it needs) and a fragment of
the message a user sees. Every one exits non-zero and prints a short message on stderr —
a line of cause and, where there is one, a line of remedy; no traceback (that needs
``-v``), nothing on stdout. A user's exception in a job is the short report of
``cli/failure_report.py`` (at most ``MAX_LINES`` lines). All run without Spark: in process
(``--executor inprocess``) or failing before Spark starts.
"""

from __future__ import annotations

import importlib
import socket
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.cli.failure_report import MAX_LINES
from cairn.cli.main import main
from cairn.datastream.stream_execution_environment import reset_context_defaults

OK_JOB = """\
from cairn.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).map(lambda x: x + 1).print()
env.execute("ok")
"""

# name -> the text of a file the case's argv names as {name}
FILES = {
    "ok.py": OK_JOB,
    "syntax.py": "def f(:\n    pass\n",
    "raises.py": "raise RuntimeError('boom at the top of the script')\n",
    "bad_conf.py": """\
from cairn.common import Configuration
from cairn.datastream import StreamExecutionEnvironment
conf = Configuration()
conf.set_string("execution.checkpointing.interval", "soon")
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.from_collection([1]).print()
env.execute("bad-conf")
""",
    "lock.py": """\
import threading
from cairn.datastream import StreamExecutionEnvironment
lock = threading.Lock()
def f(x):
    with lock:
        return x
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).map(f).print()
env.execute("lock")
""",
    "no_psycopg.py": """\
import sys
sys.modules["psycopg"] = None  # as if cairn[postgres] were not installed
from cairn.common import Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.jdbc import JdbcConnectionOptions, JdbcSink
env = StreamExecutionEnvironment.get_execution_environment()
options = (JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
           .with_url("jdbc:postgresql://127.0.0.1:1/db").build())
row = Types.ROW([Types.INT()])
env.from_collection([(1,)], type_info=row).add_sink(
    JdbcSink.sink("INSERT INTO t VALUES (?)", row, options))
env.execute("jdbc")
""",
    "no_kafka.py": """\
import sys
sys.modules["confluent_kafka"] = None  # as if cairn[kafka] were not installed
from cairn.common.serialization import SimpleStringSchema
from cairn.datastream.connectors.kafka import KafkaSource
(KafkaSource.builder().set_bootstrap_servers("h:9092").set_topics("t")
 .set_value_only_deserializer(SimpleStringSchema()).build())
""",
    "unbounded_batch.py": """\
from cairn.common import WatermarkStrategy
from cairn.common.serialization import SimpleStringSchema
from cairn.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from cairn.datastream.connectors.kafka import KafkaSource
env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
source = (KafkaSource.builder().set_bootstrap_servers("127.0.0.1:1").set_topics("t")
          .set_value_only_deserializer(SimpleStringSchema()).build())
env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka").print()
env.execute("unbounded")
""",
    "user_error.py": """\
from cairn.datastream import StreamExecutionEnvironment

def parse(line):
    key, value = line.split(",")
    return key, int(value)

env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection(["a,1", "c,x"]).map(parse).name("parse").uid("parse").print()
env.execute("user-error")
""",
    "wrong_type.py": """\
import sys
from cairn.common import Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.table import StreamTableEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
t_env = StreamTableEnvironment.create(env)
rows = env.from_collection([1, 2], type_info=Types.INT()).map(
    lambda x: "s" + str(x), output_type=Types.ROW_NAMED(["n"], [Types.INT()]))
t_env.execute_sql("CREATE TABLE snk (n INT) WITH ('connector' = 'filesystem', "
                  f"'path' = '{sys.argv[1]}', 'format' = 'csv')")
t_env.from_data_stream(rows).execute_insert("snk").wait()
""",
    "mismatch.sql": """\
CREATE TABLE src (a INT, b STRING) WITH ('connector' = 'datagen', 'number-of-rows' = '3');
CREATE TABLE snk (a INT, b INT) WITH ('connector' = 'blackhole');
INSERT INTO snk SELECT a, b FROM src;
""",
    "unknown_table.sql": "SELECT * FROM nowhere;\n",
    "corrupt/_metadata": "garbage",
    "nonempty/file": "x",
}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


JOB_ID = "0123456789abcdef0123456789abcdef"

# (argv, fragment of stderr, exit status; None: any non-zero); {dir} is the files' directory.
INVENTORY: list[tuple[str, str, int | None]] = [
    # cairn run: the script
    ("run {dir}/nothere.py", "the script {dir}/nothere.py does not exist", 1),
    ("run {dir}", "is a directory", 1),
    ("run {dir}/syntax.py", "syntax.py:1: SyntaxError: invalid syntax", 1),
    ("run {dir}/raises.py", "raised RuntimeError: boom at the top of the script", 1),
    ("run --bogus {dir}/ok.py", "unrecognized arguments: --bogus", 2),
    ("run --executor inprocess {dir}/ok.py -p 2", "after the script would go to the script", 2),
    # cairn run: options and configuration
    ("run -p 0 {dir}/ok.py", "parallelism must be at least 1, got 0", 1),
    ("run -p x {dir}/ok.py", "argument -p/--parallelism: invalid int value: 'x'", 2),
    ("run -D no.such.key=1 {dir}/ok.py", "unknown configuration option 'no.such.key'", 1),
    (
        "run -D execution.checkpointing.interval=soon {dir}/ok.py",
        "invalid value 'soon' for configuration option 'execution.checkpointing.interval'",
        1,
    ),
    ("run -D execution.runtime-mode=FOO {dir}/ok.py", "expected one of 'AUTOMATIC'", 1),
    ("run --executor inprocess {dir}/bad_conf.py", "invalid value 'soon'", 1),
    ("run --executor nothere {dir}/ok.py", "argument --executor: invalid choice", 2),
    # cairn run: the cluster
    ("run --master spark://127.0.0.1:{port} {dir}/ok.py", "cannot reach the Spark master", 1),
    ("run --master sparkk://host {dir}/ok.py", "unknown Spark master 'sparkk://host'", 1),
    # cairn run: what the job needs
    ("run --executor inprocess {dir}/no_psycopg.py", "pip install 'cairn[postgres]'", 1),
    ("run {dir}/no_kafka.py", "pip install 'cairn[kafka]'", 1),
    ("run --executor inprocess {dir}/lock.py", "cannot pickle '_thread.lock' object", 1),
    ("run --executor inprocess {dir}/unbounded_batch.py", "BATCH needs bounded sources", 1),
    # cairn run: the state to restore
    (
        "run --executor inprocess -s {dir}/nothere {dir}/ok.py",
        "{dir}/nothere: no such checkpoint, savepoint or directory",
        1,
    ),
    (
        "run --executor inprocess -s {dir}/corrupt {dir}/ok.py",
        "_metadata: truncated metadata",
        1,
    ),
    (
        "run --executor inprocess -s {dir}/nonempty {dir}/ok.py",
        "not a checkpoint or savepoint directory",
        1,
    ),
    # cairn run: the job fails in the user's code (the short report)
    (
        "run --executor inprocess {dir}/user_error.py",
        "failed: ValueError: invalid literal for int() with base 10: 'x'",
        1,
    ),
    (
        "run --executor inprocess {dir}/wrong_type.py {dir}/out",
        "field 'n': 's1' (str) is not of type Integer",
        1,
    ),
    # cairn sql
    (
        "sql --executor inprocess -f {dir}/mismatch.sql",
        "Cause: Incompatible types for sink column 'b' at position 1.",
        1,
    ),
    ("sql --executor inprocess -f {dir}/unknown_table.sql", "statement at line 1 failed", 1),
    ("sql -f {dir}/nothere.sql", "No such file or directory", 2),
    # cairn chaos
    (
        "chaos {dir}/ok.py --profile hosts --upgrade {dir}/ok.py",
        "--profile hosts does not combine with --upgrade yet; use --profile local for it",
        2,
    ),
    # reading checkpoints
    ("checkpoints {dir}/nothere", "no such checkpoint, savepoint or directory", 1),
    ("checkpoints foo://bucket/x", "unknown filesystem scheme 'foo'", 1),
    ("state {dir}/nothere", "no such checkpoint, savepoint or directory", 1),
    ("state {dir}/ok.py --state s", "--state needs --uid", 1),
    ("doctor {dir}/nothere", "neither a running job of this machine", 1),
    # running jobs
    (f"stop {JOB_ID}", f"no running job {JOB_ID} on this machine", 1),
    (f"cancel {JOB_ID}", f"no running job {JOB_ID} on this machine", 1),
    (f"savepoint {JOB_ID}", f"no running job {JOB_ID} on this machine", 1),
    ("savepoint", "give the job id", 1),
    ("savepoint --dispose {dir}/nonempty", "not a savepoint (no _metadata): left alone", 1),
    # the rest
    ("tls init {dir}/nonempty", "is not empty", 1),
    ("demo -p 0", "--parallelism must be at least 1, got 0", 1),
    ("demo skew --variants aligned,bogus", "bogus", 2),
]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name, text in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # cairn run replaces them
    monkeypatch.setattr(sys, "path", list(sys.path))
    for module in ("psycopg", "confluent_kafka"):  # two scripts hide them: put them back
        try:
            monkeypatch.setitem(sys.modules, module, importlib.import_module(module))
        except ImportError:
            monkeypatch.setitem(sys.modules, module, None)  # type: ignore[arg-type]
    yield tmp_path
    reset_context_defaults()


@pytest.mark.parametrize(
    ("command", "fragment", "status"), INVENTORY, ids=[row[0] for row in INVENTORY]
)
def test_each_documented_failure_is_a_short_message(
    command: str,
    fragment: str,
    status: int | None,
    files: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    values = {"dir": str(files), "port": str(_closed_port())}
    argv = [part.format(**values) for part in command.split()]
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    err = [line for line in captured.err.splitlines() if not line.startswith("[cairn] ")]
    assert code == status if status is not None else code != 0, (code, err)
    assert fragment.format(**values) in captured.err, err
    assert "Traceback (most recent call last)" not in captured.err, err
    report = any(line.startswith("Job ") and " failed: " in line for line in err)
    assert len(err) <= (MAX_LINES if report else 5), err
    if not report:  # a job that ran printed what it printed before it failed
        assert captured.out == "", captured.out
