"""``cairn list``, ``cairn savepoint``, ``cairn stop`` and ``cairn cancel``: Flink's job
commands, run against the jobs of this machine's registry through their control endpoints
(another process than the job's), ``cairn savepoint --dispose``; and ``cairn doctor``, the
checkpoint advice for a running job or a directory of retained checkpoints.

Invariant: these commands never touch a job's state directly; they read the registry and
send requests to the job's endpoint. Progress goes to stderr, the result line to stdout; every
expected failure is one line (``JobControlError``, ``CheckpointError``) through ``main``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cairn.cli.options import parse_conf_items
from cairn.ids import JobId

if TYPE_CHECKING:
    from cairn.rest.client import JobEndpoint

DEFAULT_TIMEOUT_S = 600.0


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _absolute(path: str) -> str:
    """A local path as the job's driver (another working directory) must see it."""
    return path if "://" in path else os.path.abspath(path)


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%d.%m.%Y %H:%M:%S")


def cmd_list(args: argparse.Namespace) -> int:
    """Flink's ``flink list``: the running jobs, oldest first, each with its rate and cost
    (:func:`cost_column`); with ``--all`` (``-a``) also the ended jobs of the job archive,
    newest first, with their final state and figures."""
    from cairn.rest.client import JobControlError, JobEndpoint
    from cairn.rest.registry import JobRegistry

    registry = JobRegistry()
    entries = registry.running_jobs()
    if not entries:
        print("No running jobs.")
    else:
        print("------------------ Running/Restarting Jobs -------------------")
    for entry in entries:
        try:
            details = JobEndpoint(entry, timeout_s=3.0).request("GET", f"/jobs/{entry.job_id}")
            state, cost = str(details["state"]), cost_column(details.get("cpu"))
        except JobControlError:
            state, cost = "UNREACHABLE", cost_column(None)
        started = _time(entry.start_time_ms)
        print(f"{started} : {entry.job_id} : {entry.name} ({state}) {cost} {entry.endpoint}")
        if args.web:  # the token travels in the fragment: browsers never send it
            print(f"    web UI: {web_ui_url(entry.endpoint, entry.token)}")
    if entries:
        print("--------------------------------------------------------------")
    if args.all:
        _list_archived(args.archive_dir, registry.directory, {e.job_id for e in entries})
    return 0


def _list_archived(directory: str | None, registry_dir: str, running: set[str]) -> None:
    from cairn.rest.archive import JobArchive, default_archive_dir

    archive = JobArchive(directory or default_archive_dir(registry_dir))
    jobs = [job for job in archive.jobs() if job.job_id not in running]
    if not jobs:
        print(f"No terminated jobs in {archive.directory}.")
        return
    print("---------------------- Terminated Jobs -----------------------")
    for job in jobs:
        row = job.row
        print(f"{_time(int(row['start-time']))} : {job.job_id} : {row['name']} ({job.state})")
        details = job.body(f"/jobs/{job.job_id}")
        cpu = _final_cpu((details or {}).get("cpu"))
        print(f"    ended {_time(job.end_ms)}; {_records(details)}" + (f"; {cpu}" if cpu else ""))
        cause = (job.body(f"/jobs/{job.job_id}/exceptions") or {}).get("root-exception")
        if cause:
            print(f"    cause: {cause}")
    print("--------------------------------------------------------------")


def _records(details: dict[str, Any] | None) -> str:
    """The final record counts of an archived ``/jobs/:jobid`` body, per vertex.

    >>> _records({"vertices": [{"name": "src", "metrics": {"read-records": 0,
    ...     "write-records": 5}}, {"name": "sink", "metrics": {"read-records": 5}}]})
    'records in/out: src 0/5, sink 5/0'
    """
    counts = [
        f"{v['name']} {v['metrics'].get('read-records', 0)}/{v['metrics'].get('write-records', 0)}"
        for v in (details or {}).get("vertices", [])
        if isinstance(v.get("metrics"), dict)
    ]
    return "records in/out: " + (", ".join(counts) if counts else "not recorded")


