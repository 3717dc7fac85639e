"""``ConditionalStore`` on S3 with conditional PUTs (``If-None-Match: *``, ``If-Match``).

Invariant: every write is one PUT that the server applies only if its precondition holds
(absent for ``create``, the ETag read for ``replace``), so two writers never both succeed;
a record is read with one GET, whose body and ETag belong together. ``check_conditional``
proves at start that the server enforces both preconditions (some S3-compatible servers
ignore them, ``ha.probe``): without that, high availability is refused rather than silently unsafe.
"""

from __future__ import annotations

import posixpath
from typing import Any

from fsspec.asyn import sync

from cairn.checkpoint.ha.probe import UnsupportedConditionalWrites, check_conditional
from cairn.checkpoint.ha.store import Versioned, WriteConflict

__all__ = ["S3Store", "UnsupportedConditionalWrites", "is_conflict"]

# Refused preconditions (412), and AWS's answer to two concurrent conditional writes (409).
_CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is S3 refusing a conditional write."""
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            error = response.get("Error", {})
            status = str(response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            return str(error.get("Code", "")) in _CONFLICT_CODES or status in _CONFLICT_CODES
        seen = seen.__cause__ or seen.__context__
    return False


class S3Store:
    """Records under ``bucket/prefix`` of an s3fs filesystem ``fs``."""

    def __init__(self, fs: Any, path: str) -> None:
        self._fs = fs
        self._path = path.strip("/")
        self._bucket, _, self._prefix = self._path.partition("/")

    @property
    def description(self) -> str:
        return "s3://" + self._path

    def _key(self, name: str) -> str:
        return posixpath.join(self._prefix, name) if self._prefix else name

    def read(self, name: str) -> Versioned | None:
        async def get() -> Versioned | None:
            try:
                # s3fs has no public call returning the ETag or taking a condition.
                resp = await self._fs._call_s3(
                    "get_object", Bucket=self._bucket, Key=self._key(name)
                )
            except FileNotFoundError:
                return None
            async with resp["Body"] as body:
                data = await body.read()
            return Versioned(data, str(resp["ETag"]))

        result: Versioned | None = sync(self._fs.loop, get)
        return result

    def create(self, name: str, data: bytes) -> Versioned:
        return self._put(name, data, {"IfNoneMatch": "*"}, f"record {name!r} exists")

    def replace(self, name: str, data: bytes, expected: str) -> Versioned:
        message = f"record {name!r} changed since version {expected} was read"
        return self._put(name, data, {"IfMatch": expected}, message)

    def _put(self, name: str, data: bytes, condition: dict[str, str], conflict: str) -> Versioned:
        async def put() -> Any:
            # s3fs has no public conditional put (IfMatch / IfNoneMatch).
            return await self._fs._call_s3(
                "put_object", Bucket=self._bucket, Key=self._key(name), Body=data, **condition
            )

        try:
            out = sync(self._fs.loop, put)
        except Exception as exc:
            if is_conflict(exc):
                raise WriteConflict(conflict) from exc
            raise
        return Versioned(bytes(data), str(out["ETag"]))

    def check_conditional(self) -> None:
        """Raise ``UnsupportedConditionalWrites`` unless the server refuses a second create
        and a replace naming a stale ETag (probed on a throw-away record)."""
        check_conditional(
            self,
            lambda name: self._fs.rm_file(posixpath.join(self._path, name)),
            "If-None-Match / If-Match",
        )
