"""Table jobs declared in SQL with Flink's connector options, exactly once on real Spark with
a worker SIGKILLed mid-run (the fault's marker file proves it fired).

Kafka (json) → retracting ``GROUP BY`` → ``upsert-kafka`` with ``sink.delivery-guarantee =
exactly-once``: a ``read_committed`` reader's upserted view (last value per key, a tombstone
removing its key) equals the batch aggregation of the input, and each key's counts rise by
one per message (nothing lost, nothing doubled). A second level of aggregation (keys per
count) retracts groups to zero, so its topic holds tombstones. Kafka → filter →
``filesystem``: the committed files hold each selected row once. A message the format cannot
read fails the job naming topic, partition and offset, or is skipped with
``json.ignore-parse-errors`` (in process).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cairn.table import StreamTableEnvironment
from tests.integration.jobs import checkpointed_env, environment
from tests.integration.kafka_jobs import new_topic

pytestmark = pytest.mark.timeout(240)

RECORDS, KEYS, PARTITIONS = 12_000, 13, 3


def _value(i: int) -> tuple[str, int]:
    return f"k{(i * 7) % KEYS:02d}", i % 10


@pytest.fixture(scope="module")
def orders(kafka_broker: Any) -> str:
    """The input topic: ``{"k": ..., "v": ...}`` messages spread over the partitions."""
    from confluent_kafka import Producer

    topic = new_topic(kafka_broker, "tconn-in", PARTITIONS)
    producer = Producer(kafka_broker.client_config(**{"linger.ms": 20}))
    for i in range(RECORDS):
        k, v = _value(i)
        while True:
            try:
                producer.produce(topic, json.dumps({"k": k, "v": v}), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    return topic


def _t_env(tmp_path: Path, marker: Path) -> StreamTableEnvironment:
    conf = {
        "cairn.executor": "spark",
        "cairn.testing.faults": (
            f"point=processing,attempt=0,records={RECORDS // 3},subtask=1,marker={marker}"
        ),
    }
    env = checkpointed_env(conf, interval_ms=200, checkpoint_dir=str(tmp_path / "chk"))
    return StreamTableEnvironment.create(env)


def _source_ddl(broker: Any, topic: str) -> str:
    return (
        "CREATE TABLE orders (k STRING, v BIGINT) WITH ('connector' = 'kafka',"
        f" 'topic' = '{topic}', 'properties.bootstrap.servers' = '{broker.bootstrap_servers}',"
        f" 'properties.group.id' = 'g-{topic}', 'scan.startup.mode' = 'earliest-offset',"
        " 'scan.bounded.mode' = 'latest-offset', 'format' = 'json')"
    )


def _upsert_ddl(broker: Any, name: str, columns: str, key: str, topic: str) -> str:
    return (
        f"CREATE TABLE {name} ({columns}, PRIMARY KEY ({key}) NOT ENFORCED) WITH"
        f" ('connector' = 'upsert-kafka', 'topic' = '{topic}',"
        f" 'properties.bootstrap.servers' = '{broker.bootstrap_servers}',"
        " 'key.format' = 'json', 'value.format' = 'json',"
        # under the broker's transaction.max.timeout.ms (Flink's sink asks for an hour)
        " 'properties.transaction.timeout.ms' = '600000',"
        f" 'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = '{topic}')"
    )


def _upserted(broker: Any, topic: str, key: str) -> tuple[dict[Any, dict[str, Any]], list[Any]]:
    """The final view of an upsert topic, and every message's (key, value) in offset order."""
    view: dict[Any, dict[str, Any]] = {}
    log = []
    for r in broker.read_topic(topic, read_committed=True, timeout_s=60):
        k = json.loads(r.key)[key]
        value = None if r.value is None else json.loads(r.value)
        log.append((k, value))
        if value is None:
            view.pop(k, None)
        else:
            view[k] = value
    return view, log


