"""PyFlink 2.3 peer of the Nexmark benchmark: Flink SQL on the JVM planner and runtime.

Invariant: the input is ``nexmark_common.flink_ddl`` over the benchmark's CSV files (Flink's
``filesystem`` connector, ``csv`` format: the same statements Cairn runs), the query the
query file's own ``CREATE TABLE`` (``blackhole``) and ``INSERT``, in streaming mode at
parallelism 2 with 1 s exactly-once checkpoints (hashmap state); no Python runs in the job.
``elapsed_s`` runs from the ``INSERT``'s submission to the job's end (the JVM and the table
environment are up before). ``--verify-data`` first runs the query's ``SELECT`` over those
(smaller) files, collected, and reports the :func:`nexmark_common.figures` of its final rows.
Last stdout line: one JSON result. Run it through ``run_peer.py --workload nexmark``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
import nexmark_common as nc
from pyflink_keyed_sum import free_port
from pyflink_table import make_env

SYSTEM = "pyflink"
KINDS = {"INSERT": "+I", "UPDATE_BEFORE": "-U", "UPDATE_AFTER": "+U", "DELETE": "-D"}


def _t_env(args: argparse.Namespace, work: Path, data: str) -> Any:
    args.rest_port = free_port()
    t_env = make_env(args, work, checkpoints=True)
    for key, value in nc.TABLE_CONFIG.items():  # nexmark-flink's own configuration
        t_env.get_config().set(key, value)
    for statement in nc.flink_ddl(str(Path(data).resolve())):
        t_env.execute_sql(statement)
    return t_env


def run_verify(args: argparse.Namespace, work: Path) -> dict[str, int]:
    t_env = _t_env(args, work / "verify", args.verify_data)
    _, insert = nc.query_statements(args.query)
    changes = []
    with t_env.execute_sql(nc.select_of(insert)).collect() as rows:
        for row in rows:
            changes.append((KINDS[row.get_row_kind().name], tuple(row)))
    return nc.figures(changes)


def run_timed(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    t_env = _t_env(args, work, args.data)
    create, insert = nc.query_statements(args.query)
    t_env.execute_sql(create)
    submitted = time.time()
    client = t_env.execute_sql(insert).get_job_client()
    client.get_job_execution_result().result()
    elapsed = time.time() - submitted
    return {
        "elapsed_s": round(elapsed, 3),
        "events_per_s": round(args.records / max(elapsed, 1e-9)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    common.add_common_args(parser)
    parser.add_argument("--query", required=True, choices=nc.QUERIES)
    parser.add_argument("--data", default="", help="the timed run's CSV folder ('': none)")
    parser.add_argument("--verify-data", default="", help="the verifying run's CSV folder")
    parser.add_argument("--python-execution-mode", default="thread")
    args = parser.parse_args()
    if not args.work_dir:
        args.work_dir = tempfile.mkdtemp(prefix="peer-pyflink-nexmark-")
    work = Path(args.work_dir)
    import pyflink

    result = common.result_template(args, SYSTEM)
    result["versions"]["apache-flink"] = pyflink.version.__version__
    result["query"] = args.query
    try:
        if args.verify_data:
            started = time.time()
            figures = run_verify(args, work)
            result["verify_s"] = round(time.time() - started, 3)
            result.update({f"result_{k}": v for k, v in figures.items()})
        if args.data:
            result.update(run_timed(args, work))
    except Exception as exc:  # the driver records the reason
        text = str(exc).strip().splitlines()
        result["error"] = f"{type(exc).__name__}: {(text[0] if text else '')[:300]}"
    result["note"] = (
        "Flink SQL on the JVM planner (the query file's text), filesystem/csv source, "
        "blackhole sink; events/s = events / (submission to the job's end)"
    )
    result["work_dir"] = args.work_dir
    common.emit(result)
    sys.stdout.flush()
    os._exit(0)  # skip py4j's slow interpreter teardown; the JVM gateway exits with us


if __name__ == "__main__":
    main()
