"""A throw-away Apache Kafka broker (KRaft, one combined broker+controller) on 127.0.0.1.

Invariant: the broker is one JVM in its own process group, listening only on two loopback
ports (clients, controller) chosen at construction and kept across ``restart()``; all its
files (log dirs, configuration, log) live under one temporary directory that ``stop()``
removes. ``kill()`` SIGKILLs it and keeps the data, so ``restart()`` brings the same cluster
back on the same ports, as a broker crash would. On Linux the broker is SIGKILLed when the
thread that started it ends, so a killed test run leaves no broker behind (start and
restart it from a thread that outlives it, e.g. the main thread).

The broker is Apache Kafka's own code: the jars of ``org.apache.kafka:kafka_2.13`` and its
runtime dependencies, copied from Maven Central by ``mvn dependency:copy-dependencies`` over
the repository's ``kafka/pom.xml`` into ``~/.cache/cairn/kafka-<version>/`` once
(``python -m cairn.testing.kafka prepare``, which ``.ci/run`` calls), then started as
``java -cp '<libs>/*' kafka.Kafka server.properties`` after ``kafka.tools.StorageTool format
--standalone`` with a random cluster id. ``CAIRN_KAFKA_LIBS`` may name another directory of
jars (a Kafka distribution's ``libs/``).

Example::

    with KafkaBroker() as kafka:
        kafka.create_topic("events", partitions=4)
        kafka.produce("events", [b"a", b"b"])
        conf = {"bootstrap.servers": kafka.bootstrap_servers}
"""

from __future__ import annotations

import base64
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
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.testing.kafka_jars import KafkaPrepareError, kafka_libs, kafka_version
from cairn.testing.managed_server import ManagedServer, die_with_parent
from cairn.testing.spark_cluster import free_port

__all__ = [
    "KafkaBroker",
    "KafkaPrepareError",
    "KafkaStartError",
    "TopicRecord",
    "kafka_libs",
    "kafka_version",
]

log = logging.getLogger(__name__)

_HOST = "127.0.0.1"
_START_TIMEOUT_S = 120.0
_STOP_GRACE_S = 10.0
# Sized for a 2-core test machine: a small heap, few threads, one replica of everything.
_JVM_OPTS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
_SERVER_DEFAULTS: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # A restarted broker re-registers only once its old session expired (9 s by default).
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    # Transactions left open by a killed producer are aborted within seconds, not a minute.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
    # Missing topics are errors, as a test of them needs (clients never create topics).
    "auto.create.topics.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
    "log.cleaner.threads": "1",
}
_LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


class KafkaStartError(RuntimeError):
    """The broker did not serve in time; the message carries its log's tail."""


