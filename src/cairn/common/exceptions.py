"""Errors raised by Cairn's user API.

Invariant: every error names what the user must change (the option key and value, the
operator and function, ...); configuration mistakes are ``ValueError`` subclasses so that
PyFlink-style ``except ValueError`` handlers keep working.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "JobExecutionException",
    "JobSubmissionError",
    "MissingDependencyError",
    "require_module",
]


class ConfigurationError(ValueError):
    """An unknown configuration key, or a value that is invalid for its key.

    >>> raise ConfigurationError("unknown configuration option 'x'")
    Traceback (most recent call last):
    ...
    cairn.common.exceptions.ConfigurationError: unknown configuration option 'x'
    """


class JobSubmissionError(RuntimeError):
    """The job cannot be submitted: empty topology, duplicate uids, unserializable functions."""


class MissingDependencyError(ImportError):
    """A connector needs an optional dependency that is not installed; the message names the
    extra that installs it (an ``ImportError``, as PyFlink's missing jar is a class error).

    >>> require_module("no_such_module_x", "the Foo sink", "foo")
    Traceback (most recent call last):
    ...
    cairn.common.exceptions.MissingDependencyError: the Foo sink needs no_such_module_x, \
which is not installed
      pip install 'cairn[foo]'
    """


def require_module(module: str, what: str, extra: str) -> None:
    """Raise ``MissingDependencyError`` unless ``module`` can be imported."""
    try:
        __import__(module)
    except ImportError as e:
        raise MissingDependencyError(
            f"{what} needs {module}, which is not installed\n  pip install 'cairn[{extra}]'"
        ) from e


class JobExecutionException(Exception):
    """The job failed (after exhausting its restart strategy) or was cancelled.

    The root cause is chained as ``__cause__`` (``raise JobExecutionException(...) from err``).
    """

    def __init__(self, message: str, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id

    def get_job_id(self) -> str | None:
        return self.job_id
