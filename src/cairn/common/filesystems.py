"""Which filesystem URLs Cairn can write to: the schemes fsspec knows.

Invariant: a URL accepted here names a filesystem fsspec has an implementation for (whether
its package is installed is checked where the filesystem is opened, which may be a worker);
local paths (no ``scheme://``) are always accepted. Checked where the user gives the URL, so
a typo fails at submission, not at the first checkpoint.

>>> filesystem_url_problem("file:///tmp/checkpoints") is None
True
>>> filesystem_url_problem("/tmp/checkpoints") is None
True
>>> print(filesystem_url_problem("foo://b/c"))
unknown filesystem scheme 'foo' in 'foo://b/c' (fsspec knows file, memory, s3, gs, hdfs, ...)
"""

from __future__ import annotations

__all__ = ["filesystem_url_problem"]

_COMMON = ("file", "memory", "s3", "gs", "hdfs")


def filesystem_url_problem(url: str) -> str | None:
    """Why fsspec cannot open ``url`` (an unknown scheme), or None if it can."""
    from fsspec.registry import known_implementations, registry

    if "://" not in url:
        return None
    for part in url.split("::"):  # fsspec's chained URLs: "simplecache::s3://bucket/x"
        scheme = part.split("://", 1)[0] if "://" in part else part
        if scheme not in known_implementations and scheme not in registry:
            return (
                f"unknown filesystem scheme {scheme!r} in {url!r} (fsspec knows "
                f"{', '.join(_COMMON)}, ...)"
            )
    return None