def cost_column(cpu: dict[str, Any] | None) -> str:
    """A running job's rate and cost from its ``cpu`` block (``/jobs/:jobid``): records/s
    the sources read, cores the workers used and CPU microseconds per source record, over
    the last reporting interval (``-`` until known).

    >>> cost_column({"source-records-per-second": 5012.3, "cores": 0.4213,
    ...              "cpu-per-record-us": 84.06})
    '5.0k rec/s 0.42 cores 84 us/rec'
    >>> cost_column(None)
    '- rec/s - cores - us/rec'
    """
    from cairn.observability.progress import format_count

    if not cpu:
        return "- rec/s - cores - us/rec"
    per_record = cpu.get("cpu-per-record-us")
    us = "-" if per_record is None else f"{per_record:.0f}"
    rate = format_count(float(cpu.get("source-records-per-second", 0.0)))
    return f"{rate} rec/s {float(cpu.get('cores', 0.0)):.2f} cores {us} us/rec"


def _final_cpu(cpu: dict[str, Any] | None) -> str:
    """An ended job's CPU time and CPU per source record over its last attempt.

    >>> _final_cpu({"cpu-time": 12340, "cpu-per-record-us-since-start": 61.7,
    ...             "measured": "process"})
    'cpu 12.3 s, 62 us/rec (process)'
    >>> _final_cpu(None)
    ''
    """
    if not cpu:
        return ""
    per_record = cpu.get("cpu-per-record-us-since-start")
    us = "-" if per_record is None else f"{per_record:.0f}"
    return f"cpu {cpu.get('cpu-time', 0) / 1000:.1f} s, {us} us/rec ({cpu.get('measured')})"


def web_ui_url(endpoint: str, token: str | None) -> str:
    """The web UI's address with the job's token in the fragment.

    >>> web_ui_url("http://127.0.0.1:8081", "t0k")
    'http://127.0.0.1:8081/web/index.html#token=t0k'
    """
    return f"{endpoint}/web/index.html" + (f"#token={token}" if token else "")


