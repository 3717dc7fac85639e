"""A small disk for tests: a tmpfs of a few megabytes mounted on a directory, filled to the
last byte and freed again (a full disk under a storage server's data, a host's work dir).

Invariant: ``fill`` leaves exactly one file of its own (``FILLER``) in the directory, which
``free`` removes, so freeing undoes exactly the filling; the mount is lazily unmounted when
the ``SmallDisk`` is closed, whatever still has files open on it.

Needs root (``mount``); :func:`mount_unavailable` says why not. Example (not a doctest: it
needs root)::

    with SmallDisk(Path("/tmp/x/data"), size_mb=64) as disk:
        disk.fill()      # writes fail with ENOSPC
        disk.free()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

__all__ = ["FILLER", "SmallDisk", "fill_to_the_last_byte", "mount_unavailable"]

FILLER = "filler"


def mount_unavailable() -> str | None:
    """Why a tmpfs cannot be mounted here (not root, no ``mount``, no permission in this
    container), else None: it mounts and unmounts a 1 MB one to find out."""
    if os.geteuid() != 0:
        return "a small disk (a tmpfs mount) needs root"
    if shutil.which("mount") is None:
        return "a small disk needs the 'mount' command"
    probe = Path(tempfile.mkdtemp(prefix="cairn-small-disk-probe-"))
    try:
        with SmallDisk(probe, size_mb=1):
            return None
    except OSError as exc:
        return str(exc)
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def fill_to_the_last_byte(directory: Path) -> Path:
    """Append to ``directory/FILLER`` until the file system is full; the filler."""
    filler = directory / FILLER
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 4096, 1):  # big writes, then the last pages' worth
            chunk = b"\0" * size
            with contextlib.suppress(OSError):  # ENOSPC: full at this granularity
                while True:
                    os.write(fd, chunk)
    finally:
        os.close(fd)
    return filler


class SmallDisk:
    """A tmpfs of ``size_mb`` on ``path`` (made if missing), from ``open()`` (or ``with``)
    until ``close()``."""

    def __init__(self, path: Path, size_mb: int) -> None:
        self.path = path
        self.size_mb = size_mb
        self._mounted = False

    def open(self) -> SmallDisk:
        self.path.mkdir(parents=True, exist_ok=True)
        options = f"size={self.size_mb}m,mode=0700"
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(self.path)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise OSError(f"cannot mount a tmpfs on {self.path}: {done.stderr.strip()}")
        self._mounted = True
        return self

    def fill(self) -> Path:
        return fill_to_the_last_byte(self.path)

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.path / FILLER).unlink()

    def available_bytes(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def close(self) -> None:
        if self._mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, check=False)
            self._mounted = False

    def __enter__(self) -> SmallDisk:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
