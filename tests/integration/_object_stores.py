"""One face for the object-store emulators the store matrix runs on (fake-gcs-server for
``gs://``, Azurite for ``abfs://``): URLs, configuration, a filesystem to look at what the
job wrote, and the store's own conditional-write store for high availability."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn.common.storage_options import storage_options_for


@dataclass(frozen=True)
class ObjectStore:
    name: str  # "gcs" or "azure"
    server: Any  # FakeGcs or Azurite

    @property
    def bucket(self) -> str:
        return str(getattr(self.server, "bucket", None) or self.server.container)

    def url(self, *parts: str) -> str:
        return str(self.server.url(*parts))

    def config(self, **overrides: str) -> dict[str, str]:
        return {**self.server.flink_config(), **overrides}

    def options(self, url: str | None = None, **overrides: str) -> dict[str, Any]:
        return storage_options_for(url or self.url("x"), self.config(**overrides))

    def path(self, url: str) -> str:
        """``url`` as the filesystem names it: ``<bucket>/<key>`` (no account host)."""
        authority, _, rest = url.split("://", 1)[1].partition("/")
        return authority.split("@", 1)[0] + ("/" + rest if rest else "")

    def filesystem(self) -> Any:
        return self.server.filesystem()

    def find(self, url: str) -> list[str]:
        fs = self.filesystem()
        fs.invalidate_cache()
        return list(fs.find(self.path(url)))

    def conditional_store(self, prefix: str) -> Any:
        from cairn.checkpoint.ha.azure_store import AzureStore
        from cairn.checkpoint.ha.gcs_store import GcsStore

        path = f"{self.bucket}/{prefix}"
        if self.name == "gcs":
            return GcsStore(self.filesystem(), path)
        return AzureStore(self.filesystem(), path)
