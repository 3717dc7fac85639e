"""Programs the test servers need, built or installed once into ``~/.cache/cairn/<name>/``
(fake-gcs-server, Azurite, the Kafka broker's and Hadoop's jars).

Invariant: a cache directory is complete or absent: it is built into a fresh sibling
directory, marked complete, then renamed into place, so a build that fails or is interrupted
leaves nothing a later run would mistake for a program, and concurrent first uses never see
half of one (the loser of the rename discards its copy).

>>> cache_root().name
'cairn'
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["ToolPrepareError", "cache_root", "cached_build"]

log = logging.getLogger(__name__)

_COMPLETE = ".complete"


class ToolPrepareError(RuntimeError):
    """A program could not be built or installed (no toolchain, no network)."""


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/cairn``, by default ``~/.cache/cairn``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cairn"


def cached_build(
    name: str,
    build: Callable[[Path], None],
    *,
    fetch: bool = True,
    hint: str | None = None,
    error: type[Exception] = ToolPrepareError,
) -> Path:
    """The complete directory ``cache_root()/name``; if absent (and ``fetch``), ``build(d)``
    fills a fresh directory ``d`` (raising ``error`` on failure) first. Not prepared and not
    ``fetch``: ``error``, naming ``hint`` (the command that prepares it)."""
    target = cache_root() / name
    if (target / _COMPLETE).exists():
        return target
    if not fetch:
        raise error(f"{name} is not prepared in {target}" + (f"; run: {hint}" if hint else ""))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=target.parent))
    try:
        started = time.monotonic()
        build(staging)
        (staging / _COMPLETE).write_text(name + "\n")
        try:
            staging.rename(target)
        except OSError:
            if not (target / _COMPLETE).exists():  # not another process's complete copy
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
        log.info("%s prepared in %s (%.0f s)", name, target, time.monotonic() - started)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
