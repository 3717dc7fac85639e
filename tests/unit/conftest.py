"""Fixtures shared by the unit tests; plain helper functions live in ``tests/unit/_*.py``.

- ``keyed_backend_factory``: each keyed state backend of ``_backends.py`` in turn; the RocksDB
  backends ``state_backends`` made are disposed after each test.
- ``root``: a checkpoint root on disk, then in fsspec's memory filesystem.
- ``accepted``, ``server_log``: what a ``_network.collecting_listener`` accepted, and the
  listener's warnings captured.
"""

from __future__ import annotations

import logging
import queue
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fsspec.core import url_to_fs

from tests.unit import state_backends

from ._backends import KEYED_BACKENDS, KeyedBackendFactory
from ._network import SERVER_LOG, Accepted


@pytest.fixture(params=sorted(KEYED_BACKENDS))
def keyed_backend_factory(request: pytest.FixtureRequest) -> KeyedBackendFactory:
    """Each keyed state backend in turn (the test id is the backend's name)."""
    return KEYED_BACKENDS[request.param]


@pytest.fixture(autouse=True)
def _dispose_rocksdb_backends() -> Iterator[None]:
    yield
    state_backends.dispose_all()


@pytest.fixture(params=["file", "memory"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A checkpoint root on disk, then in fsspec's memory filesystem (removed afterwards)."""
    if request.param == "file":
        yield str(tmp_path / "checkpoints")
        return
    url = f"memory://cairn-test-{uuid.uuid4().hex}"
    yield url
    fs, path = url_to_fs(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


@pytest.fixture
def accepted() -> Accepted:
    """The queue a ``collecting_listener`` puts each accepted ``(connection, hello)`` on."""
    return queue.Queue()


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The listener's warnings (its rejections), captured; read them with ``rejections``."""
    caplog.set_level(logging.WARNING, logger=SERVER_LOG)
    return caplog