def cmd_savepoint(args: argparse.Namespace) -> int:
    """``cairn savepoint <job-id> [target-dir]`` or ``cairn savepoint --dispose <path>``."""
    if args.dispose is not None:
        return _dispose(args.dispose)
    if args.job_id is None:
        from cairn.common.exceptions import ConfigurationError

        raise ConfigurationError("give the job id (cairn list shows it), or --dispose PATH")
    from cairn.rest.client import JobEndpoint

    endpoint = JobEndpoint.find(args.job_id)
    body = {
        "target-directory": _absolute(args.target) if args.target else None,
        "formatType": args.type.upper(),
    }
    _progress(f"Triggering savepoint for job {args.job_id}.")
    trigger = endpoint.request("POST", f"/jobs/{args.job_id}/savepoints", body)
    _progress("Waiting for response...")
    location = endpoint.wait_for_operation(trigger["request-id"], args.timeout)
    print(f"Savepoint completed. Path: {location}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """``cairn stop [--drain] --savepoint-path <dir> <job-id>``: stop-with-savepoint (with
    ``--drain``: the sources send the final watermark first), then wait until the job ended."""
    from cairn.rest.client import JobControlError, JobEndpoint

    endpoint = JobEndpoint.find(args.job_id)
    path = _absolute(args.savepoint_path) if args.savepoint_path else None
    verb = "Draining" if args.drain else "Suspending"  # Flink's words
    _progress(f'{verb} job "{args.job_id}" with a savepoint.')
    trigger = endpoint.request(
        "POST",
        f"/jobs/{args.job_id}/stop",
        {"targetDirectory": path, "drain": args.drain, "formatType": args.type.upper()},
    )
    location = endpoint.wait_for_operation(trigger["request-id"], args.timeout)
    print(f"Savepoint completed. Path: {location}")
    state = _wait_for_end(endpoint, args.timeout)
    if state is None:
        _progress(f"Job {args.job_id} ended (its driver closed the endpoint).")
    elif state != "FINISHED":
        raise JobControlError(f"job {args.job_id} ended {state} after the savepoint")
    else:
        print(f"Job {args.job_id} FINISHED.")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """``cairn cancel <job-id>``: cancel, then wait until the job is CANCELED."""
    from cairn.rest.client import JobControlError, JobEndpoint

    endpoint = JobEndpoint.find(args.job_id)
    _progress(f"Cancelling job {args.job_id}.")
    endpoint.request("PATCH", f"/jobs/{args.job_id}?mode=cancel")
    state = _wait_for_end(endpoint, args.timeout)
    if state not in (None, "CANCELED"):
        raise JobControlError(f"job {args.job_id} ended {state}, not CANCELED")
    print(f"Cancelled job {args.job_id}.")
    return 0


def _wait_for_end(endpoint: JobEndpoint, timeout_s: float) -> str | None:
    """The job's terminal state, or None if its endpoint went away first (it ended)."""
    from cairn.rest.client import JobControlError

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = endpoint.status()
        except JobControlError:
            return None
        if state in ("FINISHED", "CANCELED", "FAILED"):
            return state
        time.sleep(0.2)
    raise JobControlError(f"job {endpoint.entry.job_id} still running after {timeout_s:.0f} s")


def _dispose(path: str) -> int:
    """Delete the savepoint at ``path`` after checking that it is one (never a checkpoint
    or an arbitrary directory)."""
    from cairn.checkpoint.storage import dispose_savepoint

    _progress(f"Disposing savepoint '{path}'.")
    dispose_savepoint(_absolute(path))
    print(f"Savepoint '{path}' disposed.")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """``cairn doctor <job-id | checkpoint-dir>``: the checkpoint advice for a running job
    (through its endpoint) or for retained checkpoints (their ``_metadata``)."""
    import json

    from cairn.observability.doctor.report import format_findings
    from cairn.rest.registry import JobRegistry

    target: str | None = args.target
    if target is None and not args.table:
        from cairn.common.exceptions import ConfigurationError

        raise ConfigurationError("give a job id, a checkpoint directory or --table TABLE")
    if target is None:
        subject, checkpoints, findings = ", ".join(args.table), 0, []
    elif JobRegistry().find(JobId(target)) is not None:  # a job id, else a directory
        from cairn.rest.client import JobEndpoint

        body = JobEndpoint.find(JobId(target)).request("GET", f"/jobs/{target}/doctor")
        subject, checkpoints, findings = f"job {target}", body["checkpoints"], body["findings"]
    else:
        if not os.path.exists(target) and "://" not in target:
            from cairn.common.exceptions import ConfigurationError

            raise ConfigurationError(
                f"{target} is neither a running job of this machine (cairn list) nor a "
                "checkpoint directory"
            )
        from cairn.observability.doctor.fact_sources import facts_of_retained
        from cairn.observability.doctor.rules import diagnose

        facts = facts_of_retained(_retained(target, args.conf))
        subject, checkpoints = target, len(facts.checkpoints)
        findings = [f.to_dict() for f in diagnose(facts)]
    if args.table:
        from cairn.cli.table import table_findings

        findings += table_findings(args.table, parse_conf_items(args.conf))
    if args.json:
        print(json.dumps({"checkpoints": checkpoints, "findings": findings}, indent=2))
    else:
        print(format_findings(subject, checkpoints, findings))
    return 0


def _retained(target: str, conf: list[str] | None) -> Any:
    """The retained checkpoints under ``target``, read with the storage options of the
    ``-D`` keys (``s3.*``, ``gs.*``, ``fs.azure.*``, ``flink.hadoop.*``); a storage error is
    one ``CheckpointStorageUnusableError``, as for ``cairn checkpoints``."""
    from cairn.checkpoint.errors import CheckpointError, CheckpointStorageUnusableError
    from cairn.checkpoint.storage_access import describe_storage_error, is_storage_error
    from cairn.cli.options import parse_conf_items
    from cairn.common.config_options import validate_configuration
    from cairn.common.storage_options import storage_options_for
    from cairn.observability.tables import load_retained

    options = storage_options_for(target, validate_configuration(parse_conf_items(conf)))
    try:
        return load_retained(target, options)
    except CheckpointError:
        raise
    except Exception as e:  # missing credentials, unreachable endpoint, no permission, ...
        if not is_storage_error(e):
            raise
        raise CheckpointStorageUnusableError(target, describe_storage_error(target, e)) from e


# argparse has no public name for the type add_subparsers() returns (allowlisted, issue 34).
def add_job_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``list``, ``savepoint``, ``stop`` and ``cancel`` to the ``cairn`` parser."""
    timeout = {
        "type": float,
        "default": DEFAULT_TIMEOUT_S,
        "help": "seconds to wait for the result (default: %(default)s)",
    }
    format_type = {
        "choices": ["canonical", "native"],
        "default": "canonical",
        "type": str.lower,
        "help": "how keyed state is written: canonical (default; restores into any state "
        "backend) or native (the backend's own files, RocksDB: faster, RocksDB only)",
    }
    ls = sub.add_parser("list", help="list the jobs running on this machine")
    ls.add_argument(
        "--web", action="store_true", help="also print each job's web UI link (with its token)"
    )
    ls.add_argument(
        "-a",
        "--all",
        action="store_true",
        help="also list the ended jobs of the job archive (final state, end time, records)",
    )
    ls.add_argument(
        "--archive-dir",
        default=None,
        metavar="DIR",
        help="the job archive (jobmanager.archive.fs.dir; default: the per-user one)",
    )
    ls.set_defaults(func=cmd_list)

    sp = sub.add_parser(
        "savepoint", help="take a savepoint of a running job, or dispose of one (--dispose PATH)"
    )
    sp.add_argument("job_id", nargs="?", default=None, metavar="job-id", type=JobId)
    sp.add_argument(
        "target",
        nargs="?",
        default=None,
        metavar="target-dir",
        help="the savepoint's (new) directory; default: a new directory under "
        "execution.checkpointing.savepoint-dir",
    )
    sp.add_argument(
        "-d", "--dispose", default=None, metavar="PATH", help="delete the savepoint at PATH"
    )
    sp.add_argument("-t", "--type", **format_type)  # type: ignore[arg-type]
    sp.add_argument("--timeout", **timeout)  # type: ignore[arg-type]
    sp.set_defaults(func=cmd_savepoint)

    stop = sub.add_parser("stop", help="stop a running job with a savepoint")
    stop.add_argument("job_id", metavar="job-id", type=JobId)
    stop.add_argument(
        "-p",
        "--savepoint-path",
        default=None,
        metavar="DIR",
        help="the savepoint's (new) directory; default: a new directory under "
        "execution.checkpointing.savepoint-dir",
    )
    stop.add_argument(
        "-d",
        "--drain",
        action="store_true",
        help="send the final watermark (MAX_WATERMARK) before the savepoint, so every "
        "event-time timer and window fires; for a job ended for good (a job restored from "
        "the savepoint finds them already fired)",
    )
    stop.add_argument("-t", "--type", **format_type)  # type: ignore[arg-type]
    stop.add_argument("--timeout", **timeout)  # type: ignore[arg-type]
    stop.set_defaults(func=cmd_stop)

    cancel = sub.add_parser("cancel", help="cancel a running job")
    cancel.add_argument("job_id", metavar="job-id", type=JobId)
    cancel.add_argument("--timeout", **timeout)  # type: ignore[arg-type]
    cancel.set_defaults(func=cmd_cancel)

    doctor = sub.add_parser(
        "doctor",
        help="checkpoint advice for a running job or retained checkpoints, with the figures "
        "behind each finding and the configuration keys that address it",
    )
    doctor.add_argument("target", nargs="?", default=None, metavar="job-id | checkpoint-dir")
    doctor.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="TABLE",
        help="also look at a lakehouse table's data files: a Delta table's path or URL, or "
        "an Iceberg 'namespace.table' (catalog properties with -D uri=... -D warehouse=...)",
    )
    doctor.add_argument("--json", action="store_true", help="findings as JSON")
    doctor.add_argument(
        "-D",
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="storage configuration of a checkpoint directory on an object store or HDFS, "
        "as for cairn checkpoints (s3.endpoint, gs.*, fs.azure.*, flink.hadoop.*), and the "
        "--table's Iceberg catalog properties or Delta storage options",
    )
    doctor.set_defaults(func=cmd_doctor)
