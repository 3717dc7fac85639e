"""Fixtures shared by the unit tests: the keyed state backends (``_backends.py``)."""

from __future__ import annotations

import pytest

from ._backends import KEYED_BACKENDS, KeyedBackendFactory


@pytest.fixture(params=sorted(KEYED_BACKENDS))
def keyed_backend_factory(request: pytest.FixtureRequest) -> KeyedBackendFactory:
    """Each keyed state backend in turn (the test id is the backend's name)."""
    return KEYED_BACKENDS[request.param]