@dataclass(frozen=True)
class TopicRecord:
    """One record read back by ``KafkaBroker.read_topic``."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaStartError("java not found (JAVA_HOME unset and no java on PATH)")
    return found


def random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, as Kafka's
    ``Uuid.randomUuid()`` (which never starts one with ``-``).

    >>> len(random_cluster_id()), random_cluster_id()[0] != "-"
    (22, True)
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((_HOST, port)) == 0


class KafkaBroker(ManagedServer):
    """One KRaft broker+controller on loopback ports, started on enter (see the module).

    ``config`` overrides server properties (``auto.create.topics.enable`` is off by
    default), ``heap`` the JVM's ``-Xmx`` (512m), ``quick_jvm`` runs it C1-only.
    """

    stop_grace_s = _STOP_GRACE_S  # SIGTERM: a controlled shutdown

    def __init__(
        self,
        *,
        config: dict[str, str] | None = None,
        heap: str | None = None,
        quick_jvm: bool = False,
    ) -> None:
        super().__init__(Path(tempfile.mkdtemp(prefix="cairn-kafka-")))
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self._config = {**_SERVER_DEFAULTS, **(config or {})}
        self._jvm_opts = [o for o in _JVM_OPTS if not (heap and o.startswith("-Xmx"))]
        if heap:
            self._jvm_opts.append(f"-Xmx{heap}")
        if quick_jvm:  # C1 only: about half the start-up CPU; for tests, not for benchmarks
            self._jvm_opts.append("-XX:TieredStopAtLevel=1")
        self._formatted = False
        self.libs: Path | None = None
        self.start_seconds: float | None = None  # of the last (re)start, until it served

    # -- what tests use ------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return f"{_HOST}:{self.port}"

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """A confluent-kafka configuration for this broker (librdkafka's own logging off)."""
        return {"bootstrap.servers": self.bootstrap_servers, "log_level": 0, **extra}

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.client_config())

    def create_topic(
        self, name: str, partitions: int = 1, config: dict[str, str] | None = None
    ) -> None:
        """Create ``name`` and wait until its leaders are known to clients."""
        from confluent_kafka.cimpl import NewTopic

        admin = self.admin()  # referenced until the result is in: its end cancels it
        futures = admin.create_topics(
            [NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30
        )
        futures[name].result(timeout=60)
        self._await_partitions(name, partitions)

    def add_partitions(self, name: str, total: int) -> None:
        """Grow topic ``name`` to ``total`` partitions."""
        from confluent_kafka.cimpl import NewPartitions

        admin = self.admin()
        futures = admin.create_partitions([NewPartitions(name, total)], operation_timeout=30)
        futures[name].result(timeout=60)
        self._await_partitions(name, total)

    def delete_topic(self, name: str) -> None:
        admin = self.admin()
        futures = admin.delete_topics([name], operation_timeout=30)
        futures[name].result(timeout=60)

    def _await_partitions(self, name: str, partitions: int) -> None:
        admin = self.admin()
        deadline = time.monotonic() + 30
        while True:
            topic = admin.list_topics(name, timeout=10).topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and len(topic.partitions) >= partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} has no leaders for {partitions} partitions")
            time.sleep(0.05)

    def produce(
        self,
        topic: str,
        values: Iterable[bytes | str],
        *,
        partition: int | None = None,
        key: bytes | str | None = None,
        timestamps: Sequence[int] | None = None,
    ) -> int:
        """Write ``values`` (acks=all, idempotent) and wait for them; returns the count."""
        from confluent_kafka import Producer

        producer = Producer(self.client_config(**{"enable.idempotence": True, "linger.ms": 5}))
        errors: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        n = 0
        for i, value in enumerate(values):
            kwargs: dict[str, Any] = {"value": value, "on_delivery": delivered}
            if partition is not None:
                kwargs["partition"] = partition
            if key is not None:
                kwargs["key"] = key
            if timestamps is not None:
                kwargs["timestamp"] = timestamps[i]
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            n += 1
        if producer.flush(60) != 0 or errors:
            raise RuntimeError(f"producing to {topic!r} failed: {errors[:3] or 'flush timeout'}")
        return n

    def read_topic(
        self, topic: str, *, read_committed: bool = True, timeout_s: float = 30.0
    ) -> list[TopicRecord]:
        """Every record of ``topic`` now readable (committed only, unless told otherwise),
        in partition then offset order."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            self.client_config(
                **{
                    "group.id": f"cairn-read-{uuid.uuid4().hex}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                    "auto.offset.reset": "earliest",
                }
            )
        )
        try:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            if meta.error is not None:
                raise RuntimeError(f"topic {topic!r}: {meta.error}")
            parts = [TopicPartition(topic, p, 0) for p in sorted(meta.partitions)]
            # The stable end (LSO for read_committed) of each partition, as of now.
            ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in parts}
            consumer.assign(parts)
            records: list[TopicRecord] = []
            pending = {p for p, end in ends.items() if end > 0}
            deadline = time.monotonic() + timeout_s
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(1000, timeout=0.2):
                    partition, offset = msg.partition(), msg.offset()
                    if msg.error() is not None or partition is None or offset is None:
                        continue
                    records.append(
                        TopicRecord(
                            topic,
                            partition,
                            offset,
                            msg.key(),
                            msg.value(),
                            msg.timestamp()[1],
                        )
                    )
                positions = consumer.position([TopicPartition(topic, p) for p in pending])
                pending = {
                    tp.partition
                    for tp in positions
                    if tp.offset < 0 or tp.offset < ends[tp.partition]
                }
            if pending:
                raise TimeoutError(f"reading {topic!r}: partitions {sorted(pending)} not at end")
        finally:
            consumer.close()
        records.sort(key=lambda r: (r.partition, r.offset))
        return records

    # -- life cycle ------------------------------------------------------------------------

    def _write_config(self) -> Path:
        data = self.root / "data"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{_HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{_HOST}:{self.port},CONTROLLER://{_HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{_HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data),
            **self._config,
        }
        path = self.root / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.root / "log4j2.properties").write_text(_LOG4J2.format(log=self.root / "server.log"))
        return path

    def _java_cmd(self, main: str, *args: str) -> list[str]:
        assert self.libs is not None
        return [
            _java(),
            *self._jvm_opts,
            f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
            "-cp",
            f"{self.libs}/*",
            main,
            *args,
        ]

    def start(self) -> KafkaBroker:
        """Format the storage (first start only), start the JVM, wait until it serves."""
        self.libs = kafka_libs()
        started = time.monotonic()
        props = self._write_config()
        if not self._formatted:
            fmt = subprocess.run(
                self._java_cmd(
                    "kafka.tools.StorageTool",
                    "format",
                    "--cluster-id",
                    random_cluster_id(),
                    "--config",
                    str(props),
                    "--standalone",
                ),
                capture_output=True,
                text=True,
                check=False,
                stdin=subprocess.DEVNULL,
                timeout=120,
            )
            if fmt.returncode != 0:
                raise KafkaStartError(
                    f"kafka-storage format failed ({fmt.returncode}): "
                    f"{(fmt.stdout + fmt.stderr)[-2000:]}"
                )
            self._formatted = True
        self._spawn(
            self._java_cmd("kafka.Kafka", str(props)), "stdout.log", preexec_fn=die_with_parent
        )
        self._guard_start(self._await_ready)
        self.start_seconds = time.monotonic() - started
        log.info(
            "Kafka broker on %s (controller %d) served after %.1f s",
            self.bootstrap_servers,
            self.controller_port,
            self.start_seconds,
        )
        return self

    def _await_ready(self) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + _START_TIMEOUT_S
        last: Exception | None = None
        admin: AdminClient | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise KafkaStartError(
                    f"the Kafka broker exited with {self._proc.returncode}: {self.log_tail()}"
                )
            if not _port_open(self.port):
                time.sleep(0.1)
                continue
            if admin is None:
                admin = AdminClient(self.client_config())
            try:
                meta = admin.list_topics(timeout=2)
                if meta.brokers:
                    return
            except KafkaException as exc:
                last = exc
            time.sleep(0.1)
        raise KafkaStartError(f"the Kafka broker did not serve in time ({last}): {self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        tails = []
        for name in ("server.log", "stdout.log"):
            path = self.root / name
            if path.exists():
                tails.append("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(tails) or "(no log)"

    def restart(self) -> KafkaBroker:
        """Stop (SIGTERM) if running, then start again on the same ports and data."""
        self._end_process(self.stop_signal)
        return self.start()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cairn.testing.kafka prepare``: fetch the broker's jars (``.ci/run``);
    ``python -m cairn.testing.kafka run``: a broker for local experiments until Ctrl-C."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "prepare"
    if command == "prepare":
        try:
            print(kafka_libs())
        except KafkaPrepareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if command == "run":
        with KafkaBroker() as broker:
            print(f"Kafka broker on {broker.bootstrap_servers} ({broker.start_seconds:.1f} s)")
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    print("usage: python -m cairn.testing.kafka [prepare|run]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
