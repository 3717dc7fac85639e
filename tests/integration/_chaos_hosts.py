"""What the ``cairn chaos --profile hosts`` tests share: the worked example and the marks of
a test that builds simulated hosts (root and iproute2, else skipped with the reason)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.testing.hosts import netns_unavailable

_UNAVAILABLE = netns_unavailable()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chaos_orders.py"

HOSTS_MARKS = [
    pytest.mark.multihost,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.s3,
    pytest.mark.skipif(_UNAVAILABLE is not None, reason=_UNAVAILABLE or ""),
    pytest.mark.timeout(900),
]
