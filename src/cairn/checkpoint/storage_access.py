"""A pre-flight check that checkpoint storage is usable, run once at submission.

Invariant: the check only reads the storage root and writes (then removes) one probe object
directly under it; it never creates a bucket or a job directory. Every failure is turned into
one ``CheckpointStorageUnusableError`` that says what is wrong in the user's terms (missing
bucket, credentials, endpoint, permission, space), so a job with unusable storage fails at
submission instead of counting checkpoint failures or hanging on its first upload.

>>> check_storage_access("memory://doc-access/root")
"""

from __future__ import annotations

import errno
import logging
import posixpath
import uuid
from collections.abc import Mapping
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from cairn.checkpoint import hdfs_files, local_files
from cairn.checkpoint.errors import CheckpointStorageUnusableError
from cairn.common.storage_options import (
    AZURE_SCHEMES,
    GCS_SCHEMES,
    HDFS_SCHEMES,
    S3_SCHEMES,
    url_to_fresh_fs,
)

__all__ = ["check_storage_access", "describe_storage_error", "is_storage_error", "space_problem"]

log = logging.getLogger(__name__)

# Libraries whose exceptions mean "the storage said no" (botocore: credentials, endpoint).
_CLIENT_LIBRARIES = frozenset(
    {
        "botocore",
        "aiobotocore",
        "s3fs",
        "gcsfs",
        "adlfs",
        "azure",
        "google",
        "aiohttp",
        "hdfs_native",
    }
)
# Object stores whose first path component is a bucket (container) the check never creates.
_BUCKET_SCHEMES = S3_SCHEMES | GCS_SCHEMES | AZURE_SCHEMES

_HDFS_CLIENT_HINT = "hdfs:// storage needs the hdfs-native client: pip install 'cairn[hdfs]'"

_CREDENTIALS_HINT = (
    "check s3.access-key and s3.secret-key (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
)
_GCS_CREDENTIALS_HINT = (
    "check gs.auth.type and gs.auth.service.account.json.keyfile "
    "(or GOOGLE_APPLICATION_CREDENTIALS)"
)
_AZURE_KEY_HINT = "check fs.azure.account.key.<account>.blob.core.windows.net"


# A store's answer to a write its server's disk had no room for (fake-gcs-server's 500 says
# so; SeaweedFS's S3 gateway and Azurite answer a bare internal error that does not).
_NO_SPACE_TEXT = "no space left on device"
# HDFS's NameNode when no DataNode has room for a block (or every one was excluded).
_NO_DATANODE_TEXT = "could only be written to 0 of the"


def space_problem(exc: BaseException) -> str | None:
    """What ``exc`` (or an exception it was raised from or while handling: a writer's close
    after its failed write) says about the storage's room, in the user's terms, else None.

    >>> space_problem(OSError(errno.ENOSPC, "No space left on device"))
    'no space left on the device'
    >>> space_problem(RuntimeError("HttpError: write /d/x: no space left on device, 500"))
    'no space left on the storage server'
    >>> space_problem(RuntimeError("File /c/x could only be written to 0 of the 1 minReplication "
    ...     "nodes. There are 2 datanode(s) running and 2 node(s) are excluded"))
    'no DataNode took a new block: their disks are full (less room than a block) or failing'
    >>> try:
    ...     try:
    ...         raise OSError(errno.ENOSPC, "No space left on device")
    ...     finally:
    ...         raise RuntimeError("close failed")
    ... except RuntimeError as e:
    ...     space_problem(e)
    'no space left on the device'
    >>> space_problem(KeyError("x")) is None
    True
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return "no space left on the device"
        text = str(current)
        if _NO_SPACE_TEXT in text.lower():
            return "no space left on the storage server"
        if _NO_DATANODE_TEXT in text:
            return (
                "no DataNode took a new block: their disks are full (less room than a block)"
                " or failing"
            )
        current = current.__cause__ or current.__context__
    return None


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def describe_storage_error(url: str, exc: BaseException) -> str:
    """What ``exc``, raised while using the storage at ``url``, means for the user.

    >>> describe_storage_error("s3://b/x", FileNotFoundError("The specified bucket does not exist"))
    "bucket 'b' does not exist (FileNotFoundError: The specified bucket does not exist)"
    >>> describe_storage_error("/ckpt", OSError(errno.ENOSPC, "No space left on device"))
    'no space left on the device (OSError: [Errno 28] No space left on device)'
    >>> describe_storage_error("hdfs://nn:9000/cp", OSError("Connection refused (os error 111)"))
    "cannot connect to the NameNode 'nn:9000'; check the URL's host and port (OSError: ..."
    """
    scheme = _scheme(url)
    # The NameNode's errors carry its Java stack trace: the first line says what it is.
    detail = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if scheme in HDFS_SCHEMES:
        namenode = url.split("://", 1)[1].split("/", 1)[0] or "(fs.defaultFS)"
        if isinstance(exc, ImportError):
            return f"{_HDFS_CLIENT_HINT} ({detail})"
        if "Connection refused" in str(exc) or isinstance(exc, ConnectionError):
            return (
                f"cannot connect to the NameNode {namenode!r}; check the URL's host and port "
                f"({detail})"
            )
        if isinstance(exc, PermissionError) or "AccessControlException" in str(exc):
            return (
                "the NameNode refused access; the HDFS user is HADOOP_USER_NAME or the "
                f"process's user ({detail})"
            )
    if scheme in S3_SCHEMES:
        bucket = url.split("://", 1)[1].split("/", 1)[0]
        if isinstance(exc, FileNotFoundError):
            return f"bucket {bucket!r} does not exist ({detail})"
        if isinstance(exc, PermissionError):
            return f"access denied to bucket {bucket!r}: {_CREDENTIALS_HINT} ({detail})"
        if "Could not connect" in str(exc) or "EndpointConnectionError" in type(exc).__name__:
            return f"cannot connect to the S3 endpoint; check s3.endpoint ({detail})"
        if type(exc).__name__ == "NoCredentialsError":
            return f"no S3 credentials: {_CREDENTIALS_HINT} ({detail})"
    if scheme in GCS_SCHEMES:
        bucket = url.split("://", 1)[1].split("/", 1)[0]
        if isinstance(exc, FileNotFoundError):
            return f"bucket {bucket!r} does not exist ({detail})"
        if isinstance(exc, PermissionError) or _status(exc) in (401, 403):
            return f"access denied to bucket {bucket!r}: {_GCS_CREDENTIALS_HINT} ({detail})"
        if _is_connection_error(exc):
            return f"cannot connect to GCS; check gs.storage.root.url ({detail})"
    if scheme in AZURE_SCHEMES:
        container = url.split("://", 1)[1].split("/", 1)[0].split("@", 1)[0]
        detail = f"{type(exc).__name__}: {_first_line(exc)}"
        code = str(getattr(exc, "error_code", "") or "")
        if isinstance(exc, FileNotFoundError) or code == "ContainerNotFound":
            return f"container {container!r} does not exist ({detail})"
        if _status(exc) in (401, 403) or code.startswith("Authorization"):
            return f"access denied to container {container!r}: {_AZURE_KEY_HINT} ({detail})"
        if _is_connection_error(exc):
            return f"cannot connect to Azure Blob storage; check fs.azure.blob.endpoint ({detail})"
    space = space_problem(exc)
    if space is not None:
        return f"{space} ({detail})"
    if isinstance(exc, PermissionError):
        return f"no permission to write there ({detail})"
    return detail


def _status(exc: BaseException) -> int | None:
    """The HTTP status an object store client attached to ``exc`` (Azure SDK, gcsfs)."""
    for attr in ("status_code", "code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    return None


def _is_connection_error(exc: BaseException) -> bool:
    names = {type(e).__name__ for e in (exc, exc.__cause__, exc.__context__) if e is not None}
    return bool(names & {"ClientConnectorError", "ServiceRequestError", "ConnectionError"})


def _first_line(exc: BaseException) -> str:
    """The Azure SDK's messages run over lines (request id, XML body): keep the first."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else ""


