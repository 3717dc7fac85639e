"""Flink's own PyFlink DataStream examples run on Cairn with only the import changed.

Invariant: nothing is fetched at run time and no Flink code is kept in this repository: the
examples come from a directory the user points to; each is copied to a temporary directory
with ``pyflink`` replaced by ``cairn`` in its imports (and, with ``--kafka``, Flink's
``localhost:9092`` by the address of a real broker this script starts), run once with
``cairn run --fresh`` in its own process group, and judged by its exit status or, for an
unbounded job, by the lines it must print before it is stopped. The verdicts and reasons are
in docs/flink-examples.md.

Getting the examples (PyPI's wheel of PyFlink 2.3.0 carries them)::

    pip download apache-flink==2.3.0 --no-deps -d /tmp/pf
    (cd /tmp/pf && unzip -q apache_flink-*.whl 'pyflink/examples/*')
    python -m bench.flink_examples /tmp/pf/pyflink/examples/datastream          # no broker
    python -m bench.flink_examples /tmp/pf/pyflink/examples/datastream --kafka  # + Kafka

or from a clone of apache/flink: ``flink-python/pyflink/examples/datastream``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EXPECTED_LINES", "Outcome", "main", "rewrite", "run_example"]

# Unbounded examples, by the end of their path: the lines that show they work; the job is
# stopped once all were printed.
EXPECTED_LINES: dict[str, tuple[str, ...]] = {
    # random words at 5 rows/s, counted with retraction: a word seen twice prints -U then +U
    "table/streaming_word_count.py": ("+I[", "-U[", "+U["),
    # the same words as a DataStream (to_data_stream) reduced per word
    "datastream/streaming_word_count.py": (",1)", ",2)"),
    # random comments at 100 rows/s through an async function
    "asyncio/remote_model_inference.py": ('"analysis_result": "positive"',),
    "kafka_json_format.py": ("+I[1,hi]", "+I[6,hello]"),
    "kafka_csv_format.py": ("+I[1,hi]", "+I[6,hello]"),
    "kafka_avro_format.py": ("+I[1,hi]", "+I[6,hello]"),
    "avro_format.py": ("+I[1,hi]", "+I[6,hello]"),
    "kafka_bytearray_format.py": ('"country": "Germany"',),
}
_TOPIC = re.compile(r"""['"]((?:test_\w+_topic)|(?:row-extractor-example))['"]""")


@dataclass
class Outcome:
    example: str
    verdict: str  # "runs", "runs (stopped)", "fails", "skipped"
    seconds: float
    detail: str


def rewrite(source: str, bootstrap_servers: str | None) -> str:
    """The example with ``pyflink`` imports as ``cairn`` ones (and the broker's address)."""
    out = re.sub(r"^(\s*)(from|import) pyflink\b", r"\1\2 cairn", source, flags=re.M)
    if bootstrap_servers is not None:
        out = out.replace("localhost:9092", bootstrap_servers)
    return out


def _last_error(text: str) -> str:
    """The CLI's own headline (``cairn run: ... raised X: ...``), else the last exception line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    headlines = [  # without "cairn run: <script path> raised "
        line.split(" raised ", 1)[-1] for line in lines if re.match(r"^cairn \w+: ", line)
    ]
    errors = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b", line)]
    return (headlines or errors or lines or ["(no output)"])[-1][:200]


def run_example(
    path: Path,
    workdir: Path,
    executor: str,
    timeout_s: float,
    bootstrap_servers: str | None,
) -> Outcome:
    """Run one example as a user would (``cairn run --fresh``) and judge it."""
    script = workdir / path.name
    script.write_text(rewrite(path.read_text(encoding="utf-8"), bootstrap_servers))
    expected = next((v for k, v in EXPECTED_LINES.items() if path.as_posix().endswith(f"/{k}")), ())
    command = [
        sys.executable, "-m", "cairn.cli.main", "run", "--executor", executor, "--fresh",
        "-D", f"state.checkpoints.dir=file://{workdir}/checkpoints",
        str(script),
    ]  # fmt: skip
    started = time.monotonic()
    log = workdir / f"{path.stem}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, cwd=workdir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        stopped = False
        while proc.poll() is None:
            text = log.read_text(errors="replace")
            if expected and all(line in text for line in expected):
                stopped = True
            if stopped or time.monotonic() - started > timeout_s:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                break
            time.sleep(0.5)
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    if stopped:
        return Outcome(path.name, "runs (stopped)", seconds, "printed " + ", ".join(expected))
    if proc.returncode == 0:
        return Outcome(path.name, "runs", seconds, _last_line(text))
    if seconds > timeout_s:
        return Outcome(path.name, "fails", seconds, f"no result within {timeout_s:.0f} s")
    return Outcome(path.name, "fails", seconds, _last_error(text))


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("%")]
    return lines[-1][:120] if lines else ""


def _create_topics(bootstrap_servers: str, examples: Sequence[Path]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    names = sorted({m for p in examples for m in _TOPIC.findall(p.read_text(encoding="utf-8"))})
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    existing = set(admin.list_topics(timeout=30).topics)
    new = [NewTopic(n, 1, 1) for n in names if n not in existing]
    for name, future in (admin.create_topics(new) if new else {}).items():
        future.result(30)
        print(f"created topic {name}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("examples", type=Path, help="pyflink/examples/datastream directory")
    parser.add_argument("--kafka", action="store_true", help="start a broker; run connectors/")
    parser.add_argument("--bootstrap-servers", help="use this running broker (with --kafka)")
    parser.add_argument("--executor", default="inprocess", choices=("inprocess", "spark"))
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per example")
    parser.add_argument("--only", default="", help="run only examples whose path has this")
    args = parser.parse_args(argv)
    examples = sorted(
        p for p in args.examples.rglob("*.py") if args.only in str(p) and p.name != "__init__.py"
    )
    if not examples:
        parser.error(f"no examples under {args.examples}")
    outcomes: list[Outcome] = []
    broker = None
    try:
        servers = args.bootstrap_servers if args.kafka else None
        if args.kafka and servers is None:
            from cairn.testing.kafka import KafkaBroker

            broker = KafkaBroker().start()
            servers = broker.bootstrap_servers
        if servers is not None:
            _create_topics(servers, examples)
        for path in examples:
            relative = str(path.relative_to(args.examples))
            if ("kafka" in path.name or "Kafka" in path.read_text()) and servers is None:
                outcomes.append(Outcome(relative, "skipped", 0.0, "needs --kafka"))
                continue
            with tempfile.TemporaryDirectory(prefix="cairn-flink-example-") as tmp:
                outcome = run_example(path, Path(tmp), args.executor, args.timeout, servers)
            outcome.example = relative
            outcomes.append(outcome)
            print(f"{relative}: {outcome.verdict} ({outcome.seconds:.1f} s)", file=sys.stderr)
    finally:
        if broker is not None:
            broker.stop()
    print("| example | result | seconds | detail |\n| --- | --- | ---: | --- |")
    for o in outcomes:
        print(f"| `{o.example}` | {o.verdict} | {o.seconds:.1f} | {o.detail.replace('|', '/')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
