"""Unit-test fixtures: RocksDB backends of ``state_backends`` are disposed after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit import state_backends


@pytest.fixture(autouse=True)
def _dispose_rocksdb_backends() -> Iterator[None]:
    yield
    state_backends.dispose_all()
