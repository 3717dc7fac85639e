"""Every configuration key Cairn understands, with Flink's names, defaults and aliases.

Invariant: importing this module registers all built-in keys (other layers add theirs with
``register_option``); it re-exports the registry API and every built-in option, so
``config_options`` is the one module callers need. The options are defined by group in
``cairn.common.options`` (checkpointing, state backend, restart, execution, network,
recovery, S3, GCS, Azure, Hadoop, deployment, REST and metrics, TLS). Keys under ``spark.`` (and
PyFlink's ``python.``, and Hadoop's ``flink.hadoop.``) pass through unvalidated.

>>> get_option("state.checkpoints.num-retained").key
'execution.checkpointing.num-retained'
>>> get_option("execution.checkpointing.interval").parse("1 min")
60000
"""

from __future__ import annotations

from cairn.common import config_registry
from cairn.common.config_registry import *  # noqa: F403  (the registry API, re-exported)
from cairn.common.config_registry import Check, ConfigOption, register_passthrough_prefix  # noqa: F401
from cairn.common.options import define as _helpers

# Each group's options (and its key prefixes: CP, RS, NET), re-exported under their names.
from cairn.common.options.azure import *  # noqa: F403
from cairn.common.options.checkpointing import *  # noqa: F403
from cairn.common.options.deployment import *  # noqa: F403
from cairn.common.options.execution import *  # noqa: F403
from cairn.common.options.gcs import *  # noqa: F403
from cairn.common.options.hadoop import *  # noqa: F403
from cairn.common.options.high_availability import *  # noqa: F403
from cairn.common.options.network import *  # noqa: F403
from cairn.common.options.recovery import *  # noqa: F403
from cairn.common.options.rest_metrics import *  # noqa: F403
from cairn.common.options.restart import *  # noqa: F403
from cairn.common.options.s3 import *  # noqa: F403
from cairn.common.options.security import *  # noqa: F403
from cairn.common.options.state_backend import *  # noqa: F403

__all__ = config_registry.__all__

# The helpers under the names they had here, for options still defined in this module.
_define = _helpers.define
_spellings = _helpers.spellings
_at_least = _helpers.at_least
_between = _helpers.between
_non_empty = _helpers.non_empty
_filesystem_url = _helpers.filesystem_url
_max_parallelism = _helpers.max_parallelism
_positive = _helpers.positive
_MS = _helpers.MS

register_passthrough_prefix("spark.", "Spark configuration, passed to the Spark session")
register_passthrough_prefix("python.", "PyFlink's Python worker options, accepted and ignored")
