"""The result of a finished job (``pyflink.common.JobExecutionResult``).

Invariant: created by the deploy layer once the job reached FINISHED; immutable afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.ids import JobId

__all__ = ["JobExecutionResult"]


@dataclass(frozen=True)
class JobExecutionResult:
    """Id, runtime and accumulators of a finished job.

    >>> r = JobExecutionResult(JobId("ab12"), 1500, {"records": 3})
    >>> r.get_job_id(), r.get_net_runtime(), r.get_accumulator_result("records")
    ('ab12', 1500, 3)
    """

    job_id: JobId
    net_runtime_ms: int
    accumulators: Mapping[str, Any] = field(default_factory=dict)
    job_name: str = ""

    def get_job_id(self) -> JobId:
        return self.job_id

    def get_net_runtime(self) -> int:
        """Milliseconds from submission to the end of the job."""
        return self.net_runtime_ms

    def get_accumulator_result(self, accumulator_name: str) -> Any:
        return self.accumulators.get(accumulator_name)

    def get_all_accumulator_results(self) -> dict[str, Any]:
        return dict(self.accumulators)

    def is_job_execution_result(self) -> bool:
        return True

    def get_job_execution_result(self) -> JobExecutionResult:
        return self

    def __str__(self) -> str:
        return f"JobExecutionResult(job_id={self.job_id}, net_runtime={self.net_runtime_ms} ms)"
