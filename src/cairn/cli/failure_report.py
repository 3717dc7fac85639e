"""What ``cairn run`` prints when a job fails in the user's code: a short report a person
reads in one glance, the whole chained traceback kept in a file whose path it names.

Invariant: the report is at most ``MAX_LINES`` lines: what failed and how (one line), where
(the operator, its subtask, the record it was given), the user's own frames (innermost last,
at most three), what Cairn did about it (restarts, the restart strategy's reason), and where
the full traceback is; nothing in it comes from Cairn's or Spark's frames.

>>> from cairn.deploy.failure_facts import FailureFacts, UserFrame
>>> facts = FailureFacts("parse (uid parse)", (UserFrame("/jobs/job.py", 5, "parse",
...     "return key, int(value)"),), "'c,x'")
>>> print(short_report("b945", "ValueError", "invalid literal for int() with base 10: 'x'",
...     facts, 0, "0", 0, "restart strategy 'none' (no restarts)", "/tmp/cairn-b945.log"))
Job b945 failed: ValueError: invalid literal for int() with base 10: 'x'
  in operator parse (uid parse), subtask 0
  record: 'c,x'
  /jobs/job.py:5 in parse
      return key, int(value)
Not restarted: restart strategy 'none' (no restarts).
Full traceback: /tmp/cairn-b945.log (or run with -v)
"""

from __future__ import annotations

import os
import tempfile
import traceback

from cairn.deploy.failure_facts import FailureFacts

__all__ = ["MAX_LINES", "report_job_failure", "report_script_error", "short_report"]

MAX_LINES = 15
_MESSAGE_CHARS = 300
_FRAMES = 3


def short_report(
    job_id: str,
    error_type: str,
    message: str,
    facts: FailureFacts | None,
    vertex: int | None,
    subtask: str | None,
    restarts: int,
    reason: str | None,
    log_path: str | None,
) -> str:
    """The report's lines (see the module's invariant)."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    if len(first) > _MESSAGE_CHARS:
        first = first[: _MESSAGE_CHARS - 3] + "..."
    lines = [f"Job {job_id} failed: {error_type}: {first}"]
    facts = facts or FailureFacts()
    where = f"operator {facts.operator}" if facts.operator else None
    if where is None and vertex is not None:
        where = f"vertex {vertex}"
    if where is not None:
        lines.append(f"  in {where}" + (f", subtask {subtask}" if subtask is not None else ""))
    if facts.record is not None:
        lines.append(f"  record: {facts.record}")
    for frame in facts.user_frames[-_FRAMES:]:
        lines.append(f"  {frame.file}:{frame.line} in {frame.function}")
        if frame.code:
            lines.append(f"      {frame.code}")
    did = f"Not restarted: {reason}." if reason else "The job failed."
    if restarts:
        did += f" (after {restarts} restart{'s' if restarts != 1 else ''})"
    lines.append(did)
    if log_path is not None:
        lines.append(f"Full traceback: {log_path} (or run with -v)")
    return "\n".join(lines[:MAX_LINES])


def _write_log(name: str, error: BaseException) -> str | None:
    """Write ``error``'s whole chained traceback to ``<tmp>/cairn-<name>.log``; its path."""
    path = os.path.join(tempfile.gettempdir(), f"cairn-{name}.log")
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write("".join(traceback.format_exception(error)))
    except OSError:
        return None
    return path


def script_report(
    script: str, error_type: str, message: str, facts: FailureFacts, log_path: str | None
) -> str:
    """What ``cairn run`` prints when the script itself raised (not a job of it).

    >>> from cairn.deploy.failure_facts import UserFrame
    >>> print(script_report("job.py", "KeyError", "'host'", FailureFacts(None,
    ...     (UserFrame("/jobs/job.py", 3, "<module>", "host = conf['host']"),)), None))
    cairn run: job.py raised KeyError: 'host'
      /jobs/job.py:3 in <module>
          host = conf['host']
    """
    first = message.strip().splitlines()[0] if message.strip() else ""
    if len(first) > _MESSAGE_CHARS:
        first = first[: _MESSAGE_CHARS - 3] + "..."
    lines = [f"cairn run: {script} raised {error_type}" + (f": {first}" if first else "")]
    for frame in facts.user_frames[-_FRAMES:]:
        lines.append(f"  {frame.file}:{frame.line} in {frame.function}")
        if frame.code:
            lines.append(f"      {frame.code}")
    if log_path is not None:
        lines.append(f"Full traceback: {log_path} (or run with -v)")
    return "\n".join(lines[:MAX_LINES])


def report_script_error(script: str, error: BaseException) -> str:
    """The short report of an exception the job script raised outside a job: a syntax
    error (its line and caret), or the exception with the user's own frames; the whole
    traceback goes to ``<tmp>/cairn-run-<pid>.log`` first."""
    from cairn.deploy.failure_facts import facts_of

    if isinstance(error, SyntaxError):
        where = f"{error.filename or script}:{error.lineno}"
        lines = [f"cairn run: {where}: {type(error).__name__}: {error.msg}"]
        if error.text:
            text = error.text.rstrip("\n")
            lines.append(f"    {text.strip()}")
            if error.offset:
                indent = len(text) - len(text.lstrip())
                lines.append("    " + " " * max(error.offset - 1 - indent, 0) + "^")
        return "\n".join(lines)
    log_path = _write_log(f"run-{os.getpid()}", error)
    return script_report(script, type(error).__name__, str(error), facts_of(error), log_path)


def report_job_failure(error: BaseException) -> str:
    """The short report of a failed job's ``JobExecutionError``; the whole traceback goes to
    ``<tmp>/cairn-<job id>.log`` first (its path is in the report)."""
    from cairn.deploy.attempt_errors import TaskFailure

    job_id = str(getattr(error, "job_id", None) or "?")
    cause = error.__cause__
    log_path = _write_log(job_id, error)
    restarts = int(getattr(error, "restarts", 0) or 0)
    reason = getattr(error, "failure_reason", None)
    if isinstance(cause, TaskFailure):
        failed = cause.failed
        key = failed.task
        return short_report(
            job_id,
            failed.error_type,
            failed.message,
            failed.facts,
            None if key is None else int(key.vertex_id),
            None if key is None else str(key.subtask_index),
            restarts,
            reason,
            log_path,
        )
    kind = type(cause).__name__ if cause is not None else type(error).__name__
    text = str(cause) if cause is not None else str(error)
    return short_report(job_id, kind, text, None, None, None, restarts, reason, log_path)
