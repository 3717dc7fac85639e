"""Sources and sinks (``pyflink.datastream.connectors``).

Contracts are in ``connectors.base``; implementations in ``number_seq``, ``file_system`` and
``datagen``. The implementations are re-exported here lazily, so importing the package does
not import every connector.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DataGeneratorSource", "FileSink", "FileSource", "NumberSequenceSource"]

_LOCATIONS = {
    "NumberSequenceSource": "number_seq",
    "FileSource": "file_system",
    "FileSink": "file_system",
    "DataGeneratorSource": "datagen",
}


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LOCATIONS])
