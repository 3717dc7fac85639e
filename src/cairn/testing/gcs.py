"""A throw-away Google Cloud Storage emulator (fake-gcs-server) on 127.0.0.1 for tests.

Invariant: the server is one process group that ``stop()`` kills; it binds only to loopback,
speaks plain HTTP, and keeps its objects under one temporary directory (a restart on the same
root finds them again). It enforces GCS's generation preconditions (``ifGenerationMatch``),
but not credentials: every request is accepted as anonymous, so tests of a wrong key run on
Azurite and SeaweedFS, not here.

The program is ``github.com/fsouza/fake-gcs-server``, built with the Go toolchain
(``go install``, from the Go module proxy) into ``~/.cache/cairn/fake-gcs-server-<version>/``
on first use or by ``python -m cairn.testing.gcs prepare`` (``.ci/run`` calls it);
``CAIRN_FAKE_GCS_SERVER`` may name a binary instead.

gcsfs's experimental gRPC bucket probe cannot reach an emulator (each call waits 60 s):
processes using gcsfs against it need ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` before
gcsfs is imported (the test suite sets it).

Example::

    with FakeGcs(bucket="checkpoints") as gcs:
        conf = gcs.flink_config()   # {"gs.storage.root.url": ..., "gs.auth.type": ...}
        url = gcs.url("jobs")       # "gs://checkpoints/jobs"
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
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

__all__ = ["FAKE_GCS_VERSION", "FakeGcs", "FakeGcsStartError", "fake_gcs_binary", "main"]

log = logging.getLogger(__name__)

FAKE_GCS_VERSION = "v1.56.1"
_MODULE = "github.com/fsouza/fake-gcs-server"
_BINARY_ENV = "CAIRN_FAKE_GCS_SERVER"
_HOST = "127.0.0.1"
_START_TIMEOUT_S = 30.0
_BUILD_TIMEOUT_S = 900.0
PROJECT = "cairn-test"


class FakeGcsStartError(RuntimeError):
    """The emulator did not serve in time; the message carries its log's tail."""


def _build(staging: Path) -> None:
    go = shutil.which("go")
    if go is None:
        raise ToolPrepareError(
            f"the Go toolchain (go) is not on PATH: it builds {_MODULE} (or set {_BINARY_ENV})"
        )
    env = {**os.environ, "GOBIN": str(staging / "bin"), "CGO_ENABLED": "0"}
    done = subprocess.run(
        [go, "install", f"{_MODULE}@{FAKE_GCS_VERSION}"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=_BUILD_TIMEOUT_S,
    )
    if done.returncode != 0 or not (staging / "bin" / "fake-gcs-server").exists():
        raise ToolPrepareError(
            f"go install {_MODULE}@{FAKE_GCS_VERSION} failed ({done.returncode}):\n"
            f"{(done.stdout + done.stderr)[-3000:]}"
        )


def fake_gcs_binary(*, fetch: bool = True) -> str:
    """The ``fake-gcs-server`` binary: ``CAIRN_FAKE_GCS_SERVER``, else the cached build
    (built with ``go install`` on first use when ``fetch``)."""
    env = os.environ.get(_BINARY_ENV)
    if env:
        return env
    return str(
        cached_build(f"fake-gcs-server-{FAKE_GCS_VERSION}", _build, fetch=fetch)
        / "bin"
        / "fake-gcs-server"
    )


class FakeGcs(ManagedServer):
    """fake-gcs-server with one bucket, started on enter."""

    def __init__(
        self, bucket: str = "cairn", *, root: str | None = None, host: str = _HOST
    ) -> None:
        self.bucket = bucket
        super().__init__(
            Path(root or tempfile.mkdtemp(prefix="cairn-fake-gcs-")), own_root=root is None
        )
        self.host = host
        self.port = free_port()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- what tests use ------------------------------------------------------------------

    def url(self, *parts: str) -> str:
        return "gs://" + "/".join([self.bucket, *parts])

    def flink_config(self) -> dict[str, str]:
        """Cairn/Flink configuration keys that reach this emulator."""
        return {
            "gs.storage.root.url": self.endpoint,
            "gs.auth.type": "UNAUTHENTICATED",
            "gs.project.id": PROJECT,
        }

    def filesystem(self) -> Any:
        """A gcsfs filesystem on the emulator (inspecting objects, planting faults)."""
        from gcsfs.core import GCSFileSystem  # not the experimental gRPC subclass

        return GCSFileSystem(
            endpoint_url=self.endpoint, token="anon", project=PROJECT, skip_instance_cache=True
        )

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> FakeGcs:
        """Start the emulator; retried on a new port if the chosen one was taken meanwhile."""

        def new_port() -> None:
            self.port = free_port()

        return retry_on_port_clash(self._start_once, new_port)

    def _start_once(self) -> FakeGcs:
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        args = [
            fake_gcs_binary(),
            "-scheme=http",
            f"-host={self.host}",
            f"-port={self.port}",
            "-backend=filesystem",
            f"-filesystem-root={data}",
            f"-public-host={self.host}:{self.port}",
            f"-external-url={self.endpoint}",
            "-log-level=warn",
        ]
        self._spawn(args, "fake-gcs.log")
        self._guard_start(self._await_ready)
        log.info("fake-gcs-server at %s (bucket %s, data in %s)", self.endpoint, self.bucket, data)
        return self

    def _await_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        fs = self.filesystem()
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise FakeGcsStartError(
                    f"fake-gcs-server exited with {self._proc.returncode}: {self.log_tail(20)}"
                )
            try:
                if self.bucket not in {b.rstrip("/") for b in fs.ls("")}:
                    fs.mkdir(self.bucket)
                return
            except Exception as exc:  # not serving yet: connection refused
                last = exc
                fs.invalidate_cache()
                time.sleep(0.1)
        raise FakeGcsStartError(
            f"no GCS at {self.endpoint} after {_START_TIMEOUT_S:.0f} s ({last!r}): "
            f"{self.log_tail(20)}"
        )

    def restart(self) -> None:
        """Stop the emulator (if it runs) and start it again on the same data and port."""
        self._end_process(self.stop_signal)
        self._start_once()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cairn.testing.gcs prepare``: build the emulator (``.ci/run``);
    ``python -m cairn.testing.gcs run``: an emulator for local experiments until Ctrl-C."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "prepare"
    if command == "prepare":
        try:
            print(fake_gcs_binary())
        except ToolPrepareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if command == "run":
        with FakeGcs() as gcs:
            print(f"fake-gcs-server on {gcs.endpoint}; -D options: {gcs.flink_config()}")
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    print("usage: python -m cairn.testing.gcs [prepare|run]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
