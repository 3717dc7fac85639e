"""The client side of the control endpoint, for the CLI: find a running job in the registry
and call its endpoint (``urllib``, JSON in and out, the job's bearer token).

Invariant: every failure is a :class:`JobControlError` with one line a user can act on (no
such job, endpoint unreachable, the endpoint's own error message); the token is sent only to
the endpoint the registry names for that job.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from cairn.ids import JobId
from cairn.rest.https import client_ssl
from cairn.rest.registry import JobEntry, JobRegistry

TIMEOUT_S = 10.0
POLL_S = 0.2


class JobControlError(Exception):
    """A job cannot be found or controlled; ``str()`` is the one line the CLI prints."""


class JobEndpoint:
    """Requests to one running job's endpoint."""

    def __init__(self, entry: JobEntry, timeout_s: float = TIMEOUT_S) -> None:
        self.entry = entry
        self._timeout_s = timeout_s

    @classmethod
    def find(cls, job_id: JobId, registry: JobRegistry | None = None) -> JobEndpoint:
        """The endpoint of running job ``job_id``.

        Raises:
            JobControlError: no such job runs on this machine (for this user).
        """
        registry = registry or JobRegistry()
        entry = registry.find(job_id)
        if entry is None:
            running = [e.job_id for e in registry.running_jobs()]
            known = f"running: {', '.join(running)}" if running else "no job is running"
            raise JobControlError(
                f"no running job {job_id} on this machine ({known}; `cairn list` shows them)"
            )
        return cls(entry)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """``method path`` with ``body`` as JSON; returns the decoded JSON answer.

        Raises:
            JobControlError: the endpoint is unreachable or answered an error (its message).
        """
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.entry.endpoint + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.entry.token is not None:
            req.add_header("Authorization", f"Bearer {self.entry.token}")
        try:
            context = client_ssl(self.entry)
            with urllib.request.urlopen(req, timeout=self._timeout_s, context=context) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise JobControlError(_error_message(e)) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise JobControlError(
                f"job {self.entry.job_id} does not answer at {self.entry.endpoint} ({reason}); "
                "its driver may have ended"
            ) from None

    def status(self) -> str:
        """The job's state (``RUNNING``, ``FINISHED``, ...)."""
        return str(self.request("GET", f"/jobs/{self.entry.job_id}")["state"])

    def wait_for_operation(self, trigger_id: str, timeout_s: float) -> str:
        """Poll a savepoint or stop operation until it completed; returns the savepoint's
        location.

        Raises:
            JobControlError: it failed (with the reason), or is still running at the timeout.
        """
        deadline = time.monotonic() + timeout_s
        path = f"/jobs/{self.entry.job_id}/savepoints/{trigger_id}"
        while True:
            answer = self.request("GET", path)
            if answer["status"]["id"] == "COMPLETED":
                operation = answer.get("operation", {})
                cause = operation.get("failure-cause")
                if cause is not None:
                    raise JobControlError(f"savepoint failed: {cause.get('stack-trace')}")
                return str(operation["location"])
            if time.monotonic() > deadline:
                raise JobControlError(
                    f"savepoint of job {self.entry.job_id} not complete after {timeout_s:.0f} s "
                    "(it goes on; see the job's log)"
                )
            time.sleep(POLL_S)


def _error_message(e: urllib.error.HTTPError) -> str:
    try:
        errors = json.loads(e.read() or b"{}").get("errors") or []
    except (ValueError, AttributeError):
        errors = []
    return "; ".join(str(m) for m in errors) or f"HTTP {e.code} {e.reason}"
