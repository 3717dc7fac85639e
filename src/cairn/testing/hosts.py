"""Simulated hosts on one Linux machine: a network namespace each, wired to one private bridge.

Invariant: every name this module creates (namespaces, the bridge, veth pairs) carries the
network's tag, lives only until ``HostNetwork.delete()`` (called on exit and by ``atexit``),
and every address is inside the network's private /24 (``10.77.<n>.0/24``); the namespaces
have no default route, so a process on a host reaches only the other hosts, the controller
(the machine's own namespace, ``.1`` on the bridge) and its own loopback. Faults are plain
kernel state — a veth link down, a blackhole route, a full tmpfs, a signal — so healing one
is undoing exactly that state.

Every host resolves every host's name (and ``controller``) to its address: ``add_host``
rewrites each namespace's ``/etc/netns/<netns>/hosts`` (the machine's lines, then those),
which ``ip netns exec`` mounts over ``/etc/hosts`` for what runs there; ``delete()``
removes those files with the namespaces.

Needs root and iproute2 (``ip netns``, ``ip link``); :func:`netns_unavailable` says why not.

Example (not a doctest: it needs root)::

    with HostNetwork() as net:
        a, b = net.add_host("a"), net.add_host("b")
        proc = a.popen(["python3", "-m", "http.server", "--bind", a.address, "8000"])
        net.partition(a, b)      # blackhole routes both ways
        net.heal(a, b)
        a.isolate()              # its link down: cut off from every host
        a.reconnect()
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

from cairn.testing.small_disk import FILLER, fill_to_the_last_byte

__all__ = ["Host", "HostNetwork", "netns_unavailable"]

log = logging.getLogger(__name__)

_SUBNET_BASE = "10.77"
_NETNS_ETC = Path("/etc/netns")


def netns_unavailable() -> str | None:
    """Why simulated hosts cannot be made here (not root, no ``ip``), or None if they can.

    >>> netns_unavailable() in (None,) or isinstance(netns_unavailable(), str)
    True
    """
    if os.geteuid() != 0:
        return "simulated hosts need root (network namespaces, veth pairs, tmpfs mounts)"
    if shutil.which("ip") is None:
        return "simulated hosts need iproute2's 'ip' command (apt-get install iproute2)"
    probe = f"cairn-probe-{os.getpid()}"
    made = _run(["ip", "netns", "add", probe], check=False)
    if made.returncode != 0:
        return f"'ip netns add' failed: {made.stderr.strip()} (no CAP_SYS_ADMIN?)"
    _run(["ip", "netns", "delete", probe], check=False)
    return None


def _run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        list(argv), capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


@dataclass
class Host:
    """One simulated host: a namespace, an address on the bridge and its own directory.

    ``dir`` holds ``tmp/`` (the host's TMPDIR) and ``work/`` (its work dir, a small tmpfs
    when the host was made with ``disk_mb``); nothing under it is shared with other hosts.
    """

    name: str
    netns: str
    address: str
    veth: str  # the bridge side of the host's veth pair
    dir: Path
    disk_mb: int | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)

    @property
    def tmp(self) -> Path:
        return self.dir / "work" / "tmp"  # on the host's disk (tmpfs), like its work dir

    @property
    def work(self) -> Path:
        return self.dir / "work"

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The machine's environment with this host's TMPDIR and Spark's local IP/dirs."""
        env = dict(os.environ)
        env.update(
            TMPDIR=str(self.tmp),
            SPARK_LOCAL_IP=self.address,
            SPARK_LOCAL_DIRS=str(self.work / "spark-local"),
        )
        env.update(extra or {})
        return env

    def popen(
        self,
        argv: Sequence[str],
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` on this host (its own session), output to ``<dir>/<name>.log``."""
        name = name or Path(argv[0]).name
        handle = open(self.dir / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop_all()
        self.logs.append(handle)
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, *argv],
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else self.env(),
            cwd=cwd or self.dir,
            start_new_session=True,
        )
        self.processes.append(proc)
        return proc

    def run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        """Run a short command on this host and wait for it (``ip``, ``df``...)."""
        return _run(["ip", "netns", "exec", self.netns, *argv])

    def pids(self) -> list[int]:
        """Every process running on this host now (``ip netns pids``)."""
        done = _run(["ip", "netns", "pids", self.netns], check=False)
        return [int(p) for p in done.stdout.split()]

    def signal_all(self, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` to every process on the host (SIGKILL: the host dies); their pids."""
        hit = []
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                hit.append(pid)
        return hit

    def isolate(self) -> None:
        """Cut the host off from every other host and the controller: its link down."""
        _run(["ip", "link", "set", self.veth, "down"])

    def reconnect(self) -> None:
        _run(["ip", "link", "set", self.veth, "up"])

    def block(self, address: str) -> None:
        """Drop everything this host sends to ``address`` (a blackhole route): packets
        vanish without an error, as on a partitioned network."""
        self.run(["ip", "route", "replace", "blackhole", f"{address}/32"])

    def unblock(self, address: str) -> None:
        _run(
            ["ip", "netns", "exec", self.netns, "ip", "route", "del", f"{address}/32"], check=False
        )

    def fill_disk(self) -> Path:
        """Fill the host's work dir (a tmpfs of ``disk_mb``) to the last byte; the filler."""
        if self.disk_mb is None:
            raise RuntimeError(f"host {self.name} has no tmpfs of its own (disk_mb)")
        return fill_to_the_last_byte(self.work)

    def free_disk(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.work / FILLER).unlink()

    def wipe_disk(self) -> None:
        """Empty the host's work dir, as a host replaced by a fresh machine has."""
        for child in self.work.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        self.tmp.mkdir(exist_ok=True)

    def stop_all(self, timeout: float = 5.0) -> None:
        """SIGTERM then SIGKILL every process on the host; close its log files."""
        self.signal_all(signal.SIGCONT)  # a paused process cannot act on SIGTERM
        self.signal_all(signal.SIGTERM)
        for proc in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=timeout)
        self.signal_all(signal.SIGKILL)
        for proc in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=timeout)
        self.processes = []
        for handle in self.logs:
            handle.close()
        self.logs = []


