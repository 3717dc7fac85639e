"""The ``kafka-job`` measurement: Kafka -> keyed running sum -> Kafka, one broker, one input
topic, for Cairn (NONE / AT_LEAST_ONCE / EXACTLY_ONCE on embedded local Spark), PyFlink 2.3
with Flink's Kafka connector, Spark Structured Streaming 4.3 with its Kafka source and sink,
and the broker's own limit on this machine; then Cairn exactly-once's end-to-end latency
per checkpoint interval.

One run starts a throw-away broker (``cairn.testing.kafka``, Kafka 4.1.1), fills one input
topic of ``--partitions`` partitions with ``--records`` lines (``bench.kafka_topics``), and
runs each system's job over it into a fresh output topic, at parallelism 2 with checkpoints
(Spark: micro-batch triggers) every ``--interval-ms``. Every system is measured alike from
its output topic, read back by a ``read_committed`` consumer: records/s between the 10th
and 90th percentile of the records' broker append times (``LogAppendTime``), whether every
key's last sum is right and how many records came twice. The broker's limit:
``ProducerPerformance`` (plain, and transactional with a transaction per interval) and
``ConsumerPerformance`` from ``kafka-tools``, the same jars as the broker. Latency: the
exactly-once job over an unbounded input written at ``--latency-rate`` records/s, each
record's produce time carried to the output; ms until a ``read_committed`` consumer got it.

The peers' jars come from Maven Central: ``flink-sql-connector-kafka`` by ``mvn
dependency:copy`` into ``~/.cache/cairn/bench-jars`` (never committed), Spark's
``spark-sql-kafka-0-10`` through ``spark.jars.packages``. The peers' venvs:
``bash bench/peers/install.sh pyflink spark``.

Invariant: prints one JSON object as its last stdout line; the broker and its data are gone
when it returns. The machine's load moves absolute figures: compare ratios of one run.

    python -m bench.kafka_job --records 300000 --interval-ms 1000
    python -m bench.kafka_job --systems cairn-at-least-once cairn-exactly-once \\
        pyflink-exactly-once --repeat 5 --peer-repeat 2 --warmup --latency-intervals
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.kafka_topics import fill_input, new_topic, read_output

__all__ = [
    "SYSTEMS",
    "measure",
    "pair_costs",
    "parse_consumer_perf",
    "parse_producer_perf",
    "summarize",
]

SYSTEMS = (
    "broker",
    "cairn-none",
    "cairn-at-least-once",
    "cairn-exactly-once",
    "pyflink-exactly-once",
    "spark",
)
FLINK_CONNECTOR = "org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2"
# Maven Central has no spark-sql-kafka-0-10 4.3.0 (pyspark 4.3.0's own version) as of this
# writing: the newest, 4.2.0, runs on Spark 4.3.0.
SPARK_CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
JAR_CACHE = Path.home() / ".cache" / "cairn" / "bench-jars"
_PEERS = Path(__file__).resolve().parent / "peers"


def fetch_jar(coordinate: str, cache: Path = JAR_CACHE) -> Path:
    """``group:artifact:version`` from Maven Central into ``cache`` (once)."""
    _group, artifact, version = coordinate.split(":")
    jar = cache / f"{artifact}-{version}.jar"
    if not jar.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mvn", "-q", "dependency:copy", f"-Dartifact={coordinate}",
             f"-DoutputDirectory={cache}"],
            check=True,
            cwd=str(cache),
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    return jar


def parse_producer_perf(text: str) -> float | None:
    """records/s of ``ProducerPerformance``'s summary line.

    >>> parse_producer_perf("1000 records sent, 52631.6 records/sec (1.00 MB/sec), 3 ms avg")
    52631.6
    """
    found = re.findall(r"records sent, ([0-9.]+) records/sec", text)
    return float(found[-1]) if found else None


def parse_consumer_perf(text: str) -> float | None:
    """``nMsg.sec`` of ``ConsumerPerformance``'s CSV output.

    >>> head = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
    >>> parse_consumer_perf(head + "\\n2026-11-28 09:00:00:000, x, 5.7, 1.9, 300000, 99000.5")
    99000.5
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        names = [n.strip() for n in line.split(",")]
        if "nMsg.sec" in names and i + 1 < len(lines):
            values = [v.strip() for v in lines[i + 1].split(",")]
            return float(values[names.index("nMsg.sec")])
    return None


