"""``cairn chaos`` on the in-process executor with each kind of sink it reads besides files:
a user's own two-phase ``Sink`` (through ``Sink.redirected``/``committed_records``), JDBC
into a real PostgreSQL and Kafka into a real broker. Each run commits to a place of its own
(never the user's table, topic or directory), the committed output is what is compared,
and a sink that is not exactly-once is caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._cli import cli_in_process

JOB = str(Path(__file__).with_name("_chaos_sink_job.py"))


def _chaos(tmp: Path, capsys: Any, *job_args: str, seed: int = 3) -> tuple[int, str]:
    argv = ["chaos", JOB, "--executor", "inprocess", "--faults", "2", f"--seed={seed}"]
    argv += ["--work-dir", str(tmp / "work"), "--", *job_args]
    status = cli_in_process(argv)
    return status, capsys.readouterr().out


def test_a_users_own_two_phase_sink_is_redirected_and_its_commits_compared(
    tmp_path: Path, capsys: Any
) -> None:
    status, out = _chaos(tmp_path, capsys, "--sink", "own", "--target", str(tmp_path / "mine"))
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (2000 records)"), out
    assert "2 of 2 faults" in out and "not compared" not in out, out
    assert not (tmp_path / "mine").exists(), "the user's directory was written"


@pytest.mark.postgres
def test_jdbc_exactly_once_passes_and_at_least_once_is_caught(
    postgres: Any, tmp_path: Path, capsys: Any
) -> None:
    with postgres.connect() as conn:
        conn.execute("CREATE TABLE chaos_totals (customer text, total bigint)")
    login = ["--url", postgres.jdbc_url(), "--user", postgres.user]
    login += ["--password", postgres.password, "--sink", "jdbc", "--target", "chaos_totals"]
    status, out = _chaos(tmp_path / "once", capsys, *login)
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (2000 records)"), out

    status, out = _chaos(tmp_path / "twice", capsys, *login, "--at-least-once", seed=12)
    assert status == 1, out
    assert "written again" in out, out
    assert "likely cause: a sink that is not exactly-once" in out, out
    with postgres.connect() as conn:
        assert conn.execute("SELECT count(*) FROM chaos_totals").fetchone()[0] == 0
        schemas = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'cairn_chaos%'"
        ).fetchall()
        assert schemas == [], "a run's schema was left behind"
        assert conn.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone()[0] == 0


@pytest.mark.kafka
def test_kafka_exactly_once_is_read_committed_from_a_topic_of_the_runs_own(
    kafka_broker: Any, tmp_path: Path, capsys: Any
) -> None:
    kafka_broker.create_topic("chaos-totals", partitions=2)
    job = ["--sink", "kafka", "--target", "chaos-totals"]
    status, out = _chaos(tmp_path, capsys, *job, "--servers", kafka_broker.bootstrap_servers)
    assert status == 0, out
    assert out.startswith("EQUAL: 1 outputs (2000 records)"), out
    assert kafka_broker.read_topic("chaos-totals") == []
    topics = kafka_broker.admin().list_topics(timeout=10).topics
    assert not [t for t in topics if t.startswith("chaos-totals.")], topics