class HostNetwork:
    """A bridge ``cn<n>br`` with the controller at ``10.77.<n>.1`` and hosts from ``.2`` up.

    ``n`` is chosen from the free /24s so that two networks (two test sessions) can coexist.
    """

    def __init__(self, base_dir: str | None = None) -> None:
        reason = netns_unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        self.subnet = _free_subnet()
        self.tag = f"cn{self.subnet}"
        self.bridge = f"{self.tag}br"
        self.controller = f"{_SUBNET_BASE}.{self.subnet}.1"
        self.dir = Path(tempfile.mkdtemp(prefix=f"cairn-hosts-{self.subnet}-", dir=base_dir))
        self.hosts: dict[str, Host] = {}
        self._deleted = False
        try:
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            _run(["ip", "addr", "add", f"{self.controller}/24", "dev", self.bridge])
            _run(["ip", "link", "set", self.bridge, "up"])
        except BaseException:
            self.delete()
            raise
        atexit.register(self.delete)

    def add_host(self, name: str, *, disk_mb: int | None = None) -> Host:
        """A new namespace with loopback up, a veth to the bridge and the next address."""
        index = len(self.hosts) + 2
        netns = f"{self.tag}-{name}"
        veth = f"{self.tag}v{index}"
        address = f"{_SUBNET_BASE}.{self.subnet}.{index}"
        host = Host(name, netns, address, veth, self.dir / name, disk_mb)
        host.dir.mkdir()
        host.work.mkdir()
        self.hosts[name] = host
        if disk_mb is not None:
            _run(["mount", "-t", "tmpfs", "-o", f"size={disk_mb}m", "tmpfs", str(host.work)])
        host.tmp.mkdir()
        _run(["ip", "netns", "add", netns])
        _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}p"])
        _run(["ip", "link", "set", f"{veth}p", "netns", netns])
        _run(["ip", "link", "set", veth, "master", self.bridge, "up"])
        host.run(["ip", "link", "set", "lo", "up"])
        host.run(["ip", "addr", "add", f"{address}/24", "dev", f"{veth}p"])
        host.run(["ip", "link", "set", f"{veth}p", "up"])
        self._write_hosts_files()
        return host

    def hosts_file(self) -> str:
        """The ``/etc/hosts`` every host sees: the machine's (its own name, which the hosts
        share, stays resolvable), then the controller and each host by name."""
        try:
            lines = Path("/etc/hosts").read_text().splitlines()
        except OSError:
            lines = ["127.0.0.1 localhost"]
        lines.append(f"{self.controller} controller")
        lines += [f"{h.address} {h.name}" for h in self.hosts.values()]
        return "\n".join(lines) + "\n"

    def _write_hosts_files(self) -> None:
        text = self.hosts_file()
        for host in self.hosts.values():
            etc = _NETNS_ETC / host.netns
            etc.mkdir(parents=True, exist_ok=True)
            # In place, not renamed: a process already running there has the file's inode
            # mounted over its /etc/hosts and sees hosts added later.
            (etc / "hosts").write_text(text)

    def partition(self, a: Host, b: Host) -> None:
        """No packet between ``a`` and ``b`` either way; both still reach everyone else."""
        a.block(b.address)
        b.block(a.address)

    def heal(self, a: Host, b: Host) -> None:
        a.unblock(b.address)
        b.unblock(a.address)

    def delete(self) -> None:
        """Stop every process on every host, delete namespaces, links and directories."""
        if self._deleted:
            return
        self._deleted = True
        for host in self.hosts.values():
            host.stop_all()
        for host in self.hosts.values():
            _run(["ip", "link", "del", host.veth], check=False)
            _run(["ip", "netns", "delete", host.netns], check=False)
            shutil.rmtree(_NETNS_ETC / host.netns, ignore_errors=True)
            if host.disk_mb is not None:
                _run(["umount", "-l", str(host.work)], check=False)
        _run(["ip", "link", "del", self.bridge], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(Exception):
            atexit.unregister(self.delete)

    def __enter__(self) -> HostNetwork:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.delete()


def _free_subnet() -> int:
    """A third octet no bridge or address on this machine uses yet (pid-seeded, so two
    sessions starting together rarely try the same one first)."""
    used = _run(["ip", "-o", "addr"], check=False).stdout
    links = _run(["ip", "-o", "link"], check=False).stdout
    start = os.getpid() % 200 + 20
    for offset in range(230):
        n = (start + offset) % 230 + 20
        if f"{_SUBNET_BASE}.{n}." not in used and f"cn{n}br" not in links:
            return n
    raise RuntimeError("no free 10.77.<n>.0/24 subnet for simulated hosts")
