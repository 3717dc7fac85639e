"""Hadoop filesystem options (Flink's names) for ``hdfs://`` and ``viewfs://`` storage, turned
into the HDFS client's options only by ``common.storage_options``.

Invariant: every key here is registered on import; keys under ``flink.hadoop.`` pass through
unvalidated as Hadoop configuration keys (``flink.hadoop.dfs.replication`` sets
``dfs.replication``), as Flink passes them to its Hadoop filesystems.
"""

from __future__ import annotations

from cairn.common.config_registry import register_passthrough_prefix
from cairn.common.options.define import define, non_empty

#: Keys under this prefix are Hadoop configuration keys (the prefix removed).
HADOOP_KEY_PREFIX = "flink.hadoop."

HADOOP_CONF_DIR = define(
    "env.hadoop.conf.dir",
    "str",
    None,
    "Hadoop configuration directory whose core-site.xml and hdfs-site.xml configure hdfs:// "
    "storage (NameNode addresses, HA nameservices, replication), read on the driver; "
    "default: HADOOP_CONF_DIR or HADOOP_HOME/etc/hadoop, read by every process.",
    "fs.hdfs.hadoopconf",
    check=non_empty,
)

register_passthrough_prefix(
    HADOOP_KEY_PREFIX, "Hadoop configuration for hdfs:// storage (the prefix removed)"
)
