"""The contracts between a user's job and the engine: what the runtime calls and reads.

Flink keeps these in ``flink-core`` (``org.apache.flink.api.common.*``: functions, state
descriptors, the source and sink interfaces), below both the DataStream API that builds jobs
and the runtime that runs them; Cairn does the same. Here: the user function interfaces
(``functions`` and its parts), the runtime context and metric group, state descriptors and
state interfaces (``state``), output tags, time domain and timer service, partitioning, the
source/sink contracts (``connectors``), the async I/O interfaces, retry strategies and operator
options (``async_functions``, ``async_retry``, ``async_wait``), and the reduce functions of the
built-in aggregations.

Invariant: nothing here imports ``cairn.datastream`` (the builders and the environment, which
submit jobs) or anything above ``cairn.graph``, so the runtime, the state backends, the state
processor and the workers that unpickle a job load these modules and never the builders.
Users import them at PyFlink's paths (``cairn.datastream.functions``, ``.state``, ...), which
re-export this package.
"""
