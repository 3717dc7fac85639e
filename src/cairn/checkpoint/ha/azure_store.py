"""``ConditionalStore`` on Azure Blob Storage with ETag preconditions.

Invariant: every write is one Put Blob that the server applies only if its precondition
holds (``If-None-Match: *`` for ``create``, ``If-Match: <ETag read>`` for ``replace``), so two
writers never both succeed; a record is read with one Get Blob whose body and ETag belong
together. ``check_conditional`` proves at start that the server enforces both
(``ha.probe``).
"""

from __future__ import annotations

import posixpath
from typing import Any

from fsspec.asyn import sync

from cairn.checkpoint.ha.probe import check_conditional
from cairn.checkpoint.ha.store import Versioned, WriteConflict

__all__ = ["AzureStore"]

# Refused preconditions (412), and a write racing another on the same blob (409).
_CONFLICT_STATUSES = frozenset({409, 412})


class AzureStore:
    """Records under ``container/prefix`` of an adlfs filesystem ``fs``."""

    def __init__(self, fs: Any, path: str, scheme: str = "abfs") -> None:
        self._fs = fs
        self._path = path.strip("/")
        self._scheme = scheme
        self._container, _, self._prefix = self._path.partition("/")

    @property
    def description(self) -> str:
        return f"{self._scheme}://{self._path}"

    def _key(self, name: str) -> str:
        return posixpath.join(self._prefix, name) if self._prefix else name

    def read(self, name: str) -> Versioned | None:
        from azure.core.exceptions import ResourceNotFoundError

        async def get() -> Versioned | None:
            # adlfs has no public call returning a blob's bytes with its ETag.
            client = self._fs.service_client.get_blob_client(self._container, self._key(name))
            async with client:
                try:
                    download = await client.download_blob()
                except ResourceNotFoundError:
                    return None
                data = await download.readall()
                return Versioned(bytes(data), str(download.properties.etag))

        result: Versioned | None = sync(self._fs.loop, get)
        return result

    def create(self, name: str, data: bytes) -> Versioned:
        return self._put(name, data, {"overwrite": False}, f"record {name!r} exists")

    def replace(self, name: str, data: bytes, expected: str) -> Versioned:
        from azure.core import MatchConditions

        condition = {
            "overwrite": True,
            "etag": expected,
            "match_condition": MatchConditions.IfNotModified,
        }
        message = f"record {name!r} changed since version {expected} was read"
        return self._put(name, data, condition, message)

    def _put(self, name: str, data: bytes, condition: dict[str, Any], conflict: str) -> Versioned:
        from azure.core.exceptions import HttpResponseError, ResourceExistsError

        async def put() -> Any:
            client = self._fs.service_client.get_blob_client(self._container, self._key(name))
            async with client:
                return await client.upload_blob(bytes(data), **condition)

        try:
            out = sync(self._fs.loop, put)
        except ResourceExistsError as exc:  # If-None-Match: * on an existing blob
            raise WriteConflict(conflict) from exc
        except HttpResponseError as exc:
            if exc.status_code in _CONFLICT_STATUSES:
                raise WriteConflict(conflict) from exc
            raise
        return Versioned(bytes(data), str(out["etag"]))

    def check_conditional(self) -> None:
        """Raise ``UnsupportedConditionalWrites`` unless the server refuses a second create
        and a replace naming a stale ETag (probed on a throw-away record)."""
        check_conditional(
            self,
            lambda name: self._fs.rm_file(posixpath.join(self._path, name)),
            "If-None-Match / If-Match",
        )
