"""Network options: batch sizes, the frame cap, the workers' switch interval, debloating.

Invariant: every key here is registered on import; a frame cap always lets control messages
through (at least 1 MiB) and fits a frame header's uint32 length.
"""

from __future__ import annotations

from cairn.common.options.define import between, define, positive
from cairn.settings import DEFAULT_MAX_FRAME_SIZE, MAX_FRAME_SIZE_KEY

NETWORK_BATCH_SIZE = define(
    "cairn.network.batch-size",
    "int",
    1024,
    "Records per network buffer (the largest size when buffer debloating is on). Cairn's "
    "buffers count records, not bytes (Flink: taskmanager.memory.segment-size, 32 KiB).",
    check=positive,
)
NETWORK_MIN_BATCH_SIZE = define(
    "cairn.network.min-batch-size",
    "int",
    16,
    "Smallest buffer, in records, that buffer debloating may choose (Flink: "
    "taskmanager.memory.min-segment-size).",
    check=positive,
)
NETWORK_MAX_FRAME_SIZE = define(
    MAX_FRAME_SIZE_KEY,
    "memory",
    DEFAULT_MAX_FRAME_SIZE,
    "Largest frame (a pickled batch of records, an event or a control message) a connection "
    "sends or accepts, e.g. '64 mb'. A receiver refuses a longer frame before allocating "
    "memory for it; a task whose batch pickles to more fails, naming the edge (lower "
    "cairn.network.batch-size for large records, or raise this cap).",
    # At least 1 MiB: control messages (failure reports with tracebacks) must fit; at most
    # what a frame header's uint32 length can say.
    check=between(1 << 20, 0xFFFFFFFF, "the frame size cap (bytes)"),
)
WORKER_SWITCH_INTERVAL = define(
    "cairn.worker.switch-interval",
    "duration",
    1,
    "Python thread switch interval of the workers (sys.setswitchinterval; Python's default is "
    "5 ms): how soon network, control and snapshot threads get the GIL from a busy task thread.",
    check=positive,
)
NET = "taskmanager.network.memory."
DEBLOAT_ENABLED = define(
    NET + "buffer-debloat.enabled",
    "bool",
    False,
    "Resize network buffers so that the in-flight data of each input takes about "
    "buffer-debloat.target to process.",
)
DEBLOAT_TARGET = define(
    NET + "buffer-debloat.target",
    "duration",
    1_000,
    "Time the in-flight data of an input should take to process (buffer debloating).",
)
DEBLOAT_PERIOD = define(
    NET + "buffer-debloat.period",
    "duration",
    200,
    "How often buffer debloating measures throughput and recomputes the buffer size.",
)
DEBLOAT_SAMPLES = define(
    NET + "buffer-debloat.samples",
    "int",
    20,
    "Throughput measurements averaged (exponential moving average over this many periods).",
    check=positive,
)
DEBLOAT_THRESHOLD = define(
    NET + "buffer-debloat.threshold-percentages",
    "int",
    25,
    "Change the buffer size only if the new size differs by more than this many percent.",
)
