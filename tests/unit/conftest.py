"""Fixtures shared by the unit tests: the keyed state backends (``_backends.py``), and the
RocksDB backends ``state_backends`` made, disposed after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit import state_backends

from ._backends import KEYED_BACKENDS, KeyedBackendFactory


@pytest.fixture(params=sorted(KEYED_BACKENDS))
def keyed_backend_factory(request: pytest.FixtureRequest) -> KeyedBackendFactory:
    """Each keyed state backend in turn (the test id is the backend's name)."""
    return KEYED_BACKENDS[request.param]


@pytest.fixture(autouse=True)
def _dispose_rocksdb_backends() -> Iterator[None]:
    yield
    state_backends.dispose_all()
