"""A stand-in for the worker's services to a task (TaskServices), and running a task until it is
idle, for unit tests of tasks and operators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.runtime.faults import FaultInjector
from cairn.runtime.operators.base import OperatorContext
from cairn.runtime.task import StreamTask
from cairn.state.operator_state import DefaultOperatorStateBackend
from cairn.testing.simple_state_files import MemoryStateFiles


class StubServices:
    """Records what the task sends to the master; runs async work inline; state in memory."""

    attempt = 0
    job_id = "job"

    def __init__(self) -> None:
        self.faults = FaultInjector((), 0, hard_kill=False)
        self.sent: list[Any] = []
        self.files: dict[int, MemoryStateFiles] = {}

    def send_to_master(self, message: Any) -> None:
        self.sent.append(message)

    def submit_async(self, fn: Callable[[], None]) -> None:
        fn()

    def state_writer(self, checkpoint_id: int) -> MemoryStateFiles:
        return self.files.setdefault(checkpoint_id, MemoryStateFiles(checkpoint_id))

    def wake(self) -> None:
        pass

    def control_pending(self) -> bool:
        return False


def operator_context(
    node: Any, output: Callable[[list[Any]], Any], **fields: Any
) -> OperatorContext:
    """An ``OperatorContext`` for a unit test: subtask 0 of 1, max parallelism 128, attempt 0
    of job ``"job"``, a fresh operator state backend, no keyed backend, a clock at 0 and
    ``StubServices``; ``fields`` override any of them (``keyed_backend=...``, ...)."""
    defaults: dict[str, Any] = {
        "task_name": "op",
        "subtask_index": 0,
        "parallelism": 1,
        "max_parallelism": 128,
        "attempt": 0,
        "job_id": "job",
        "operator_backend": DefaultOperatorStateBackend(),
        "keyed_backend": None,
        "clock_ms": lambda: 0,
        "services": StubServices(),
    }
    return OperatorContext(node=node, output=output, **{**defaults, **fields})


def run_until_idle(task: StreamTask, *, flush: bool = False) -> None:
    """Run ``task`` until it has nothing left to do (``run_once`` returns False); with
    ``flush``, then flush its writers' partial batches downstream."""
    while task.run_once():
        pass
    if flush:
        task.flush()
