"""A throw-away Azure Blob Storage emulator (Azurite's blob service) on 127.0.0.1 for tests.

Invariant: the server is one process group that ``stop()`` kills; it binds only to loopback,
keeps its blobs under one temporary directory (a restart on the same root finds them again),
and accepts only requests signed with its one account's key (Azurite's well-known
development account, or the account and key given), so a wrong key is really refused. It
enforces the Blob service's ETag preconditions (``If-None-Match``, ``If-Match``).

Azurite is the npm package ``azurite``, installed with ``npm install`` (from the npm
registry) into ``~/.cache/cairn/azurite-<version>/`` on first use or by
``python -m cairn.testing.azurite prepare`` (``.ci/run`` calls it); ``CAIRN_AZURITE_BLOB``
may name an ``azurite-blob`` executable instead.

Example::

    with Azurite(container="checkpoints") as az:
        conf = az.flink_config()   # {"fs.azure.account.key.<account>...": ..., ...}
        url = az.url("jobs")       # "abfs://checkpoints@<account>.dfs.core.windows.net/jobs"
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.testing.managed_server import ManagedServer, retry_on_port_clash
from cairn.testing.spark_cluster import free_port
from cairn.testing.tool_cache import ToolPrepareError, cached_build

__all__ = [
    "AZURITE_VERSION",
    "DEV_ACCOUNT",
    "DEV_KEY",
    "Azurite",
    "AzuriteStartError",
    "azurite_blob_binary",
    "main",
]

log = logging.getLogger(__name__)

AZURITE_VERSION = "3.37.0"
_BINARY_ENV = "CAIRN_AZURITE_BLOB"
_HOST = "127.0.0.1"
_START_TIMEOUT_S = 30.0
_INSTALL_TIMEOUT_S = 900.0
# Azurite's documented development account (the Azure SDKs' "UseDevelopmentStorage=true").
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class AzuriteStartError(RuntimeError):
    """Azurite did not serve in time; the message carries its log's tail."""


def _install(staging: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ToolPrepareError(
            f"npm is not on PATH: it installs Azurite (apt-get install npm), or set {_BINARY_ENV}"
        )
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(staging),
         f"azurite@{AZURITE_VERSION}"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=_INSTALL_TIMEOUT_S,
    )  # fmt: skip
    if done.returncode != 0 or not (staging / "node_modules" / ".bin" / "azurite-blob").exists():
        raise ToolPrepareError(
            f"npm install azurite@{AZURITE_VERSION} failed ({done.returncode}):\n"
            f"{(done.stdout + done.stderr)[-3000:]}"
        )


def azurite_blob_binary(*, fetch: bool = True) -> str:
    """The ``azurite-blob`` executable: ``CAIRN_AZURITE_BLOB``, else the cached install
    (``npm install`` on first use when ``fetch``)."""
    env = os.environ.get(_BINARY_ENV)
    if env:
        return env
    root = cached_build(f"azurite-{AZURITE_VERSION}", _install, fetch=fetch)
    return str(root / "node_modules" / ".bin" / "azurite-blob")


class Azurite(ManagedServer):
    """Azurite's blob service with one container, started on enter."""

    # Azurite's SIGTERM waits for idle keep-alive connections (clients' pools) to close.
    stop_grace_s = 2.0

    def __init__(
        self,
        container: str = "cairn",
        *,
        account: str = DEV_ACCOUNT,
        key: str = DEV_KEY,
        root: str | None = None,
        host: str = _HOST,
    ) -> None:
        self.container = container
        self.account = account
        self.key = key
        super().__init__(
            Path(root or tempfile.mkdtemp(prefix="cairn-azurite-")), own_root=root is None
        )
        self.host = host
        self.port = free_port()

    @property
    def endpoint(self) -> str:
        """The account's Blob endpoint (Azurite serves accounts path-style)."""
        return f"http://{self.host}:{self.port}/{self.account}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};"
            f"AccountKey={self.key};BlobEndpoint={self.endpoint};"
        )

    # -- what tests use ------------------------------------------------------------------

    def url(self, *parts: str, scheme: str = "abfs") -> str:
        """Hadoop's form, naming the account: ``abfs://<container>@<account>.dfs...``."""
        host = f"{self.account}.dfs.core.windows.net"
        return f"{scheme}://{self.container}@{host}/" + "/".join(parts)

    def flink_config(self, key: str | None = None) -> dict[str, str]:
        """Cairn/Flink configuration keys that reach this server (signing with ``key``,
        default: the right one)."""
        return {
            f"fs.azure.account.key.{self.account}.blob.core.windows.net": key or self.key,
            "fs.azure.blob.endpoint": self.endpoint,
        }

    def filesystem(self) -> Any:
        """An adlfs filesystem on the server (inspecting blobs, planting faults)."""
        from adlfs import AzureBlobFileSystem

        return AzureBlobFileSystem(
            connection_string=self.connection_string, skip_instance_cache=True
        )

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> Azurite:
        """Start Azurite; retried on a new port if the chosen one was taken meanwhile."""

        def new_port() -> None:
            self.port = free_port()

        return retry_on_port_clash(self._start_once, new_port)

    def _start_once(self) -> Azurite:
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        args = [
            "env",  # Azurite reads its accounts from the environment only
            f"AZURITE_ACCOUNTS={self.account}:{self.key}",
            azurite_blob_binary(),
            "--blobHost",
            self.host,
            "--blobPort",
            str(self.port),
            "--location",
            str(data),
            "--debug",
            str(self.root / "debug.log"),
            # The Azure SDK for Python speaks newer API versions than Azurite knows of.
            "--skipApiVersionCheck",
            "--disableProductStyleUrl",
        ]
        self._spawn(args, "azurite.log")
        self._guard_start(self._await_ready)
        log.info("Azurite at %s (container %s, data in %s)", self.endpoint, self.container, data)
        return self

    def _await_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        last: BaseException | None = None
        # The port first: the Azure SDK backs off for seconds after a refused connection.
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                tail = self.log_tail(20)
                if "EADDRINUSE" in tail:
                    tail = "address already in use: " + tail
                raise AzuriteStartError(f"Azurite exited with {self._proc.returncode}: {tail}")
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                break
            except OSError as exc:
                last = exc
                time.sleep(0.05)
        fs = self.filesystem()
        while time.monotonic() < deadline:
            try:
                if not fs.exists(self.container):
                    fs.mkdir(self.container)
                return
            except Exception as exc:  # not serving yet: connection refused
                last = exc
                fs.invalidate_cache()
                time.sleep(0.1)
        raise AzuriteStartError(
            f"no Azurite at {self.endpoint} after {_START_TIMEOUT_S:.0f} s ({last!r}): "
            f"{self.log_tail(20)}"
        )

    def restart(self) -> None:
        """Stop Azurite (if it runs) and start it again on the same data and port."""
        self._end_process(self.stop_signal)
        self._start_once()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cairn.testing.azurite prepare``: install Azurite (``.ci/run``);
    ``python -m cairn.testing.azurite run``: a server for local experiments until Ctrl-C."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "prepare"
    if command == "prepare":
        try:
            print(azurite_blob_binary())
        except ToolPrepareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if command == "run":
        with Azurite() as az:
            print(f"Azurite blob service on {az.endpoint}; -D options: {az.flink_config()}")
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    print("usage: python -m cairn.testing.azurite [prepare|run]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
