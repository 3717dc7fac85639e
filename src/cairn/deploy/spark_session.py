"""Obtain the SparkSession Cairn jobs run on, and ask it how many task slots it offers.

Invariant: at most one SparkContext lives in a process, so an existing one is reused when it
matches the requested master and never silently replaced; sessions this module creates for a
loopback master bind only to 127.0.0.1 and run Python workers with this interpreter, and
every session it creates keeps PySpark's own Python sockets (the driver's accumulator server,
the executors' Python daemon) off TCP: Unix domain sockets, for local masters in a directory
only this user can enter.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Mapping
from types import MappingProxyType
from urllib.parse import urlsplit

from pyspark import SparkContext
from pyspark.sql import SparkSession

from cairn.common.exceptions import JobSubmissionError

__all__ = [
    "LOOPBACK",
    "SparkMasterConflict",
    "SparkMasterUnreachable",
    "available_slots",
    "default_local_master",
    "get_or_create_spark",
    "is_loopback_master",
    "master_url_problem",
]

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"

_NO_CONF: Mapping[str, str] = MappingProxyType({})
_LOCAL_N = re.compile(r"^local\[(\d+|\*)(?:,\s*\d+)?\]$")
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]$")
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

# Applied only when this module builds the session; an existing session keeps its settings.
# The Python daemon forks workers with Cairn's code already imported (``spark_daemon``): a
# worker restarted after a failure restores ~0.5-0.8 s sooner (bench/RESULTS.md).
# Unix domain sockets instead of loopback TCP for PySpark's accumulator server and Python
# daemon: on TCP any local process could connect, and the accumulator server serves one
# connection at a time (one idle connection wedged it: every job ended 60 s late), while the
# daemon forks a process per connection. A socket file needs write permission to connect.
_SESSION_CONF: Mapping[str, str] = MappingProxyType(
    {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.python.daemon.module": "cairn.deploy.spark_daemon",
        "spark.python.unix.domain.socket.enabled": "true",
    }
)
UDS_DIR_KEY = "spark.python.unix.domain.socket.dir"
# PySpark names a socket "<dir>/.<uuid4>.sock": 43 bytes after the directory, whose own
# name adds up to 17; sun_path holds 107.
_MAX_SOCKET_BASE = 40


# Local mode: the driver's JVM only schedules and feeds the Python workers, which do the
# work. Its optimizing JIT compiler (C2) would spend seconds of CPU at start-up and in bursts
# mid-run — on a small machine taken from the workers, showing as latency tails; the quick
# compiler alone starts Spark ~2 s sooner (measured in bench/RESULTS.md). Its log is Spark's
# default profile at WARN, without the lines announcing it (``log4j2-local.properties``), unless
# the user keeps a log4j2 configuration in Spark's conf directory. A ``spark.*`` key of the
# job's configuration overrides both (pass an empty string to drop them).
_QUICK_JIT = "-XX:TieredStopAtLevel=1"
_LOCAL_LOG4J2 = os.path.join(os.path.dirname(__file__), "log4j2-local.properties")
_LOG4J2_FILES = ("log4j2.properties", "log4j2.xml", "log4j2.yaml", "log4j2.yml", "log4j2.json")


def _local_driver_java_options(environ: Mapping[str, str] = os.environ) -> str:
    """The driver JVM's options for a local master.

    >>> _local_driver_java_options({"SPARK_CONF_DIR": "/nonexistent"}).split()[0]
    '-XX:TieredStopAtLevel=1'
    >>> "log4j2-local.properties" in _local_driver_java_options({"SPARK_CONF_DIR": "/nowhere"})
    True
    """
    conf_dir = environ.get("SPARK_CONF_DIR") or os.path.join(environ.get("SPARK_HOME", ""), "conf")
    if any(os.path.isfile(os.path.join(conf_dir, name)) for name in _LOG4J2_FILES):
        return _QUICK_JIT
    return f'{_QUICK_JIT} "-Dlog4j2.configurationFile={_LOCAL_LOG4J2}"'


# YARN: a container's working directory (Spark's default directory for the Python sockets
# on an executor) is too long for a socket path (107 bytes), so they go to /tmp, which every
# node has (the files are the user's and, with the usual umask, only the user may connect);
# enough single-core executors for a barrier stage of ``min_slots`` tasks, since Spark on
# YARN starts 2 (``spark.executor.instances``/``spark.executor.cores`` override both).
_YARN_CONF: Mapping[str, str] = MappingProxyType({UDS_DIR_KEY: "/tmp", "spark.executor.cores": "1"})


class SparkMasterConflict(JobSubmissionError):
    """A SparkContext is already running with another master than the one requested.

    Spark allows one SparkContext per process; stop the running one first
    (``SparkSession.getActiveSession().stop()``) if the new master is really wanted.
    """


class SparkMasterUnreachable(JobSubmissionError):
    """The master URL is not one Spark knows, or no ``spark://`` master answers on its port:
    refused before Spark starts (Spark itself retries for a minute, printing JVM stacks)."""


_MASTER_SCHEMES = ("spark://", "k8s://", "mesos://")
MASTER_CONNECT_TIMEOUT_S = 3.0


def master_url_problem(master: str) -> str | None:
    """What is wrong with a Spark master URL's form, or None.

    >>> master_url_problem("local[2]"), master_url_problem("spark://h1:7077,h2:7077")
    (None, None)
    >>> master_url_problem("spark:/h:7077")
    "unknown Spark master 'spark:/h:7077': give local[N], spark://host:port, yarn or k8s://..."
    """
    if master in ("local", "yarn") or _LOCAL_N.match(master) or _LOCAL_CLUSTER.match(master):
        return None
    if master.startswith(_MASTER_SCHEMES) and len(master) > master.index("://") + 3:
        return None
    return f"unknown Spark master {master!r}: give local[N], spark://host:port, yarn or k8s://..."


def _check_master(master: str, timeout_s: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """Refuse a malformed master URL, or a ``spark://`` master none of whose hosts accepts
    a connection within ``timeout_s``."""
    problem = master_url_problem(master)
    if problem is not None:
        raise SparkMasterUnreachable(problem + "\n  check --master or cairn.spark.master")
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port or 7077)), timeout_s):
                return
        except (OSError, ValueError) as e:
            errors.append(f"{address}: {getattr(e, 'strerror', None) or e}")
    raise SparkMasterUnreachable(
        f"cannot reach the Spark master {master} ({'; '.join(errors)})\n"
        "  start the master, or check --master / cairn.spark.master (host and port, e.g. "
        "spark://host:7077)"
    )


def default_local_master(min_slots: int) -> str:
    """Embedded master big enough for a barrier stage of ``min_slots`` tasks.

    >>> default_local_master(1) == f"local[{max(1, os.cpu_count() or 1)}]"
    True
    """
    return f"local[{max(min_slots, os.cpu_count() or 1)}]"


def is_loopback_master(master: str) -> bool:
    """True for embedded masters and for cluster masters reached over 127.0.0.1.

    >>> is_loopback_master("local[2]"), is_loopback_master("spark://127.0.0.1:7077")
    (True, True)
    >>> is_loopback_master("spark://spark-master.example:7077")
    False
    """
    if master.startswith("local"):
        return True
    host = urlsplit(master).hostname
    return host in _LOOPBACK_HOSTS


def get_or_create_spark(
    master: str | None = None,
    min_slots: int = 1,
    extra_conf: Mapping[str, str] = _NO_CONF,
    app_name: str = "cairn",
) -> SparkSession:
    """Return a SparkSession for ``master``, reusing the running one when it fits.

    * A running session is reused when ``master`` is None or equals its master; a running
      session with another master raises :class:`SparkMasterConflict`.
    * Otherwise a session is built for ``master``, or for ``local[N]`` with
      ``N = max(min_slots, cpu_count)`` when ``master`` is None, so that a barrier stage of
      ``min_slots`` tasks fits.
    * Loopback masters get 127.0.0.1 binding (``SPARK_LOCAL_IP`` and the driver confs);
      ``local``/``local[N]`` masters run the driver JVM with the quick JIT compiler only
      (``-XX:TieredStopAtLevel=1``: it only schedules and feeds the Python workers) and
      log at WARN without Spark's banner (``log4j2-local.properties``).
      Every created session gets the UI and console progress bar off, log level WARN,
      PySpark's accumulator server and Python daemon on Unix domain sockets
      (``spark.python.unix.domain.socket.enabled``; local masters: in ``private_socket_dir``)
      and ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` defaulted to ``sys.executable``.
    * ``extra_conf`` is applied last and wins over the defaults above.

    A reused session is not reconfigured; when it offers fewer than ``min_slots`` slots a
    warning is logged (barrier stages wider than the cluster cannot be scheduled).

    Example (not a doctest: it needs a running system)::

        spark = get_or_create_spark(None, min_slots=2)
        available_slots(spark) >= 2
        # True
    """
    if min_slots < 1:
        raise ValueError(f"min_slots must be >= 1, got {min_slots}")
    running = _running_session()
    if running is not None:
        running_master = running.sparkContext.master
        if master is not None and master != running_master:
            raise SparkMasterConflict(
                f"a SparkContext with master {running_master!r} is running; "
                f"cannot start one for {master!r} in the same process"
            )
        slots = available_slots(running)
        if slots < min_slots:
            log.warning(
                "reusing Spark session on %s with %d task slots; %d requested",
                running_master,
                slots,
                min_slots,
            )
        return running

    target = master if master is not None else default_local_master(min_slots)
    _check_master(target)
    _prepare_environment(target)
    builder = SparkSession.builder.master(target).appName(app_name)
    for key, value in _session_conf(target, extra_conf, min_slots).items():
        builder = builder.config(key, value)
    started = time.monotonic()
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    log.info(
        "started Spark session on %s (%s) in %.1f s",
        target,
        spark.sparkContext.applicationId,
        time.monotonic() - started,
    )
    return spark


def available_slots(spark: SparkSession) -> int:
    """Number of tasks the cluster can run at once right now (all executors registered now).

    This is the number Spark itself compares with a barrier stage's width before it schedules
    the stage. ``local[N]`` gives N; cluster masters count only executors that have
    registered, so the value can grow while a cluster starts and drop when an executor dies.

    Example (not a doctest: it needs a running system)::

        available_slots(get_or_create_spark("local[3]"))
        # 3
    """
    sc = spark.sparkContext
    try:
        return int(_max_concurrent_tasks(sc))
    except Exception:  # py4j errors: the private JVM API moved; fall back to public hints
        log.debug("maxNumConcurrentTasks unavailable; estimating slots", exc_info=True)
    return _estimate_slots(sc)


def _running_session() -> SparkSession | None:
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # The active session is thread-local in the JVM; a context started on another thread
    # still owns the process, so wrap it instead of starting a second one.
    # PySpark's only way to see a context without creating one (allowlisted, issue 34).
    if SparkContext._active_spark_context is not None:
        return SparkSession.builder.getOrCreate()
    return None


def _prepare_environment(master: str) -> None:
    # Spark reads these when the gateway JVM and the Python workers start, so they must be
    # in os.environ before the context exists; explicit user settings are kept.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if is_loopback_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)


def _session_conf(master: str, extra_conf: Mapping[str, str], min_slots: int = 1) -> dict[str, str]:
    conf = dict(_SESSION_CONF)
    if is_loopback_master(master):
        conf["spark.driver.host"] = LOOPBACK
        conf["spark.driver.bindAddress"] = LOOPBACK
    if _LOCAL_N.match(master) or master == "local":
        conf["spark.driver.extraJavaOptions"] = _local_driver_java_options()
        # Driver and executors share this host: their socket files go where only this user
        # can reach them. (Executors of a cluster use their own host's temporary directory,
        # which need not have this one.)
        conf[UDS_DIR_KEY] = private_socket_dir()
    elif master.startswith("yarn"):
        conf.update(_YARN_CONF)
        cores = int(extra_conf.get("spark.executor.cores", conf["spark.executor.cores"]))
        conf["spark.executor.instances"] = str(-(-min_slots // max(1, cores)))
    conf.update(extra_conf)
    return conf


def private_socket_dir(base: str | None = None) -> str:
    """``<tmp>/cairn-spark-<uid>``, created 0700 (``/tmp`` instead of a temporary directory
    too long for socket paths); refused if another user owns it or others may enter it (they
    could replace the socket files).

    >>> import tempfile, stat
    >>> d = private_socket_dir(tempfile.mkdtemp())
    >>> stat.S_IMODE(os.stat(d).st_mode)
    448
    """
    base = base or tempfile.gettempdir()
    if len(base) > _MAX_SOCKET_BASE and os.path.isdir("/tmp"):
        base = "/tmp"  # a socket's path has at most ~107 bytes (sun_path)
    path = os.path.join(base, f"cairn-spark-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.getuid()
        or stat.S_IMODE(info.st_mode) & 0o077
    ):
        raise PermissionError(
            f"{path} must be a directory of this user that no one else may enter (0700)"
        )
    return path


def _max_concurrent_tasks(sc: SparkContext) -> int:
    # PySpark has no public handle on the JVM SparkContext; _jsc is the only way to it.
    jsc = sc._jsc.sc()
    profile = jsc.resourceProfileManager().defaultResourceProfile()
    return int(jsc.maxNumConcurrentTasks(profile))


def _estimate_slots(sc: SparkContext) -> int:
    master = sc.master or ""
    cpus_per_task = int(sc.getConf().get("spark.task.cpus", "1") or "1")
    local = _LOCAL_N.match(master)
    if local is not None:
        n = local.group(1)
        return (os.cpu_count() or 1) if n == "*" else int(n)
    if master == "local":
        return 1
    cluster = _LOCAL_CLUSTER.match(master)
    if cluster is not None:
        return int(cluster.group(1)) * int(cluster.group(2)) // cpus_per_task
    return int(sc.defaultParallelism) // cpus_per_task
