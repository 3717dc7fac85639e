"""Checkpoint files on a local disk are private to the user running the job.

Invariant: every directory Cairn creates for checkpoints on a local disk is 0700 and every file
0600 (created exclusively, never through an existing file or link), whatever the umask; the
default storage root is used only if the current user owns it and nobody else may write in it.
Checkpointed state is pickled, so whoever can change it can run code in the job: the files
must be writable by the job's owner only (and readable only by it: state holds user data).
"""

from __future__ import annotations

import os
import stat
import tempfile

from cairn.common.exceptions import ConfigurationError

DIR_MODE = 0o700
FILE_MODE = 0o600


def default_root() -> str:
    """``<tempdir>/cairn-checkpoints-<uid>``: one root per user.

    In the temp directory like before (it exists for every user, also for Spark executors
    without a home directory), named by uid so users never share it; created 0700 and
    refused when someone else could have prepared it (:func:`ensure_private_root`).
    """
    return os.path.join(tempfile.gettempdir(), f"cairn-checkpoints-{os.getuid()}")


def ensure_private_root(path: str) -> None:
    """Create ``path`` 0700, or check that the existing one is safe to keep checkpoints in.

    Raises:
        ConfigurationError: ``path`` is not a directory (e.g. a symbolic link), another user
            owns it, or its group or others may write in it; the message says what to do.
    """
    try:
        os.mkdir(path, DIR_MODE)
        os.chmod(path, DIR_MODE)
    except FileExistsError:
        pass
    st = os.lstat(path)
    remedy = (
        "checkpoints would run code planted there; remove it or configure "
        "execution.checkpointing.dir to a directory only you can write"
    )
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigurationError(f"checkpoint storage {path} is not a directory: {remedy}")
    if st.st_uid != os.getuid():
        raise ConfigurationError(
            f"checkpoint storage {path} belongs to uid {st.st_uid}, not to you "
            f"(uid {os.getuid()}): {remedy}"
        )
    if st.st_mode & 0o022:
        raise ConfigurationError(
            f"checkpoint storage {path} is writable by group or others (mode "
            f"{stat.S_IMODE(st.st_mode):04o}): {remedy}, or chmod 700 it"
        )


def makedirs_private(path: str) -> None:
    """``os.makedirs`` with every directory it creates 0700 (existing ones are left alone).

    >>> d = os.path.join(tempfile.mkdtemp(), "a", "b")
    >>> makedirs_private(d)
    >>> [oct(os.stat(p).st_mode & 0o777) for p in (d, os.path.dirname(d))]
    ['0o700', '0o700']
    """
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path:
        makedirs_private(parent)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return
    os.chmod(path, DIR_MODE)  # the umask may have removed bits; never added


def open_private(path: str) -> int:
    """A new file at ``path`` for writing, mode 0600; fails if anything exists there."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)


def write_private(path: str, data: bytes, sync: bool = False) -> None:
    """Write ``data`` as the new file ``path`` (0600); ``sync``: fsync before returning."""
    fd = open_private(path)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
