"""``ConditionalStore`` on Google Cloud Storage with generation preconditions.

Invariant: every write is one upload that the server applies only if its precondition holds
(``ifGenerationMatch=0``: the object is absent, for ``create``; ``ifGenerationMatch=<g>``:
the generation read is still current, for ``replace``), so two writers never both succeed; a
record is read with one GET whose body and ``x-goog-generation`` belong together. A record's
version is its generation, which GCS never reuses for an object name. ``check_conditional``
proves at start that the server enforces both (``ha.probe``).
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import quote

from fsspec.asyn import sync

from cairn.checkpoint.ha.probe import check_conditional
from cairn.checkpoint.ha.store import Versioned, WriteConflict

__all__ = ["GcsStore"]


class GcsStore:
    """Records under ``bucket/prefix`` of a gcsfs filesystem ``fs``."""

    def __init__(self, fs: Any, path: str) -> None:
        self._fs = fs
        self._path = path.strip("/")
        self._bucket, _, self._prefix = self._path.partition("/")

    @property
    def description(self) -> str:
        return "gs://" + self._path

    def _key(self, name: str) -> str:
        return posixpath.join(self._prefix, name) if self._prefix else name

    def read(self, name: str) -> Versioned | None:
        try:
            # gcsfs has no public call returning an object's bytes with its generation.
            headers, data = sync(
                self._fs.loop,
                self._fs._call,
                "GET",
                "b/{}/o/{}",
                self._bucket,
                self._key(name),
                alt="media",
            )
        except FileNotFoundError:
            return None
        return Versioned(bytes(data), str(headers["x-goog-generation"]))

    def create(self, name: str, data: bytes) -> Versioned:
        return self._upload(name, data, "0", f"record {name!r} exists")

    def replace(self, name: str, data: bytes, expected: str) -> Versioned:
        message = f"record {name!r} changed since version {expected} was read"
        return self._upload(name, data, expected, message)

    def _upload(self, name: str, data: bytes, generation: str, conflict: str) -> Versioned:
        # gcsfs's public put takes no generation precondition but 0 (mode="create").
        url = f"{self._fs._location}/upload/storage/v1/b/{quote(self._bucket)}/o"
        try:
            out = sync(
                self._fs.loop,
                self._fs._call,
                "POST",
                url,
                uploadType="media",
                name=self._key(name),
                data=bytes(data),
                ifGenerationMatch=generation,
                json_out=True,
            )
        except FileExistsError as exc:  # gcsfs's reading of 412 Precondition Failed
            raise WriteConflict(conflict) from exc
        except FileNotFoundError as exc:  # ifGenerationMatch=<g> on an absent object: 404
            if generation == "0":
                raise
            raise WriteConflict(conflict) from exc
        return Versioned(bytes(data), str(out["generation"]))

    def check_conditional(self) -> None:
        """Raise ``UnsupportedConditionalWrites`` unless the server refuses a second create
        and a replace naming a stale generation (probed on a throw-away record)."""
        check_conditional(
            self,
            lambda name: self._fs.rm_file(posixpath.join(self._path, name)),
            "ifGenerationMatch",
        )
