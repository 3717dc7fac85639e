"""The embedded RocksDB keyed state backend (Flink's ``EmbeddedRocksDBStateBackend``).

Modules, bottom up: ``codecs`` (byte layouts of keys, values, timers), ``db`` (opening a
database with bounded memory), ``states`` (state objects), ``timers`` (keyed timers written
through), ``transfer`` (upload and download of RocksDB checkpoints), ``rescale`` (which old
databases a new subtask restores from), ``backend`` (the ``KeyedStateBackend``).
"""

from cairn.state.rocksdb.backend import RocksDBKeyedStateBackend
from cairn.state.rocksdb.db import RocksDBMemory

__all__ = ["RocksDBKeyedStateBackend", "RocksDBMemory"]
