"""bench.flink_examples: the import rewrite, and the verdict of a run judged by its exit status
and last error (a tiny script of our own stands in for a Flink example)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.flink_examples import rewrite, run_example


def test_only_pyflink_imports_and_the_broker_address_change() -> None:
    source = (
        "from pyflink.common import Types\n"
        "import pyflink.datastream as ds\n"
        "    from pyflink.table import DataTypes\n"
        "# pyflink stays in comments; 'localhost:9092' in strings is the broker\n"
        "servers = 'localhost:9092'\n"
    )
    assert rewrite(source, "127.0.0.1:4242") == (
        "from cairn.common import Types\n"
        "import cairn.datastream as ds\n"
        "    from cairn.table import DataTypes\n"
        "# pyflink stays in comments; '127.0.0.1:4242' in strings is the broker\n"
        "servers = '127.0.0.1:4242'\n"
    )
    assert "localhost:9092" in rewrite("x = 'localhost:9092'", None)


@pytest.mark.slow  # a `cairn run` process: ~6 s on a loaded 2-core machine
def test_a_failing_example_is_reported_with_its_error(tmp_path: Path) -> None:
    example = tmp_path / "pulsar.py"
    example.write_text("from pyflink.datastream.connectors.pulsar import PulsarSource\n")
    work = tmp_path / "work"
    work.mkdir()
    outcome = run_example(example, work, "inprocess", 60, None)
    assert outcome.verdict == "fails"
    assert "PulsarSource: the Apache Pulsar connector is not supported" in outcome.detail
