"""Errors raised by Cairn's user API.

Invariant: every error names what the user must change (the option key and value, the
operator and function, ...); configuration mistakes are ``ValueError`` subclasses so that
PyFlink-style ``except ValueError`` handlers keep working.
"""

from __future__ import annotations

__all__ = ["ConfigurationError", "JobExecutionException", "JobSubmissionError"]


class ConfigurationError(ValueError):
    """An unknown configuration key, or a value that is invalid for its key.

    >>> raise ConfigurationError("unknown configuration option 'x'")
    Traceback (most recent call last):
    ...
    cairn.common.exceptions.ConfigurationError: unknown configuration option 'x'
    """


class JobSubmissionError(RuntimeError):
    """The job cannot be submitted: empty topology, duplicate uids, unserializable functions."""


class JobExecutionException(Exception):
    """The job failed (after exhausting its restart strategy) or was cancelled.

    The root cause is chained as ``__cause__`` (``raise JobExecutionException(...) from err``).
    """

    def __init__(self, message: str, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id

    def get_job_id(self) -> str | None:
        return self.job_id