def _tool(main: str, *args: str) -> str:
    """Run a class of the broker's jars (``kafka-tools``) and return its output."""
    from cairn.testing.kafka import kafka_libs

    java = (
        os.path.join(os.environ["JAVA_HOME"], "bin", "java")
        if "JAVA_HOME" in os.environ
        else "java"
    )
    cmd = [java, "-Xmx512m", "-cp", f"{kafka_libs()}/*", main, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    return done.stdout + done.stderr


def broker_limit(broker: Any, records: int, partitions: int, interval_ms: int) -> dict[str, Any]:
    """The broker's own clients on this machine: produce (plain; transactional with one
    transaction per interval) and consume ``records`` records of 20 bytes."""
    out: dict[str, Any] = {}
    for name, extra in (
        ("producer", []),
        ("producer_transactional", ["--transactional-id", f"perf-{time.time_ns()}",
                                    "--transaction-duration-ms", str(interval_ms)]),
    ):  # fmt: skip
        topic = new_topic(broker, f"perf-{name}", partitions)
        text = _tool(
            "org.apache.kafka.tools.ProducerPerformance",
            "--topic", topic, "--num-records", str(records), "--record-size", "20",
            "--throughput", "-1", *extra,
            "--producer-props", f"bootstrap.servers={broker.bootstrap_servers}",
        )  # fmt: skip
        out[f"{name}_records_per_s"] = parse_producer_perf(text)
        if name == "producer":
            text = _tool(
                "org.apache.kafka.tools.ConsumerPerformance",
                "--bootstrap-server", broker.bootstrap_servers, "--topic", topic,
                "--messages", str(records), "--timeout", "60000",
            )  # fmt: skip
            out["consumer_records_per_s"] = parse_consumer_perf(text)
    return out


def _peer(system: str, broker: Any, source: str, sink: str, args: argparse.Namespace) -> Any:
    extra = (
        ["--jar", str(fetch_jar(FLINK_CONNECTOR))]
        if system == "pyflink"
        else ["--package", SPARK_CONNECTOR]
    )
    cmd = [
        sys.executable, str(_PEERS / "run_peer.py"), "--system", system,
        "--workload", "kafka-job", "--records", str(args.records),
        "--checkpoint-interval-ms", str(args.interval_ms), "--parallelism", "2",
        "--timeout", str(args.peer_timeout), "--bootstrap-servers", broker.bootstrap_servers,
        "--source-topic", source, "--sink-topic", sink, *extra,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": done.stderr[-2000:]}


def _system(name: str, broker: Any, source: str, args: argparse.Namespace) -> dict[str, Any]:
    from bench.kafka_cairn_job import run_throughput

    sink = new_topic(broker, f"out-{name}", args.partitions, output=True)
    started = time.time()
    if name.startswith("cairn-"):
        fields = run_throughput(broker, source, sink, name[len("cairn-") :], args.interval_ms)
    else:
        peer = _peer(name.split("-")[0], broker, source, sink, args)
        fields = {k: peer.get(k) for k in ("elapsed_s", "error", "unsupported", "versions")}
        fields = {k: v for k, v in fields.items() if v is not None}
    fields["wall_s"] = round(time.time() - started, 1)
    if "error" in fields or "unsupported" in fields:
        return fields
    output = read_output(broker, sink, args.records)
    rate = output.records_per_s
    fields.update(
        records_per_s=None if rate is None else round(rate),
        output_records=output.records,
        sums_ok=output.sums_ok,
        duplicates=output.duplicates,
    )
    return fields


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from cairn.testing.kafka import KafkaBroker

    result: dict[str, Any] = {
        "records": args.records,
        "partitions": args.partitions,
        "parallelism": 2,
        "interval_ms": args.interval_ms,
        "load_before": os.getloadavg()[0],
    }
    with KafkaBroker(heap="1g") as broker:
        source = new_topic(broker, "in", args.partitions)
        result["fill_records_per_s"] = round(fill_input(broker, source, args.records))
        if args.warmup:  # the process's first Cairn job carries Spark's start-up
            warm = _system("cairn-none", broker, source, args)
            print(f"warm-up: {json.dumps(warm)}", file=sys.stderr, flush=True)
        runs: dict[str, list[dict[str, Any]]] = {}
        for round_ in range(args.repeat):
            for name in args.systems:
                if not name.startswith("cairn-") and round_ not in _peer_rounds(args):
                    continue
                if name == "broker":
                    fields = broker_limit(broker, args.records, args.partitions, args.interval_ms)
                else:
                    fields = _system(name, broker, source, args)
                fields["load"] = round(os.getloadavg()[0], 2)
                runs.setdefault(name, []).append(fields)
                print(f"{name}: {json.dumps(fields)}", file=sys.stderr, flush=True)
        for name, done in runs.items():
            result[name] = done[0] if len(done) == 1 else summarize(done)
        if args.latency_intervals:
            result["latency"] = latency(broker, args)
    result["load_after"] = os.getloadavg()[0]
    result["ratios"] = ratios(result)
    costs = pair_costs(result)
    if costs:
        result["ratios"]["eo_cost_vs_alo_pct_per_pair"] = costs
        result["ratios"]["eo_cost_vs_alo_pct_median_of_pairs"] = statistics.median(costs)
    return result


def _peer_rounds(args: argparse.Namespace) -> set[int]:
    """The rounds a non-Cairn system runs in: ``--peer-repeat`` of them, spread from the
    first to the last, so that the peers see the same load as the Cairn runs around them."""
    n = max(1, min(args.peer_repeat, args.repeat))
    if n == 1:
        return {0}
    return {round(i * (args.repeat - 1) / (n - 1)) for i in range(n)}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs of one system: each run's fields, and the median rate as the system's.

    >>> s = summarize([{"records_per_s": 3}, {"records_per_s": 1}, {"records_per_s": 4}])
    >>> s["records_per_s"], s["rates"]
    (3, [3, 1, 4])
    """
    rates = [r.get("records_per_s") for r in runs]
    known = [r for r in rates if r]
    return {
        "runs": runs,
        "records_per_s": statistics.median(known) if known else None,
        "rates": rates,
    }


def pair_costs(result: dict[str, Any]) -> list[float] | None:
    """Exactly-once's cost against at-least-once per interleaved pair (round), in %.

    >>> pair_costs({"cairn-at-least-once": {"rates": [100, 80]},
    ...             "cairn-exactly-once": {"rates": [90, 80]}})
    [10.0, 0.0]
    """
    alo = (result.get("cairn-at-least-once") or {}).get("rates")
    eo = (result.get("cairn-exactly-once") or {}).get("rates")
    if not alo or not eo:
        return None
    return [round(100 * (1 - e / a), 1) for a, e in zip(alo, eo, strict=False) if a and e]


def latency(broker: Any, args: argparse.Namespace) -> dict[str, Any]:
    from bench.kafka_cairn_job import run_latency
    from bench.measure import nearest_rank

    out: dict[str, Any] = {"rate": args.latency_rate, "seconds": args.latency_seconds}
    for interval in args.latency_intervals:
        source = new_topic(broker, "lat-in", args.partitions)
        sink = new_topic(broker, "lat-out", args.partitions, output=True)
        samples = sorted(
            run_latency(broker, source, sink, interval, args.latency_rate, args.latency_seconds)
        )
        out[f"{interval}ms"] = {
            "p50_ms": round(nearest_rank(samples, 0.5), 1) if samples else None,
            "p99_ms": round(nearest_rank(samples, 0.99), 1) if samples else None,
            "samples": len(samples),
        }
        print(f"latency {interval} ms: {out[f'{interval}ms']}", file=sys.stderr, flush=True)
    return out


def ratios(result: dict[str, Any]) -> dict[str, float | None]:
    """The run's comparisons: Cairn exactly-once against the others.

    >>> ratios({"cairn-exactly-once": {"records_per_s": 80},
    ...         "cairn-at-least-once": {"records_per_s": 100}, "spark": {}})
    {'eo_cost_vs_alo_pct': 20.0, 'eo_vs_pyflink': None, 'eo_vs_spark': None}
    """

    def rate(name: str) -> float | None:
        value = (result.get(name) or {}).get("records_per_s")
        return float(value) if value else None

    eo, alo = rate("cairn-exactly-once"), rate("cairn-at-least-once")
    flink, spark = rate("pyflink-exactly-once"), rate("spark")
    return {
        "eo_cost_vs_alo_pct": round(100 * (1 - eo / alo), 1) if eo and alo else None,
        "eo_vs_pyflink": round(eo / flink, 2) if eo and flink else None,
        "eo_vs_spark": round(eo / spark, 2) if eo and spark else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_job", description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--latency-intervals", type=int, nargs="*", default=[1000, 5000])
    parser.add_argument("--latency-rate", type=int, default=5000)
    parser.add_argument("--latency-seconds", type=float, default=30.0)
    parser.add_argument("--peer-timeout", type=float, default=1500.0)
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of the Cairn systems, interleaved in the order given (medians reported)",
    )
    parser.add_argument(
        "--peer-repeat", type=int, default=1, help="rounds (of --repeat) the peers run in"
    )
    parser.add_argument(
        "--warmup", action="store_true", help="a throw-away Cairn NONE job first (Spark start-up)"
    )
    args = parser.parse_args(argv)
    print(json.dumps(measure(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
