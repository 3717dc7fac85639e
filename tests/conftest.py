"""Shared fixtures: one local SparkSession per test session, executor parametrization."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

pytest_plugins = ["tests.s3_server"]  # the session's SeaweedFS S3 server (fixture ``seaweed``)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from cairn.deploy.spark_session import get_or_create_spark

    session = get_or_create_spark(None, 4, {})
    yield session
    session.stop()


@pytest.fixture(params=["inprocess", "spark"])
def executor_conf(request: pytest.FixtureRequest) -> dict[str, str]:
    """Configuration selecting each executor; the Spark one runs on real local Spark."""
    if request.param == "spark":
        request.getfixturevalue("spark")
    return {"cairn.executor": request.param}


@pytest.fixture
def inprocess_conf() -> dict[str, str]:
    return {"cairn.executor": "inprocess"}
