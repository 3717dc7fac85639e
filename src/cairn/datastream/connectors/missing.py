"""PyFlink connectors Cairn does not have, refused at import with a message naming them.

Invariant: ``from cairn.datastream.connectors.pulsar import PulsarSource`` (and the other
modules listed in ``MISSING``, and their class names imported from
``cairn.datastream.connectors``) raises ``ImportError`` saying which connector is not
supported and what Cairn has instead; lower-case names stay ``AttributeError``, so tools
probing modules (pytest's doctest collection) are not affected.

>>> try:
...     from cairn.datastream.connectors.pulsar import PulsarSource
... except ImportError as e:
...     print(str(e).split(": ")[1].split(";")[0])
the Apache Pulsar connector is not supported by Cairn
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["MISSING", "PREFIXES", "refuse"]

# module name -> what it connects to
MISSING = {
    "pulsar": "Apache Pulsar",
    "elasticsearch": "Elasticsearch",
    "kinesis": "Amazon Kinesis / Firehose",
    "cassandra": "Apache Cassandra",
    "rabbitmq": "RabbitMQ",
    "hybrid_source": "HybridSource",
}

# class-name prefixes PyFlink re-exports from pyflink.datastream.connectors -> module
PREFIXES = {
    "Pulsar": "pulsar",
    "Elasticsearch": "elasticsearch",
    "Elasticsearch6": "elasticsearch",
    "Elasticsearch7": "elasticsearch",
    "Kinesis": "kinesis",
    "FlinkKinesis": "kinesis",
    "KinesisFirehose": "kinesis",
    "Cassandra": "cassandra",
    "RMQ": "rabbitmq",
    "HybridSource": "hybrid_source",
}

_HAVE = (
    "Cairn's connectors are Kafka (cairn.datastream.connectors.kafka), files (file_system), "
    "JDBC/PostgreSQL (jdbc), number sequences, data generators and collections; see "
    "docs/connectors.md"
)


def refuse(module: str, name: str) -> NoReturn:
    """``ImportError`` for a class name of a missing connector module, else AttributeError."""
    short = module.rsplit(".", 1)[-1]
    what = MISSING.get(short)
    if what is None or not name[:1].isupper():
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    raise ImportError(f"{module}.{name}: the {what} connector is not supported by Cairn; {_HAVE}")


def module_for(name: str) -> str | None:
    """The missing connector module a class name of ``pyflink.datastream.connectors`` is from."""
    for prefix in sorted(PREFIXES, key=len, reverse=True):
        if name.startswith(prefix):
            return PREFIXES[prefix]
    return None
