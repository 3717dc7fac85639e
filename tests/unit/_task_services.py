"""A stand-in for the worker's services to a task (TaskServices), for unit tests of tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.runtime.faults import FaultInjector
from cairn.testing.state_files import MemoryStateFiles


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
