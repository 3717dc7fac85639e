"""``JobClient`` at PyFlink's import path (``pyflink.common.job_client``).

Invariant: the class lives in the deploy layer (``cairn.deploy.job_master_client``); this
module only re-exports it from the composition root (``cairn.launch``), lazily, so that
importing the API never imports Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cairn.launch import JobClient

__all__ = ["JobClient"]


def __getattr__(name: str) -> Any:
    if name == "JobClient":
        from cairn.launch import JobClient

        return JobClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