@pytest.mark.spark
def test_kafka_group_by_into_upsert_kafka_stays_exactly_once_when_a_worker_is_killed(
    spark: Any, kafka_broker: Any, orders: str, tmp_path: Path
) -> None:
    marker = tmp_path / "fault-marker"
    totals_topic = new_topic(kafka_broker, "tconn-totals", 2)
    counts_topic = new_topic(kafka_broker, "tconn-counts", 2)
    t_env = _t_env(tmp_path, marker)
    t_env.execute_sql(_source_ddl(kafka_broker, orders))
    cols = "k STRING, total BIGINT, n BIGINT"
    t_env.execute_sql(_upsert_ddl(kafka_broker, "totals", cols, "k", totals_topic))
    t_env.execute_sql(
        _upsert_ddl(kafka_broker, "counts", "n BIGINT, keys BIGINT", "n", counts_topic)
    )
    statements = t_env.create_statement_set()
    statements.add_insert_sql(
        "INSERT INTO totals SELECT k, SUM(v) AS total, COUNT(*) AS n FROM orders GROUP BY k"
    )
    statements.add_insert_sql(
        "INSERT INTO counts SELECT n, COUNT(*) AS keys FROM"
        " (SELECT k, COUNT(*) AS n FROM orders GROUP BY k) GROUP BY n"
    )
    statements.execute().wait(timeout_ms=200_000)
    assert marker.exists() and "processing" in marker.read_text(), "the fault did not fire"

    expected: dict[str, dict[str, int]] = {}
    for i in range(RECORDS):
        k, v = _value(i)
        row = expected.setdefault(k, {"k": k, "total": 0, "n": 0})  # type: ignore[dict-item]
        row["total"] += v
        row["n"] += 1
    totals, log = _upserted(kafka_broker, totals_topic, "k")
    assert totals == expected
    for k in expected:  # +I then one +U per input row: no gap, no repeat
        assert [v["n"] for key, v in log if key == k] == list(range(1, expected[k]["n"] + 1))

    counts, counts_log = _upserted(kafka_broker, counts_topic, "n")
    by_count = Counter(row["n"] for row in expected.values())
    assert counts == {n: {"n": n, "keys": c} for n, c in by_count.items()}
    assert any(value is None for _, value in counts_log), "no group was retracted to zero"

    # The upsert-kafka source reads the topics back as changelogs (ChangelogNormalize)
    reader = StreamTableEnvironment.create(environment({"cairn.executor": "inprocess"}, 1))
    bounded = (
        "'scan.bounded.mode' = 'latest-offset', 'properties.isolation.level' = 'read_committed'"
    )
    reader.execute_sql(
        _upsert_ddl(kafka_broker, "totals_in", cols, "k", totals_topic).replace(
            "'sink.delivery-guarantee'", f"{bounded}, 'sink.delivery-guarantee'"
        )
    )
    reader.execute_sql(
        _upsert_ddl(kafka_broker, "counts_in", "n BIGINT, keys BIGINT", "n", counts_topic).replace(
            "'sink.delivery-guarantee'", f"{bounded}, 'sink.delivery-guarantee'"
        )
    )
    summed = reader.sql_query("SELECT SUM(n) AS rows_seen, COUNT(*) AS keys FROM totals_in")
    last = list(summed.execute().collect())[-1]
    assert (last[0], last[1]) == (RECORDS, KEYS)
    view: dict[int, int] = {}
    for r in reader.sql_query("SELECT n, keys FROM counts_in").execute().collect():
        kind = r.get_row_kind().short_string()
        if kind in ("+I", "+U"):
            view[r[0]] = r[1]
        elif kind == "-D":
            del view[r[0]]
    assert view == dict(by_count)


@pytest.mark.spark
def test_kafka_filter_into_filesystem_stays_exactly_once_when_a_worker_is_killed(
    spark: Any, kafka_broker: Any, orders: str, tmp_path: Path
) -> None:
    marker = tmp_path / "fault-marker"
    out = tmp_path / "out"
    t_env = _t_env(tmp_path, marker)
    t_env.execute_sql(_source_ddl(kafka_broker, orders))
    t_env.execute_sql(
        f"CREATE TABLE big (k STRING, v BIGINT) WITH ('connector' = 'filesystem',"
        f" 'path' = '{out}', 'format' = 'csv', 'sink.rolling-policy.file-size' = '4kb')"
    )
    t_env.execute_sql("INSERT INTO big SELECT k, v FROM orders WHERE v >= 7").wait(
        timeout_ms=200_000
    )
    assert marker.exists() and "processing" in marker.read_text(), "the fault did not fire"
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files and not [p for p in files if p.name.startswith(".")]
    got = Counter(line for p in files for line in p.read_text().splitlines())
    want = Counter(f"{k},{v}" for k, v in map(_value, range(RECORDS)) if v >= 7)
    assert got == want


@pytest.mark.parametrize("ignore", [False, True])
def test_a_message_the_format_cannot_read_is_named_or_skipped(
    kafka_broker: Any, ignore: bool
) -> None:
    from confluent_kafka import Producer

    topic = new_topic(kafka_broker, "tconn-bad", 1)
    producer = Producer(kafka_broker.client_config())
    for message in ('{"k": "a", "v": 1}', "{not json", '{"k": "b", "v": 2}'):
        producer.produce(topic, message, partition=0)
    assert producer.flush(30) == 0
    t_env = StreamTableEnvironment.create(environment({"cairn.executor": "inprocess"}, 1))
    t_env.execute_sql(
        _source_ddl(kafka_broker, topic).replace(
            "'format' = 'json'", f"'format' = 'json', 'json.ignore-parse-errors' = '{ignore}'"
        )
    )
    result = t_env.sql_query("SELECT k, v FROM orders").execute()
    if ignore:
        assert sorted((r[0], r[1]) for r in result.collect()) == [("a", 1), ("b", 2)]
        return
    with pytest.raises(Exception, match=f"topic '{topic}' partition 0 offset 1"):
        list(result.collect())
