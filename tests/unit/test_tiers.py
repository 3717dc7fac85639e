"""The test tiers: ``.ci/run`` runs every test exactly once, the fast tier first (the
multihost tests beside it), then the rest in pytest-xdist workers taking whole files,
through README's test command, and a test that starts Spark
without the ``spark`` marker fails.

The marker check is exercised on a small pytest run in a child process with the suite's own
``tests/conftest.py``; its tests stand the ``spark`` fixture in, so no JVM starts here.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CI_RUN = REPO_ROOT / ".ci" / "run"

_INNER_TESTS = """
import os
import subprocess
import sys
from pathlib import Path

import pytest

ORDER = Path(__file__).with_name("order.txt")


@pytest.fixture(scope="session")
def spark():  # stands in for the suite's session: no JVM in this run
    return "session"


@pytest.fixture(autouse=True)
def _record(request):
    marked = request.node.get_closest_marker("spark") is not None
    with ORDER.open("a") as f:
        f.write(f"{request.node.name} {marked} {os.environ.get('SPARK_HOME')}\\n")


@pytest.mark.spark
def test_marked():
    pass


def test_uses_spark(spark):
    pass


def test_executor(executor_conf):
    pass


@pytest.mark.cluster
def test_cluster():
    pass


def test_plain():
    pass


def test_starts_spark_here_expecting_an_error():
    from cairn.deploy.spark_session import get_or_create_spark

    with pytest.raises(Exception):
        get_or_create_spark("local[1]")


def test_starts_spark_in_a_child():
    code = ("from pyspark.sql import SparkSession; "
            "SparkSession.builder.master('local[1]').getOrCreate()")
    subprocess.run([sys.executable, "-c", code], check=False, capture_output=True)
"""


def _tier_selections() -> dict[str, str]:
    found = re.findall(r"^(\w+_TIER)=['\"]([^'\"]*)['\"]$", CI_RUN.read_text(), re.M)
    return dict(found)


def test_ci_runs_the_readme_test_command_in_every_tier() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    readme_command = re.search(r"(\.venv/bin/python -m pytest[^\n`]*)", readme)
    assert readme_command, "README.md shows no pytest command"
    text = CI_RUN.read_text()
    assert text.count(f'{readme_command.group(1)} -m "$selection" "$@"') == 2  # tier, beside
    foreground = re.findall(r'^\s*tier \w+ "\$(\w+)"(?: "\$\{\w+\[@\]\}")? "\$@"$', text, re.M)
    background = re.findall(r'^\s*beside \w+ "\$(\w+)" "\$@"$', text, re.M)
    assert foreground == ["FAST_TIER", "SLOW_TIER"], "the fast tier runs first, then the rest"
    assert background == ["BESIDE_TIER"]
    order = [
        'beside multihost "$BESIDE_TIER"',
        'tier fast "$FAST_TIER"',
        'tier slow "$SLOW_TIER" "${SLOW_WORKERS[@]}"',
        'beside_done multihost "$BESIDE_TIER"',
    ]
    positions = [text.index(line) for line in order]
    assert positions == sorted(positions), "multihost beside fast and on past it"
    gate = text.index("if [[ $fast_status -eq 0")
    assert positions[1] < gate < positions[2], "the slow tier runs only when fast passed"
    # Whole files per worker: a module's fixtures (a server, a cluster) start once.
    assert re.search(r"^SLOW_WORKERS=\(-n \d --dist loadfile\)$", text, re.M)


def test_the_tiers_select_every_test_exactly_once() -> None:
    selections = _tier_selections()
    assert set(selections) == {"FAST_TIER", "BESIDE_TIER", "SLOW_TIER"}
    names = ("spark", "slow", "cluster", "multihost", "kafka", "hdfs", "yarn", "s3", "gcs")
    names += ("azure", "postgres", "iceberg_rest")  # -m's and/or/not over names is Python too
    for values in itertools.product([False, True], repeat=len(names)):
        markers = dict(zip(names, values, strict=True))
        chosen = [t for t, expr in selections.items() if eval(expr, {}, markers)]
        assert len(chosen) == 1, (markers, chosen)
    assert not eval(selections["FAST_TIER"], {}, {"spark": True, "slow": False, "multihost": False})


def test_spark_marker_is_added_enforced_and_marked_tests_run_last(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text((REPO_ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    spark\n    cluster\n")
    (tmp_path / "test_inner.py").write_text(_INNER_TESTS)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPARK_HOME", "PYTEST_CURRENT_TEST", "CAIRN_TESTS_REAL_SPARK_HOME")
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--junitxml=report.xml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    order = [line.split(" ") for line in (tmp_path / "order.txt").read_text().splitlines()]
    marked = {name: flag == "True" for name, flag, _ in order}
    assert marked == {
        "test_uses_spark": True,
        "test_executor[spark]": True,
        "test_cluster": True,
        "test_marked": True,
        "test_executor[inprocess]": False,
        "test_plain": False,
        "test_starts_spark_here_expecting_an_error": False,
        "test_starts_spark_in_a_child": False,
    }, run.stdout
    flags = [marked[name] for name, _, _ in order]
    assert flags == sorted(flags), f"unmarked tests run first: {order}"
    spark_homes = {name: home for name, _, home in order}
    assert spark_homes["test_marked"] == "None", "marked tests see the real SPARK_HOME"
    assert spark_homes["test_plain"] != "None", "unmarked tests see the stand-in"

    failed = {
        case.get("name"): (
            case.find("error") if case.find("error") is not None else case.find("failure")
        )
        for case in ET.parse(tmp_path / "report.xml").iter("testcase")
    }
    refused = {name for name, bad in failed.items() if bad is not None}
    assert refused == {
        "test_starts_spark_here_expecting_an_error",
        "test_starts_spark_in_a_child",
    }, run.stdout
    for name in refused:
        message = failed[name].get("message", "")  # type: ignore[union-attr]
        assert "started Spark but is not marked 'spark'" in message, message


def test_every_doctest_in_src_cairn_is_collected(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.getoption("doctestmodules"), "--doctest-modules in pytest's addopts"
    assert "src/cairn" in pytestconfig.getini("testpaths")
    assert "ELLIPSIS" in pytestconfig.getini("doctest_optionflags")
