"""On embedded local Spark, what a job prints (``DataStream.print()`` and ``print()`` in user
functions) reaches the driver's stdout, as with PyFlink's local cluster, instead of the stderr
that Spark copies its local workers' stdout to."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.common import Types
from cairn.datastream import StreamExecutionEnvironment


def _noisy(x: int) -> int:
    print(f"seen {x}")  # a user's own print() in a function on a worker
    return x * 10


@pytest.mark.spark
def test_print_lines_of_spark_workers_reach_the_driver_stdout(
    spark: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    env = StreamExecutionEnvironment({"cairn.executor": "spark"})
    env.set_parallelism(2)
    env.from_collection([1, 2, 3], Types.INT()).map(_noisy, Types.INT()).print("out")
    env.execute("print on spark")
    out, err = capfd.readouterr()
    printed = [line for line in out.splitlines() if line.startswith("out:")]
    assert sorted(line.split("> ")[1] for line in printed) == ["10", "20", "30"], out
    assert {line.split("> ")[0] for line in printed} <= {"out:1", "out:2"}
    assert sorted(line for line in out.splitlines() if line.startswith("seen")) == [
        "seen 1",
        "seen 2",
        "seen 3",
    ]
    assert "seen " not in err and "out:" not in err, "nothing printed lands on stderr"
