"""Pipeline and execution options: parallelism, chaining, watermarks, buffer timeout.

Invariant: every key here is registered on import; keys PyFlink scripts set that have no
meaning in Cairn are accepted and ignored, never rejected.
"""

from __future__ import annotations

from cairn.common.options.define import at_least, define, max_parallelism, non_empty, spellings

PARALLELISM = define(
    "parallelism.default",
    "int",
    1,
    "Default parallelism of operators; unset: the CPU count on embedded local Spark, else 1.",
    check=at_least(1, "parallelism"),
)
MAX_PARALLELISM = define(
    "pipeline.max-parallelism",
    "int",
    -1,
    "Number of key groups; -1: derived from the parallelism (at least 128).",
    check=max_parallelism,
)
JOB_NAME = define(
    "pipeline.name", "str", None, "Job name when execute() is given none.", check=non_empty
)
OPERATOR_CHAINING = define(
    "pipeline.operator-chaining.enabled",
    "bool",
    True,
    "Chain operators into tasks.",
    "pipeline.operator-chaining",
)
AUTO_WATERMARK_INTERVAL = define(
    "pipeline.auto-watermark-interval",
    "duration",
    200,
    "How often sources and assign_timestamps_and_watermarks emit watermarks (0: only the "
    "final one at end of input).",
)
OBJECT_REUSE = define("pipeline.object-reuse", "bool", False, "Accepted; has no effect.")
JOB_PARAMETERS = define(
    "pipeline.global-job-parameters",
    "map",
    None,
    "Parameters read by RuntimeContext.get_job_parameter ('k1:v1,k2:v2').",
)
RUNTIME_MODE = define(
    "execution.runtime-mode",
    "enum",
    "STREAMING",
    "STREAMING, BATCH (bounded jobs run stage by stage) or AUTOMATIC (BATCH when every "
    "source is bounded, else STREAMING).",
    choices=spellings(("STREAMING",), ("BATCH",), ("AUTOMATIC",)),
)
BUFFER_TIMEOUT = define(
    "execution.buffer-timeout.interval",
    "duration",
    10,
    "Flush partially filled network buffers after this long; 0: after every batch. "
    "Cairn's default is 10 ms (Flink: 100 ms): buffers hold up to 1024 records, not 32 KiB, "
    "so at moderate rates they fill slowly and the timeout bounds latency.",
    "execution.buffer-timeout",
)
BUFFER_LINGER = define(
    "execution.buffer-timeout.linger",
    "duration",
    2,
    "Cairn: while a worker is busy, input and rate-limited sources wait for its next turn "
    "up to this long instead of waking it each (batches coalesce, as TCP's Nagle with a "
    "bound); an idle worker still wakes at once for the first input. 0: wake for every "
    "input and poll sources as soon as they have records.",
)
BUFFER_TIMEOUT_ENABLED = define(
    "execution.buffer-timeout.enabled",
    "bool",
    True,
    "false: flush buffers only when full (set_buffer_timeout(-1)).",
)

PIPELINE_JARS = define("pipeline.jars", "str", None, "Accepted for PyFlink scripts; ignored.")
PIPELINE_CLASSPATHS = define(
    "pipeline.classpaths", "str", None, "Accepted for PyFlink scripts; ignored."
)