def is_storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the filesystem (I/O, credentials, endpoint), not from Cairn:
    an ``OSError``, an exception class of a storage client library, or any exception raised
    inside one (hdfs-native raises plain ``RuntimeError`` for a failed write pipeline,
    ``OperationFailed``, and for the NameNode's other errors).

    >>> is_storage_error(PermissionError("denied")), is_storage_error(KeyError("x"))
    (True, False)
    >>> is_storage_error(RuntimeError("OperationFailed: All nodes failed for write"))
    False
    """
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in _CLIENT_LIBRARIES:
        return True
    return _raised_in(exc) in _CLIENT_LIBRARIES


def _raised_in(exc: BaseException) -> str | None:
    """The top-level package of the innermost Python frame ``exc`` went through (a native
    extension's error has no frame of its own: the frame that called into it)."""
    tb, package = exc.__traceback__, None
    while tb is not None:
        package = str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0]
        tb = tb.tb_next
    return package


def check_storage_access(url: str | None, storage_options: Mapping[str, Any] | None = None) -> None:
    """Raise ``CheckpointStorageUnusableError`` unless ``url`` can be listed and written.

    ``None`` is the default storage (the user's private root, checked as
    ``local_files.ensure_private_root`` does). A local directory that does not exist yet is
    created 0700, as checkpoints would create it.
    """
    if url is None:
        local_files.ensure_private_root(local_files.default_root())
        url = "file://" + local_files.default_root()
    try:
        fs, root = url_to_fresh_fs(url, storage_options)
    except Exception as exc:  # bad options, missing fsspec implementation package
        raise CheckpointStorageUnusableError(url, describe_storage_error(url, exc)) from exc
    root = root.rstrip("/") or root
    probe = posixpath.join(root, f".cairn-probe-{uuid.uuid4().hex}")
    if _scheme(url) in HDFS_SCHEMES and not hdfs_files.is_hdfs(fs):
        raise CheckpointStorageUnusableError(
            url, f"{_HDFS_CLIENT_HINT} (fsspec chose {type(fs).__module__})"
        )
    try:
        if _scheme(url) in _BUCKET_SCHEMES:
            fs.ls(root.split("/", 1)[0])  # the bucket must exist: never create one
            fs.pipe_file(probe, b"")
        elif isinstance(fs, LocalFileSystem):
            local_files.makedirs_private(root)  # as checkpoints would create it: 0700
            local_files.write_private(probe, b"")
        elif hdfs_files.is_hdfs(fs):
            hdfs_files.makedirs_private(fs, root)  # as checkpoints would create it: 0700
            hdfs_files.write_private(fs, probe, b"")
        else:
            fs.makedirs(root, exist_ok=True)
            fs.pipe_file(probe, b"")
    except Exception as exc:  # anything the filesystem raises is the user's storage problem
        raise CheckpointStorageUnusableError(url, describe_storage_error(url, exc)) from exc
    try:
        fs.rm(probe)
    except Exception as exc:  # written but not removable: usable, tell the user why a file stays
        log.warning("could not remove the storage probe %s: %s", probe, exc)
