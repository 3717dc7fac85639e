"""Cairn's side of the Nexmark benchmark: one query over the CSV events, timed or verified
(``python -m bench.nexmark_jobs``; the driver is :mod:`bench.nexmark_bench`).

Invariant: the job is Cairn's SQL — ``nexmark_common.flink_ddl`` (the ``filesystem``/``csv``
table ``events``, its watermark and the three views) then the query file's own ``CREATE
TABLE`` (a ``blackhole`` sink) and ``INSERT`` — on Cairn's runtime (``--executor spark``:
local Spark, as ``bench.table_jobs``; ``inprocess``: threads) at parallelism 2 with 1 s
exactly-once checkpoints. The timed run's figure is ``elapsed_s``, from the ``INSERT``'s
submission to the job's end (its bounded input read and processed): the Spark session is
started before, so only the job's own start-up counts, as for the peers. ``--verify-data``
runs the query's ``SELECT`` over those (smaller) files first, collected, and reports the
:func:`nexmark_common.figures` of its final rows as ``result_rows``/``result_checksum``.

    python -m bench.nexmark_jobs --query q5 --data bench/out/nexmark-data/n1000000-seed0-files2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
if str(PEERS) not in sys.path:
    sys.path.insert(0, str(PEERS))

import nexmark_common as nc  # noqa: E402

from bench import empty_result  # noqa: E402
from bench.jobs import CairnOptions, bench_environment, cairn_versions  # noqa: E402
from bench.nexmark_data import files_per_subtask  # noqa: E402

__all__ = ["run_query", "verify_query"]


def _t_env(
    opts: CairnOptions,
    interval_ms: int,
    checkpoint_dir: str,
    data: str,
    config: dict[str, str] | None = None,
) -> Any:
    from cairn.table import StreamTableEnvironment

    t_env = StreamTableEnvironment.create(bench_environment(opts, interval_ms, checkpoint_dir))
    for key, value in (config or {}).items():  # e.g. table.exec.mini-batch.*
        t_env.get_config().set(key, value)
    for statement in nc.flink_ddl(data):
        t_env.execute_sql(statement)
    return t_env


def _wait(client: Any, timeout_s: float) -> tuple[float, dict[str, Any]]:
    """Wait for the job's end: (end time, checkpoint figures)."""
    master = client.job_master
    deadline = time.monotonic() + timeout_s
    while master.end_ms is None:
        if time.monotonic() > deadline:
            client.cancel()
            raise TimeoutError(f"the job did not end within {timeout_s:.0f} s")
        time.sleep(0.05)
    client.get_job_execution_result(timeout=60)
    figures: dict[str, Any] = {"restarts": master.restarts}
    coordinator = master.coordinator
    if coordinator is not None:
        summary = coordinator.stats.snapshot().end_to_end_duration
        figures["checkpoints_completed"] = summary.count
        if summary.count:
            figures["checkpoint_p50_ms"] = summary.p50
            figures["checkpoint_p99_ms"] = summary.p99
    return (master.end_ms or time.time() * 1000) / 1000.0, figures


def verify_query(
    opts: CairnOptions,
    query: str,
    data: str,
    work: str,
    config: dict[str, str] | None = None,
) -> dict[str, int]:
    """The figures of the query's final rows over ``data`` (collected)."""
    t_env = _t_env(opts, 1000, os.path.join(work, "verify-checkpoints"), data, config)
    _, insert = nc.query_statements(query)
    rows = t_env.execute_sql(nc.select_of(insert)).collect()
    figures: dict[str, int] = nc.figures((r.get_row_kind().short_string(), tuple(r)) for r in rows)
    return figures


def run_query(
    query: str,
    data: str,
    events: int,
    interval_ms: int = 1000,
    parallelism: int = 2,
    executor: str = "spark",
    verify_data: str = "",
    timeout_s: float = 1800.0,
    config: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The verifying run (with ``verify_data``), then the timed one; one result. ``config``:
    table configuration keys set on both runs' table environments (``--config k=v``)."""
    opts = CairnOptions(parallelism, executor)
    work = tempfile.mkdtemp(prefix="cairn-bench-nexmark-")
    result = empty_result("cairn", "nexmark", events)
    result.update(
        query=query,
        parallelism=parallelism,
        checkpoint_interval_ms=interval_ms,
        versions=cairn_versions(),
        executor=executor,
        table_config=dict(config or {}),
    )
    try:
        if executor == "spark":  # the session's start-up is not the job's
            from cairn.deploy.spark_session import get_or_create_spark

            get_or_create_spark(None, min_slots=parallelism)
        if verify_data:
            started = time.time()
            figures = verify_query(opts, query, verify_data, work, config)
            result["verify_s"] = round(time.time() - started, 3)
            result.update({f"result_{k}": v for k, v in figures.items()})
        if data:
            t_env = _t_env(opts, interval_ms, os.path.join(work, "checkpoints"), data, config)
            create, insert = nc.query_statements(query)
            t_env.execute_sql(create)
            result["source_files_per_subtask"] = files_per_subtask(Path(data), parallelism)
            submitted = time.time()
            client = t_env.execute_sql(insert).get_job_client()
            ended, figures = _wait(client, timeout_s)
            result.update(figures)
            result["elapsed_s"] = round(ended - submitted, 3)
            result["events_per_s"] = round(events / max(ended - submitted, 1e-9))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["note"] = (
        "Cairn SQL (the query file's text), filesystem/csv source, blackhole sink; events/s "
        "= events / (submission to the job's end)"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nexmark_jobs", description=__doc__)
    parser.add_argument("--query", required=True, choices=nc.QUERIES)
    parser.add_argument("--data", default="", help="the timed run's CSV folder ('': none)")
    parser.add_argument("--events", type=int, default=0, help="the events in --data")
    parser.add_argument("--verify-data", default="", help="the verifying run's CSV folder")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--executor", choices=["spark", "inprocess"], default="spark")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a table configuration key for both runs (repeatable), e.g."
        " table.exec.mini-batch.enabled=true",
    )
    args = parser.parse_args(argv)
    config: dict[str, str] = {}
    for entry in args.config:
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            parser.error(f"--config takes KEY=VALUE, got {entry!r}")
        config[key.strip()] = value.strip()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        result = run_query(
            args.query,
            args.data,
            args.events,
            args.checkpoint_interval_ms,
            args.parallelism,
            args.executor,
            args.verify_data,
            args.timeout,
            config,
        )
    except Exception as exc:  # report, don't crash: the driver records the reason
        result = empty_result("cairn", "nexmark", args.events)
        result["query"] = args.query
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        print(json.dumps(result), flush=True)
        return 1
    print(json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
