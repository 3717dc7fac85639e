"""The session's SeaweedFS S3 server, shared by the tests that need real S3 storage."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cairn.testing.seaweedfs import SeaweedS3


@pytest.fixture(scope="session")
def seaweed() -> Iterator[SeaweedS3]:
    """A real SeaweedFS S3 server on 127.0.0.1 with bucket ``cairn`` (started once)."""
    with SeaweedS3(bucket="cairn") as server:
        yield server
