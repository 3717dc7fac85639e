"""``ExecutionConfig`` (``env.get_config()``): a view of the environment's configuration.

Invariant: holds no state of its own; every setter writes the same configuration key the
environment and the CLI use, so the three ways of setting a value cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cairn.common import config_options as opts
from cairn.common.arguments import require_int

if TYPE_CHECKING:
    from cairn.common.configuration import Configuration

__all__ = ["ExecutionConfig", "global_job_parameters"]


class ExecutionConfig:
    """Parallelism, job parameters and other execution settings.

    >>> from cairn.common.configuration import Configuration
    >>> cfg = ExecutionConfig(Configuration())
    >>> cfg.set_global_job_parameters({"threshold": "3"}).get_global_job_parameters()
    {'threshold': '3'}
    """

    def __init__(self, configuration: Configuration) -> None:
        self._conf = configuration

    def _set(self, option: opts.ConfigOption, value: Any) -> ExecutionConfig:
        key, text = opts.format_value(option.key, value)
        self._conf.set_string(key, text)
        return self

    def _get(self, option: opts.ConfigOption) -> Any:
        raw = self._conf.get_string(option.key, None)
        return option.default if raw is None else opts.parse_value(option.key, raw)[1]

    def set_parallelism(self, parallelism: int) -> ExecutionConfig:
        return self._set(opts.PARALLELISM, require_int("parallelism", parallelism))

    def get_parallelism(self) -> int:
        return int(self._get(opts.PARALLELISM))

    def set_max_parallelism(self, max_parallelism: int) -> ExecutionConfig:
        return self._set(opts.MAX_PARALLELISM, require_int("max parallelism", max_parallelism))

    def get_max_parallelism(self) -> int:
        return int(self._get(opts.MAX_PARALLELISM))

    def set_auto_watermark_interval(self, interval: int) -> ExecutionConfig:
        """Stored only: event time is not implemented yet."""
        return self._set(opts.AUTO_WATERMARK_INTERVAL, interval)

    def get_auto_watermark_interval(self) -> int:
        return int(self._get(opts.AUTO_WATERMARK_INTERVAL))

    def enable_object_reuse(self) -> ExecutionConfig:
        """Accepted for compatibility; Cairn hands records over by reference anyway."""
        return self._set(opts.OBJECT_REUSE, True)

    def disable_object_reuse(self) -> ExecutionConfig:
        return self._set(opts.OBJECT_REUSE, False)

    def is_object_reuse_enabled(self) -> bool:
        return bool(self._get(opts.OBJECT_REUSE))

    def set_global_job_parameters(
        self, global_job_parameters_dict: Mapping[str, str]
    ) -> ExecutionConfig:
        """Parameters functions read with ``RuntimeContext.get_job_parameter(key, default)``."""
        return self._set(opts.JOB_PARAMETERS, dict(global_job_parameters_dict))

    def get_global_job_parameters(self) -> dict[str, str]:
        return dict(self._get(opts.JOB_PARAMETERS) or {})


def global_job_parameters(configuration: Mapping[str, str]) -> dict[str, str]:
    """The job parameters held in a job's configuration (``JobSettings.configuration``).

    >>> global_job_parameters({"pipeline.global-job-parameters": "a:1,b:2"})
    {'a': '1', 'b': '2'}
    """
    raw = configuration.get(opts.JOB_PARAMETERS.key)
    return {} if raw is None else dict(opts.parse_value(opts.JOB_PARAMETERS.key, raw)[1])
